"""Scalars read from objects and globals are guarded only when the trace relies on them.

A counter (``obj.count += 1``) must not recompile on every call; a value that
decides a branch or a shape must still be guarded. Every program is compared
with eager on its results and on the state it changes.
"""

from __future__ import annotations

import torch

import bytegraph


class Counter:
    def __init__(self, count: int = 0, scale: float = 1.5) -> None:
        self.count = count
        self.scale = scale


STEP = 0


def _pair(fn, backend):
    return fn, bytegraph.compile(fn, backend=backend)


def test_counter_increment_compiles_once(counting_backend) -> None:
    def f(x, counter):
        counter.count += 1
        return x * 2

    eager_counter, compiled_counter = Counter(), Counter()
    eager, compiled = _pair(f, counting_backend)
    for _ in range(12):  # more than config.recompile_limit calls with a new count each
        x = torch.randn(3)
        assert torch.equal(compiled(x, compiled_counter), eager(x, eager_counter))
    assert compiled_counter.count == eager_counter.count == 12
    assert counting_backend.calls == 1
    assert len(compiled.entries) == 1


def test_seed_example_counter_is_one_then_two(counting_backend) -> None:
    """The seed's example 8.1."""

    def f(x, counter):
        counter.count += 1
        result = x * 2
        return result

    counter = Counter()
    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.randn(4)
    assert torch.equal(compiled(x, counter), x * 2)
    assert counter.count == 1
    compiled(x, counter)
    assert counter.count == 2
    assert counting_backend.calls == 1


def test_arithmetic_chain_is_rebuilt_not_guarded(counting_backend) -> None:
    def f(x, counter):
        counter.count = counter.count * 3 + 1
        counter.scale = counter.scale / 2
        return x + 1, counter.count - 1

    eager_counter, compiled_counter = Counter(2, 4.0), Counter(2, 4.0)
    eager, compiled = _pair(f, counting_backend)
    for _ in range(4):
        x = torch.randn(2)
        got, want = compiled(x, compiled_counter), eager(x, eager_counter)
        assert torch.equal(got[0], want[0]) and got[1] == want[1]
    assert (compiled_counter.count, compiled_counter.scale) == (
        eager_counter.count, eager_counter.scale
    )
    assert counting_backend.calls == 1


def test_value_used_in_tensor_code_is_guarded(counting_backend) -> None:
    def f(x, counter):
        counter.count += 1
        return x * counter.count  # the graph holds the value: it must be guarded

    eager_counter, compiled_counter = Counter(), Counter()
    eager, compiled = _pair(f, counting_backend)
    for _ in range(3):
        x = torch.randn(3)
        assert torch.equal(compiled(x, compiled_counter), eager(x, eager_counter))
    assert compiled_counter.count == eager_counter.count == 3
    # The value seen first is guarded; once it has changed it is symbolic (a graph input).
    assert counting_backend.calls == 2


def test_branch_on_the_value_is_guarded(counting_backend) -> None:
    def f(x, counter):
        if counter.count > 1:
            return x - 1
        return x + 1

    eager, compiled = _pair(f, counting_backend)
    x = torch.randn(3)
    for count in (0, 1, 2, 5, 0):
        counter = Counter(count)
        assert torch.equal(compiled(x, counter), eager(x, counter))
    # 0 specialises; from 1 on the value is symbolic and the branch guards the relation:
    # one entry for count <= 1, one for count > 1 (5 hits it), and the last 0 hits.
    assert counting_backend.calls == 3


def test_global_counter(counting_backend) -> None:
    global STEP

    def f(x):
        global STEP
        STEP += 2
        return x.sin()

    STEP = 0
    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.randn(3)
    for _ in range(10):
        assert torch.equal(compiled(x), x.sin())
    assert STEP == 20
    assert counting_backend.calls == 1


def test_counter_across_a_graph_break(counting_backend, capsys) -> None:
    def f(x, counter):
        counter.count += 1
        y = x * 2
        print("count is", counter.count)
        counter.count += 10
        return y + 1

    eager_counter, compiled_counter = Counter(), Counter()
    eager, compiled = _pair(f, counting_backend)
    for _ in range(3):
        x = torch.randn(3)
        assert torch.equal(compiled(x, compiled_counter), eager(x, eager_counter))
    printed = capsys.readouterr().out.splitlines()
    assert printed[0::2] == printed[1::2]  # compiled and eager print the same, in turn
    assert compiled_counter.count == eager_counter.count == 33
    assert counting_backend.calls == 2  # before and after the print, each traced once
