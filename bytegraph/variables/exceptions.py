"""Exception objects made in the trace: ``ExcType(*args)`` and the attributes set on them.

``e = ValueError("outer"); e.__context__ = KeyError("inner"); return e``
builds an exception that escapes. Its VT has an identity (it is created
with ``AttributeMutationNew``, so codegen builds it once however often it is
loaded) and its attribute stores live in SideEffects like any object's.
The four attributes BaseException keeps in slots follow CPython's rules:

* ``__context__`` and ``__cause__`` take None or an exception object, and a
  ``__cause__`` store also sets ``__suppress_context__`` to True;
* ``__suppress_context__`` takes a bool;
* ``__traceback__`` takes None (a real traceback cannot be made here).

Other names (not attributes of the class) are plain instance attributes.
Class attributes of a user subclass are not read (they are not guarded).
Anything else (``e.args = ...``, ``OSError.errno``, a value CPython would
reject with TypeError) is unsupported. Rebuilt, the object is
``ExcType(*args)`` followed by ``object.__setattr__`` of each final value:
``__cause__`` first (it resets ``__suppress_context__``), then the rest.

Raising one (``translate/ops/exceptions.py``) wraps it in ``ObservedRaise``,
the Python exception that carries a raised VT through the translator's own
call stack to the frame whose exception table catches it. A raised object
has a real traceback in eager mode that the trace cannot make: reading
``__traceback__`` of it is unsupported, and rebuilt after the trace it gets
a one-entry traceback at the compiled frame's line where it was raised
(``escapes.py``). Its ``__context__`` is unknown (unsupported to read) when
it was raised while the frame's caller was handling an exception
(``OuterExceptionVariable``). ``TracebackVariable`` stands for that
traceback where a with-block hands it to ``__exit__``: passed on, compared
with None, or put back on its exception.
"""

from __future__ import annotations

import dataclasses
import types
import weakref
from typing import TYPE_CHECKING, Any

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.side_effects import DELETED
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# BaseException's slots and their values on a new exception, in replay order.
_SLOT_DEFAULTS: dict[str, Any] = {
    "__cause__": None, "__context__": None, "__suppress_context__": False, "__traceback__": None,
}


@dataclasses.dataclass(frozen=True)
class Raised:
    """What the trace knows of an exception it raised."""

    exc: VariableTracker
    context_unknown: bool  # raised while the frame's caller may be handling one
    lineno: int | None  # the compiled frame's line it was raised at (last raise)


# Exceptions raised in each trace, by its SideEffects: id -> Raised.
_raised: weakref.WeakKeyDictionary[Any, dict[int, Raised]] = weakref.WeakKeyDictionary()


class ObservedRaise(Exception):
    """A raise inside the trace, on its way to the frame whose handler catches it.

    ``vetted`` is the translator that may handle it at its current instruction;
    ``left`` the caller translator once it left an inlined frame. An opcode
    handler that knows CPython passes the exception straight through (a CALL
    of a user function, a dict lookup) vets it; anything else (a protocol in C
    that might catch it, such as FOR_ITER catching StopIteration) leaves it
    unvetted, and the translator turns it into a graph break.
    """

    def __init__(self, exc: ExceptionInstanceVariable, vetted: Any = None) -> None:
        super().__init__(exc.exc_type.__name__)
        self.exc = exc
        self.vetted = vetted
        self.left: Any = None
        # Builtin calls it left on its way out, when raised by a builtin (``raise_builtin``).
        self.builtin_frames = 0


def mark_raised(
    tx: Tx, exc: ExceptionInstanceVariable, context_unknown: bool, lineno: int | None
) -> None:
    """Record that ``exc`` was raised in this trace (it now has a traceback in eager)."""
    raised = _raised.setdefault(tx.output.side_effects, {})
    known = raised.get(id(exc))
    unknown = context_unknown or (known is not None and known.context_unknown)
    raised[id(exc)] = Raised(exc, unknown, lineno)


def raised_in_trace(side_effects: Any, exc: VariableTracker) -> Raised | None:
    return _raised.get(side_effects, {}).get(id(exc))


