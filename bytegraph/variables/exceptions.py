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

``args`` takes a tuple. Other names (not attributes of a builtin class, nor
descriptors of a user class) are plain instance attributes. Anything else
(``OSError.errno``, a value CPython would reject with TypeError) is
unsupported. Rebuilt, the object is ``ExcType(*args)`` (``ExcType.__new__(
ExcType, *args)`` for a class with a Python ``__init__``, which must not run
twice) followed by ``object.__setattr__`` of each final value: ``__cause__``
first (it resets ``__suppress_context__``), then the rest.

Raising one (``translate/ops/exceptions.py``) wraps it in ``ObservedRaise``,
the Python exception that carries a raised VT through the translator's own
call stack to the frame whose exception table catches it. A raised object
has a real traceback in eager mode that the trace cannot make: reading
``__traceback__`` of it gives a ``TracebackVariable``, and rebuilt after the trace it gets
a one-entry traceback at the compiled frame's line where it was raised
(``escapes.py``). Its ``__context__`` is unknown (unsupported to read) when
it was raised while the frame's caller was handling an exception
(``OuterExceptionVariable``). ``TracebackVariable`` stands for that
traceback where a with-block hands it to ``__exit__`` or ``sys.exc_info()``
returns it (``ExcInfoFunctionVariable``): passed on, compared with None, or
put back on its exception.

