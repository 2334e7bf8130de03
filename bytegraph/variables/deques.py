"""``collections.deque`` (without ``maxlen``): a mutable sequence like a list.

``DequeVariable`` is a handle, as ``ListVariable`` is (containers.py): its
current items live in SideEffects (``items_now``), every mutation stores a
new tuple of them (``store_contents``), so a deque made in the trace costs
nothing unless it escapes, and one from the frame (a source, guarded by type
and length, each item wrapped through ``d[i]``) is replayed after the graph
as ``d.clear(); d.extend(final_items)``.

Modelled: ``append``, ``appendleft``, ``pop``, ``popleft`` (IndexError on an
empty deque, raised as eager raises it), ``extend``, ``extendleft``,
``clear``, ``remove``, ``reverse``, ``rotate``, ``copy``, ``count``,
``index``, ``len``, ``in``, ``bool``, integer indexing and iteration. An
iterator (``DequeIteratorVariable``) that finds the deque mutated since it
was made is unsupported (RuntimeError in eager). A ``maxlen`` (items dropped
from the other end) is not modelled: such deques stay with Python.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import GetItemSource, Source
from bytegraph.variables.base import ValueMutationExisting, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import (
    NEW_VALUE,
    BaseSequenceVariable,
    ListVariable,
    _index,
    equal_now,
    store_contents,
)
from bytegraph.variables.iterators import IteratorVariable
from bytegraph.variables.method_arguments import check_method_arguments
from bytegraph.variables.objects import ClassVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_EXISTING = ValueMutationExisting(0)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DequeVariable(BaseSequenceVariable):
    """A ``collections.deque`` with no ``maxlen``."""

    def python_type(self) -> type:
        return collections.deque

    def items_now(self, tx: Tx) -> tuple[VariableTracker, ...]:
        return tx.output.side_effects.contents(self, self.items)

    def rebuild(self, values: list[Any]) -> Any:
        return collections.deque(values)

    def with_items(self, items: tuple[VariableTracker, ...]) -> DequeVariable:
        return DequeVariable(items, mutation_type=NEW_VALUE)

    def getitem(self, tx: Tx, index: VariableTracker) -> VariableTracker:
        items = self.items_now(tx)
        position = _index(index)  # a deque takes no slice (TypeError): _index refuses it
        if not -len(items) <= position < len(items):
            from bytegraph.translate.ops.exceptions import raise_as_eager

            raise_as_eager(tx, "deque index", collections.deque.__getitem__,
                           collections.deque([None] * len(items)), position)
        return items[position]

    def call_method(self, tx: Tx, name: str, args, kwargs) -> VariableTracker:
        check_method_arguments(collections.deque, name, args, kwargs)
        if kwargs:
            raise Unsupported("unsupported_method", f"deque.{name} with keywords")
        if name == "copy" and not args:
            return self.with_items(self.items_now(tx))
        if name == "__iter__" and not args:
            return DequeIteratorVariable.over(tx, self)
        if name in ("extend", "extendleft") and len(args) == 1:
            return self._extend(tx, args[0], left=name == "extendleft")
        mutate = _MUTATIONS.get(name)
        if mutate is None:
            if name in ("index", "count", "__len__", "__contains__", "__getitem__"):
                return super().call_method(tx, name, args, kwargs)
            raise Unsupported("unsupported_method", f"deque.{name}")
        items = list(self.items_now(tx))
        try:
            result = mutate(tx, items, *args)
        except TypeError as e:  # the wrong number of arguments: TypeError in eager
            raise Unsupported("call_raises_type_error", f"deque.{name}: {e}") from None
        store_contents(tx, self, tuple(items))
        return ConstantVariable(None) if result is None else result

    def _extend(self, tx: Tx, iterable: VariableTracker, left: bool) -> VariableTracker:
        """Each item added as it is read, as CPython does: a generator over the deque
        (``d.extendleft(d[0] + z for z in ...)``) sees the items added before it."""
        from bytegraph.variables.iterators import iterate

        if iterable is self:  # CPython reads a copy of the deque itself
            iterable = ListVariable(self.items_now(tx))
        iterator = iterate(tx, iterable)
        while (item := iterator.next_item(tx)) is not None:
            items = self.items_now(tx)
            store_contents(tx, self, (item, *items) if left else (*items, item))
        return ConstantVariable(None)

    def _build(self, codegen: PyCodegen, items: tuple[VariableTracker, ...]) -> None:
        codegen.call_const(collections.deque, [ListVariable(items)])

    def replay_contents(self, codegen: PyCodegen, items: tuple[VariableTracker, ...]) -> None:
        """``d.clear(); d.extend(items)`` on the frame's deque."""
        codegen.call_const(_replay_deque, [self, ListVariable(items)])
        codegen.append(bc.Instr("POP_TOP"))

    def __repr__(self) -> str:
        return f"DequeVariable({len(self.items)} items)"


