"""Iterators: a snapshot of known items, and lazy ones that do what CPython does.

An iterator's state (a tuple of VTs) lives in SideEffects. ``iterate(tx, x)``
is ``iter(x)``: a list, dict or set iterator reads its container as it is at
each step, so a loop sees the appends its body makes, and a dict or set that
changes size under its iterator (a RuntimeError in eager) is unsupported.
``map``, ``filter``, ``zip`` and ``enumerate`` call into their sources only
when asked for the next item.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import NEW_VALUE, ListVariable, TupleVariable, store_contents
from bytegraph.variables.dicts import DictVariable, DictViewVariable
from bytegraph.variables.object_keys import elements_in_order, key_variable

TUPLE_ITERATOR = type(iter(()))
# Iterators rebuilt from any remaining items; others (ranges, text) from constants only.
_ANY_ITEMS = (TUPLE_ITERATOR, type(reversed(())))

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase
    from bytegraph.variables.sets import SetVariable


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class IteratorVariable(VariableTracker):
    """An iterator over known items; the remaining items live in SideEffects.

    Subclasses are lazy: their state (a tuple of VTs, starting as ``items``)
    lives in SideEffects too, and each ``next_item`` does what CPython's
    ``__next__`` does at that moment (a list iterator sees appends, ``map``
    calls its function only when asked).
    """

    items: tuple[VariableTracker, ...]
    # The type of the real iterator the snapshot stands for: type() and isinstance
    # answer it, and an escaping snapshot is rebuilt as one (a tuple's by default).
    iterator_type: type = dataclasses.field(default=TUPLE_ITERATOR, kw_only=True)

    def python_type(self) -> type:
        return self.iterator_type

    def state(self, tx: InstructionTranslatorBase) -> tuple[VariableTracker, ...]:
        return tx.output.side_effects.contents(self, self.items)

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        """The next item, or None when exhausted (StopIteration)."""
        remaining = self.state(tx)
        if not remaining:
            return None
        store_contents(tx, self, remaining[1:])
        return remaining[0]

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        items = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
        return items

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return True

    def reconstruct(self, codegen: PyCodegen) -> None:
        """An iterator of ``iterator_type`` over the remaining items."""
        if type(self) is not IteratorVariable:  # a subclass that cannot rebuild itself
            raise Unsupported("unrebuildable_value", f"a live {self} escapes the trace")
        remaining = codegen.side_effects.contents(self, self.items)
        if self.iterator_type not in _ANY_ITEMS and not _rebuilds(self.iterator_type, remaining):
            name = self.iterator_type.__name__
            raise Unsupported("unrebuildable_value", f"a live {name} escapes the trace")
        rebuild = functools.partial(rebuilt_iterator, self.iterator_type)
        codegen.call_const(rebuild, [TupleVariable(remaining)])


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ListIteratorVariable(IteratorVariable):
    """``iter(a_list)``: state ``(list, position)``, or ``()`` once exhausted."""

    def python_type(self) -> type:
        return type(iter([]))

    @staticmethod
    def over(base: ListVariable) -> ListIteratorVariable:
        return ListIteratorVariable((base, ConstantVariable(0)), mutation_type=NEW_VALUE)

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        state = self.state(tx)
        if not state:
            return None
        base, position = state
        items = base.items_now(tx)
        if not 0 <= position.value < len(items):  # CPython drops the list for good
            store_contents(tx, self, ())
            return None
        store_contents(tx, self, (base, ConstantVariable(position.value + self.step)))
        return items[position.value]

    step = 1

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``iter(list)`` set to the traced position (``__setstate__``), or an empty one."""
        state = codegen.side_effects.contents(self, self.items)
        if not state:
            codegen.call_const(iter, [TupleVariable(())])
            return
        codegen.call_const(_list_iterator_at, [*state, ConstantVariable(self.step)])


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ListReverseIteratorVariable(ListIteratorVariable):
    """``reversed(a_list)``: state ``(list, index)``, counting down from the end."""

    step = -1

    def python_type(self) -> type:
        return type(reversed([]))

    @staticmethod
    def over_list(tx: InstructionTranslatorBase, base: ListVariable) -> ListReverseIteratorVariable:
        start = ConstantVariable(len(base.items_now(tx)) - 1)
        return ListReverseIteratorVariable((base, start), mutation_type=NEW_VALUE)


