"""associative_scan captured as one node (bytegraph/variables/scans.py).

Each capture test compiles with ``fullgraph=True`` (one graph) under "eager",
"aot_eager" and "inductor", and compares outputs and gradients with eager.
"""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.associative_scan import associative_scan

import bytegraph
from bytegraph.variables.scans import apply_associative_scan
from tests.test_higher_order import BACKENDS, Counting, check, refused

QUICK = ["eager", "aot_eager"]  # Inductor: once, on the Mamba-shaped scan
W = torch.randn(3, requires_grad=True)


def mamba_combine(left, right):
    a_left, b_left = left
    a_right, b_right = right
    return a_left * a_right, a_right * b_left + b_right


def selective_scan(a, b):
    # The shape of transformers' Mamba scan on CPU: a pytree xs, dim 2, generic mode.
    da = torch.exp(a)
    _, states = associative_scan(mamba_combine, (da, b), dim=2, combine_mode="generic")
    return states.sum(-1), states[:, :, -1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_pytree_scan_is_one_node(backend: str) -> None:
    args = (torch.randn(2, 3, 5, 4, requires_grad=True), torch.randn(2, 3, 5, 4,
                                                                       requires_grad=True))
    counting = check(selective_scan, args, backend)
    assert len(counting.graphs) == 1
    assert counting.targets().count(apply_associative_scan) == 1


def free_variable_and_reverse(x):
    return associative_scan(lambda a, b: a * W + b, x, dim=0, reverse=True,
                            combine_mode="generic")


@pytest.mark.parametrize("backend", QUICK)
def test_free_variable_is_lifted_reverse(backend: str) -> None:
    counting = check(free_variable_and_reverse, (torch.randn(6, 3, requires_grad=True),), backend,
                     params=(W,))
    (node,) = [n for g in counting.graphs for n in g.graph.nodes
               if n.target is apply_associative_scan]
    assert len(node.args) == 4 + 1 + 1  # body, n_leaves, dim, reverse, x, W lifted


def not_pointwise(x):
    # Each step mixes the elements of a slice: right only under vmap's batching.
    return associative_scan(lambda a, b: a @ b, x, dim=1, combine_mode="generic")


@pytest.mark.parametrize("backend", QUICK)
def test_combine_that_is_not_pointwise(backend: str) -> None:
    counting = check(not_pointwise, (torch.randn(2, 5, 2, 2, requires_grad=True),), backend)
    assert counting.targets().count(apply_associative_scan) == 1


def list_xs_odd_length(x, y):
    out = associative_scan(lambda p, q: [p[0] + q[0], torch.maximum(p[1], q[1])], [x, y], dim=-1,
                           combine_mode="generic")
    return out, [t.requires_grad for t in out]


def test_list_xs_odd_length_under_no_grad() -> None:
    x, y = torch.randn(3, 7), torch.randn(3, 7, requires_grad=True)
    counting = Counting("eager")
    with torch.no_grad():
        got, flags = bytegraph.compile(list_xs_odd_length, backend=counting, fullgraph=True)(x, y)
        expected, expected_flags = list_xs_odd_length(x, y)
    assert isinstance(got, list) and len(counting.graphs) == 1
    assert flags == expected_flags == [False, False]
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
        assert g.requires_grad == e.requires_grad
        assert g.stride() == e.stride()


def grad_through_the_other_leaves(a, b, c):
    # Only c requires grad; b's scan reads c at once, a's reads b (so c) one step later.
    out = associative_scan(lambda p, q: (p[0] * q[1], p[1] * q[2], p[2] + q[2]), (a, b, c),
                           dim=0, combine_mode="generic")
    return out, [t.requires_grad for t in out]


def test_requires_grad_spreads_across_leaves() -> None:
    args = (torch.randn(4, 2), torch.randn(4, 2), torch.randn(4, 2, requires_grad=True))
    check(grad_through_the_other_leaves, args)
    out = bytegraph.compile(grad_through_the_other_leaves, backend="eager")(*args)
    assert out[1] == grad_through_the_other_leaves(*args)[1] == [True, True, True]


def mismatch(x):
    return associative_scan(lambda a, b: (a + b).sum(), x, dim=0, combine_mode="generic")


def test_mismatched_combine_output_breaks_and_raises_eagers_error() -> None:
    x = torch.randn(4, 3)
    assert "another structure, shape or dtype" in str(refused(mismatch, x))
    with pytest.raises(Exception) as expected:
        mismatch(x)
    with pytest.raises(type(expected.value)):
        bytegraph.compile(mismatch, backend="eager")(x)


def pointwise_on_cpu(x):
    return associative_scan(lambda a, b: a + b, x, dim=0)


def test_pointwise_mode_on_cpu_is_eagers_error() -> None:
    assert "combine_mode='pointwise'" in str(refused(pointwise_on_cpu, torch.randn(4)))
    with pytest.raises(ValueError, match="CUDA"):
        bytegraph.compile(pointwise_on_cpu, backend="eager")(torch.randn(4))


def test_length_one_runs_in_python() -> None:
    # Eager returns views of xs for a scan of one element: left to Python.
    assert "scan lengths" in str(refused(free_variable_and_reverse, torch.randn(1, 3)))


def test_dynamic_scan_length() -> None:
    # Eager backend: one graph for every length; AOTAutograd's own guards on the length
    # (torch's scan branches on it) recompile where needed, never a stale graph.
    for backend, most in (("eager", 1), ("aot_eager", 3)):
        counting = Counting(backend)
        compiled = bytegraph.compile(selective_scan, backend=counting, dynamic=True)
        for length in (5, 6, 3):
            a, b = torch.randn(2, 3, length, 4), torch.randn(2, 3, length, 4)
            for got, expected in zip(compiled(a, b), selective_scan(a, b), strict=True):
                torch.testing.assert_close(got, expected)
        assert 1 <= len(counting.graphs) <= most


def one_dimensional(x):
    return associative_scan(lambda a, b: torch.maximum(a, b) * 1.0, x, dim=0,
                            combine_mode="generic")


def test_one_dimensional_xs_is_eagers_error() -> None:
    # torch's generic mode fails on some combines of 0-d slices (this one): 1-d xs are
    # left to Python, which raises eager's own error (a graph would raise it in the backend).
    x = torch.randn(5)
    assert "1-d xs" in str(refused(one_dimensional, x))
    with pytest.raises(IndexError):
        one_dimensional(x)
    with pytest.raises(IndexError):
        bytegraph.compile(one_dimensional, backend="aot_eager")(x)