Instances of user subclasses (user_exceptions.py) are the same VT with the
class VT they were made through (``cls_vt``): their ``args`` follow
``BaseException.__new__`` and ``__init__``, and their class attributes are
read (and guarded) through that class's source.
"""

from __future__ import annotations

import dataclasses
import sys
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
    """``ExcType(*args)`` made in the trace, with the attributes stored on it since.

    ``args`` is what ``BaseException.__new__`` stored: the constructor's positional
    arguments; a later ``e.args = ...`` or BaseException's ``__init__`` run again
    (``super().__init__(msg)``) stores ``args`` in SideEffects. ``cls_vt`` is the
    class VT a user subclass was called through (user_exceptions.py reads its
    attributes through it); None for a builtin class.
    """

    exc_type: type[BaseException]
    args: tuple[VariableTracker, ...]
    cls_vt: VariableTracker | None = None

    def python_type(self) -> type:
        return self.exc_type

    def class_vt(self) -> VariableTracker:
        """``type(exc)``."""
        from bytegraph.variables.raising import ExceptionClassVariable

        return self.cls_vt if self.cls_vt is not None else ExceptionClassVariable(self.exc_type)

    def current_args(self, side_effects: Any) -> VariableTracker:
        """``exc.args`` now: the last store of it, else the constructor's arguments."""
        from bytegraph.variables.containers import TupleVariable

        pending = side_effects.load_attr(self, "args")
        return pending if pending is not None else TupleVariable(self.args)

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        from bytegraph.variables.user_exceptions import instance_getattr

        if name == "args":
            return self.current_args(tx.output.side_effects)
        if name == "__class__":
            return self.class_vt()
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is not None and pending is not DELETED:
            return pending
        raised, context_unknown = _raised_state(tx.output.side_effects, self)
        if raised and name == "__traceback__":
            return TracebackVariable(self)  # 3.13's ExitStack.__exit__ reads it
        if context_unknown and name == "__context__":
            raise Unsupported("unknown_attribute", f"{name} of a raised exception")
        if name in _SLOT_DEFAULTS:
            return ConstantVariable(_SLOT_DEFAULTS[name])
        if not name.isidentifier() or name == "__dict__":
            raise Unsupported("unknown_attribute", f"{name!r} of a {self.exc_type.__name__}")
        return instance_getattr(tx, self, name)

    def constant_copy(self, tx: Tx) -> BaseException:
        """A real exception of the same class and current args, for str() and repr(),
        when the args are constants. A user class is made with its ``__new__`` alone
        (BaseException's): its ``__init__`` must not run at trace time."""
        args = self.current_args(tx.output.side_effects)
        if not args.is_python_constant():
            raise Unsupported("unknown_attribute", f"text of a {self.exc_type.__name__}")
        values = args.as_python_constant()
        if self.cls_vt is None:
            return self.exc_type(*values)
        copy = self.exc_type.__new__(self.exc_type)
        copy.args = values
        return copy

    def var_setattr(self, tx: Tx, name: str, value: VariableTracker) -> None:
        """``e.name = value``: a slot of BaseException checked as CPython checks it,
        ``args`` (a tuple), or a plain instance attribute."""
        from bytegraph.variables.user_exceptions import check_instance_store

        side_effects = tx.output.side_effects
        if name == "__traceback__" and isinstance(value, TracebackVariable) and value.exc is self:
            return  # the traceback it was raised with, put back (contextlib's __exit__)
        if name in _SLOT_DEFAULTS:
            _check_slot_value(name, value)
        elif name == "args":
            value = _args_value(value)
        elif not name.isidentifier():
            raise Unsupported(
                "attribute_mutation", f"setting {name!r} of a {self.exc_type.__name__}"
            )
        else:
            check_instance_store(tx, self, name)
        side_effects.store_attr(self, name, value)
        if name == "__cause__":
            side_effects.store_attr(self, "__suppress_context__", ConstantVariable(True))

    def var_delattr(self, tx: Tx, name: str) -> None:
        raise Unsupported("attribute_mutation", f"deleting {name!r} of a {self.exc_type.__name__}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``ExcType(*args)``, then ``object.__setattr__`` for each stored attribute
        (``args`` among them when it changed). A class whose ``__init__`` is a Python
        function is made with ``ExcType.__new__(ExcType, *args)``: its ``__init__``
        ran in the trace, and its effects are the attributes and side effects.

        One the trace raised gets a traceback at the compiled frame's line where it
        was raised (escapes.py)."""
        from bytegraph.escapes import with_traceback_at
        from bytegraph.variables.user_exceptions import has_python_init

        raised = raised_in_trace(codegen.side_effects, self)

        def make() -> None:
            if has_python_init(self.exc_type):
                codegen.call_const(self.exc_type.__new__, [self.class_vt(), *self.args])
            else:
                codegen.call_const(self.exc_type, list(self.args))

        def build() -> None:
            if raised is None:
                make()
                return
            codegen.load_callable(with_traceback_at)
            make()
            codegen.load_const(raised.lineno or 0)
            codegen.append(*assemble.call(2))

        codegen.build_object(
            self, build, lambda: _replay_order(codegen.side_effects.pending_attrs(self))
        )

    def __repr__(self) -> str:
        return f"ExceptionInstanceVariable({self.exc_type.__name__})"


def _args_value(value: VariableTracker) -> VariableTracker:
    """``e.args = value``: CPython keeps ``tuple(value)``; a plain tuple here."""
    from bytegraph.variables.containers import TupleVariable

    if type(value) is TupleVariable and value.python_type() is tuple:
        return value
    raise Unsupported("attribute_mutation", f"args set to {value}")


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
        raise Unsupported(
            "attribute_mutation", f"{name} set to {value} (TypeError, or unknown here)"
        )


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


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ExcInfoFunctionVariable(VariableTracker):
    """``sys.exc_info``: ``(type, value, traceback)`` of the exception being handled
    (``exc_info`` in translate/ops/exceptions.py), or three Nones when none is; the
    traceback is a ``TracebackVariable``. What the frame's caller handles is known
    only to be nothing (guarded); an exception of the caller's is unsupported.
    With ``fn`` ``sys.exception`` (3.13's contextlib calls it), the value alone."""

    fn: Any = sys.exc_info

    def python_type(self) -> type:
        return types.BuiltinFunctionType

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        info = self._exc_info(tx, args, kwargs)
        return info.items[1] if self.fn is sys.exception else info

    def _exc_info(self, tx: Tx, args, kwargs) -> Any:
        from bytegraph.translate.ops.exceptions import exc_info
        from bytegraph.variables.containers import TupleVariable

        if args or kwargs:
            raise Unsupported(
                "call_raises_type_error", f"sys.{self.fn.__name__}() with arguments (TypeError)"
            )
        handled = exc_info(tx)
        if isinstance(handled, ExceptionInstanceVariable):
            return TupleVariable((handled.class_vt(), handled, TracebackVariable(handled)))
        if handled.is_python_constant() and handled.as_python_constant() is None:
            return TupleVariable((ConstantVariable(None),) * 3)
        if sys.exc_info()[1] is None:
            # The caller handles nothing now (the trace runs inside the call): guarded,
            # three Nones as long as every call comes from outside an except block.
            from bytegraph.guards.guard import GuardKind
            from bytegraph.guards.sources import GetItemSource, StateCallSource

            value = GetItemSource(StateCallSource(sys.exc_info), 1)
            tx.output.add_guard(GuardKind.CONSTANT_MATCH, value, None)
            return TupleVariable((ConstantVariable(None),) * 3)
        raise Unsupported("exception_value", "sys.exc_info() of the caller's exception")

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_const(self.fn)
