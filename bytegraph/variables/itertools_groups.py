"""itertools iterators that share state with others: ``groupby`` and its groups, ``tee``.

CPython's objects, modelled field by field (``Modules/itertoolsmodule.c``):

* ``groupby``: state ``(iterator, key function, tgtkey, currkey, currvalue,
  current group)``, None where CPython's field is NULL. ``next`` forgets the
  current group, steps the source until ``currkey != tgtkey`` (or the first
  item), and hands out ``(currkey, new group)``. A group yields while it is
  still the current one and the current key equals its target; taking its
  value empties ``currvalue`` and ``currkey``. Keys are compared as ``==``
  with identity first (``equal_now``), as ``PyObject_RichCompareBool`` does.
* ``tee``: the n iterators share one buffer, ``_TeeData``: state
  ``(source, values read so far)``; each iterator's state ``(buffer, index)``.
  The lead iterator reads the source; the others read the buffer. ``tee`` of
  a tee iterator copies it (the first result is the iterator itself).

None of them is rebuilt if it escapes the trace (their shared state has no
public constructor): a graph break.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import (
    NEW_VALUE,
    TupleVariable,
    _is_none,
    equal_now,
    store_contents,
)
from bytegraph.variables.iterators import IteratorVariable
from bytegraph.variables.itertools_sources import ItertoolsIteratorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_GROUPER = type(next(itertools.groupby([0]))[1])
_TEE = type(itertools.tee(())[0])


def _same_key(tx: Tx, a: VariableTracker, b: VariableTracker) -> bool:
    if a.is_python_constant() and isinstance(a.as_python_constant(), float) and a is not b:
        value = a.as_python_constant()
        if value != value:  # NaN: only identity makes it equal, and constants lose identity
            raise Unsupported("data_dependent_branch", "groupby() keys that are NaN")
    return equal_now(tx, a, b)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GroupByVariable(ItertoolsIteratorVariable):
    """``itertools.groupby(iterable, key)``."""

    kind = itertools.groupby

    @staticmethod
    def make(iterator: IteratorVariable, key: VariableTracker) -> GroupByVariable:
        keyfunc = None if _is_none(key) else key
        return GroupByVariable((iterator, keyfunc, None, None, None, None), mutation_type=NEW_VALUE)

    def step(self, tx: Tx) -> bool:
        """``groupby_step``: read the next value and its key; False at the end."""
        iterator, keyfunc = self.state(tx)[:2]
        value = iterator.next_item(tx)
        if value is None:
            return False
        key = value if keyfunc is None else keyfunc.call_function(tx, [value], {})
        self.set_fields(tx, currkey=key, currvalue=value)
        return True

    def set_fields(self, tx: Tx, **fields: Any) -> None:
        names = ("iterator", "keyfunc", "tgtkey", "currkey", "currvalue", "group")
        state = dict(zip(names, self.state(tx)))
        state.update(fields)
        store_contents(tx, self, tuple(state[n] for n in names))

    def next_item(self, tx: Tx) -> VariableTracker | None:
        self.set_fields(tx, group=None)
        while True:
            _, _, tgtkey, currkey, _, _ = self.state(tx)
            if currkey is not None and (tgtkey is None or not _same_key(tx, tgtkey, currkey)):
                break
            if not self.step(tx):
                return None
        group = GrouperVariable((), parent=self, target=currkey, mutation_type=NEW_VALUE)
        self.set_fields(tx, tgtkey=currkey, group=group)
        return TupleVariable((currkey, group))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GrouperVariable(ItertoolsIteratorVariable):
    """One group of a ``groupby``: yields while it is its parent's current group."""

    kind = _GROUPER
    parent: GroupByVariable | None = None
    target: VariableTracker | None = None

    def next_item(self, tx: Tx) -> VariableTracker | None:
        parent = self.parent
        if parent.state(tx)[5] is not self:
            return None
        if parent.state(tx)[4] is None and not parent.step(tx):
            return None
        _, _, _, currkey, currvalue, _ = parent.state(tx)
        if not _same_key(tx, self.target, currkey):
            return None
        parent.set_fields(tx, currkey=None, currvalue=None)
        return currvalue


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TeeDataVariable(VariableTracker):
    """The buffer the iterators of one ``tee`` share: state ``(source, values)``."""

    items: tuple[Any, ...] = ()

    def value_at(self, tx: Tx, index: int) -> VariableTracker | None:
        source, values = tx.output.side_effects.contents(self, self.items)
        if index < len(values):
            return values[index]
        value = source.next_item(tx)  # the lead iterator reads on; the end is not kept
        if value is not None:
            store_contents(tx, self, (source, (*values, value)))
        return value


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TeeIteratorVariable(ItertoolsIteratorVariable):
    """One iterator of a ``tee``: state ``(buffer, index)``."""

    kind = _TEE

    def next_item(self, tx: Tx) -> VariableTracker | None:
        data, index = self.state(tx)
        value = data.value_at(tx, index.value)
        if value is not None:
            store_contents(tx, self, (data, ConstantVariable(index.value + 1)))
        return value

    def copy(self, tx: Tx) -> TeeIteratorVariable:
        return TeeIteratorVariable(self.state(tx), mutation_type=NEW_VALUE)


def make_tee(tx: Tx, iterator: IteratorVariable, n: int) -> TupleVariable:
    """``itertools.tee(iterator, n)`` for n > 0 (``tee(x, 0)`` is ``()``, x untouched)."""
    if isinstance(iterator, TeeIteratorVariable):
        first = iterator
    else:
        data = TeeDataVariable((iterator, ()), mutation_type=NEW_VALUE)
        first = TeeIteratorVariable((data, ConstantVariable(0)), mutation_type=NEW_VALUE)
    return TupleVariable((first, *(first.copy(tx) for _ in range(n - 1))))
