"""``torch._check`` and its siblings in compiled code (variables/torch_checks.py).

A true condition (a Python bool, or a size relation the ShapeEnv decides and
guards) is nothing in the graph; a false one breaks, and Python raises eager's
error with its message. Transformers' ``torch_compilable_check`` takes this path
while it is traced (RT-DETR, Mask2Former: 8-15 graphs where torch.compile has 1).
"""

from __future__ import annotations

import pytest
import torch

import bytegraph


def checked_sizes(x, n):
    torch._check(x.shape[0] == n, lambda: f"expected {n} rows")
    torch._check_with(ValueError, n > 0, lambda: "n must be positive")
    torch._check_value(x.dim() == 1)
    return x * 2


def outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        return type(e), str(e)


def test_true_checks_are_nothing(counting_backend) -> None:
    compiled = bytegraph.compile(checked_sizes, backend=counting_backend, fullgraph=True)
    x = torch.randn(3)
    assert torch.equal(compiled(x, 3), checked_sizes(x, 3))
    assert counting_backend.calls == 1
    ops = [n for n in counting_backend.graphs[0].graph.nodes if n.op == "call_function"]
    assert len(ops) == 1  # the multiplication alone


@pytest.mark.parametrize("n", [4, 0, -1])
def test_false_checks_raise_eagers_error(n) -> None:
    compiled = bytegraph.compile(checked_sizes, backend="eager")
    x = torch.randn(max(n, 1) if n != 4 else 3)
    expected = outcome(checked_sizes, x, n)
    assert isinstance(expected, tuple) and expected[0] in (RuntimeError, ValueError)
    assert outcome(compiled, x, n) == expected


def test_a_size_relation_is_guarded(counting_backend) -> None:
    def f(x, y):
        torch._check(x.shape[0] == y.shape[0])
        return x + y

    compiled = bytegraph.compile(f, backend=counting_backend, dynamic=True, fullgraph=True)
    for size in (3, 5, 7):
        x, y = torch.randn(size), torch.randn(size)
        assert torch.equal(compiled(x, y), f(x, y))
    assert counting_backend.calls == 1
    x, y = torch.randn(3), torch.randn(4)  # the guard fails; the new trace breaks there
    compiled = bytegraph.compile(f, backend=counting_backend, dynamic=True)
    assert outcome(compiled, x, y)[0] is outcome(f, x, y)[0] is RuntimeError


def checked_tensor(x, log):
    log.append("before")
    y = x.abs() + 1
    torch._check_tensor_all(y > x, lambda: "y must exceed x")
    log.append("after")
    return y * 2


def checked_after_writing(x):
    x.add_(1)
    torch._check_tensor_all(x > 0)
    return x * 2


def _run(fn, *args):
    log: list = []
    return outcome(fn, *args, log), log


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_tensor_check_is_an_assert_in_the_graph(backend, counting_backend) -> None:
    compiled = bytegraph.compile(checked_tensor, backend=counting_backend)
    x = torch.randn(4)
    assert _run(compiled, x)[1] == _run(checked_tensor, x)[1] == ["before", "after"]
    assert torch.equal(_run(compiled, x)[0], _run(checked_tensor, x)[0])
    assert counting_backend.calls == 1
    targets = [n.target for n in counting_backend.graphs[0].graph.nodes]
    assert torch._assert_async in targets
    with_backend = bytegraph.compile(checked_tensor, backend=backend)
    bad = torch.tensor([1.0, float("inf")])  # inf + 1 == inf: the check fails
    expected = _run(checked_tensor, bad)
    assert expected[0] == (RuntimeError, "y must exceed x") and expected[1] == ["before"]
    assert _run(with_backend, bad) == expected  # rerun as Python: eager's error and state


def test_a_tensor_check_in_a_graph_that_cannot_rerun_is_a_break(counting_backend) -> None:
    compiled = bytegraph.compile(checked_after_writing, backend=counting_backend)
    for values in ([1.0, 2.0], [-3.0, 2.0]):
        x_eager, x_compiled = torch.tensor(values), torch.tensor(values)
        expected = outcome(checked_after_writing, x_eager)
        got = outcome(compiled, x_compiled)
        assert type(got) is type(expected)
        assert got == expected if isinstance(expected, tuple) else torch.equal(got, expected)
        assert torch.equal(x_compiled, x_eager)
    assert counting_backend.calls == 2  # the write, then the product after the check
