"""ConstantVariable: a known, immutable Python value (int, str, dtype, ...).

Operations whose operands are all constants fold at trace time; the result
is a constant again, so ``x.shape[0] * 2`` never reaches the graph.
"""

from __future__ import annotations

import dataclasses
import types
from typing import TYPE_CHECKING

import torch

from bytegraph.variables.base import PythonValueVariable, VariableTracker

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase

CONSTANT_TYPES: tuple[type, ...] = (
    int, float, bool, complex, str, bytes, type(None), type(Ellipsis),
    type(NotImplemented), range, slice, torch.dtype, torch.device, torch.layout,
    torch.memory_format, types.CodeType,
)


def is_constant_value(value: object) -> bool:
    """True for values that are immutable and compared by value."""
    if isinstance(value, (slice, range)):
        return all(is_constant_value(v) for v in (value.start, value.stop, value.step))
    if type(value) in (tuple, frozenset):
        return all(is_constant_value(v) for v in value)
    if type(value) in _EXACT_CONSTANT_TYPES:
        return True
    return isinstance(value, CONSTANT_TYPES) and _plain_subclass_instance(value)


_EXACT_CONSTANT_TYPES = frozenset(CONSTANT_TYPES)


def _plain_subclass_instance(value: object) -> bool:
    """An instance of a subclass of a constant type (an IntEnum member, numpy's float64)
    is a constant too, unless it holds state of its own or its class hashes or compares
    in Python: then its identity and its methods' effects matter (a ``__hash__`` that
    counts its calls would count the trace's dict lookups)."""
    import enum

    if isinstance(value, enum.Enum):
        return True
    if getattr(value, "__dict__", None):
        return False
    for klass in type(value).__mro__:
        if klass in _EXACT_CONSTANT_TYPES:
            return True
        if any(isinstance(vars(klass).get(name), types.FunctionType) for name in _IDENTITY):
            return False
    return True


_IDENTITY = ("__hash__", "__eq__")


_SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ConstantVariable(PythonValueVariable):
    def __post_init__(self) -> None:
        # A size of a dynamic trace taken as a constant is one: its value, guarded
        # by the ShapeEnv (a specialisation), never the symbol itself.
        if type(self.value) in _SYMBOLIC_TYPES:
            from bytegraph.variables.symbolic import decide  # a break for an unbacked one

            kind = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}
            object.__setattr__(self, "value", decide(kind[type(self.value)], self.value))

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.value)

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        from bytegraph.exc import Unsupported
        from bytegraph.variables.builder import wrap_constant_result

        try:
            value = getattr(self.value, name)
        except AttributeError:  # getattr(None, name, default) handles this one
            raise Unsupported(
                "operation_raises", f"{type(self.value).__name__} has no attribute {name!r}"
            ) from None
        return wrap_constant_result(value)

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        from bytegraph.exc import Unsupported
        from bytegraph.variables.builder import wrap_constant_result

        try:
            values = list(self.value)
        except TypeError:
            raise Unsupported(
                "operation_raises", f"iteration over a {type(self.value).__name__} (TypeError)"
            ) from None
        return [wrap_constant_result(v) for v in values]

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_const(self.value)

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"
