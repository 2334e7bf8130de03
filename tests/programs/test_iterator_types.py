"""An iterator made in the trace is, after it escapes, the type eager makes.

``iter()`` of a tuple, range, string or bytes, and ``reversed()`` of a tuple,
range or string, each have their own iterator type. A snapshot of their items
answers ``type()`` with that type in the trace, and is rebuilt as one where it
is returned or crosses a graph break (it was a ``list_iterator`` for every
one of them: Dynamo's test_subgraphs ``test_tuple_iterator_return``).
Expected values come from eager: each result iterator's type and remaining items.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import bytegraph


def tuple_iterator_across_break(x):
    it = iter((x, x + 1, 3))
    first = next(it)
    bytegraph.graph_break()
    return it, first


def tuple_iterator_returned(x):
    return iter((x, x * 2)), x + 1


def range_iterator(x):
    it = iter(range(5))
    next(it)
    return it, x + 1


def long_range_iterator(x):
    it = iter(range(2**70, 2**70 + 4))
    next(it)
    return it, x + 1


def reversed_range(x):
    it = reversed(range(4))
    next(it)
    return it, x + 1


def reversed_tuple(x):
    it = reversed((x, 1, 2))
    next(it)
    return it, x + 1, type(it).__name__


def ascii_text(x):
    it = iter("hello")
    next(it)
    return it, x + 1, type(it).__name__


def wide_text(x):  # made over non-ASCII text, only ASCII left: still a str_iterator
    it = iter("héllo")
    next(it)
    next(it)
    return it, x + 1, type(it).__name__


def reversed_text(x):
    return reversed("abc"), x + 1


def bytes_iterator(x):
    it = iter(b"abc")
    next(it)
    return it, x + 1


def shape_iterator(x):
    return iter(x.shape), x + 1


def tensor_iterator(x):
    it = iter(x)
    return it, type(it).__name__


PROGRAMS = [
    tuple_iterator_across_break, tuple_iterator_returned, range_iterator, long_range_iterator,
    reversed_range, reversed_tuple, ascii_text, wide_text, reversed_text, bytes_iterator,
    shape_iterator, tensor_iterator,
]


def _opened(result: Any) -> list[Any]:
    """Each item of a result tuple, an iterator as its type and remaining items."""
    items = result if isinstance(result, tuple) else (result,)
    return [(type(v), list(v)) if hasattr(v, "__next__") else v for v in items]


def _assert_same(actual: list[Any], expected: list[Any]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if isinstance(e, tuple):
            assert a[0] is e[0], f"iterator type {a[0].__name__} != {e[0].__name__}"
            a, e = a[1], e[1]
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(a, e, rtol=0, atol=0)
        else:
            assert repr(a) == repr(e)  # lists of tensors and constants, printed


@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda fn: fn.__name__)
def test_escaping_iterator_keeps_its_type(fn, counting_backend):
    expected = _opened(fn(torch.ones(2)))
    compiled = bytegraph.compile(fn, backend=counting_backend)
    for _ in range(2):  # the trace, then the cache hit
        _assert_same(_opened(compiled(torch.ones(2))), expected)
    assert counting_backend.calls >= 1
