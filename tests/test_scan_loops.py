"""``scan(combine_fn, init, xs)`` as one node calling ``apply_scan`` (variables/scan_loops.py).

Outputs and gradients equal eager's under each backend, one graph with
``fullgraph=True``; the forms left to Python break with their reason.
"""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.scan import scan

import bytegraph
from bytegraph.variables.scan_loops import apply_scan
from tests.test_higher_order import BACKENDS, Counting, check, refused

W = torch.randn(3, requires_grad=True)


def running(init, xs):
    def combine(carry, x):
        nxt = carry * W + x
        return nxt, nxt.sin()

    return scan(combine, init, xs)


def pytree_carry(a, b, xs, ys):
    def combine(carry, x):
        total, count = carry
        step = total + x["x"] * x["y"]
        return (step, count + 1), {"out": step.cos()}

    return scan(combine, (a, b), {"x": xs, "y": ys})


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_with_a_free_variable(backend: str) -> None:
    args = (torch.randn(3, requires_grad=True), torch.randn(4, 3, requires_grad=True))
    counting = check(running, args, backend, params=(W,))
    assert apply_scan in counting.targets()


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_carry_gains_grad_from_a_free_variable(backend: str) -> None:
    """init does not require grad; after one step the carry does (through W)."""
    check(running, (torch.randn(3), torch.randn(4, 3)), backend, params=(W,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_pytree_carry_and_xs(backend: str) -> None:
    args = (torch.randn(3, requires_grad=True), torch.zeros(3), torch.randn(5, 3),
            torch.randn(5, 3, requires_grad=True))
    check(pytree_carry, args, backend)


def reversed_scan(init, xs):
    return scan(lambda c, x: (c + x, c * x), init, xs, reverse=True)


def test_reverse_is_left_to_python() -> None:
    error = refused(reversed_scan, torch.randn(3), torch.randn(4, 3))
    assert "reverse" in error.detail
    counting = Counting("eager")
    init, xs = torch.randn(3), torch.randn(4, 3)
    got = bytegraph.compile(reversed_scan, backend=counting)(init, xs)
    want = reversed_scan(init, xs)
    torch.testing.assert_close(got, want)
