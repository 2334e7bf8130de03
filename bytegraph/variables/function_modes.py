"""TorchFunctionModes entered inside the trace: ops under them go through the mode.

``with Mode():`` pushes ``Mode`` on torch's torch-function mode stack; every
overridable torch call made under it (``torch.add``, ``x.add``, ``x + y``,
``x[i]``, ``x.shape``...) first calls ``Mode.__torch_function__(func, types,
args, kwargs)`` with the mode popped for the duration, so ``func(*args)``
inside it reaches the next mode down, or the op itself. transformers enters
``TransformGetItemToIndex`` around its vmap mask construction; a user mode may
rewrite, log or count ops. The trace does what eager does, step by step:

1. ``TorchFunctionMode.__enter__`` / ``__exit__`` (``FunctionModeSwitchVariable``)
   push and pop the mode's VT on ``OutputGraph.function_modes``, a tuple: the
   trace's model of the stack. The real stack is never touched while tracing.
2. Each place where eager dispatches (``TensorVariable.call_method`` and
   ``var_getattr``, ``TorchFunctionVariable.call_function``, the operators of
   ``BuiltinVariable``) calls ``through_modes`` first. With a mode on the
   stack, the op is run once on the metadata examples under a probe mode
   that records what torch hands ``__torch_function__`` (the very ``func``,
   ``types`` and the arguments in torch's order: ``1 + x`` is
   ``Tensor.add(x, 1)``) and stops it there. Nothing recorded means eager
   does not dispatch that call (``torch.is_grad_enabled``): it runs natively.
3. The top mode's ``__torch_function__`` is traced as a user method call
   with the mode popped. ``func`` is a ``TorchApiFunctionVariable``:
   calling it runs the op natively (``call_torch_api``), which dispatches
   again to the next mode down if there is one.
4. What the trace cannot dispatch this way is refused while a mode is on
   the stack: ``tensor_op`` breaks if it is reached under a mode not
   through step 3 (an iteration over a tensor, an internal op); a builtin
   other than the operators on a tensor breaks; a higher-order op's body
   (``speculate``) is traced only when each mode passes ``dim()`` and
   ``size()`` through unchanged and writes nothing, as the op's own Python
   (vmap's checks) is not traced but dispatches those in eager.
5. At the edges: a trace that would break or return with a mode still on
   its stack is refused (the break widens to the ``with`` block, which runs
   as Python); a frame entered with a user mode on the real stack runs as
   Python; every entry's guard checks that no user mode is on the real stack
   (``guards/build.py``), so graphs never run under a mode they did not see.

``DeviceContext`` (``torch.set_default_device``, ``with torch.device(...)``)
is a mode too; it is not modelled here: the default device is global state
with its own guard.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode

from bytegraph.exc import Unsupported
from bytegraph.guards.build import user_modes_on_stack
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_SWITCHES = (TorchFunctionMode.__enter__, TorchFunctionMode.__exit__)
_SWITCH_IDS = frozenset(map(id, _SWITCHES))  # an identity test: no __eq__ of the value runs


def _device_context() -> type:
    from torch.utils._device import DeviceContext

    return DeviceContext


def is_traced_mode_class(cls: Any) -> bool:
    """A TorchFunctionMode whose ``__torch_function__`` is Python the trace can run."""
    return (
        isinstance(cls, type) and issubclass(cls, TorchFunctionMode)
        and not issubclass(cls, _device_context())
        and cls.__torch_function__ is not TorchFunctionMode.__torch_function__
    )


def refuse_entry_under_modes() -> None:
    """A frame entered under a user mode runs as Python: the mode's dispatch is eager's."""
    if user_modes_on_stack():
        raise Unsupported(
            "torch_function_mode", "the frame was entered with a TorchFunctionMode active"
        )


def refuse_open_modes(tx: Tx, where: str) -> None:
    """A break or a return with a mode entered in the trace and not exited."""
    if tx.output.function_modes:
        raise Unsupported("torch_function_mode", f"{where} inside a TorchFunctionMode")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FunctionModeSwitchVariable(PythonValueVariable):
    """``TorchFunctionMode.__enter__`` or ``__exit__``: push or pop the trace's stack."""

    rebuilt_as_constant = True

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        output = tx.output
        if self.value is TorchFunctionMode.__enter__:
            if len(args) != 1 or kwargs:
                raise Unsupported("call_raises_type_error", "TorchFunctionMode.__enter__(self)")
            if not is_traced_mode_class(args[0].python_type()):
                raise Unsupported("torch_function_mode", f"entering {args[0]}")
            output.function_modes = (*output.function_modes, args[0])
            return args[0]
        if len(args) != 4 or kwargs:
            raise Unsupported("call_raises_type_error", "TorchFunctionMode.__exit__(self, *exc)")
        if not output.function_modes:
            raise Unsupported("torch_function_mode", "exiting a mode the trace did not enter")
        output.function_modes = output.function_modes[:-1]  # torch pops the top, whichever
        return ConstantVariable(None)

    def __repr__(self) -> str:
        return f"FunctionModeSwitchVariable({self.value.__name__})"


