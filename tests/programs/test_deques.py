"""collections.deque in traced code (variables/deques.py): eager vs compiled.

Deques made in the trace and deques passed in (mutated, then replayed onto
the caller's object: ``d.clear(); d.extend(items)``), their methods, indexing,
iteration and the IndexError of an empty pop, each compiled to the graph count
given. A deque with a maxlen, and iteration over a deque mutated meanwhile,
stay with Python.
"""

from __future__ import annotations

from collections import deque

import pytest
import torch
from _harness import Corpus, check_program, randn

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3),)


def t3_deque() -> tuple:
    return (randn(3), deque([1, 2, 3]))


def t3_tensor_deque() -> tuple:
    return (randn(3), deque([randn(3), randn(3)]))


@add(t3)
def append_and_pop_both_ends(x):
    q = deque()
    q.append(x)
    q.appendleft(x * 2)
    q.append(x + 1)
    right = q.pop()
    left = q.popleft()
    return right + left, len(q), bool(q)


@add(t3)
def deque_from_iterable(x):
    q = deque([x, x + 1, x + 2])
    total = q[0] + q[-1]
    return total, len(q), q[1] * 2


@add(t3)
def iterate_deque(x):
    q = deque([1, 2, 3])
    out = x
    for v in q:
        out = out * v
    return out, list(q), tuple(q)


@add(t3)
def extend_and_extendleft(x):
    q = deque([0])
    q.extend([1, 2])
    q.extendleft([3, 4])
    return x + len(q), list(q)


@add(t3)
def rotate_reverse_remove(x):
    q = deque([1, 2, 3, 4])
    q.rotate(1)
    q.reverse()
    q.remove(2)
    q.rotate(-2)
    return x * q[0], list(q), q.count(3), q.index(4)


@add(t3)
def membership_and_truth(x):
    q = deque()
    empty = bool(q)
    q.append(5)
    return x + 1, empty, bool(q), 5 in q, 6 in q


@add(t3)
def empty_pop_raises_index_error(x):
    q = deque()
    try:
        q.pop()
    except IndexError as e:
        return x + 1, str(e)
    return x


@add(t3)
def empty_popleft_raises_index_error(x):
    q = deque([x])
    q.popleft()
    try:
        q.popleft()
    except IndexError as e:
        return x * 2, e.args
    return x


@add(t3)
def drain_with_while(x):
    q = deque([1, 2, 3])
    out = x
    while q:
        out = out + q.pop()
    return out, len(q)


@add(t3)
def copy_and_clear(x):
    q = deque([x, 2])
    c = q.copy()
    q.clear()
    return c[0] + len(c), len(q)


@add(t3)
def deque_returned(x):
    q = deque()
    q.append(x * 3)
    q.appendleft(1)
    return q


@add(t3_deque)
def mutate_input_deque(x, d):
    d.append(4)
    d.appendleft(0)
    first = d.popleft()
    return x + first + len(d)


@add(t3_deque)
def read_input_deque(x, d):
    return x * d[0] + d[-1], len(d), 3 in d


@add(t3_deque)
def drain_input_deque(x, d):
    out = x
    while d:
        out = out + d.popleft()
    return out


@add(t3_tensor_deque)
def tensors_in_input_deque(x, d):
    d.append(x)
    a = d.popleft()
    return a + d[0] + d[-1]


@add(t3)
def deque_stored_in_a_list(x):
    q = deque([1])
    holder = [q]
    holder[0].append(2)
    return x + sum(q), list(q)


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_deque_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def mutated_while_iterating(x):
    q = deque([1, 2])
    out = x + 1
    try:
        for v in q:
            q.append(v)
    except RuntimeError as e:
        return out * 2, str(e)
    return out


def test_mutated_while_iterating_stays_with_python(differential) -> None:
    compiled = differential.compile(mutated_while_iterating)
    differential.check(mutated_while_iterating, compiled, (torch.ones(2),))


def test_maxlen_deque_stays_with_python(differential) -> None:
    def bounded(x, d):
        d.append(9)
        return x + len(d)

    compiled = differential.compile(bounded)
    differential.check(bounded, compiled, (torch.ones(2), deque([1, 2], maxlen=2)))


def test_aliased_deques_are_guarded(differential) -> None:
    def two(x, a, b):
        a.append(1)
        return x + len(b)

    compiled = differential.compile(two)
    differential.check(two, compiled, (torch.ones(2), deque(), deque()))
    shared = deque()
    differential.check(two, compiled, (torch.ones(2), shared, shared))
