"""numpy values of the frame: ndarray arguments, numpy scalars, numpy's functions and types.

``wrap_numpy_value`` and ``wrap_numpy_object`` are the builder's two hooks
(``variables/builder.py``), each None for anything that is not numpy's, and
for everything while ``config.trace_numpy`` is off or the program has not
imported numpy. An ndarray argument becomes a graph input read as
``torch.from_numpy(a)`` (``NumpyTensorSource``), guarded on its type, dtype,
shape, strides and writeability; the array itself stays the caller's object.
A numpy function or ufunc is a ``NumpyFunctionVariable`` named by its path in
torch._numpy (none where torch._numpy lacks it); a numpy scalar type,
``np.dtype``, ``np.finfo`` and ``np.iinfo`` are ``NumpyTypeVariable``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch

from bytegraph import config
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import ChildSource, Source, const_expr, source_record
from bytegraph.variables import numpy_calls
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.numpy import (
    NdarrayVariable,
    NumpyFunctionVariable,
    NumpyTypeVariable,
    no_dynamic_shapes,
    refuse,
)
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase


@source_record
class NumpyTensorSource(ChildSource):
    """``torch.from_numpy(base)``: the tensor over an ndarray argument's memory."""

    def _expr(self) -> str:
        return f"{const_expr(torch.from_numpy)}({self.base.expr()})"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable(torch.from_numpy)
        codegen.load_source(self.base)
        codegen.append(*codegen.call_instrs(1))


def _numpy() -> Any:
    """numpy, where tracing it is on and the program has imported it; else None."""
    return sys.modules.get("numpy") if config.trace_numpy else None


def wrap_numpy_value(
    tx: InstructionTranslatorBase, value: Any, source: Source
) -> VariableTracker | None:
    """An ndarray or numpy scalar of the frame, or None for anything else."""
    np = _numpy()
    if np is None or not isinstance(value, (np.ndarray, np.generic)):
        return None
    if isinstance(value, np.generic):
        tx.output.add_guard(GuardKind.CONSTANT_MATCH, source, value)
        return ConstantVariable(value, source=source)
    return _wrap_ndarray(tx, value, source)


def _wrap_ndarray(tx: InstructionTranslatorBase, value: Any, source: Source) -> VariableTracker:
    import numpy as np

    from bytegraph.graph import metadata
    from bytegraph.guards.guard import GuardKind

    no_dynamic_shapes(tx)
    if type(value) is not np.ndarray:
        raise refuse(f"an ndarray subclass {type(value).__name__}")
    numpy_calls.torch_dtype(value.dtype)
    itemsize = value.dtype.itemsize
    if any(s < 0 or s % itemsize for s in value.strides) or not value.flags.writeable:
        raise refuse("an ndarray argument with negative strides or read-only memory")
    output = tx.output
    output.add_guard(GuardKind.TYPE_MATCH, source, np.ndarray)
    layout = (value.dtype, value.shape, value.strides, True)
    e = source.expr()
    output.add_guard(GuardKind.SHAPE, source,
                     f"({e}.dtype, {e}.shape, {e}.strides, {e}.flags.writeable) == "
                     f"{const_expr(layout)}")
    tensor = torch.from_numpy(value)
    meta = metadata.to_meta(tensor)
    tensor_source = NumpyTensorSource(source)
    node = output.add_input(tensor_source, tensor, meta)
    t = TensorVariable(node, meta, tensor.device, source=tensor_source)
    strides = tuple(s // itemsize for s in value.strides)
    spec = numpy_calls.ArraySpec(value.dtype, value.shape, strides)
    return NdarrayVariable(t, spec, source=source)


def wrap_numpy_object(value: Any, source: Source) -> VariableTracker | None:
    """A numpy function, ufunc or scalar type reached by identity; None for the rest."""
    np = _numpy()
    if np is None:
        return None
    if isinstance(value, type):
        if issubclass(value, np.generic) or value in (np.finfo, np.iinfo, np.dtype):
            return NumpyTypeVariable(value, source=source)
        return None
    module = getattr(value, "__module__", None)
    if not isinstance(module, str) or module.split(".")[0] != "numpy" or not callable(value):
        return None
    if module not in _TNP_MODULES:
        return None
    return NumpyFunctionVariable(value, name=_tnp_names().get(id(value)), source=source)


_TNP_MODULES = {"numpy": "", "numpy.linalg": "linalg.", "numpy.fft": "fft."}
# Functions torch._numpy has that write into an argument or reach global state.
_NOT_TRACED = frozenset({"copyto", "put", "put_along_axis", "fill_diagonal", "random",
                         "set_default_dtype", "from_dlpack"})


def _tnp_names() -> dict[int, str]:
    """id(numpy object) -> its path in torch._numpy, for the names both have."""
    names = _TNP_NAMES
    if not names:
        tnp = numpy_calls.tnp()
        for module_name, prefix in _TNP_MODULES.items():
            module = sys.modules.get(module_name)
            counterpart = tnp if not prefix else getattr(tnp, prefix[:-1])
            for name, obj in vars(module or {}).items() if module else ():
                if name.startswith("_") or name in _NOT_TRACED or not callable(obj):
                    continue
                if isinstance(obj, type) or not hasattr(counterpart, name):
                    continue
                names.setdefault(id(obj), prefix + name)
    return names


_TNP_NAMES: dict[int, str] = {}
