"""Variants issue 20's reporters saw differ: in-place operators on user objects, keys
whose ``__hash__`` counts its calls, set and deque methods fed by generators,
another module's globals changed between calls, ``throw()`` through ``yield from``.

Each program goes through ``_state.check_state_program`` (result, inputs,
globals and class attributes after two calls on each side, graph count).
"""

from __future__ import annotations

import collections
import contextlib
import gc

import _other_module as other
import pytest
import torch
from _other_module import helper
from _state import StateCorpus, check_state_program

import bytegraph

corpus = StateCorpus()
add = corpus.add


def t3() -> tuple:
    return (torch.randn(3),)


# -- in-place operators on user objects -------------------------------------------------------


class Acc:
    def __init__(self, v):
        self.v = v

    def __iadd__(self, other):
        self.v = self.v + other
        return self

    def __imul__(self, other):
        self.v = self.v * other
        return None

    def __isub__(self, other):
        return Acc(self.v - other)


class Plain:
    def __init__(self, v):
        self.v = v

    def __add__(self, other):
        return Plain(self.v + other)

    def __radd__(self, other):
        return Plain(other + self.v + 100)


def acc_input():
    return torch.randn(3), Acc(torch.zeros(3))


@add(acc_input)
def iadd_returns_self(x, a):
    b = a
    a += x
    return a is b, a.v, b.v


@add(acc_input)
def imul_returns_none(x, a):
    b = a
    a *= 3
    return a, b.v


@add(acc_input)
def isub_returns_another_object(x, a):
    b = a
    a -= x
    return a is b, a.v, b.v


@add(lambda: (torch.randn(3), Plain(torch.zeros(3))))
def iadd_falls_back_to_add(x, p):
    q = p
    p += x
    q.tag = 1
    return p is q, p.v, q.v, getattr(p, "tag", None)


@add(lambda: (torch.randn(3), Plain(torch.zeros(3))))
def iadd_falls_back_to_radd(x, p):
    n = 1
    n += p
    return n.v + x


@add(t3)
def iadd_on_an_object_made_here(x):
    a = Acc(x)
    b = a
    a += x
    a *= 2
    return a, b.v


class Holder:
    def __init__(self):
        self.n = 0
        self.items = []


@add(lambda: (torch.randn(3), Holder()))
def iadd_on_attributes_of_an_input(x, o):
    o.items += [x]
    o.n += 1
    return len(o.items) + o.n + x


# -- keys whose __hash__ counts its calls ---------------------------------------------------------


class Key:
    calls = 0

    def __init__(self, k):
        self.k = k

    def __hash__(self):
        Key.calls += 1
        return hash(self.k)

    def __eq__(self, other):
        return isinstance(other, Key) and other.k == self.k


def keys():
    return torch.randn(3), Key(1), Key(2)


# Keys whose class hashes in Python are not hashed by the trace: an operation that hashes
# runs as Python (a graph break); a dict of such keys crossing a break is modelled, its
# keys guarded by identity, for what hashes nothing (iteration, len: variables/object_keys.py).
@add(keys, class_attrs=((Key, "calls"),), graphs=1, fullgraph=False)
def hash_counts_dict(x, a, b):
    Key.calls = 0
    d = {a: 1, b: 2}
    d[a] = 3
    d.setdefault(b, 4)
    d.update({a: 5})
    found = a in d, d.get(b), d.pop(a)
    d2 = dict(d)
    comp = {k: v for k, v in d2.items()}
    return x + 1, Key.calls, found, len(comp)


@add(keys, class_attrs=((Key, "calls"),), graphs=2, fullgraph=False)
def hash_counts_set(x, a, b):
    Key.calls = 0
    s = {a}
    s.add(b)
    s.add(a)
    s.discard(b)
    t = set(s), frozenset([a, b]), {k for k in [a, b]}
    return x + 1, Key.calls, a in s, len(t[2])


# A fresh dict (and key) each call: its key is read through the dict, so one entry.
@add(lambda: (torch.randn(3), {Key(1): 1}, Key(1)), class_attrs=((Key, "calls"),),
     entries=1, fullgraph=False)
def hash_counts_input_dict(x, d, a):
    Key.calls = 0
    v = d[a]
    d[a] = 5
    return x + v, Key.calls


# -- set and deque methods fed by generators -------------------------------------------------------


@add(t3)
def set_methods_with_generators(x):
    s = {1, 2, 3}
    return (
        x + 1,
        s.isdisjoint(i for i in [4, 5]),
        s.issubset(i for i in range(5)),
        s.issuperset(i for i in [1]),
        s.union(i for i in [9]),
        s.difference(i for i in [1]),
        s.intersection(i for i in [2, 3]),
        s.symmetric_difference(i for i in [3, 4]),
    )


@add(t3)
def deque_extendleft_with_a_generator(x):
    d = collections.deque([1, 2])
    d.extendleft(i * 2 for i in [3, 4])
    d.extend(i for i in [5])
    return x + 1, list(d)


def logging_generator(log):
    for item in (1, 2, 3):
        log.append(item)
        yield item


@add(t3)
def set_predicates_stop_at_the_deciding_item(x):  # Dynamo's test_isdisjoint_with_generator
    log = []
    s = {2, 4, 5}
    disjoint = s.isdisjoint(logging_generator(log))  # stops at 2
    superset = s.issuperset(logging_generator(log))  # stops at 1
    subset = s.issubset(logging_generator(log))  # reads all
    return (x.sin() if len(log) == 6 else x.cos()), disjoint, superset, subset, log