def _list_iterator_at(items: list, position: int, step: int) -> Any:
    iterator = iter(items) if step == 1 else reversed(items)
    iterator.__setstate__(position)
    return iterator


def _advanced(iterable: Any, steps: int, reverse: bool = False) -> Any:
    """``iter(iterable)`` (or ``reversed``) after ``steps`` items: where the trace left it."""
    iterator = reversed(iterable) if reverse else iter(iterable)
    for _ in range(steps):
        next(iterator)
    return iterator


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DictIteratorVariable(IteratorVariable):
    """Iteration over a dict or one of its views: state ``(dict, kind, position, keys,
    reverse)``. ``keys`` is the dict's key order when iteration began; a dict whose
    keys change under its iterator raises RuntimeError in eager (or, with a key
    deleted and added back, yields it twice): unsupported here.
    """

    def python_type(self) -> type:
        return type(iter({}))

    @staticmethod
    def over(tx: InstructionTranslatorBase, base: DictVariable, kind: str,
             reverse: bool = False) -> DictIteratorVariable:
        keys = ConstantVariable(tuple(base.items_now(tx)))
        state = (base, ConstantVariable(kind), ConstantVariable(0), keys, ConstantVariable(reverse))
        return DictIteratorVariable(state, mutation_type=NEW_VALUE)

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        state = self.state(tx)
        if not state:
            return None
        base, kind, position, keys, reverse = state
        current = base.items_now(tx)
        if tuple(current) != keys.value:
            raise Unsupported(
                "mutated_during_iteration", "dict changed during iteration (RuntimeError)"
            )
        if position.value >= len(keys.value):
            store_contents(tx, self, ())
            return None
        store_contents(tx, self, (base, kind, ConstantVariable(position.value + 1), keys, reverse))
        key = keys.value[-1 - position.value if reverse.value else position.value]
        if kind.value == "keys":
            return key_variable(key)
        if kind.value == "values":
            return current[key]
        return TupleVariable((key_variable(key), current[key]))

    def reconstruct(self, codegen: PyCodegen) -> None:
        state = codegen.side_effects.contents(self, self.items)
        if not state:
            codegen.call_const(iter, [TupleVariable(())])
            return
        base, kind, position, _, reverse = state
        if codegen.side_effects.is_modified(base):  # replay would change it under the iterator
            raise Unsupported("mutated_during_iteration", "an iterator over a changed dict escapes")
        codegen.call_const(_advanced, [DictViewVariable(base, kind.value), position, reverse])


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SetIteratorVariable(IteratorVariable):
    """Iteration over a set: state ``(set, position, (recipe, elements))`` at the start."""

    def python_type(self) -> type:
        return type(iter(set()))

    @staticmethod
    def over(tx: InstructionTranslatorBase, base: SetVariable) -> SetIteratorVariable:
        recipe = base.items_now(tx)
        start = ConstantVariable((recipe, elements_in_order(tx, recipe)))
        return SetIteratorVariable((base, ConstantVariable(0), start), mutation_type=NEW_VALUE)

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        from bytegraph.variables.sets import element_variable

        state = self.state(tx)
        if not state:
            return None
        base, position, start = state
        recipe, elements = start.value
        if base.items_now(tx) is not recipe:
            raise Unsupported("mutated_during_iteration", "set changed during iteration")
        if position.value >= len(elements):
            store_contents(tx, self, ())
            return None
        store_contents(tx, self, (base, ConstantVariable(position.value + 1), start))
        return element_variable(elements[position.value])

    def reconstruct(self, codegen: PyCodegen) -> None:
        state = codegen.side_effects.contents(self, self.items)
        if not state:
            codegen.call_const(iter, [TupleVariable(())])
            return
        base, position, _ = state
        if codegen.side_effects.is_modified(base):
            raise Unsupported("mutated_during_iteration", "an iterator over a changed set escapes")
        codegen.call_const(_advanced, [base, position])


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MapIteratorVariable(IteratorVariable):
    """``map(fn, *iterators)``: state ``(fn, *iterators)``, never changed itself."""

    def python_type(self) -> type:
        return map

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.call_const(map, list(self.items))

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        fn, *iterators = self.items
        row = []
        for iterator in iterators:
            item = iterator.next_item(tx)
            if item is None:
                return None
            row.append(item)
        return fn.call_function(tx, row, {})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FilterIteratorVariable(IteratorVariable):
    """``filter(fn, iterator)``: state ``(fn, iterator)``; fn None keeps true items."""

    def python_type(self) -> type:
        return filter

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.call_const(filter, list(self.items))

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        fn, iterator = self.items
        keep_truthy = fn.is_python_constant() and fn.as_python_constant() is None
        while (item := iterator.next_item(tx)) is not None:
            test = item if keep_truthy else fn.call_function(tx, [item], {})
            if test.truth(tx):
                return item
        return None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ZipIteratorVariable(IteratorVariable):
    """``zip(*iterators, strict=...)``: state ``(strict, *iterators)``."""

    def python_type(self) -> type:
        return zip

    def reconstruct(self, codegen: PyCodegen) -> None:
        strict, *iterators = self.items
        codegen.call_const(functools.partial(zip, strict=strict.value), iterators)

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        strict, *iterators = self.items
        if not iterators:
            return None
        row = []
        for i, iterator in enumerate(iterators):
            item = iterator.next_item(tx)
            if item is None:
                if strict.value and (i > 0 or any(it.next_item(tx) for it in iterators[1:])):
                    raise Unsupported("operation_raises", "zip(strict=True) of unequal lengths")
                return None
            row.append(item)
        return TupleVariable(tuple(row))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class EnumerateIteratorVariable(IteratorVariable):
    """``enumerate(iterator, start)``: state ``(iterator, count)``."""

    def python_type(self) -> type:
        return enumerate

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.call_const(enumerate, list(codegen.side_effects.contents(self, self.items)))

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        iterator, count = self.state(tx)
        item = iterator.next_item(tx)
        if item is None:
            return None
        store_contents(tx, self, (iterator, ConstantVariable(count.value + 1)))
        return TupleVariable((count, item))


