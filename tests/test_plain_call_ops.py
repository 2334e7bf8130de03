"""``torch._higher_order_ops.wrap.wrap``: the call traced in place (variables/plain_call_ops.py).

One graph with ``fullgraph=True``; outputs and gradients of inputs and
parameters equal eager's under each backend; a body that cannot be traced
breaks inside it, as any inlined call does.
"""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.wrap import wrap

import bytegraph
from tests.test_higher_order import BACKENDS, Counting, check

LINEAR = torch.nn.Linear(3, 3)


def wrapped(x, y):
    def gn(a, *, scale):
        return torch.cos(a) + wrap(LINEAR, a) * scale + y

    return wrap(gn, x, scale=2.0), wrap(lambda a: (a.sin(), {"c": a.cos()}), y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrap_is_its_call(backend: str) -> None:
    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    check(wrapped, (x, y), backend, params=tuple(LINEAR.parameters()))


def wrapped_print(x):
    return wrap(lambda a: print("", end="") or a.sin(), x) + 1


def test_body_that_breaks_breaks_inside() -> None:
    counting = Counting("eager")
    x = torch.randn(3)
    torch.testing.assert_close(bytegraph.compile(wrapped_print, backend=counting)(x),
                               wrapped_print(x))
    assert len(counting.graphs) >= 1