def _raised_state(side_effects: Any, exc: VariableTracker) -> tuple[bool, bool]:
    """(raised in this trace, its __context__ unknown)."""
    entry = raised_in_trace(side_effects, exc)
    return (False, False) if entry is None else (True, entry.context_unknown)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class OuterExceptionVariable(VariableTracker):
    """The exception being handled when the frame was called: unknown to the trace."""

    def __repr__(self) -> str:
        return "OuterExceptionVariable()"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ExceptionInstanceVariable(VariableTracker):
    """``ExcType(*args)`` made in the trace, with the attributes stored on it since."""

    exc_type: type[BaseException]
    args: tuple[VariableTracker, ...]

    def python_type(self) -> type:
        return self.exc_type

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        from bytegraph.variables.containers import TupleVariable

        if name == "args":
            return TupleVariable(self.args)
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None and pending is not DELETED:
            return pending
        raised, context_unknown = _raised_state(tx.output.side_effects, self)
        if (raised and name == "__traceback__") or (context_unknown and name == "__context__"):
            raise Unsupported("unsupported_value", f"{name} of a raised exception")
        if name in _SLOT_DEFAULTS:
            return ConstantVariable(_SLOT_DEFAULTS[name])
        raise Unsupported("unsupported_value", f"attribute {name!r} of {self.exc_type.__name__}")

    def constant_copy(self) -> BaseException:
        """A real ``ExcType(*args)`` for str() and repr(), when the args are constants."""
        if not all(a.is_python_constant() for a in self.args):
            raise Unsupported("unsupported_value", f"text of a {self.exc_type.__name__}")
        return self.exc_type(*(a.as_python_constant() for a in self.args))

    def var_setattr(self, tx: Tx, name: str, value: VariableTracker) -> None:
        """``e.name = value``: a slot of BaseException checked as CPython checks it,
        or a plain instance attribute."""
        side_effects = tx.output.side_effects
        if name == "__traceback__" and isinstance(value, TracebackVariable) and value.exc is self:
            return  # the traceback it was raised with, put back (contextlib's __exit__)
        if name in _SLOT_DEFAULTS:
            _check_slot_value(name, value)
        elif not name.isidentifier() or hasattr(self.exc_type, name):
            raise Unsupported("side_effect", f"setting {name!r} of a {self.exc_type.__name__}")
        side_effects.store_attr(self, name, value)
        if name == "__cause__":
            side_effects.store_attr(self, "__suppress_context__", ConstantVariable(True))

    def var_delattr(self, tx: Tx, name: str) -> None:
        raise Unsupported("side_effect", f"deleting {name!r} of a {self.exc_type.__name__}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``ExcType(*args)``, then ``object.__setattr__`` for each stored attribute.

        One the trace raised gets a traceback at the compiled frame's line where it
        was raised (escapes.py)."""
        from bytegraph.escapes import with_traceback_at

        raised = raised_in_trace(codegen.side_effects, self)

        def build() -> None:
            if raised is None:
                codegen.call_const(self.exc_type, list(self.args))
                return
            codegen.append(*assemble.push_null())
            codegen.load_const(with_traceback_at)
            codegen.call_const(self.exc_type, list(self.args))
            codegen.load_const(raised.lineno or 0)
            codegen.append(*assemble.call(2))

        codegen.build_object(
            self, build, lambda: _replay_order(codegen.side_effects.pending_attrs(self))
        )

    def __repr__(self) -> str:
        return f"ExceptionInstanceVariable({self.exc_type.__name__})"


def _check_slot_value(name: str, value: VariableTracker) -> None:
    """Unsupported where CPython's setter raises TypeError (or the value is unknown)."""
    is_constant = value.is_python_constant()
    constant = value.as_python_constant() if is_constant else object()
    if name in ("__context__", "__cause__"):
        ok = constant is None or isinstance(value, ExceptionInstanceVariable)
    elif name == "__suppress_context__":
        ok = isinstance(constant, bool)
    else:  # __traceback__
        ok = constant is None
    if not ok:
        raise Unsupported("side_effect", f"{name} set to {value} (TypeError, or unknown here)")


def _replay_order(attrs: dict[str, Any]) -> list[tuple[str, Any]]:
    """The final value of each attribute, ``__cause__`` before ``__suppress_context__``."""
    slots = [(n, attrs[n]) for n in _SLOT_DEFAULTS if n in attrs]
    plain = [(n, v) for n, v in attrs.items() if n not in _SLOT_DEFAULTS]
    return [(n, v) for n, v in slots + plain if v is not DELETED]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TracebackVariable(VariableTracker):
    """The traceback of a raised ``exc``, as a with-block hands it to ``__exit__``.

    The trace cannot make it; it is never None, so it can be passed on, dropped,
    compared with None or put back on ``exc``, and anything else is unsupported.
    """

    exc: ExceptionInstanceVariable

    def python_type(self) -> type:
        return types.TracebackType

    def __repr__(self) -> str:
        return f"TracebackVariable({self.exc!r})"