def rebuilt_iterator(iterator_type: type, items: tuple) -> Any:
    """A fresh iterator of ``iterator_type`` (where it can be made) yielding ``items``.

    Ranges, strings and bytes are rebuilt from their remaining items; a string
    iterator that was made over non-ASCII text keeps its type through one
    non-ASCII character read off first. Anything else yields through a tuple
    iterator, which the caller compares with the type it wanted.
    """
    if iterator_type is TUPLE_ITERATOR:
        return iter(items)
    if iterator_type is type(reversed(())):
        return reversed(items[::-1])
    if iterator_type in (type(iter(range(0))), type(iter(range(2**64)))):
        return _range_iterator(items)
    if all(type(item) is str for item in items) and "str" in iterator_type.__name__:
        text = "".join(items)
        if type(iter(text)) is iterator_type:
            return iter(text)
        wide = iter("\u0100" + text)
        next(wide)
        return wide
    if iterator_type is type(iter(b"")) and all(type(item) is int for item in items):
        return iter(bytes(items))
    return iter(items)


def _rebuilds(iterator_type: type, items: tuple[VariableTracker, ...]) -> bool:
    """True if ``rebuilt_iterator`` makes an ``iterator_type`` of these (constant) items."""
    if not all(item.is_python_constant() for item in items):
        return False
    values = tuple(item.as_python_constant() for item in items)
    return type(rebuilt_iterator(iterator_type, values)) is iterator_type


def _range_iterator(items: tuple) -> Any:
    if not items:
        return iter(range(0))
    step = items[1] - items[0] if len(items) > 1 else 1
    candidate = range(items[0], items[-1] + step, step) if step else range(0)
    return iter(candidate) if tuple(candidate) == items else iter(items)


