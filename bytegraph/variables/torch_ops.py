"""Operators of ``torch.ops``: ATen's and those registered with ``torch.library``.

An operator packet (``torch.ops.aten.sin``, ``torch.ops.mylib.scale``), one of
its overloads (``torch.ops.aten.add.Tensor``) and a function made by
``torch.library.custom_op`` are each one graph node, like an aten binding of
``torch``: the call runs on meta or fake tensors for its metadata, which a
custom op gets from the fake kernel registered for it. Without one, the call
is a graph break that says so.

What an operator writes comes from its schema (``Tensor(a!) self``), not its
name: one that writes into its first argument, or into ``out=``, is an
in-place op as ``x.add_(y)`` is; one that writes into any other argument is a
graph break, since the trace would not know that argument changed.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch
from torch._library.custom_ops import CustomOpDef

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.tensor import tensor_op
from bytegraph.variables.torch import TorchFunctionVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase

_OPERATOR_TYPES = (torch._ops.OpOverloadPacket, torch._ops.OpOverload, CustomOpDef)


def is_torch_operator(value: Any) -> bool:
    return isinstance(value, _OPERATOR_TYPES)


def _schemas(op: Any) -> list[Any]:
    """The schemas a call of ``op`` may resolve to (every overload of a packet)."""
    if isinstance(op, torch._ops.OpOverload):
        return [op._schema]
    return [getattr(op, name)._schema for name in op.overloads()]


def _written_positions(schema: Any) -> list[str]:
    return [
        argument.name
        for position, argument in enumerate(schema.arguments)
        if argument.alias_info is not None and argument.alias_info.is_write
        and position != 0 and argument.name != "out"
    ]


def writes_first_argument(op: Any) -> bool:
    """Whether some overload of ``op`` writes into its first argument (``add_``)."""
    for schema in _schemas(op):
        first = schema.arguments[0] if schema.arguments else None
        if first is not None and first.alias_info is not None and first.alias_info.is_write:
            return True
    return False


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TorchOperatorVariable(TorchFunctionVariable):
    """``torch.ops.<namespace>.<name>[.<overload>]`` or a ``custom_op`` function."""

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        from bytegraph.variables.builder import wrap, wrap_constant_result

        packet = self.value
        if isinstance(packet, torch._ops.OpOverloadPacket) and name in packet.overloads():
            overload = getattr(packet, name)
            if self.source is None:
                return wrap_constant_result(overload)
            return wrap(tx, overload, AttrSource(self.source, name))
        return super().var_getattr(tx, name)

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        op = self.value._opoverload if isinstance(self.value, CustomOpDef) else self.value
        if tx.output.function_modes:
            from bytegraph.variables.function_modes import through_modes

            dispatched = through_modes(tx, self.value, args, kwargs)
            if dispatched is not None:
                return dispatched
        for schema in _schemas(op):
            others = _written_positions(schema)
            if others:
                raise Unsupported(
                    "torch_op_writes",
                    f"{schema.name} writes into its argument(s) {', '.join(others)}",
                )
        try:
            return tensor_op(tx, "call_function", op, args, kwargs)
        except Unsupported as e:
            if e.entry.name != "op_failed_on_metadata" or op.namespace == "aten":
                raise
            raise Unsupported(
                "custom_op_without_fake",
                f"custom op {op} failed on fake tensors ({e.detail}); register a fake "
                "kernel for it (torch.library.register_fake) to capture it",
            ) from e

    def __repr__(self) -> str:
        return f"TorchOperatorVariable({self.value})"
