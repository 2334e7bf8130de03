"""A generator started in the trace that lives on after it: the tensor work is captured.

A started generator paused at a plain yield is rebuilt paused there
(``variables/paused_generators.py``, tested in test_rebuilt_generators.py): one
graph. One whose frame cannot be rebuilt (a closure's cells) makes the frame
break where it first resumed the generator instead: made there and not
started, the generator is made again in Python and runs there, while the
tensor work before it is one graph (before, the whole frame ran as Python:
Dynamo's test_generator ``test_return_advanced_generator`` and the
``test_reconstruct_generator_with_*_mutation`` tests). Each program is run
eagerly and compiled twice; the results, with every returned generator read
to its end afterwards, and the state the generators change must match.
"""

from __future__ import annotations

import gc
import itertools
from typing import Any

import pytest
import torch

import bytegraph


def three(t):
    yield t.sin()
    yield t.cos()
    yield t + 1


def returned_after_one_item(x, state):
    y = x * 2
    gen = three(y)
    first = next(gen)
    return gen, first + 1


def closure_mutated_by_generator(x, state):
    y = x + 1

    def counting():
        state["n"] += 1
        yield y * state["n"]
        state["n"] += 1
        yield y * state["n"]

    gen = counting()
    first = next(gen)
    return gen, first, dict(state)


def stored_on_input(x, state):
    y = x.relu()
    gen = three(y)
    next(gen)
    state["gen"] = gen
    return y - 1


# Graphs: one where the generator is rebuilt paused; where it is not (a closure), the work
# before its first resume (and the resume function's after it, where there is some).
PROGRAMS = [(returned_after_one_item, 1), (closure_mutated_by_generator, 1), (stored_on_input, 1)]


def _drained(value: Any) -> Any:
    """The value with every generator in it read to its end (items in a list)."""
    if hasattr(value, "__next__"):
        return ("generator", [_drained(v) for v in value])
    if isinstance(value, (tuple, list)):
        return type(value)(_drained(v) for v in value)
    if isinstance(value, dict):
        return {k: _drained(v) for k, v in value.items()}
    return value


def _assert_same(actual: Any, expected: Any) -> None:
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e)
    elif isinstance(expected, dict):
        assert list(actual) == list(expected)
        for key in expected:
            _assert_same(actual[key], expected[key])
    else:
        assert actual == expected


def _outcome(fn: Any) -> Any:
    state = {"n": 0}
    result = fn(torch.arange(3.0), state)
    return _drained((result, state))


@pytest.mark.parametrize("fn, graphs", PROGRAMS, ids=[fn.__name__ for fn, _ in PROGRAMS])
def test_started_generator_escapes(fn, graphs, counting_backend):
    expected = _outcome(fn)
    compiled = bytegraph.compile(fn, backend=counting_backend)
    for _ in range(2):  # the trace, then the cache hit
        _assert_same(_outcome(compiled), expected)
    assert counting_backend.calls == graphs


LOG: list = []


def accumulating(t, k):
    total = 0
    try:
        while True:
            got = yield t * total
            total += 1 if got is None else got
            if total > k + 3:
                return total
    finally:
        LOG.append(("finally", total))


def sends_in_a_loop(x, y, n):  # fuzz seed 2612, index 1324
    out = x + y
    gen = accumulating(x, 1)
    out = out + next(gen)
    for _ in range(len(list(itertools.dropwhile(lambda v: v < n % 4, range(6)))) % 5):
        out = out + gen.send(1)


def test_a_generator_dropped_at_return_closes_at_return(counting_backend):
    """The compiled frame breaks at the generator's first resume; the trace of the code
    after it read the real generator, and its VTs, in a cycle with their OutputGraph,
    kept it alive until the cyclic collector ran: its finally ran late."""
    x, y = torch.randn(3, 3).t(), torch.randn(3, 3)
    compiled = bytegraph.compile(sends_in_a_loop, backend=counting_backend)
    for fn in (sends_in_a_loop, compiled, compiled):
        LOG.clear()
        gc.disable()
        try:
            fn(x, y, 3)
            assert LOG == [("finally", 3)], fn
        finally:
            gc.enable()
    assert counting_backend.calls >= 1
