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
Anything else (``e.args = ...``, ``OSError.errno``, a value CPython would
reject with TypeError) is unsupported. Rebuilt, the object is
``ExcType(*args)`` followed by ``object.__setattr__`` of each final value:
``__cause__`` first (it resets ``__suppress_context__``), then the rest.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

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
        if name in _SLOT_DEFAULTS:
            return ConstantVariable(_SLOT_DEFAULTS[name])
        raise Unsupported("unsupported_value", f"attribute {name!r} of {self.exc_type.__name__}")

    def var_setattr(self, tx: Tx, name: str, value: VariableTracker) -> None:
        """``e.name = value``: a slot of BaseException checked as CPython checks it,
        or a plain instance attribute."""
        side_effects = tx.output.side_effects
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
        """``ExcType(*args)``, then ``object.__setattr__`` for each stored attribute."""
        codegen.build_object(
            self,
            lambda: codegen.call_const(self.exc_type, list(self.args)),
            lambda: _replay_order(codegen.side_effects.pending_attrs(self)),
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
