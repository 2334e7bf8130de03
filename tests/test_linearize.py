"""``torch.func.linearize`` (variables/linearize.py): the output in place, jvp_fn as jvp.

One graph with ``fullgraph=True``, values equal eager's under each backend;
a jvp_fn that escapes is a break, and the function still returns eager's.
"""

from __future__ import annotations

import pytest
import torch

import bytegraph
from tests.test_higher_order import BACKENDS, Counting, check, refused

W = torch.randn(3)


def linearized(x, v, u):
    out, jvp_fn = torch.func.linearize(lambda a: (a.sin() * W, a.cos()), x)
    return out, jvp_fn(v), jvp_fn(u)


@pytest.mark.parametrize("backend", BACKENDS)
def test_linearize_output_and_two_jvps(backend: str) -> None:
    check(linearized, (torch.randn(3), torch.randn(3), torch.randn(3)), backend)


def returns_jvp_fn(x):
    out, jvp_fn = torch.func.linearize(torch.sin, x)
    return out, jvp_fn


def primals_requiring_grad(x):
    return torch.func.linearize(torch.sin, x)[0]


def test_left_to_python() -> None:
    x = torch.randn(3)
    with pytest.raises(bytegraph.Unsupported):
        bytegraph.compile(returns_jvp_fn, backend="eager", fullgraph=True)(x)
    out, fn = bytegraph.compile(returns_jvp_fn, backend=Counting("eager"))(x)
    torch.testing.assert_close(fn(torch.ones(3)), torch.cos(x))
    error = refused(primals_requiring_grad, torch.randn(3, requires_grad=True))
    assert "require grad" in error.detail
