"""torch modules and functions: which calls become graph nodes, which fold.

A function goes into the graph only if it is known to be a pure tensor
operation: an ATen binding in ``torch._C._VariableFunctions`` (``torch.add``,
``torch.relu``...), or a function of ``torch.nn.functional``,
``torch.functional``, ``torch.linalg``, ``torch.fft`` or ``torch.special``
reachable under a public name. Python helpers of torch's module code (the
functions of ``torch.nn.modules.*``, the private functions of those modules
such as ``F._canonical_mask``) are inlined like user code. State queries fold
at trace time (guarded where they can change). Anything else in the torch
namespace (``torch.manual_seed``, ``torch.save``) is an unsupported call, so
it runs in Python, never at trace time.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import python_constant
from bytegraph.variables.function_modes import mode_query, through_modes
from bytegraph.variables.numpy import NdarrayVariable, ndarray_to_tensor
from bytegraph.variables.tensor import TensorVariable, tensor_op
from bytegraph.variables.torch_checks import call_torch_check, is_torch_check

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase

_GRAPH_MODULES = frozenset({
    "torch.nn.functional", "torch.functional", "torch._C._nn", "torch._C._linalg",
    "torch._C._fft", "torch._C._special", "torch.linalg", "torch.fft", "torch.special",
    "torch._C._VariableFunctions",
})
_NOT_GRAPH_FUNCTIONS = frozenset({"manual_seed", "seed", "set_grad_enabled"})
_ATEN_BINDINGS = frozenset(
    id(getattr(torch._C._VariableFunctions, name))
    for name in dir(torch._C._VariableFunctions)
    if not name.startswith("__")
)


def is_graph_function(value: Any) -> bool:
    """True if a call of ``value`` can be recorded as one graph node."""
    if not callable(value) or isinstance(value, type):
        return False
    if getattr(value, "__name__", "") in _NOT_GRAPH_FUNCTIONS:
        return False
    if id(value) in _ATEN_BINDINGS:
        return True
    module = getattr(value, "__module__", None)
    if isinstance(value, types.BuiltinFunctionType):
        return module in _GRAPH_MODULES
    return isinstance(value, types.FunctionType) and module in _GRAPH_MODULES and (
        not is_torch_helper(value)
    )


# Python functions that torch's own module code calls, inlined like user code: module
# helpers of ``torch.nn.modules`` (``_check_arg_device``, ``_get_seq_len``) and the
# private helpers of the graph modules (``F._canonical_mask``, ``F._in_projection``).
# A helper is never a graph node: it may return a dtype or None, check arguments or
# warn, and what it computes on tensors is recorded op by op when it is inlined.
# flex_attention's module is Python over tensor ops too (``create_block_mask`` vmaps the
# mask_mod, sorts the blocks and builds a BlockMask): its functions are inlined, and its
# classes (BlockMask) are modelled like user classes, objects made in the trace included.
_HELPER_PACKAGES = ("torch.nn.modules.", "torch.nn.attention.flex_attention")
_HELPER_CLASS_MODULES = frozenset({"torch.nn.attention.flex_attention"})
# Single functions of other torch modules, by (module, name): Python that calls what is
# modelled (checkpoint_sequential calls checkpoint once per segment).
_HELPER_FUNCTIONS = frozenset({("torch.utils.checkpoint", "checkpoint_sequential")})


def _public_functions(module_name: str) -> frozenset[int]:
    module = sys.modules.get(module_name)
    if module is None:
        return frozenset()
    return frozenset(id(v) for k, v in vars(module).items() if not k.startswith("_"))


_PUBLIC_GRAPH_FUNCTIONS = frozenset().union(*(_public_functions(m) for m in _GRAPH_MODULES))


def is_torch_helper(value: Any) -> bool:
    """A torch-internal Python function that is inlined rather than a graph node."""
    if not isinstance(value, types.FunctionType):
        return False
    module = getattr(value, "__module__", None) or ""
    if module in _GRAPH_MODULES:
        return id(value) not in _PUBLIC_GRAPH_FUNCTIONS
    return module.startswith(_HELPER_PACKAGES) or (module, value.__qualname__) in (
        _HELPER_FUNCTIONS
    )


def is_torch_helper_class(cls: type) -> bool:
    """A class of torch's Python helpers, modelled like a user class (BlockMask)."""
    return getattr(cls, "__module__", None) in _HELPER_CLASS_MODULES


