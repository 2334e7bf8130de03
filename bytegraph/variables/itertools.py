"""The ``itertools`` module: each iterator type modelled lazily, as CPython runs it.

``itertools.chain`` (or any other function of the module) read in traced code
is an ``ItertoolsFunctionVariable``; calling it checks the arguments against
the real signature, calls ``iter()`` on the iterables as CPython's constructor
does, and returns an iterator VT. Nothing is read from the sources until the
consumer asks: each ``next_item`` does what the C ``__next__`` does, in its
order, so a generator handed to ``islice``, ``zip_longest`` or ``takewhile``
runs exactly as far (and its side effects happen exactly when) they would in
eager mode. Where CPython drops a source for good (``chain`` moving on,
``islice`` at its end, ``zip_longest``'s finished inputs, ``pairwise``), the
model drops it too and never calls it again.

This module holds the function VT and the iterators that transform others
(``chain``, ``islice``, ``accumulate``, ``starmap``, ``takewhile``,
``dropwhile``, ``filterfalse``, ``compress``, ``zip_longest``, ``pairwise``);
``itertools_sources.py`` the ones that own their items (``count``,
``repeat``, ``cycle``, the combinatorics); ``itertools_groups.py`` the ones
that share state (``groupby``, ``tee``).

An iterator that escapes (returned, stored, live at a graph break) is
rebuilt from its state as a real iterator of the same type that yields the
same items from the same sources: ``islice(source, next - count, stop -
count, step)``, ``count(current, step)``... Where no such call exists
(``tee``, ``groupby``, a ``cycle`` halfway through its first pass) it is a
graph break.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import NEW_VALUE, TupleVariable, _is_none, store_contents
from bytegraph.variables.iterators import IteratorVariable, iterate
from bytegraph.variables.itertools_groups import GroupByVariable, make_tee
from bytegraph.variables.itertools_sources import (
    CountVariable,
    ItertoolsIteratorVariable,
    RepeatVariable,
    make_cycle,
    make_pool_iterator,
)

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

State = tuple[Any, ...]


def _or_none(vt: VariableTracker | None) -> VariableTracker:
    return ConstantVariable(None) if vt is None else vt


def _new(cls: type[ItertoolsIteratorVariable], *state: Any) -> ItertoolsIteratorVariable:
    return cls(tuple(state), mutation_type=NEW_VALUE)


# -- chain -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ChainVariable(ItertoolsIteratorVariable):
    """``chain(*iterables)``, ``chain.from_iterable(iterable)``: state ``(active iterator
    or None, iterator over the iterables or None)``."""

    kind = itertools.chain

    def next_item(self, tx: Tx) -> VariableTracker | None:
        active, source = self.state(tx)
        while source is not None:
            if active is None:
                iterable = self.read_or_finish(tx, source, (None, None))
                if iterable is None:
                    store_contents(tx, self, (None, None))
                    return None
                active = iterate(tx, iterable)
                store_contents(tx, self, (active, source))
            item = active.next_item(tx)
            if item is not None:
                return item
            active = None
            store_contents(tx, self, (None, source))
        return None

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        active, source = state
        if source is None:
            codegen.call_const(itertools.chain, [])
        elif active is None:
            codegen.call_const(itertools.chain.from_iterable, [source])
        else:
            codegen.call_const(_chain_from, [active, source])


def _chain_from(active: Any, source: Any) -> Any:
    return itertools.chain.from_iterable(itertools.chain((active,), source))


# -- islice ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class IsliceVariable(ItertoolsIteratorVariable):
    """``islice(iterable, [start,] stop[, step])``: state ``(iterator, next index, stop or
    None, step, count read)``, or ``()`` once CPython has dropped the source."""

    kind = itertools.islice

    def next_item(self, tx: Tx) -> VariableTracker | None:
        state = self.state(tx)
        if not state:
            return None
        iterator, following, stop, step, count = (
            state[0], *(c.value for c in state[1:]))
        while count < following:  # skip to the next index
            if self.read_or_finish(tx, iterator, ()) is None:
                store_contents(tx, self, ())
                return None
            count += 1
            self._store(tx, iterator, following, stop, step, count)
        if stop is not None and count >= stop:
            store_contents(tx, self, ())
            return None
        item = self.read_or_finish(tx, iterator, ())
        if item is None:
            store_contents(tx, self, ())
            return None
        following += step
        if stop is not None and following > stop:
            following = stop
        self._store(tx, iterator, following, stop, step, count + 1)
        return item

    def _store(self, tx: Tx, iterator: Any, *numbers: Any) -> None:
        store_contents(tx, self, (iterator, *(ConstantVariable(n) for n in numbers)))

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        if not state:
            codegen.call_const(itertools.islice, [TupleVariable(()), ConstantVariable(0)])
            return
        iterator, following, stop, step, count = state[0], *(c.value for c in state[1:])
        args = [following - count, None if stop is None else stop - count, step]
        codegen.call_const(itertools.islice, [iterator, *map(ConstantVariable, args)])


def _islice_bound(vt: VariableTracker, what: str, default: int | None) -> int | None:
    value = None if _is_none(vt) else vt.as_python_constant() if vt.is_python_constant() else vt
    if value is None:
        return default
    if type(value) is not int or value < 0:
        raise Unsupported("operation_raises", f"islice() {what} {value!r} (ValueError)")
    return value


# -- accumulate ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AccumulateVariable(ItertoolsIteratorVariable):
    """``accumulate(iterable, func, initial=...)``: state ``(iterator, func or None,
    total or None, initial not yet yielded or None)``."""

    kind = itertools.accumulate

    def next_item(self, tx: Tx) -> VariableTracker | None:
        iterator, func, total, initial = self.state(tx)
        if initial is not None:
            store_contents(tx, self, (iterator, func, initial, None))
            return initial
        value = iterator.next_item(tx)
        if value is None:
            return None
        if total is not None:
            if func is None:
                from bytegraph.variables.builtin import call

                value = call(tx, operator.add, total, value)
            else:
                value = func.call_function(tx, [total, value], {})
        store_contents(tx, self, (iterator, func, value, None))
        return value

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        iterator, func, total, initial = state
        func = _or_none(func)
        if initial is not None:
            codegen.call_const(_accumulate_from, [iterator, func, initial, ConstantVariable(0)])
        elif total is None:
            codegen.call_const(itertools.accumulate, [iterator, func])
        else:  # its first item taken: the next one adds to ``total``
            codegen.call_const(_accumulate_from, [iterator, func, total, ConstantVariable(1)])


def _accumulate_from(iterator: Any, func: Any, initial: Any, skip: int) -> Any:
    result = itertools.accumulate(iterator, func, initial=initial)
    for _ in range(skip):
        next(result)
    return result


# -- one function over one source --------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class StarmapVariable(ItertoolsIteratorVariable):
    """``starmap(function, iterable)``: state ``(function, iterator)``."""

    kind = itertools.starmap

    def next_item(self, tx: Tx) -> VariableTracker | None:
        function, iterator = self.state(tx)
        args = iterator.next_item(tx)
        if args is None:
            return None
        return function.call_function(tx, iterate(tx, args).unpack_sequence(tx), {})

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        codegen.call_const(itertools.starmap, list(state))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TakewhileVariable(ItertoolsIteratorVariable):
    """``takewhile(predicate, iterable)``: state ``(predicate, iterator)``, ``()`` once a
    value failed the predicate."""

    kind = itertools.takewhile

    def next_item(self, tx: Tx) -> VariableTracker | None:
        state = self.state(tx)
        if not state:
            return None
        predicate, iterator = state
        item = iterator.next_item(tx)
        if item is None:
            return None
        if predicate.call_function(tx, [item], {}).truth(tx):
            return item
        store_contents(tx, self, ())
        return None

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        if not state:  # stopped for good: nothing more, whatever its source holds
            codegen.call_const(functools.partial(itertools.takewhile, bool, ()), [])
        else:
            codegen.call_const(itertools.takewhile, list(state))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DropwhileVariable(ItertoolsIteratorVariable):
    """``dropwhile(predicate, iterable)``: state ``(predicate or None once done dropping,
    iterator)``."""

    kind = itertools.dropwhile

    def next_item(self, tx: Tx) -> VariableTracker | None:
        while True:
            predicate, iterator = self.state(tx)
            item = iterator.next_item(tx)
            if item is None or predicate is None:
                return item
            if not predicate.call_function(tx, [item], {}).truth(tx):
                store_contents(tx, self, (None, iterator))
                return item

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        predicate, iterator = state
        if predicate is None:  # done dropping: every item passes
            codegen.call_const(functools.partial(itertools.dropwhile, _never), [iterator])
        else:
            codegen.call_const(itertools.dropwhile, [predicate, iterator])


def _never(item: Any) -> bool:
    return False


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FilterfalseVariable(ItertoolsIteratorVariable):
    """``filterfalse(function, iterable)``: state ``(function or None, iterator)``."""

    kind = itertools.filterfalse

    def next_item(self, tx: Tx) -> VariableTracker | None:
        function, iterator = self.state(tx)
        while (item := iterator.next_item(tx)) is not None:
            test = item if function is None else function.call_function(tx, [item], {})
            if not test.truth(tx):
                return item
        return None

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        function, iterator = state
        codegen.call_const(itertools.filterfalse, [_or_none(function), iterator])


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CompressVariable(ItertoolsIteratorVariable):
    """``compress(data, selectors)``: state ``(data iterator, selector iterator)``."""

    kind = itertools.compress

    def next_item(self, tx: Tx) -> VariableTracker | None:
        data, selectors = self.state(tx)
        while (datum := data.next_item(tx)) is not None:
            selector = selectors.next_item(tx)
            if selector is None:
                return None
            if selector.truth(tx):
                return datum
        return None

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        codegen.call_const(itertools.compress, list(state))


# -- several sources ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ZipLongestVariable(ItertoolsIteratorVariable):
    """``zip_longest(*iterables, fillvalue=...)``: state ``(fillvalue, active count,
    *iterators)``, a finished iterator replaced by None (CPython never calls it again)."""

    kind = itertools.zip_longest

    def next_item(self, tx: Tx) -> VariableTracker | None:
        fill, active, *iterators = self.state(tx)
        if not iterators or active.value == 0:
            return None
        row = []
        for i, iterator in enumerate(iterators):
            finished = (fill, ConstantVariable(0), *iterators)
            item = None if iterator is None else self.read_or_finish(tx, iterator, finished)
            if item is None and iterator is not None:
                active = ConstantVariable(active.value - 1)
                iterators[i] = None
                store_contents(tx, self, (fill, active, *iterators))
                if active.value == 0:
                    return None
            row.append(fill if item is None else item)
        return TupleVariable(tuple(row))

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        fill, _, *iterators = state
        sources = [TupleVariable(()) if it is None else it for it in iterators]
        codegen.call_const(_zip_longest_of, [fill, *sources])


def _zip_longest_of(fillvalue: Any, *sources: Any) -> Any:
    return itertools.zip_longest(*sources, fillvalue=fillvalue)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class PairwiseVariable(ItertoolsIteratorVariable):
    """``pairwise(iterable)``: state ``(iterator, previous item or None)``, ``()`` once
    the source ended."""

    kind = itertools.pairwise

    def next_item(self, tx: Tx) -> VariableTracker | None:
        state = self.state(tx)
        if not state:
            return None
        iterator, old = state
        if old is None:
            old = self.read_or_finish(tx, iterator, ())
            if old is None:
                store_contents(tx, self, ())
                return None
            store_contents(tx, self, (iterator, old))
        new = self.read_or_finish(tx, iterator, ())
        if new is None:
            store_contents(tx, self, ())
            return None
        store_contents(tx, self, (iterator, new))
        return TupleVariable((old, new))

    def rebuild(self, codegen: PyCodegen, state: State) -> None:
        if not state:
            codegen.call_const(itertools.pairwise, [TupleVariable(())])
        elif state[1] is None:
            codegen.call_const(itertools.pairwise, [state[0]])
        else:
            codegen.call_const(_pairwise_after, list(state))


def _pairwise_after(iterator: Any, old: Any) -> Any:
    return itertools.pairwise(itertools.chain((old,), iterator))


# -- the module's functions ----------------------------------------------------------------


def _items(tx: Tx, iterable: VariableTracker) -> tuple[VariableTracker, ...]:
    return tuple(iterate(tx, iterable).unpack_sequence(tx))


def _int_option(vt: VariableTracker | None, what: str) -> int | None:
    if vt is None or _is_none(vt):
        return None
    value = vt.as_python_constant() if vt.is_python_constant() else vt
    if type(value) is not int:
        raise Unsupported("not_a_constant", f"{what} {value!r} is not an int known at trace time")
    return value


def _chain(tx: Tx, /, *iterables: VariableTracker) -> VariableTracker:
    return _new(ChainVariable, None, IteratorVariable(iterables, mutation_type=NEW_VALUE))


def _from_iterable(tx: Tx, iterable: VariableTracker, /) -> VariableTracker:
    return _new(ChainVariable, None, iterate(tx, iterable))


def _count(tx: Tx, /, start: Any = None, step: Any = None) -> VariableTracker:
    start = ConstantVariable(0) if start is None else start
    return CountVariable.make(tx, start, ConstantVariable(1) if step is None else step)


def _repeat(tx: Tx, /, object: Any, times: Any = None) -> VariableTracker:  # noqa: A002
    if times is not None and _int_option(times, "repeat() times") is None:
        raise Unsupported("operation_raises", "repeat(times=None) (TypeError)")
    left = None if times is None else max(_int_option(times, "repeat() times"), 0)
    return _new(RepeatVariable, object, ConstantVariable(left))


def _cycle(tx: Tx, iterable: VariableTracker, /) -> VariableTracker:
    return make_cycle(iterate(tx, iterable))


def _accumulate(tx: Tx, /, iterable: Any, func: Any = None, *, initial: Any = None):
    func = None if func is None or _is_none(func) else func
    initial = None if initial is None or _is_none(initial) else initial
    return _new(AccumulateVariable, iterate(tx, iterable), func, None, initial)


def _compress(tx: Tx, /, data: Any, selectors: Any) -> VariableTracker:
    return _new(CompressVariable, iterate(tx, data), iterate(tx, selectors))


def _dropwhile(tx: Tx, predicate: Any, iterable: Any, /) -> VariableTracker:
    return _new(DropwhileVariable, predicate, iterate(tx, iterable))


def _takewhile(tx: Tx, predicate: Any, iterable: Any, /) -> VariableTracker:
    return _new(TakewhileVariable, predicate, iterate(tx, iterable))


def _filterfalse(tx: Tx, function: Any, iterable: Any, /) -> VariableTracker:
    function = None if _is_none(function) or function.is_python_constant() and (
        function.as_python_constant() is bool) else function
    return _new(FilterfalseVariable, function, iterate(tx, iterable))


def _starmap(tx: Tx, function: Any, iterable: Any, /) -> VariableTracker:
    return _new(StarmapVariable, function, iterate(tx, iterable))


def _groupby(tx: Tx, /, iterable: Any, key: Any = None) -> VariableTracker:
    return GroupByVariable.make(iterate(tx, iterable), _or_none(key))


def _islice(tx: Tx, iterable: Any, /, *args: Any) -> VariableTracker:
    if not 1 <= len(args) <= 3:
        raise Unsupported("call_raises_type_error", f"islice() with {len(args) + 1} arguments")
    if len(args) == 1:
        start, stop, step = 0, _islice_bound(args[0], "stop", None), 1
    else:
        start = _islice_bound(args[0], "start", 0)
        stop = _islice_bound(args[1], "stop", None)
        step = _islice_bound(args[2], "step", 1) if len(args) == 3 else 1
        if step == 0:
            raise Unsupported("operation_raises", "islice() step 0 (ValueError)")
    numbers = (start, stop, step, 0)
    return _new(IsliceVariable, iterate(tx, iterable), *map(ConstantVariable, numbers))


def _pairwise(tx: Tx, iterable: Any, /) -> VariableTracker:
    return _new(PairwiseVariable, iterate(tx, iterable), None)


def _tee(tx: Tx, iterable: Any, n: Any = None, /) -> VariableTracker:
    count = 2 if n is None else _int_option(n, "tee() n")
    if count is None or count < 0:
        raise Unsupported("operation_raises", f"tee() n={count} (ValueError)")
    return TupleVariable(()) if count == 0 else make_tee(tx, iterate(tx, iterable), count)


def _zip_longest(tx: Tx, /, *iterables: Any, fillvalue: Any = None) -> VariableTracker:
    iterators = [iterate(tx, it) for it in iterables]
    fill = _or_none(fillvalue)
    return _new(ZipLongestVariable, fill, ConstantVariable(len(iterators)), *iterators)


def _product(tx: Tx, /, *iterables: Any, repeat: Any = None) -> VariableTracker:
    times = 1 if repeat is None else _int_option(repeat, "product() repeat")
    if times is None or times < 0:
        raise Unsupported("operation_raises", "product() repeat is negative (ValueError)")
    pools = tuple(_items(tx, it) for it in iterables) * times
    return make_pool_iterator(itertools.product, pools, ())


def _combinatoric(function: Any, needs_r: bool) -> Callable[..., VariableTracker]:
    def make(tx: Tx, /, iterable: Any, r: Any = None) -> VariableTracker:
        if needs_r and r is None:
            raise Unsupported("call_raises_type_error", f"{function.__name__}() without r")
        pool = _items(tx, iterable)
        options = (_int_option(r, f"{function.__name__}() r"),) if r is not None else ()
        return make_pool_iterator(function, (pool,), options)

    return make


_CONSTRUCTORS: dict[Any, Callable[..., VariableTracker]] = {
    itertools.chain: _chain,
    itertools.chain.from_iterable: _from_iterable,
    itertools.count: _count,
    itertools.repeat: _repeat,
    itertools.cycle: _cycle,
    itertools.accumulate: _accumulate,
    itertools.compress: _compress,
    itertools.dropwhile: _dropwhile,
    itertools.takewhile: _takewhile,
    itertools.filterfalse: _filterfalse,
    itertools.starmap: _starmap,
    itertools.groupby: _groupby,
    itertools.islice: _islice,
    itertools.pairwise: _pairwise,
    itertools.tee: _tee,
    itertools.zip_longest: _zip_longest,
    itertools.product: _product,
    itertools.permutations: _combinatoric(itertools.permutations, needs_r=False),
    itertools.combinations: _combinatoric(itertools.combinations, needs_r=True),
    itertools.combinations_with_replacement: _combinatoric(
        itertools.combinations_with_replacement, needs_r=True),
}
_SIGNATURES = {fn: inspect.signature(make) for fn, make in _CONSTRUCTORS.items()}


def is_itertools_function(value: Any) -> bool:
    """``itertools.chain``, ``itertools.islice``...: modelled here."""
    try:
        return value in _CONSTRUCTORS
    except TypeError:  # unhashable
        return False


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ItertoolsFunctionVariable(PythonValueVariable):
    """A type or function of ``itertools``; calling it makes the iterator VT."""

    rebuilt_as_constant = True

    def call_function(
        self, tx: Tx, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
    ) -> VariableTracker:
        try:
            _SIGNATURES[self.value].bind(tx, *args, **kwargs)
        except TypeError as e:
            name = self.value.__qualname__
            raise Unsupported("call_raises_type_error", f"{name}(): {e} (TypeError)") from None
        return _CONSTRUCTORS[self.value](tx, *args, **kwargs)

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if self.value is itertools.chain and name == "from_iterable":
            return ItertoolsFunctionVariable(itertools.chain.from_iterable)
        from bytegraph.variables.objects import ClassVariable

        return ClassVariable(self.value).var_getattr(tx, name)

    def __repr__(self) -> str:
        return f"ItertoolsFunctionVariable({self.value.__qualname__})"