def _replay_deque(target: collections.deque, items: list) -> None:
    target.clear()
    target.extend(items)


def _pop(tx: Tx, items: list, left: bool) -> VariableTracker:
    if not items:
        from bytegraph.translate.ops.exceptions import raise_as_eager

        method = collections.deque.popleft if left else collections.deque.pop
        raise_as_eager(tx, "deque.pop", method, collections.deque())
    return items.pop(0 if left else -1)


def _remove(tx: Tx, items: list, value: VariableTracker) -> None:
    for i, item in enumerate(items):
        if equal_now(tx, item, value):
            del items[i]
            return
    raise Unsupported("operation_raises", "deque.remove of an absent value (ValueError)")


def _rotate(tx: Tx, items: list, steps: VariableTracker | None = None) -> None:
    n = 1 if steps is None else _index(steps)
    if items:
        n %= len(items)
        items[:] = items[-n:] + items[:-n] if n else items


_MUTATIONS: dict[str, Any] = {
    "append": lambda tx, items, v: items.append(v),
    "appendleft": lambda tx, items, v: items.insert(0, v),
    "pop": lambda tx, items: _pop(tx, items, left=False),
    "popleft": lambda tx, items: _pop(tx, items, left=True),
    "clear": lambda tx, items: items.clear(),
    "remove": _remove,
    "reverse": lambda tx, items: items.reverse(),
    "rotate": _rotate,
}


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DequeIteratorVariable(IteratorVariable):
    """``iter(a_deque)``: state ``(deque, position, the items it started over)``."""

    def python_type(self) -> type:
        return type(iter(collections.deque()))

    @staticmethod
    def over(tx: Tx, base: DequeVariable) -> DequeIteratorVariable:
        from bytegraph.variables.containers import TupleVariable

        start = TupleVariable(base.items_now(tx))
        return DequeIteratorVariable((base, ConstantVariable(0), start), mutation_type=NEW_VALUE)

    def next_item(self, tx: Tx) -> VariableTracker | None:
        state = self.state(tx)
        if not state:
            return None
        base, position, start = state
        items = base.items_now(tx)
        if items is not start.items:  # every mutation stores a new tuple
            raise Unsupported(
                "mutated_during_iteration", "deque mutated during iteration (RuntimeError)"
            )
        if position.value >= len(items):
            store_contents(tx, self, ())
            return None
        store_contents(tx, self, (base, ConstantVariable(position.value + 1), start))
        return items[position.value]

    def reconstruct(self, codegen: PyCodegen) -> None:
        raise Unsupported("unrebuildable_value", "rebuilding a deque iterator")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DequeClassVariable(ClassVariable):
    """``collections.deque``: ``deque()`` and ``deque(iterable)`` make a ``DequeVariable``."""

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        maxlen = kwargs.get("maxlen", args[1] if len(args) > 1 else None)
        if len(args) > 2 or set(kwargs) - {"iterable", "maxlen"} or (
            maxlen is not None and not (maxlen.is_python_constant()
                                        and maxlen.as_python_constant() is None)
        ):
            raise Unsupported("builtin_arguments", "deque() with a maxlen")
        iterable = args[0] if args else kwargs.get("iterable")
        items = () if iterable is None else tuple(iterable.unpack_sequence(tx))
        return DequeVariable(items, mutation_type=NEW_VALUE)


def wrap_frame_deque(tx: Tx, value: collections.deque, source: Source) -> VariableTracker:
    """A deque from the frame: guarded by type and length, each item through ``d[i]``."""
    from bytegraph.variables.builder import wrap

    if value.maxlen is not None:
        raise Unsupported("unrebuildable_value", "a deque with a maxlen")
    tx.output.add_guard(GuardKind.LEN_MATCH, source, (type(value), len(value)))
    items = tuple(wrap(tx, v, GetItemSource(source, i)) for i, v in enumerate(value))
    return DequeVariable(items, source=source, mutation_type=_EXISTING)
