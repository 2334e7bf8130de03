"""Dicts and sets whose keys are objects (variables/object_keys.py): tensors, modules,
functions and user objects hashed by identity, from the frame or made in the trace;
keys whose class hashes in Python (their ``__hash__``/``__eq__`` calls counted and
compared with eager). A dict passed fresh each call with the same key objects is one
cache entry.
"""

from __future__ import annotations

import gc

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add
CALLS: list[str] = []

LIN = torch.nn.Linear(2, 2)
T1, T2 = torch.ones(2), torch.full((2,), 2.0)


class P:
    """Hashed by identity."""


class K:
    """Hashed and compared in Python: every call is counted."""

    def __init__(self, n):
        self.n = n

    def __hash__(self):
        CALLS.append(f"hash {self.n}")
        return hash(self.n)

    def __eq__(self, other):
        CALLS.append(f"eq {self.n}")
        return isinstance(other, K) and other.n == self.n


class EqualToAll:
    """Equal to everything, hashed by identity: a lookup never reaches ``__eq__``."""

    __hash__ = object.__hash__

    def __eq__(self, other):
        CALLS.append("eq")
        return True


def fn():
    pass


OBJ, OTHER = P(), P()
A, B = K(1), K(2)


def keyed() -> tuple:
    return (randn(2), {T1: 1.0, LIN: 2.0, OBJ: 3.0, fn: 4.0, "c": 5.0})


@add(keyed)
def lookups_by_identity(x, d):
    out = x * d[T1] + d[LIN] + d[OBJ] + d[fn] + d["c"]
    return out, T2 in d, OBJ in d, d.get(OTHER), d.get(T2, 7), len(d)


@add(keyed)
def iteration_in_insertion_order(x, d):
    out = x
    for k, v in d.items():
        if isinstance(k, torch.Tensor):
            out = out + k * v
    return out, list(d)[0] is T1, [v for v in d.values()], list(d.keys())[2] is OBJ


@add(keyed)
def frame_dict_mutated_with_object_keys(x, d):
    d[OTHER] = x + 1
    d[T2] = 6.0
    del d[OBJ]
    d["c"] = d.pop(LIN)
    return x * 2


@add(lambda: (randn(2), {T1: randn(2), T2: randn(2)}))
def tensor_keys_and_tensor_values(x, d):
    return sum(k * v for k, v in d.items()) + x, d[T2]


@add(lambda: (randn(2),))
def dict_made_in_the_trace_escapes(x):
    y = x + 1
    d = {T1: 1, OBJ: 2}
    d[y] = 3
    d[LIN] = x
    keys = list(d)
    return list(d.values()), keys[2] is y, keys[1] is OBJ, d[y], x in d, y in d


@add(lambda: (randn(2),))
def new_object_key_made_in_the_trace(x):
    o = P()
    d = {o: x}
    return d[o] * 2, OBJ in d, len(d)


@add(lambda: (randn(2),))
def parameters_memo_set(x):
    seen = set()
    n = 0
    for m in (LIN, LIN):
        for prm in m.parameters():
            if prm not in seen:
                seen.add(prm)
                n += 1
    return x + n, len(seen), LIN.weight in seen, T1 in seen


@add(lambda: (randn(2),))
def set_of_objects_escapes(x):
    s = {T1, OBJ}
    s.add(3)
    s.add(fn)
    s.discard(OBJ)
    return x + 1, s, list(s)


@add(lambda: (randn(2),))
def set_made_in_the_trace_iterates_as_eager(x):
    s = {T2, T1}
    s.add(LIN.weight)
    out = x
    for e in s:
        out = out * 2 + e.sum()
    return out


@add(lambda: (randn(2), {T1: 1.0, OBJ: 2.0}, (T2,)))
def tensor_probe_told_apart(x, d, probes):
    return x * (probes[0] in d)


@add(lambda: (randn(2), {EqualToAll(): 1.0}, EqualToAll()))
def equal_but_another_object(x, d, other):
    CALLS.clear()
    (first,) = d
    found = other in d, first in d, d.get(other, 5.0), d[first]
    d[other] = 2.0
    return x * len(d), found, list(CALLS)


@add(lambda: (randn(2), {A: 1.0, B: 2.0}))
def user_hashed_keys_iterated_not_hashed(x, d):
    CALLS.clear()
    out = x * len(d)
    for k, v in d.items():
        out = out + k.n * v
    return out, list(CALLS)


@add(lambda: (randn(2), {A: 2.0, B: 3.0}), graphs=2)
def user_hashed_lookup_breaks(x, d):
    CALLS.clear()
    y = x + 1
    return y * d[A] + len(d), A in d, list(CALLS)


