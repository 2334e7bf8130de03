"""Graph breaks in frames that own closure cells (translate/resume.py): eager vs compiled.

The Python part and each resume function receive the frame's cells as
arguments and use them as their own, so a closure made before the break
and the code after it share every later write, as in eager. Each program
must compile to the graph count given (2 or more: it no longer runs as
plain Python) and equal eager on outputs and mutated inputs.
"""

from __future__ import annotations

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3), [])


@add(t3, graphs=2)
def closure_sees_a_write_after_the_break(x, log):
    k = 2.0

    def scale(t):
        return t * k

    y = scale(x)
    bytegraph.graph_break()
    k = 3.0
    return scale(y)


@add(t3, graphs=2)
def nonlocal_writer_across_the_break(x, log):
    total = x

    def add_to(t):
        nonlocal total
        total = total + t

    add_to(x)
    bytegraph.graph_break()
    add_to(x * 2)
    return total


@add(t3, graphs=2)
def closure_called_by_the_python_part(x, log):
    offset = x.sum()

    def shift(t):
        log.append(len(log))
        return t + offset

    y = shift(x)
    log.append(shift)  # the Python part below calls it through the input list
    bytegraph.graph_break()
    offset = offset * 2
    return y, log.pop()(x), len(log)


@add(t3, graphs=2)
def argument_captured_by_a_closure(x, log):
    def doubled():
        return x * 2

    y = doubled()
    bytegraph.graph_break()
    x = x + 1
    return y, doubled()


@add(t3, graphs=2)
def closure_read_through_a_dict(x, log):
    scale = 4.0

    def times(t):
        return t * scale

    table = {"times": times}
    y = table["times"](x)
    bytegraph.graph_break()
    scale = 5.0
    return y, table["times"](x)


@add(t3, graphs=3)
def two_breaks_share_the_cells(x, log):
    count = 0

    def bump():
        nonlocal count
        count += 1
        return count

    y = x * bump()
    bytegraph.graph_break()
    y = y * bump()
    bytegraph.graph_break()
    return y * bump(), count


@add(t3, graphs=2)  # the scaling; the loop runs in Python; the stack after it
def break_in_a_loop_with_cells(x, log):
    x = x * 1.5
    acc = []

    def push(t):
        acc.append(t)

    for i in range(3):
        push(x * i)
        if i == 1:
            bytegraph.graph_break()
    return torch.stack(acc).sum(0), len(acc)


@add(t3, graphs=2)
def nested_closures_chain(x, log):
    base = x + 1

    def outer(t):
        def inner(u):
            return u * base

        return inner(t) + base

    y = outer(x)
    bytegraph.graph_break()
    base = base - 1
    return y, outer(x)


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_cell_break_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def test_closure_returned_after_a_break_sees_later_writes(differential, counting_backend):
    def returns_closure(x):
        offset = x.sum()

        def shift(t):
            return t + offset

        bytegraph.graph_break()
        offset = offset * 2
        return shift

    compiled = differential.compile(returns_closure)
    for _ in range(2):
        x = torch.randn(3)
        assert torch.equal(compiled(x)(x), returns_closure(x)(x))
    assert counting_backend.calls == 2  # the sum; the doubling in the resume, reused


def test_closure_returned_keeps_sharing_with_the_caller(differential) -> None:
    """A closure made in the trace and returned shares its cell with a second closure,
    as in eager: a write through one is seen by the other."""

    def pair(x):
        value = x

        def get():
            return value

        def put(v):
            nonlocal value
            value = v

        return get, put

    get, put = differential.compile(pair)(torch.ones(2))
    put(torch.zeros(2))
    assert torch.equal(get(), torch.zeros(2))


def cell_deleted_after_the_break(x, log):
    k = x * 3

    def read():
        return k  # noqa: F821 (deleted below, on purpose)

    y = read()
    bytegraph.graph_break()
    del k
    try:
        read()
    except NameError:
        log.append("unbound")
    return y + 1


def test_cell_deleted_after_the_break(differential, counting_backend) -> None:
    """``del`` of a cell in the resume function; the closure's read of it raises
    NameError in the Python part of a second break, caught there as in eager."""
    compiled = differential.compile(cell_deleted_after_the_break)
    differential.check(cell_deleted_after_the_break, compiled, (torch.randn(3), []))
    assert counting_backend.calls == 1  # x * 3; the handler and the rest run as Python


def test_closure_argument_made_per_call_hits_the_cache(differential, counting_backend) -> None:
    """A nested function passed in anew each call is guarded by its code and the cell
    contents it reads, not its identity: one entry serves every call."""

    def apply(x, fn):
        return fn(x) + 1

    def make(k):
        def scaled(t):
            return t * k

        return scaled

    compiled = differential.compile(apply)
    for _ in range(3):
        differential.check(apply, compiled, (torch.randn(3), make(2.0)))
    assert len(compiled.entries) == 1 and counting_backend.calls == 1
    differential.check(apply, compiled, (torch.randn(3), make(5.0)))  # new cell contents
    assert len(compiled.entries) == 2


def test_identity_of_a_per_call_closure_is_not_assumed(differential) -> None:
    def same(x, fn, other):
        return (x + 1) if fn is other else (x - 1)

    def make():
        return lambda t: t

    compiled = differential.compile(same)
    f = make()
    differential.check(same, compiled, (torch.randn(3), f, f))
    differential.check(same, compiled, (torch.randn(3), make(), make()))