def mode_query(fn: Any) -> VariableTracker | None:
    """``torch._C._is_torch_function_mode_enabled()`` and ``has_torch_function(...)``
    under a mode entered in the trace: True, as in eager (the real stack is empty)."""
    if id(fn) in _MODE_QUERY_IDS:
        return ConstantVariable(True)
    return None


_MODE_QUERIES = (
    torch._C._is_torch_function_mode_enabled, torch._C._has_torch_function,
    torch._C._has_torch_function_unary, torch._C._has_torch_function_variadic,
)
_MODE_QUERY_IDS = frozenset(map(id, _MODE_QUERIES))


def wrap_mode_switch(value: Any, source: Any) -> VariableTracker | None:
    if id(value) in _SWITCH_IDS:
        return FunctionModeSwitchVariable(value, source=source)
    return None


# -- dispatch ------------------------------------------------------------------------
class _Recorded(Exception):  # noqa: N818 - a control-flow signal, not an error
    def __init__(self, call: tuple) -> None:
        super().__init__()
        self.call = call


class _ProbeMode(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise _Recorded((func, types, args, kwargs or {}))


def _probe(run: Callable[[], Any]) -> tuple | None:
    """What torch hands ``__torch_function__`` for ``run()``, or None if it dispatches
    nothing. ``run`` works on metadata examples and is stopped at the dispatch."""
    torch._C._push_on_torch_function_stack(_ProbeMode())
    try:
        run()
    except _Recorded as recorded:
        return recorded.call
    except Exception as e:  # noqa: BLE001 - raises before dispatching: eager raises too
        raise Unsupported("operation_raises", f"{type(e).__name__}: {e}") from e
    finally:
        torch._C._pop_torch_function_stack()
    return None


def _examples(tx: Tx, args: list, kwargs: dict) -> tuple[tuple, dict, dict[int, VariableTracker]]:
    """The metadata values of ``args``/``kwargs`` and, by id, the VT of each tensor and
    symbolic value among them."""
    from bytegraph.variables.tensor import lower_to_meta

    known: dict[int, VariableTracker] = {}
    for vt in _leaves([*args, *kwargs.values()], tx):
        meta = getattr(vt, "example", None)
        known[id(meta if meta is not None else getattr(vt, "value", None))] = vt
    return lower_to_meta(tx, tuple(args)), lower_to_meta(tx, kwargs), known


def _leaves(vts: list, tx: Tx) -> Iterator[VariableTracker]:
    from bytegraph.variables.containers import BaseSequenceVariable
    from bytegraph.variables.symbolic import SymIntVariable
    from bytegraph.variables.tensor import TensorVariable

    for vt in vts:
        if isinstance(vt, (TensorVariable, SymIntVariable)):
            yield vt
        elif isinstance(vt, BaseSequenceVariable):
            yield from _leaves(list(vt.items_now(tx)), tx)


def _rewrap(value: Any, known: dict[int, VariableTracker]) -> VariableTracker:
    """The VT of a value torch passed to ``__torch_function__``: the argument's own VT
    for a tensor or symbol, else a constant (or a sequence of those)."""
    from bytegraph.variables.builder import wrap_constant_result
    from bytegraph.variables.containers import ListVariable, TupleVariable

    if id(value) in known:
        return known[id(value)]
    if isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise Unsupported("torch_function_mode", "a tensor torch made before dispatching")
    if type(value) is list:
        return ListVariable(tuple(_rewrap(v, known) for v in value))
    if type(value) is tuple:
        return TupleVariable(tuple(_rewrap(v, known) for v in value))
    return wrap_constant_result(value)


def through_modes(
    tx: Tx, run: Callable[..., Any], args: list, kwargs: dict
) -> VariableTracker | None:
    """The op ``run(*meta_args, **meta_kwargs)`` dispatched to the top mode's
    ``__torch_function__``, traced; None with no mode, or where eager dispatches not."""
    output = tx.output
    if not output.function_modes:
        return None
    meta_args, meta_kwargs, known = _examples(tx, args, kwargs)
    call = _probe(lambda: run(*meta_args, **meta_kwargs))
    if call is None:
        return None
    func, types, call_args, call_kwargs = call
    from bytegraph.variables.base import ValueMutationNew
    from bytegraph.variables.dicts import DictVariable

    func_vt = TorchApiFunctionVariable(func)
    types_vt = _rewrap(tuple(types), known)
    args_vt = _rewrap(tuple(call_args), known)
    kwargs_vt = DictVariable(  # a new dict the mode may change (DeviceContext adds device=)
        {k: _rewrap(v, known) for k, v in call_kwargs.items()}, dict,
        mutation_type=output.side_effects.new_mutation(ValueMutationNew),
    )
    return call_top_mode(tx, [func_vt, types_vt, args_vt, kwargs_vt])


def call_top_mode(tx: Tx, dispatch_args: list) -> VariableTracker:
    """``mode.__torch_function__(*dispatch_args)`` with the mode popped meanwhile."""
    output = tx.output
    modes = output.function_modes
    handler = modes[-1].var_getattr(tx, "__torch_function__")
    output.function_modes = modes[:-1]
    try:
        return handler.call_function(tx, dispatch_args, {})
    finally:
        output.function_modes = modes


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TorchApiFunctionVariable(PythonValueVariable):
    """A torch API object as torch hands it to ``__torch_function__`` (``Tensor.add``,
    ``Tensor.__getitem__``, a getter's ``__get__``): the real object, compared by
    identity; a call is the op, dispatched to the modes still on the stack."""

    rebuilt_as_constant = True

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        return call_torch_api(tx, self.value, args, kwargs)

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in ("__name__", "__qualname__", "__module__"):  # torch's, never reassigned
            return ConstantVariable(getattr(self.value, name, None))
        return super().var_getattr(tx, name)

    def __repr__(self) -> str:
        return f"TorchApiFunctionVariable({getattr(self.value, '__name__', self.value)})"


# Tensor's dunder methods that are Python operators: ``Tensor.__and__(a, b)`` is ``a & b``.
_REVERSED = {"__radd__": operator.add, "__rsub__": operator.sub, "__rmul__": operator.mul,
             "__rtruediv__": operator.truediv, "__rdiv__": operator.truediv,
             "__rfloordiv__": operator.floordiv, "__rmod__": operator.mod,
             "__rpow__": operator.pow, "__rmatmul__": operator.matmul,
             "__rand__": operator.and_, "__ror__": operator.or_, "__rxor__": operator.xor,
             "__rlshift__": operator.lshift, "__rrshift__": operator.rshift}


def call_torch_api(tx: Tx, func: Any, args: list, kwargs: dict) -> VariableTracker:
    """``func(*args, **kwargs)`` through the ordinary paths (which dispatch to any mode
    still on the stack: not the one that received it, popped meanwhile)."""
    from bytegraph.variables.builtin import BuiltinVariable
    from bytegraph.variables.tensor import TensorVariable
    from bytegraph.variables.torch import TorchFunctionVariable
    from bytegraph.variables.torch_ops import TorchOperatorVariable, is_torch_operator

    name = getattr(func, "__name__", "")
    getter = getattr(func, "__self__", None)
    if name == "__get__" and getattr(getter, "__objclass__", None) is torch._C.TensorBase:
        if len(args) != 1 or kwargs or not isinstance(args[0], TensorVariable):
            raise Unsupported("torch_function_mode", f"Tensor.{getter.__name__} getter call")
        return args[0].var_getattr(tx, getter.__name__)
    if is_torch_operator(func):
        return TorchOperatorVariable(func).call_function(tx, args, kwargs)
    if getattr(torch.Tensor, name, None) is func and args and isinstance(args[0], TensorVariable):
        if name in _REVERSED and len(args) == 2 and not kwargs:
            return BuiltinVariable(_REVERSED[name]).call_function(tx, [args[1], args[0]], {})
        dunder_operator = getattr(operator, name, None) if name.startswith("__") else None
        if dunder_operator is not None and not kwargs:
            return BuiltinVariable(dunder_operator).call_function(tx, list(args), {})
        if name == "__len__" and len(args) == 1 and not kwargs:
            return BuiltinVariable(len).call_function(tx, list(args), {})
        if name.startswith("__"):
            raise Unsupported("torch_function_mode", f"Tensor.{name} called by a mode")
        return args[0].call_method(tx, name, list(args[1:]), dict(kwargs))
    from bytegraph.variables.torch import is_graph_function, is_trace_time_function

    if is_graph_function(func) or is_trace_time_function(func):
        return TorchFunctionVariable(func).call_function(tx, args, kwargs)
    raise Unsupported("torch_function_mode", f"calling {func!r} handed to a mode")


def tensor_dunder(cls: Any, name: str) -> VariableTracker | None:
    """``torch.Tensor.__getitem__`` and the other operator methods read from the class
    (a mode compares ``func`` with them); None for anything else."""
    if not (isinstance(cls, type) and issubclass(cls, torch.Tensor)) or not name.startswith("__"):
        return None
    value = getattr(torch.Tensor, name, None)
    if value is None or getattr(cls, name, None) is not value:
        return None
    if name in _REVERSED or isinstance(getattr(operator, name, None), type(operator.add)):
        return TorchApiFunctionVariable(value)
    return None


# -- what the trace cannot dispatch ----------------------------------------------------
# Builtins that never reach __torch_function__ (or reach it through var_getattr).
_NOT_DISPATCHED = frozenset({
    isinstance, type, id, callable, getattr, hasattr, operator.is_, operator.is_not,
})


def refuse_undispatched_op(tx: Tx, what: Any) -> None:
    """``tensor_op`` under a mode, reached by a path that did not dispatch it."""
    if tx.output.function_modes:
        raise Unsupported(
            "torch_function_mode", f"{getattr(what, '__name__', what)} under a TorchFunctionMode "
            "by a path whose dispatch the trace does not model"
        )


def through_modes_builtin(tx: Tx, fn: Any, args: list) -> VariableTracker | None:
    """A builtin with a tensor argument under a mode: an operator is dispatched as torch
    dispatches it; other builtins that would reach the mode are refused."""
    from bytegraph.variables.builtin import TENSOR_OPERATORS

    if not tx.output.function_modes or fn in _NOT_DISPATCHED:
        return None
    if fn in TENSOR_OPERATORS or fn is len:
        return through_modes(tx, fn, list(args), {})
    raise Unsupported("torch_function_mode", f"{fn.__name__}() of a tensor under a mode")


def require_transparent_modes(tx: Tx, inputs: list, what: str) -> None:
    """Before a higher-order op's body under modes: each mode passes ``dim()`` and
    ``size()`` of the inputs through unchanged and writes nothing that exists outside
    (the op's own Python, which eager dispatches, is not traced). Traced in a scope of
    its own, where a write to an older object is refused as in a body."""
    from bytegraph.variables.tensor import TensorVariable

    if not tx.output.function_modes:
        return
    with tx.output.side_effects.enter_scope():
        for vt in inputs:
            if isinstance(vt, TensorVariable):
                for method in ("dim", "size"):
                    _require_unchanged(tx, vt, method, what)


def _require_unchanged(tx: Tx, vt: Any, method: str, what: str) -> None:
    got = vt.call_method(tx, method, [], {})
    expected = getattr(vt.example, method)()
    if not got.is_python_constant() or got.as_python_constant() != expected:
        raise Unsupported(
            "torch_function_mode", f"a mode changes Tensor.{method} of an input of {what}"
        )
