"""itertools iterators that own their items: ``count``, ``repeat``, ``cycle`` and the
combinatoric ones (``product``, ``combinations``, ``combinations_with_replacement``,
``permutations``).

Each is an ``IteratorVariable`` whose state (a tuple of VTs) lives in
SideEffects, as every iterator's does, so a speculation or a restart rolls
it back. The state is what CPython's object holds, and it is what an
escaping iterator is rebuilt from, exactly:

* ``count``: ``(current, step)``; rebuilt ``count(current, step)``. Floats
  advance by repeated addition, as CPython's does.
* ``repeat``: ``(object, times left)`` (None: forever); rebuilt
  ``repeat(object[, times])``.
* ``cycle``: ``(source, saved, position)``. During the first pass items come
  from ``source`` and are saved; then ``saved`` is cycled from ``position``.
  Rebuilt ``cycle(saved[position:] + saved[:position])`` once the source is
  done (the same items forever, in the same order), or ``cycle(source)``
  before it has yielded anything; a cycle that escapes halfway through its
  first pass (its saved prefix cannot be handed to a new one) is a break.
* combinatorics: CPython reads every pool to the end when the object is
  made; the index tuples it will yield depend only on the pools' sizes and
  are computed with the real function over ``range``s. State ``(position,)``;
  rebuilt by calling the real function on the pools and advancing it.

``count``, ``cycle`` and endless ``repeat`` never end: consuming one whole
(``list(count())``) is refused after ``MAX_ITEMS`` items.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import TYPE_CHECKING, Any, ClassVar

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import NEW_VALUE, ListVariable, TupleVariable, store_contents
from bytegraph.variables.iterators import IteratorVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

MAX_ITEMS = 10_000


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ItertoolsIteratorVariable(IteratorVariable):
    """An iterator of an itertools type (``kind``), its state in SideEffects."""

    kind: ClassVar[type] = object

    def python_type(self) -> type:
        return self.kind

    def unpack_sequence(self, tx: Tx) -> list[VariableTracker]:
        items: list[VariableTracker] = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
            if len(items) > MAX_ITEMS:
                raise Unsupported(
                    "size_limit", f"consuming {self.kind.__name__}() yielded over {MAX_ITEMS} items"
                )
        return items

    def read_or_finish(self, tx: Tx, source: IteratorVariable, finished: tuple) -> Any:
        """``source``'s next item; if it raises, this iterator is left ``finished`` (where
        CPython drops its sources on an error: islice, zip_longest, pairwise, chain)."""
        from bytegraph.variables.exceptions import ObservedRaise

        try:
            return source.next_item(tx)
        except ObservedRaise:
            store_contents(tx, self, finished)
            raise

    def reconstruct(self, codegen: PyCodegen) -> None:
        self.rebuild(codegen, codegen.side_effects.contents(self, self.items))

    def rebuild(self, codegen: PyCodegen, state: tuple[VariableTracker, ...]) -> None:
        raise Unsupported("unrebuildable_value", f"a live {self.kind.__name__} escapes the trace")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _number(vt: VariableTracker, what: str) -> Any:
    """An int, float or complex constant (not a bool: CPython counts it as an int)."""
    if not vt.is_python_constant() or type(vt.as_python_constant()) not in (int, float, complex):
        raise Unsupported("not_a_constant", f"{what} is not a number known at trace time")
    return vt.as_python_constant()


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CountVariable(ItertoolsIteratorVariable):
    """``itertools.count(start, step)``: state ``(current, step)``."""

    kind = itertools.count

    @staticmethod
    def make(tx: Tx, start: VariableTracker, step: VariableTracker) -> CountVariable:
        _number(start, "count() start")
        _number(step, "count() step")
        return CountVariable((start, step), mutation_type=NEW_VALUE)

    def next_item(self, tx: Tx) -> VariableTracker | None:
        current, step = self.state(tx)
        following = ConstantVariable(current.as_python_constant() + step.as_python_constant())
        store_contents(tx, self, (following, step))
        return current

    def rebuild(self, codegen: PyCodegen, state: tuple[VariableTracker, ...]) -> None:
        codegen.call_const(itertools.count, list(state))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class RepeatVariable(ItertoolsIteratorVariable):
    """``itertools.repeat(obj[, times])``: state ``(obj, times left or None)``."""

    kind = itertools.repeat

    def next_item(self, tx: Tx) -> VariableTracker | None:
        obj, left = self.state(tx)
        if left.value is None:
            return obj
        if left.value <= 0:
            return None
        store_contents(tx, self, (obj, ConstantVariable(left.value - 1)))
        return obj

    def rebuild(self, codegen: PyCodegen, state: tuple[VariableTracker, ...]) -> None:
        obj, left = state
        codegen.call_const(itertools.repeat, [obj] if left.value is None else [obj, left])


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CycleVariable(ItertoolsIteratorVariable):
    """``itertools.cycle(iterable)``: state ``(source or None, saved, position)``."""

    kind = itertools.cycle

    def next_item(self, tx: Tx) -> VariableTracker | None:
        source, saved, position = self.state(tx)
        if source is not None:
            item = source.next_item(tx)
            if item is not None:
                store_contents(tx, self, (source, TupleVariable((*saved.items, item)), position))
                return item
            store_contents(tx, self, (None, saved, position))  # CPython drops the source
        items = saved.items
        if not items:
            return None
        index = position.value
        store_contents(tx, self, (None, saved, ConstantVariable((index + 1) % len(items))))
        return items[index]

    def rebuild(self, codegen: PyCodegen, state: tuple[VariableTracker, ...]) -> None:
        source, saved, position = state
        if source is not None:
            if saved.items:
                raise Unsupported(
                    "unrebuildable_value", "a cycle() escapes halfway through its first pass"
                )
            codegen.call_const(itertools.cycle, [source])
            return
        items = saved.items[position.value:] + saved.items[:position.value]
        codegen.call_const(itertools.cycle, [TupleVariable(items)])


def make_cycle(source: IteratorVariable) -> CycleVariable:
    return CycleVariable((source, TupleVariable(()), ConstantVariable(0)), mutation_type=NEW_VALUE)


# -- combinatorics -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PoolIteratorVariable(ItertoolsIteratorVariable):
    """``product``, ``combinations``, ``combinations_with_replacement``, ``permutations``:
    ``pools`` (one for product's each factor, else one), the ``indices`` each result takes
    from them, the ``options`` (``r``) the real call takes; state ``(position,)``."""

    pools: tuple[tuple[VariableTracker, ...], ...] = ()
    indices: tuple[tuple[int, ...], ...] = ()
    options: tuple[Any, ...] = ()
    function: Any = None

    def python_type(self) -> type:
        return self.function

    def next_item(self, tx: Tx) -> VariableTracker | None:
        (position,) = self.state(tx)
        if position.value >= len(self.indices):
            return None
        store_contents(tx, self, (ConstantVariable(position.value + 1),))
        chosen = self.indices[position.value]
        if self.function is itertools.product:
            return TupleVariable(tuple(pool[i] for pool, i in zip(self.pools, chosen)))
        return TupleVariable(tuple(self.pools[0][i] for i in chosen))

    def rebuild(self, codegen: PyCodegen, state: tuple[VariableTracker, ...]) -> None:
        pools = ListVariable(tuple(TupleVariable(pool) for pool in self.pools))
        rebuild = functools.partial(_pool_iterator_at, self.function, self.options)
        codegen.call_const(rebuild, [pools, *state])


def _pool_iterator_at(function: Any, options: tuple, pools: list, position: int) -> Any:
    iterator = function(*pools, *options)
    for _ in range(position):
        next(iterator)
    return iterator


def make_pool_iterator(
    function: Any, pools: tuple[tuple[VariableTracker, ...], ...], options: tuple[Any, ...]
) -> PoolIteratorVariable:
    """The iterator ``function(*pools, *options)`` gives (pools already read to the end)."""
    ranges = [range(len(pool)) for pool in pools]
    try:
        indices = tuple(itertools.islice(function(*ranges, *options), MAX_ITEMS + 1))
    except (TypeError, ValueError, OverflowError) as e:
        raise Unsupported("operation_raises", f"{function.__name__}(): {e}") from None
    if len(indices) > MAX_ITEMS:
        raise Unsupported("size_limit", f"{function.__name__}() of over {MAX_ITEMS} results")
    return PoolIteratorVariable(
        (ConstantVariable(0),), pools=pools, indices=indices, options=options,
        function=function, mutation_type=NEW_VALUE,
    )