@add(t3)
def deque_extension_reads_the_deque_as_it_grows(x):  # Dynamo's test_deque_extendleft
    d = collections.deque([1])
    d.extendleft(d[0] + z for z in range(3))
    d.extend(d[-1] * 2 for _ in range(2))
    d.extend(d)
    return x + 1, list(d)


class CountingInt(int):
    def __init__(self, *args):
        self.hash_count = 0

    def __hash__(self):
        self.hash_count += 1
        return int.__hash__(self)


@add(t3, graphs=0, fullgraph=False)  # Dynamo's test_do_not_rehash_dict_keys
def int_subclass_keys_hashed_as_often_as_in_eager(x):
    d = dict.fromkeys(map(CountingInt, range(4)))
    counts = [sum(k.hash_count for k in d)]
    s = set(d)
    counts.append(sum(k.hash_count for k in d))
    dict.fromkeys(frozenset(s))
    counts.append(sum(k.hash_count for k in d))
    return counts, len(s)


# -- another module's globals, changed between calls -------------------------------------------


@pytest.mark.parametrize("how", ["attribute", "imported"])
def test_other_module_global_changes_are_seen(how, counting_backend) -> None:
    fn = (lambda x: other.helper(x)) if how == "attribute" else (lambda x: helper(x))
    compiled = bytegraph.compile(fn, backend=counting_backend)
    x = torch.randn(3)
    try:
        for scale, flag in ((2, True), (3, True), (3, False), (2.5, True)):
            other.SCALE, other.FLAG = scale, flag
            torch.testing.assert_close(compiled(x), fn(x), rtol=0, atol=0)
    finally:
        other.SCALE, other.FLAG = 2, True


def test_other_module_list_and_tensor_globals(counting_backend) -> None:
    summed = bytegraph.compile(other.summed, backend=counting_backend)
    weighted = bytegraph.compile(lambda x: other.weighted(x) + 1, backend=counting_backend)
    resumed = bytegraph.compile(lambda x: other.with_break(x) * 2, backend=counting_backend)
    x = torch.randn(3)
    try:
        for step in range(3):
            torch.testing.assert_close(summed(x), other.summed(x), rtol=0, atol=0)
            torch.testing.assert_close(weighted(x), other.weighted(x) + 1, rtol=0, atol=0)
            torch.testing.assert_close(resumed(x), other.with_break(x) * 2, rtol=0, atol=0)
            other.ITEMS.append(step)  # mutated in place
            other.WEIGHT = torch.full((3,), float(step + 2))  # rebound
            other.SCALE = step + 3
    finally:
        other.ITEMS[:] = [1, 2]
        other.WEIGHT = torch.ones(3)
        other.SCALE = 2


# -- throw() through yield from ------------------------------------------------------------


class ThrowingIterator:
    def __iter__(self):
        return self

    def __next__(self):
        return 1

    def throw(self, *args):
        return 42


@add(t3)
def throw_into_yield_from_a_list_iterator(x):
    def g():
        yield from iter([1, 2, 3])

    it = g()
    next(it)
    try:
        it.throw(ValueError("v"))
    except ValueError as e:
        return x + 1, str(e)
    return x


@add(t3, fullgraph=False)
def throw_into_yield_from_an_iterator_with_throw(x):
    def g():
        r = yield from ThrowingIterator()
        return r

    it = g()
    next(it)
    return x + 1, it.throw(ValueError("v"))


@add(t3)
def throw_caught_around_yield_from(x):
    def g():
        try:
            yield from iter([1, 2])
        except ValueError:
            yield 99

    it = g()
    next(it)
    return x + 1, it.throw(ValueError("v")), list(it)


def test_a_trace_keeps_no_paused_generator_alive(counting_backend) -> None:
    """Fuzz seed 5: the trace's generator frames were kept in a table keyed weakly by
    the trace's OutputGraph, which they lead back to: the trace, its frame values and
    so the caller's objects lived for good, and a generator eager closes when the
    collector runs was never closed."""
    log = []

    def gen():
        try:
            yield 1
        finally:
            log.append("closed")

    def f(x, acc):
        try:
            raise KeyError(3)
        except KeyError as e:
            acc.append(e)  # its traceback holds f's frame, which holds g: a cycle
            g = gen()
            next(g)
        return x + 1

    for fn in (f, bytegraph.compile(f, backend=counting_backend)):
        log.clear()
        fn(torch.randn(3), [])
        gc.collect()
        assert log == ["closed"]


def test_a_paused_generator_closes_when_the_call_returns(counting_backend) -> None:
    """Fuzz seed 0: the trace's paused generator frames and the translators they lead
    to made a cycle with the OutputGraph, holding the frame values (the real generator
    among them) until the cyclic collector ran; eager closes it at the return."""
    log = []

    def gen(t):
        try:
            while True:
                yield t
        finally:
            log.append("closed")

    @contextlib.contextmanager
    def tagged():
        log.append("enter")
        try:
            yield
        finally:
            log.append("exit")

    def f(x, n):
        g = gen(x)
        out = x + next(g)
        for _ in range(n):
            out = out + g.send(1)
        with tagged(), contextlib.nullcontext():
            pass
        return out

    for fn in (f, bytegraph.compile(f, backend=counting_backend)):
        log.clear()
        gc.disable()
        try:
            fn(torch.randn(3), 0)
            assert log == ["enter", "exit", "closed"]
        finally:
            gc.enable()


PROGRAMS = corpus.programs


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_protocol_variant(prog, counting_backend) -> None:
    check_state_program(prog, counting_backend)