@add(lambda: (randn(2),), graphs=2)
def user_hashed_key_in_a_new_dict_breaks(x):
    CALLS.clear()
    y = x + 1
    d = {A: y}
    return d[A] + 1, list(CALLS)


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_object_keys_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def test_fresh_dict_each_call_is_one_entry(counting_backend) -> None:
    def f(x, d):
        return x * d[T1] + d[OBJ] + len(d)

    compiled = bytegraph.compile(f, backend=counting_backend)
    for _ in range(3):
        x = randn(2)
        assert torch.equal(compiled(x, {T1: 2.0, OBJ: 3.0}), f(x, {T1: 2.0, OBJ: 3.0}))
    assert counting_backend.calls == 1 and len(compiled.entries) == 1


def test_set_of_objects_from_the_frame(counting_backend) -> None:
    def f(x, s):
        out = x + len(s) + (OBJ in s) * 10 + (OTHER in s) * 100
        for e in s:
            if isinstance(e, torch.Tensor):
                out = out + e
        s.add(OTHER)
        s.add(T2)
        return out

    compiled = bytegraph.compile(f, backend=counting_backend)
    for _ in range(2):
        eager_set, compiled_set = {OBJ, T1, 4}, {OBJ, T1, 4}
        x = randn(2)
        assert torch.equal(compiled(x, compiled_set), f(x, eager_set))
        assert list(compiled_set) == list(eager_set)
    assert counting_backend.calls == 1 and len(compiled.entries) == 1


def test_tensor_key_aliasing_an_argument_recompiles() -> None:
    def f(x, d, probe):
        return x * (probe in d)

    compiled = bytegraph.compile(f, backend="eager", fullgraph=True)
    d, x = {T1: 1.0}, randn(2)
    assert torch.equal(compiled(x, d, T2), f(x, d, T2))
    assert torch.equal(compiled(x, d, T1), f(x, d, T1))  # now the probe is the key


def test_key_object_replaced_between_calls() -> None:
    def f(x, d):
        return x * d.get(holder.key, 5.0)

    class Holder:
        key = P()

    holder = Holder()
    compiled = bytegraph.compile(f, backend="eager", fullgraph=True)
    x = randn(2)
    d = {holder.key: 2.0}
    assert torch.equal(compiled(x, d), f(x, d))
    old = holder.key
    del d[old], old
    gc.collect()
    holder.key = P()  # may take the freed object's id
    assert torch.equal(compiled(x, d), f(x, d))  # d no longer holds it: 5.0
    d[holder.key] = 3.0
    assert torch.equal(compiled(x, d), f(x, d))
    d2 = {P(): 4.0}  # same type, another object: not the key
    assert torch.equal(compiled(x, d2), f(x, d2))


def test_iterating_a_set_of_new_objects_breaks() -> None:
    def f(x):
        s = {P(), P()}
        out = x
        for _ in s:
            out = out + 1
        return out

    explained = bytegraph.explain(f)(randn(2))
    assert any("made in the trace" in b.reason for b in explained.break_reasons)


def test_dict_and_set_with_new_tensor_keys_escape() -> None:
    def f(x):
        y, z = x + 1, x * 3
        d = {T1: 1, y: 2, OBJ: 3}
        d[z] = x
        s = {y, T1}
        s.add(z)
        s.add(OBJ)
        return d, s, y, z

    x = torch.ones(1)
    d, s, y, z = bytegraph.compile(f, backend="eager", fullgraph=True)(x)
    assert [k is e for k, e in zip(d, [T1, y, OBJ, z])] == [True] * 4
    assert list(d.values())[:3] == [1, 2, 3] and torch.equal(d[z], x)
    assert torch.equal(y, x + 1) and torch.equal(z, x * 3)
    expected = {y, T1}  # eager's operations on the very objects: the same table
    expected.add(z)
    expected.add(OBJ)
    assert [id(e) for e in s] == [id(e) for e in expected]


def test_set_replay_loads_its_objects_before_a_dict_replay() -> None:
    def f(x, d, s):
        d.pop(OBJ)  # OBJ was read as d's key: replaying d changes what that reads
        d[3] = 4
        s.add(OBJ)
        return x + 1

    compiled = bytegraph.compile(f, backend="eager", fullgraph=True)
    for _ in range(2):
        eager_d, eager_s = {T1: 1, OBJ: 2, 5: 6}, {7}
        d, s = {T1: 1, OBJ: 2, 5: 6}, {7}
        f(randn(1), eager_d, eager_s)
        compiled(randn(1), d, s)
        assert list(d) == list(eager_d) and list(s) == list(eager_s)


def test_new_tensors_only_inside_a_set_are_graph_outputs() -> None:
    def made(x):
        s = {T1}
        s.add(x + 1)
        return s

    def added(x, s):
        s.add(x * 2)
        return x + 1

    s = bytegraph.compile(made, backend="eager", fullgraph=True)(torch.ones(1))
    assert sorted(e.tolist() for e in s) == [[1.0, 1.0], [2.0]]
    frame_set = {T1}
    bytegraph.compile(added, backend="eager", fullgraph=True)(torch.ones(1), frame_set)
    assert sorted(e.tolist() for e in frame_set) == [[1.0, 1.0], [2.0]]
