"""Dynamic shapes (graph/shapes.py, variables/symbolic.py): eager vs compiled at every size.

Shapes start static; a size that changes between calls makes that dimension
dynamic, so a sweep of sizes compiles twice: the static entry, then one
size-generic entry that serves every later size. ``dynamic=True`` is
size-generic from the first call, ``dynamic=False`` never, ``mark_dynamic``
skips the first recompile. What the trace decides about a size is guarded
as a relation (``2 <= x.size()[0]``), or, where a Python value is needed, as
that size (a specialisation).
"""

from __future__ import annotations

import pytest
import torch

import bytegraph


def mlp(x, w1, w2):
    h = torch.relu(x @ w1)
    return (h @ w2).softmax(-1)


def shape_math(x):
    b, n = x.shape
    y = x.view(b, -1, 2).sum(-1)  # a computed view
    z = y[: b // 2 + 1]  # slicing with a computed bound
    pos = torch.arange(x.size(1))  # a factory sized by a symbol
    return z * 2, pos.sum(), len(x), x.numel() * 3


def branch_on_relation(x):
    if x.shape[0] > 4:
        return x[:4] * 2
    return x + 1


def two_inputs(x, y):
    return x + y, x.size(0) == y.size(0)


def loop_over_rows(x):
    total = torch.zeros(x.shape[1])
    for i in range(x.shape[0]):  # the trip count: specialised, guarded
        total = total + x[i] * i
    return total


def sizes(x, lo, hi):
    return [torch.randn(n, 6).mul_(0) + x.sum() for n in range(lo, hi)]


@pytest.mark.parametrize("dynamic, compiles", [(None, 2), (True, 1)])
def test_a_size_sweep_compiles_at_most_twice(dynamic, compiles, differential, counting_backend):
    compiled = differential.compile(mlp, dynamic=dynamic)
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    for b in range(2, 21, 2):
        differential.check(mlp, compiled, (torch.randn(b, 8), w1, w2), exact=False)
    assert counting_backend.calls == compiles
    assert len(compiled.entries) == compiles


def test_dynamic_false_compiles_per_size(differential, counting_backend) -> None:
    compiled = differential.compile(mlp, dynamic=False)
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    for b in (2, 3, 4):
        differential.check(mlp, compiled, (torch.randn(b, 8), w1, w2), exact=False)
    assert counting_backend.calls == 3


def test_shape_arithmetic_stays_symbolic(differential, counting_backend) -> None:
    compiled = differential.compile(shape_math, dynamic=True, fullgraph=True)
    for b, n in ((3, 4), (5, 8), (8, 6), (4, 10)):
        differential.check(shape_math, compiled, (torch.randn(b, n),))
    assert counting_backend.calls == 1
    graph = compiled.entries[0].graphs[0].code
    assert "size" in graph and "view(" in graph


def test_a_branch_on_a_size_guards_the_relation(differential, counting_backend) -> None:
    compiled = differential.compile(branch_on_relation, dynamic=True)
    for b in (6, 9, 12):  # all take the > 4 branch: one entry
        differential.check(branch_on_relation, compiled, (torch.randn(b, 3),))
    assert counting_backend.calls == 1
    assert "4 < x.size()[0]" in str(compiled.entries[0].guard) or (
        "5 <= x.size()[0]" in str(compiled.entries[0].guard)
    )
    for b in (2, 3):  # the other branch: a second entry, correct for both
        differential.check(branch_on_relation, compiled, (torch.randn(b, 3),))
    assert counting_backend.calls == 2


def test_equal_sizes_are_guarded_equal(differential, counting_backend) -> None:
    compiled = differential.compile(two_inputs, dynamic=True)
    differential.check(two_inputs, compiled, (torch.randn(5, 2), torch.randn(5, 2)))
    differential.check(two_inputs, compiled, (torch.randn(7, 2), torch.randn(7, 2)))
    assert counting_backend.calls == 1
    guard = str(compiled.entries[0].guard)
    assert "x.size()[0] == y.size()[0]" in guard or "y.size()[0] == x.size()[0]" in guard
    differential.check(two_inputs, compiled, (torch.randn(3, 2), torch.randn(1, 2)))  # broadcast
    assert counting_backend.calls == 2


def test_a_trip_count_specialises(differential, counting_backend) -> None:
    compiled = differential.compile(loop_over_rows, dynamic=True)
    differential.check(loop_over_rows, compiled, (torch.randn(3, 4),))
    differential.check(loop_over_rows, compiled, (torch.randn(3, 4),))
    differential.check(loop_over_rows, compiled, (torch.randn(5, 4),))
    assert counting_backend.calls == 2  # one entry per trip count, each guarded


def _marked_calls(compiled, sizes, mark):
    """Call with tensors marked as given (``differential.check`` would copy them,
    dropping the marks) and compare with eager."""
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    for b in sizes:
        x = torch.randn(b, 8)
        mark(x)
        torch.testing.assert_close(compiled(x, w1, w2), mlp(x, w1, w2))


def test_mark_dynamic_avoids_the_first_recompile(counting_backend) -> None:
    compiled = bytegraph.compile(mlp, backend=counting_backend)
    _marked_calls(compiled, (3, 5, 7), lambda x: bytegraph.mark_dynamic(x, 0))
    assert counting_backend.calls == 1


def test_mark_dynamic_bounds_are_guarded(counting_backend) -> None:
    compiled = bytegraph.compile(mlp, backend=counting_backend)
    _marked_calls(compiled, (4,), lambda x: bytegraph.mark_dynamic(x, 0, min=2, max=6))
    assert "x.size()[0] <= 6" in str(compiled.entries[0].guard)
    _marked_calls(compiled, (9,), lambda x: None)  # outside the bounds: a new entry
    assert len(compiled.entries) == 2


def test_mark_static_keeps_a_dimension_static(counting_backend) -> None:
    compiled = bytegraph.compile(mlp, backend=counting_backend, dynamic=True)
    _marked_calls(compiled, (3, 5), lambda x: bytegraph.mark_static(x, 0))
    assert counting_backend.calls == 2


def test_bad_marks_raise_clear_errors() -> None:
    with pytest.raises(IndexError, match="out of range"):
        bytegraph.mark_dynamic(torch.randn(3), 1)
    with pytest.raises(TypeError, match="takes a tensor"):
        bytegraph.mark_static([1, 2], 0)
    with pytest.raises(ValueError, match="greater than max"):
        bytegraph.mark_dynamic(torch.randn(3), 0, min=5, max=2)
    with pytest.raises(TypeError, match="dynamic must be"):
        bytegraph.compile(mlp, dynamic="yes")


def test_the_recompile_log_names_the_dimension(caplog) -> None:
    bytegraph.set_logs("recompiles")
    compiled = bytegraph.compile(mlp, backend="eager")
    w1, w2 = torch.randn(8, 16), torch.randn(16, 4)
    compiled(torch.randn(3, 8), w1, w2)
    compiled(torch.randn(5, 8), w1, w2)
    messages = [r.getMessage() for r in caplog.records if r.name == "bytegraph.recompiles"]
    assert any("x.size(0) changed 3 -> 5: now dynamic" in m for m in messages), messages


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_with_varying_batch_sizes(backend) -> None:
    """One static entry, then one size-generic entry (AOTAutograd's joint graph, or
    Inductor code over a symbolic batch) whose gradients equal eager's at every size.
    Inductor compiles take seconds: one small model, three sizes."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 12), torch.nn.GELU(), torch.nn.LayerNorm(12), torch.nn.Linear(12, 2)
    )
    compiled = bytegraph.compile(model, backend=backend)
    for b in (4, 7, 10):
        x = torch.randn(b, 6)
        model.zero_grad()
        model(x).pow(2).mean().backward()
        want = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        compiled(x).pow(2).mean().backward()
        got = [p.grad.clone() for p in model.parameters()]
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert len(compiled._compiled_forward.entries) == 2


def scaled_prefix(x, n):
    y = x * n + n
    return y[:n], n * 2


def test_an_int_argument_that_changes_becomes_symbolic(differential, counting_backend) -> None:
    compiled = differential.compile(scaled_prefix)
    for n in (2, 3, 4, 5):
        differential.check(scaled_prefix, compiled, (torch.randn(6), n))
    assert counting_backend.calls == 2  # n == 2, then one entry for every n in 0..6
    guard = str(compiled.entries[0].guard)
    assert "type(n) is int" in guard and "0 <= n and n <= 6" in guard  # the slice's bounds
    for n in (1, 0):  # an int is no size: 0 and 1 stay symbolic
        differential.check(scaled_prefix, compiled, (torch.randn(6), n))
    assert counting_backend.calls == 2
    differential.check(scaled_prefix, compiled, (torch.randn(6), 9))  # past the bound
    assert counting_backend.calls == 3
    differential.check(scaled_prefix, compiled, (torch.randn(6), True))  # a bool is no int


def offset_by_sum(x, lst):
    total = int(x.sum())  # a break: the resume function receives the int
    lst.append(total)
    return x + total


def test_negative_ints_become_symbolic_too(differential, counting_backend) -> None:
    """An int that changes between calls is made symbolic whatever its sign (a size's
    symbol would assume it positive). Fuzz seed 31, indices 106 and 189."""
    compiled = differential.compile(offset_by_sum)
    for value in (2.0, -3.0, -7.0, 5.0):
        differential.check(offset_by_sum, compiled, (torch.full((3,), value), []))
