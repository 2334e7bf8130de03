"""Enum classes and their members.

A targeted rule, as the metaclass ``EnumType`` customises attribute access
(``__getattr__``, member properties) and instance creation: a read of an
enum class's attribute (``Color.RED``, ``Color.__members__``) is evaluated
for real at trace time and wrapped through its ``AttrSource``, when it is a
member or a constant. That is sound because the class itself is guarded by
identity, every guard on the value re-evaluates the very same read on each
call, and the trace never stores into an enum class (there is no
``var_setattr``: a store is a graph break).

A member that is not already a constant (members of ``str``/``int`` enums
are: they are instances of str and int) is an ``EnumMemberVariable``: an
immutable singleton guarded by identity, so ``is``, ``==``, ``in`` and
hashing fold at trace time; ``.name`` and ``.value`` are read for real.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import is_constant_value
from bytegraph.variables.objects import ClassVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


def is_enum_class(value: Any) -> bool:
    return isinstance(value, enum.EnumMeta)


def _read(tx: Tx, owner: Any, source: Any, name: str) -> VariableTracker:
    from bytegraph.variables.builder import wrap, wrap_constant_result

    try:
        value = getattr(owner, name)
    except AttributeError:  # eager raises it: run there
        raise Unsupported("operation_raises", f"{owner!r} has no attribute {name!r}") from None
    if source is None:
        return wrap_constant_result(value)
    return wrap(tx, value, AttrSource(source, name))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class EnumClassVariable(ClassVariable):
    """An enum class: attribute reads evaluated for real, guarded through their source."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        # Members and constants only: a read that makes a new object on every access
        # (``Color.__members__`` is a fresh mappingproxy) would fail its identity guard.
        value = getattr(self.value, name, None)
        if not (isinstance(value, self.value) or is_constant_value(value)):
            raise Unsupported("unknown_attribute", f"{self.value.__name__}.{name}")
        return _read(tx, self.value, self.source, name)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class EnumMemberVariable(PythonValueVariable):
    """A member of an enum (guarded by identity): a constant of the trace."""

    rebuilt_as_constant = True

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in ("name", "value", "_name_", "_value_"):
            return _read(tx, self.value, self.source, name)
        raise Unsupported("unknown_attribute", f"attribute {name!r} of enum member {self.value}")

    def __repr__(self) -> str:
        return f"EnumMemberVariable({self.value!r})"