def _tensor_arg(args: list[VariableTracker]) -> TensorVariable:
    if len(args) != 1 or not isinstance(args[0], TensorVariable):
        raise Unsupported("builtin_arguments", "tensor predicate on a non-tensor")
    return args[0]


def _not_jit_tracing() -> bool:
    if torch.jit.is_tracing():
        raise Unsupported("jit_tracing", "tracing under torch.jit.trace")
    return False


# Functions evaluated at trace time from metadata or global state.
_TRACE_TIME: dict[Any, Callable[[list[VariableTracker]], Any]] = {
    torch.is_tensor: lambda args: isinstance(args[0], TensorVariable),
    torch.is_floating_point: lambda args: _tensor_arg(args).dtype.is_floating_point,
    torch.is_complex: lambda args: _tensor_arg(args).dtype.is_complex,
    torch.numel: lambda args: _tensor_arg(args).example.numel(),
    torch.is_grad_enabled: lambda args: torch.is_grad_enabled(),
    torch.get_default_dtype: lambda args: torch.get_default_dtype(),
    # Fixed for the life of the process, so folding it needs no guard.
    torch.cuda.is_available: lambda args: torch.cuda.is_available(),
    # "Is this code being traced by a compiler?" While bytegraph traces it, yes:
    # libraries use this to take the branch written for compilers (Hugging Face
    # skips warnings and data-dependent checks), as they do under torch.compile.
    torch.compiler.is_compiling: lambda args: True,
    torch.compiler.is_dynamo_compiling: lambda args: True,
    torch.compiler.is_exporting: lambda args: False,
    # TorchScript's modes: Python code never runs scripted, and a trace under
    # torch.jit.trace's tracer is refused (its shapes would be tensors).
    torch.jit.is_scripting: lambda args: False,
    torch.jit.is_tracing: lambda args: _not_jit_tracing(),
    # nn.Module.__init__'s usage log for Meta's telemetry: nothing, as under torch.compile.
    torch._C._log_api_usage_once: lambda args: None,
}
_CONSTANT_CONSTRUCTORS = frozenset({torch.device, torch.Size, torch.finfo, torch.iinfo,
                                    torch.promote_types, torch.can_cast})
# Switches of the process that library code reads and that may change between calls:
# folded at trace time (called with the same constant arguments) and guarded by a call
# in the guard function (StateCallSource).
_GUARDED_STATE = frozenset({
    torch.backends.mha.get_fastpath_enabled, torch.is_autocast_enabled,
    torch.is_autocast_cpu_enabled, torch.get_autocast_dtype, torch.get_autocast_gpu_dtype,
    torch._C._is_any_autocast_enabled, torch.are_deterministic_algorithms_enabled,
    torch.is_deterministic_algorithms_warn_only_enabled, torch.is_warn_always_enabled,
    torch.is_inference_mode_enabled, torch._C._are_functorch_transforms_active,
    torch._C._is_torch_function_mode_enabled, torch._C._is_torch_function_enabled,
    torch._C._get_cudnn_enabled, torch._C._get_tracing_state,
    # A Python helper of MultiheadAttention's fast path: is make_fx tracing (a mode on
    # the dispatch stack) or torch.export running? A bool, checked again by the guard.
    torch.nn.modules.activation._is_make_fx_tracing,
})
# ``has_torch_function(...)``: whether an argument overrides ``__torch_function__``.
_HAS_TORCH_FUNCTION = frozenset({
    torch._C._has_torch_function, torch._C._has_torch_function_unary,
    torch._C._has_torch_function_variadic,
})


def is_trace_time_function(value: Any) -> bool:
    try:
        return (
            value in _TRACE_TIME or value in _CONSTANT_CONSTRUCTORS or value in _GUARDED_STATE
            or value in _HAS_TORCH_FUNCTION or is_torch_check(value)
        )
    except TypeError:  # unhashable
        return False


