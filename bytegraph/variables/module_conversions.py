"""``module.to(...)`` in traced code, where it changes nothing.

Some models convert a submodule in ``forward`` to the dtype it already has
(Switch Transformers' router: ``self.classifier = self.classifier.to(self.dtype)``,
20 breaks in one model). ``nn.Module.to`` parses its arguments
(``torch._C._nn._parse_to``) and calls ``_apply`` down the tree, which for a
tensor already of that dtype and device hands back the tensor itself and sets
``param.data`` to it: nothing observable happens, and the module itself is
returned. That case is modelled here:

1. the arguments are constants, parsed by torch's own parser;
2. every module of the tree uses ``nn.Module``'s own ``_apply`` (an RNN's
   flattens its weights), and torch's ``__future__`` switches that make
   ``_apply`` swap or replace parameters are off (guarded by their value);
3. every parameter and buffer, read through its source (its dtype and device
   guarded like any tensor input), already has what ``to`` would give it.

Then the call is the module VT itself. Anything else (a real conversion, a
memory format) is a break, as before. Assigning the module back to the
attribute it came from is a no-op too (``NNModuleVariable.var_setattr``).
"""

from __future__ import annotations

import dataclasses
import types
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.nn_module import NNModuleVariable

_FUTURE_SWITCHES = (
    torch.__future__.get_overwrite_module_params_on_conversion,
    torch.__future__.get_swap_module_params_on_conversion,
)


def is_conversion_method(owner: type | None, raw: Any, name: str) -> bool:
    """``raw`` is nn.Module's own ``to``."""
    return name == "to" and owner is nn.Module and raw is nn.Module.to


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ModuleToVariable(VariableTracker):
    """``module.to`` bound to an NNModuleVariable."""

    module: VariableTracker

    def python_type(self) -> type:
        return types.MethodType

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.containers import python_constant

        consts = [python_constant(tx, a) for a in args]
        const_kwargs = {k: python_constant(tx, v) for k, v in kwargs.items()}
        try:
            device, dtype, _, memory_format = torch._C._nn._parse_to(*consts, **const_kwargs)
        except Exception as e:  # noqa: BLE001 - eager raises it from the same parser
            raise Unsupported("operation_raises", f"Module.to: {e}") from None
        if memory_format is not None:
            raise Unsupported("module_structure_change", "Module.to with a memory format")
        module: NNModuleVariable = self.module  # type: ignore[assignment]
        _require_plain_apply(tx, module)
        for tensor in _tensors(tx, module):
            if _converts(tensor, device, dtype):
                raise Unsupported(
                    "module_structure_change", "Module.to converting a parameter or buffer"
                )
        return module

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``module.to``, from the rebuilt module (a break at the call keeps it waiting)."""
        from bytegraph.bytecode import assemble

        codegen(self.module)
        codegen.append(assemble.load_attr("to"))

    def __repr__(self) -> str:
        return "ModuleToVariable()"


def _require_plain_apply(tx: Tx, module: NNModuleVariable) -> None:
    from bytegraph.guards.guard import GuardKind
    from bytegraph.guards.sources import StateCallSource
    from bytegraph.variables.module_tree import walk

    for switch in _FUTURE_SWITCHES:
        if switch():
            raise Unsupported("module_structure_change", f"Module.to under {switch.__name__}")
        tx.output.add_guard(GuardKind.CONSTANT_MATCH, StateCallSource(switch), False)
    for each in walk(tx, module, "modules", [], {}):
        if type(each.value)._apply is not nn.Module._apply:  # the class is guarded
            raise Unsupported("module_structure_change", f"{each.cls.__qualname__}._apply")


def _tensors(tx: Tx, module: NNModuleVariable) -> list[Any]:
    from bytegraph.variables.module_tree import walk
    from bytegraph.variables.tensor import TensorVariable

    tensors = walk(tx, module, "parameters", [], {}) + walk(tx, module, "buffers", [], {})
    for tensor in tensors:
        if not isinstance(tensor, TensorVariable):
            raise Unsupported("module_structure_change", f"Module.to of {tensor}")
    return tensors


def _converts(tensor: Any, device: torch.device | None, dtype: torch.dtype | None) -> bool:
    """Whether ``Module.to``'s conversion gives ``tensor`` another dtype or device."""
    if device is not None and tensor.device != device:
        return True
    floating = tensor.dtype.is_floating_point or tensor.dtype.is_complex
    return dtype is not None and floating and tensor.dtype != dtype