def _snapshot_type(iterable: VariableTracker, reverse: bool = False) -> type:
    """The type of ``iter(iterable)`` (or ``reversed``), where it is known for sure."""
    make = reversed if reverse else iter
    if iterable.is_python_constant():
        try:
            return type(make(iterable.as_python_constant()))
        except TypeError:
            return TUPLE_ITERATOR
    if issubclass(iterable.python_type(), tuple):
        return type(make(()))
    return TUPLE_ITERATOR


def iterate(tx: InstructionTranslatorBase, iterable: VariableTracker) -> IteratorVariable:
    """``iter(iterable)``: iterators are their own; lists, dicts and sets iterate live."""
    from bytegraph.variables.deques import DequeIteratorVariable, DequeVariable
    from bytegraph.variables.sets import SetVariable

    if isinstance(iterable, IteratorVariable):
        return iterable
    if isinstance(iterable, ListVariable):
        return ListIteratorVariable.over(iterable)
    if isinstance(iterable, DequeVariable):
        return DequeIteratorVariable.over(tx, iterable)
    if isinstance(iterable, DictVariable):
        return DictIteratorVariable.over(tx, iterable, "keys")
    if isinstance(iterable, DictViewVariable):
        return DictIteratorVariable.over(tx, iterable.base, iterable.kind)
    if isinstance(iterable, SetVariable):
        return SetIteratorVariable.over(tx, iterable)
    lazy = _user_iterator(tx, iterable)
    if lazy is not None:
        return lazy
    items = tuple(iterable.unpack_sequence(tx))
    return IteratorVariable(
        items, iterator_type=_snapshot_type(iterable), mutation_type=NEW_VALUE
    )


def _user_iterator(tx: InstructionTranslatorBase, value: Any) -> IteratorVariable | None:
    """``iter(obj)`` of a user object whose class defines ``__iter__`` in Python and returns
    an iterator the trace models (a generator, ``iter(list)``): that iterator, read lazily,
    so ``islice(obj, 2)`` runs the generator exactly as far as eager does."""
    import types
    from collections.abc import Sequence

    from bytegraph.variables.user_defined import UserDefinedObjectVariable

    if type(value) is not UserDefinedObjectVariable:
        return None
    found = value.lookup(tx, "__iter__")
    if found is None or found.pending is not None or not isinstance(found.raw, types.FunctionType):
        return None
    if found.raw is Sequence.__iter__:  # read by index until IndexError (unpack_sequence)
        return None
    iterator = value.call_special(tx, "__iter__", [])
    if isinstance(iterator, IteratorVariable):
        return iterator
    if isinstance(iterator, UserDefinedObjectVariable):
        raise Unsupported("unknown_iteration", f"a {value.cls.__qualname__} iterating itself")
    from bytegraph.variables.protocol_results import checked_iterator

    checked_iterator(tx, value.cls, iterator)  # no iterator: CPython's TypeError, raised here
    raise Unsupported("operation_raises", f"{value.cls.__qualname__}.__iter__ returned {iterator}")


def iterate_reversed(tx: InstructionTranslatorBase, value: VariableTracker) -> IteratorVariable:
    """``reversed(value)`` for a sequence or dict (the caller checked it is reversible)."""
    if isinstance(value, ListVariable):
        return ListReverseIteratorVariable.over_list(tx, value)
    if isinstance(value, DictVariable):
        return DictIteratorVariable.over(tx, value, "keys", reverse=True)
    if isinstance(value, DictViewVariable):
        return DictIteratorVariable.over(tx, value.base, value.kind, reverse=True)
    from bytegraph.variables.deques import DequeVariable

    if isinstance(value, DequeVariable):  # it would see mutations (RuntimeError)
        raise Unsupported("unknown_iteration", "reversed() of a deque")
    items = tuple(reversed(value.unpack_sequence(tx)))
    return IteratorVariable(
        items, iterator_type=_snapshot_type(value, reverse=True), mutation_type=NEW_VALUE
    )