def _fold_state(tx: InstructionTranslatorBase, fn: Any, args: list[VariableTracker]) -> Any:
    """``fn(*args)`` now, guarded to be the same at every call the entry serves."""
    from bytegraph.guards.guard import GuardKind
    from bytegraph.guards.sources import StateCallSource
    from bytegraph.variables.containers import python_constant

    consts = tuple(python_constant(tx, a) for a in args)
    value = fn(*consts)
    if value is not None and type(value) not in (bool, torch.dtype):
        raise Unsupported("torch_call_result", f"{fn.__name__}() returned {type(value).__name__}")
    tx.output.add_guard(GuardKind.CONSTANT_MATCH, StateCallSource(fn, consts), value)
    return value


# What a plain tensor or a Parameter has (a Parameter disables the protocol).
_NO_TORCH_FUNCTION = (
    torch.Tensor.__torch_function__, torch._C._disabled_torch_function_impl,
)


def _has_torch_function(args: list[VariableTracker]) -> bool:
    """False for plain tensors, constants and sequences of them (their types are
    guarded); anything else is left to Python."""
    from bytegraph.variables.containers import ListVariable, TupleVariable

    for arg in args:
        if isinstance(arg, (TupleVariable, ListVariable)):
            if _has_torch_function(list(arg.items)):
                return True
        elif isinstance(arg, TensorVariable):
            override = getattr(arg.python_type(), "__torch_function__", None)
            if override not in _NO_TORCH_FUNCTION:
                raise Unsupported(
                    "unsupported_tensor_kind", "has_torch_function of a tensor subclass"
                )
        elif not arg.is_python_constant():
            raise Unsupported("unsupported_tensor_kind", f"has_torch_function of {arg}")
    return False


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TorchFunctionVariable(PythonValueVariable):
    """A torch function: a graph node, or folded at trace time."""

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        from bytegraph.variables.builder import wrap_constant_result

        if tx.output.function_modes:
            dispatched = mode_query(self.value) or through_modes(tx, self.value, args, kwargs)
            if dispatched is not None:
                return dispatched
        if is_torch_check(self.value):
            return call_torch_check(tx, self.value, args, kwargs)
        fold = _TRACE_TIME.get(self.value)
        if fold is not None and not kwargs:
            return ConstantVariable(fold(args))
        if self.value in _GUARDED_STATE and not kwargs:
            return ConstantVariable(_fold_state(tx, self.value, args))
        if self.value in _HAS_TORCH_FUNCTION and not kwargs:
            return ConstantVariable(_has_torch_function(args))
        if self.value in _CONSTANT_CONSTRUCTORS:
            consts = [python_constant(tx, a) for a in args]
            const_kwargs = {k: python_constant(tx, v) for k, v in kwargs.items()}
            try:
                result = self.value(*consts, **const_kwargs)
            except Exception as e:  # torch.device("nope"): let eager raise it
                raise Unsupported(
                    "operation_raises", f"{self.value.__name__} raised {type(e).__name__}: {e}"
                ) from e
            if isinstance(result, (torch.finfo, torch.iinfo)):  # immutable; attributes fold
                return ConstantVariable(result)
            return wrap_constant_result(result)
        if args and type(args[0]) is NdarrayVariable:  # torch.from_numpy(a)...
            return ndarray_to_tensor(tx, self.value, args, kwargs)
        return tensor_op(tx, "call_function", self.value, args, kwargs)

    def __repr__(self) -> str:
        return f"TorchFunctionVariable({getattr(self.value, '__name__', self.value)})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PythonModuleVariable(VariableTracker):
    """A module object such as ``torch`` or ``math``; attributes are guarded reads."""

    value: types.ModuleType

    def python_type(self) -> type:
        return types.ModuleType

    def as_python_constant(self) -> Any:
        return self.value

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        from bytegraph.variables.builder import wrap, wrap_constant_result

        try:
            attr = getattr(self.value, name)
        except AttributeError:
            raise Unsupported(
                "unknown_attribute", f"module {self.value.__name__} has no {name!r}"
            ) from None
        if self.source is None:
            return wrap_constant_result(attr)
        return wrap(tx, attr, AttrSource(self.source, name))

    def __repr__(self) -> str:
        return f"PythonModuleVariable({self.value.__name__})"
