"""Deferred logging: ``print()`` and Logger calls replayed after the graph (opt-in).

With ``bytegraph.config.reorderable_logging = True``, a call of

* ``print(...)`` (no ``file=``), or
* a ``logging`` module function of the same names (``logging.warning(...)``), or
* a ``logging.Logger`` method ``debug``/``info``/``warning``/``warn``/``error``/
  ``critical``/``fatal``/``log`` as ``logging.Logger`` defines it, or a log-once
  helper installed on the class (a ``functools.lru_cache``-wrapped ``*_once``
  attribute, such as Hugging Face's ``logger.warning_once``),

on a logger from the frame or obtained inline (``logging.getLogger("name")``
with a constant name: the logger reached through the source
``logging.getLogger("name")``, which its guards and the replay call again),
whose arguments are all Python constants (strings, numbers, dtypes, shapes:
what the trace knows without a tensor's values) is not traced into. It is
recorded in SideEffects as a call, returns None in the trace, and the
generated code makes the same call after the graph, in program order with
the other calls and the other replayed mutations. What changes: output
appears after the graph's work rather than between its ops, and a log
record's caller (``funcName``, ``lineno``) is the transformed code's.

Refused, so the call stays a graph break: the switch off (the default), an
argument that is a tensor or any other object whose printed form could
change before the replay, ``file=``, ``exc_info``/``stack_info`` (the replay
has no exception being handled, and another stack), ``Logger.exception``,
and a call inside a nested higher-order op.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import TYPE_CHECKING, Any

import torch

from bytegraph import config
from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.side_effects import TOP_SCOPE
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value
from bytegraph.variables.user_defined import Found, UserDefinedObjectVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "fatal", "log"})
_REFUSED_KEYWORDS = ("exc_info", "stack_info")


def is_deferred_log_method(cls: type, found: Found, name: str) -> bool:
    """``logger.name`` is a log call that may be deferred (the switch is read here)."""
    if not config.reorderable_logging or not issubclass(cls, logging.Logger):
        return False
    if found.pending is not None:
        return False
    if name in LOG_METHODS:
        return found.owner is logging.Logger and found.raw is logging.Logger.__dict__[name]
    return name.endswith("_once") and isinstance(found.raw, functools._lru_cache_wrapper)


def _loggable(value: Any) -> bool:
    """A value whose printed form is fixed now: constants and containers of them."""
    if is_constant_value(value) or type(value) is torch.Size:
        return True
    if type(value) in (tuple, list, set, frozenset):
        return all(_loggable(v) for v in value)
    if type(value) is dict:
        return all(_loggable(k) and _loggable(v) for k, v in value.items())
    return False


def constant_argument(tx: Tx, vt: VariableTracker, what: str) -> Any:
    from bytegraph.variables.containers import python_constant

    try:
        value = python_constant(tx, vt)
    except Unsupported:
        value = vt
    if value is vt or not _loggable(value):
        raise Unsupported("print_or_logging", f"{what} of {vt}: needs its value at run time")
    return value


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DeferredLogCallVariable(VariableTracker):
    """``print`` or a ``logging`` function (receiver None: ``function`` is called), or
    ``logger.<name>``: a call recorded for the replay."""

    receiver: VariableTracker | None
    name: str
    function: Any = print

    def python_type(self) -> type:
        return type(self.function) if self.receiver is None else type(logging.Logger.info)

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        what = f"{self._owner()}.{self.name}()"
        if not config.reorderable_logging:
            raise Unsupported(
                "print_or_logging", f"call of {what[:-2]} (reorderable_logging is off)"
            )
        if tx.output.side_effects.scope > TOP_SCOPE:
            raise Unsupported(
                "side_effect_in_higher_order_body", f"{what} inside a higher-order op"
            )
        consts = tuple(constant_argument(tx, a, what) for a in args)
        const_kwargs = {k: constant_argument(tx, v, what) for k, v in kwargs.items()}
        self._check_keywords(what, const_kwargs)
        tx.output.side_effects.record_call(self, consts, const_kwargs)
        return ConstantVariable(None)

    def _owner(self) -> str:
        if self.receiver is not None:
            return "Logger"
        return "builtins" if self.function is print else "logging"

    def _check_keywords(self, what: str, kwargs: dict[str, Any]) -> None:
        if self.function is print and self.receiver is None:
            if kwargs.get("file") is not None:
                raise Unsupported("print_or_logging", f"{what} with file=")
            return
        for name in _REFUSED_KEYWORDS:
            if kwargs.get(name):
                raise Unsupported("print_or_logging", f"{what} with {name}")

    def load_callable(self, codegen: Any) -> None:
        """Leave the callable on the stack: ``print``, a ``logging`` function, or
        ``logger.name`` (bound now)."""

        if self.receiver is None:
            codegen.load_const(self.function)
            return
        codegen(self.receiver)
        codegen.append(assemble.load_attr(self.name))

    def __repr__(self) -> str:
        return f"DeferredLogCallVariable({self._owner()}.{self.name})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LoggerVariable(UserDefinedObjectVariable):
    """A ``logging.Logger`` from the frame: a plain object whose log methods may defer."""

    def bind(self, tx: Tx, found: Found, name: str) -> VariableTracker:
        if is_deferred_log_method(self.cls, found, name):
            return DeferredLogCallVariable(self, name)
        return super().bind(tx, found, name)


# ``logging.warning(...)`` and friends: the root logger's methods, behind a basicConfig().
MODULE_FUNCTIONS = {getattr(logging, name): name for name in sorted(LOG_METHODS)}
_MODULE_FUNCTION_IDS = frozenset(id(fn) for fn in MODULE_FUNCTIONS)


def is_module_log_function(value: Any) -> bool:
    return id(value) in _MODULE_FUNCTION_IDS


def module_log_function(fn: Any, source: Any) -> DeferredLogCallVariable:
    return DeferredLogCallVariable(None, MODULE_FUNCTIONS[fn], fn, source=source)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GetLoggerVariable(VariableTracker):
    """``logging.getLogger``: with a constant name, the logger itself, reached through
    the source ``logging.getLogger(name)`` (the same object for the life of the process,
    which the guards and the replay fetch again)."""

    def python_type(self) -> type:
        return type(logging.getLogger)

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.guards.sources import StateCallSource
        from bytegraph.variables.builder import wrap

        name = _logger_name(args, kwargs)
        source = StateCallSource(logging.getLogger, () if name is None else (name,))
        return wrap(tx, logging.getLogger(name), source)

    def reconstruct(self, codegen: Any) -> None:
        if self.source is None:
            codegen.load_const(logging.getLogger)
            return
        self.source.reconstruct(codegen)


def _logger_name(args: list, kwargs: dict) -> str | None:
    values = [*args, *kwargs.values()]
    if len(values) > 1 or set(kwargs) - {"name"}:
        raise Unsupported("call_raises_type_error", "logging.getLogger with extra arguments")
    if not values:
        return None
    if not values[0].is_python_constant():
        raise Unsupported("not_a_constant", "logging.getLogger of a name known at run time")
    name = values[0].as_python_constant()
    if name is not None and type(name) is not str:
        raise Unsupported("not_a_constant", f"logging.getLogger({name!r})")
    return name
