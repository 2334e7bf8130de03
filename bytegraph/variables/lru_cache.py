"""``functools.lru_cache``-wrapped functions and methods: called for real at trace time.

The cache is state: eager's first call with some arguments runs the function
and stores its result, later calls return that very result without running
it. Tracing ``__wrapped__`` instead (what torch.compile does, with a warning)
would run the function's effects again and hand out a new result object each
call. bytegraph keeps eager's cache instead:

* every argument (and the receiver of a cached method, such as Hugging Face's
  ``logger.warning_once``) must be a Python constant or a real object from the
  frame, and nothing may be pending in SideEffects, nor any in-place write into
  a tensor from outside be in the graph so far (the function would read the real
  objects, globals and tensors, which do not have the trace's changes yet),
  unless the call is certainly a cache hit, which runs nothing (a call without
  arguments whose cache holds its one entry), or is promised constant (the wrapped
  function is marked ``assume_constant_result``, bytegraph's or torch's, as
  transformers marks ``is_torch_greater_or_equal``: its result depends on no state
  the trace could have changed), or is a logger's log-once helper, which is then
  recorded and made after the graph, in order with the replayed mutations;
* the real wrapper is called once, at trace time: a miss runs the function
  then (its output, a first ``warning_once`` message, appears while the trace
  runs, once, as in eager), a hit changes nothing;
* the result must be an immutable constant (an int, a string, a tuple of
  them, None): it is folded into the trace, as eager would get the cached
  result on every later call.

What differs from eager: the cache's statistics (``cache_info()``) count the
trace's call and not the compiled calls, and where the cache later drops the
entry (``cache_clear()``, or eviction from a bounded cache) eager would run the
function again while the compiled code keeps the result it was traced with.
Anything else (a tensor argument, a result that is an object or a tensor, a
raising call) is a clean break: the call runs in Python.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.side_effects import TOP_SCOPE
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_NO_RECEIVER = object()


def is_lru_cache_wrapper(value: Any) -> bool:
    # By type: isinstance would read ``__class__``, which a custom __getattribute__ answers.
    return issubclass(type(value), functools._lru_cache_wrapper)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LruCacheFunctionVariable(VariableTracker):
    """An ``lru_cache`` wrapper, bound to ``receiver`` (a VT whose ``value`` is the real
    object) when read as a method."""

    wrapper: Any = dataclasses.field(metadata={"no_vts": True})
    receiver: VariableTracker | None = None

    def python_type(self) -> type:
        return type(self.wrapper)

    def as_python_constant(self) -> Any:
        if self.receiver is not None:
            return super().as_python_constant()
        return self.wrapper

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.builder import wrap_constant_result

        name = getattr(self.wrapper, "__qualname__", repr(self.wrapper))
        if tx.output.side_effects.scope > TOP_SCOPE:  # a branch of torch.cond may never run
            raise Unsupported(
                "side_effect_in_higher_order_body", f"{name}() inside a higher-order op"
            )
        pending = tx.output.side_effects.has_replay or tx.output.writes_inputs
        if pending and not (
            _certain_hit(self.wrapper, self.receiver, args, kwargs)
            or _promised_constant(self.wrapper)
        ):
            deferred = _defer_log_once(tx, self, args, kwargs)
            if deferred is not None:
                return deferred
            raise _refuse(
                f"{name}(): the trace has pending mutations (or in-place writes into tensors "
                "from outside) the call would not see"
            )
        receiver = _receiver_value(self.receiver, name)
        consts = [_constant(tx, a, name) for a in args]
        const_kwargs = {k: _constant(tx, v, name) for k, v in kwargs.items()}
        call_args = consts if receiver is _NO_RECEIVER else [receiver, *consts]
        try:
            result = self.wrapper(*call_args, **const_kwargs)
        except Exception as e:
            raise _refuse(f"{name}() raised {type(e).__name__} at trace time") from None
        if not is_constant_value(result):
            raise _refuse(f"{name}() returned a {type(result).__name__}, not a constant")
        return wrap_constant_result(result)

    def __repr__(self) -> str:
        return f"LruCacheFunctionVariable({getattr(self.wrapper, '__qualname__', '?')})"


def _certain_hit(wrapper: Any, receiver: VariableTracker | None, args: list, kwargs: dict) -> bool:
    """Whether calling ``wrapper`` now returns its cached result without running the
    function: a call without arguments has one cache key, cached if the cache holds
    anything (Hugging Face's ``is_torch_distributed_available()``)."""
    if receiver is not None or args or kwargs:
        return False
    return wrapper.cache_info().currsize > 0


def _promised_constant(wrapper: Any) -> bool:
    """The cached function, or its wrapper, is marked ``assume_constant_result``."""
    from bytegraph.markers import marking

    wrapped = getattr(wrapper, "__wrapped__", None)
    return marking(wrapper) == "constant" or (
        wrapped is not None and marking(wrapped) == "constant"
    )


def _defer_log_once(
    tx: Tx, fn: LruCacheFunctionVariable, args: list, kwargs: dict
) -> VariableTracker | None:
    """A logger's log-once helper (Hugging Face's ``logger.warning_once(msg)``) called
    with mutations pending: recorded as a call the generated code makes after the
    graph, in order with the replayed mutations, so it reads the state eager's call
    reads; its first run logs and later ones hit the cache, as in eager. It returns
    None, as a log call does. None if ``fn`` is no such helper."""
    from bytegraph.variables.logging_calls import DeferredLogCallVariable, constant_argument

    logger = getattr(fn.receiver, "value", None)
    name = getattr(fn.wrapper, "__name__", "")
    if not isinstance(logger, logging.Logger) or not name.endswith("_once"):
        return None
    if getattr(type(logger), name, None) is not fn.wrapper:
        return None
    call = DeferredLogCallVariable(fn.receiver, name)
    what = f"Logger.{name}()"
    consts = tuple(constant_argument(tx, a, what) for a in args)
    const_kwargs = {k: constant_argument(tx, v, what) for k, v in kwargs.items()}
    tx.output.side_effects.record_call(call, consts, const_kwargs)
    return ConstantVariable(None)


def _refuse(detail: str) -> Unsupported:
    return Unsupported("builtin_arguments", f"lru_cache-wrapped {detail}")


def _receiver_value(receiver: VariableTracker | None, name: str) -> Any:
    if receiver is None:
        return _NO_RECEIVER
    value = getattr(receiver, "value", None)
    if value is None or receiver.source is None:
        raise _refuse(f"{name}(): bound to an object made in the trace")
    return value


def _constant(tx: Tx, vt: VariableTracker, name: str) -> Any:
    from bytegraph.variables.containers import python_constant

    try:
        value = python_constant(tx, vt)
    except Unsupported:
        value = vt
    if value is vt or not is_constant_value(value):
        raise _refuse(f"{name}() with an argument that is not a constant: {vt}")
    return value
