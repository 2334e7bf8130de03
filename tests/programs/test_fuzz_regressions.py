"""Reproducers found by the differential fuzzer (tests/fuzz/), each kept after its fix.

Every program runs eagerly and compiled on clones of the same inputs
(``differential.check``: outputs, every input after the call, aliasing); a
program whose eager run raises must raise the same exception, type and
message, compiled.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import bytegraph
from tests.conftest import assert_same_value


def outcome(fn: Any, *args: Any) -> tuple[str, Any]:
    """What calling ``fn`` did: its result, or its exception's type and message."""
    try:
        return "returned", fn(*args)
    except Exception as e:  # noqa: BLE001  (the program's own exception is the result)
        return type(e).__name__, str(e)


# -- writes into an expanded tensor: eager refuses most, meta kernels never check ------------


@torch.no_grad()
def clamp_in_place(x, y):
    x.clamp_(-2.0, 2.0)
    return x


def overlapping_write_caught(x, y, dct):  # seed 0, index 154
    acc = []
    out = x + y
    try:
        out = out + clamp_in_place(x.mean(0, keepdim=True).expand_as(x), x)
    except Exception as e:  # noqa: BLE001
        acc.append(str(e))
    return out, acc


def overlapping_write_raises(x, y, dct):
    z = x.sum(0, keepdim=True).expand(3, 2)
    z.add_(y)
    return z


def overlapping_inplace_operator(x, y, dct):
    z = x[:1].expand(3, 2)
    z += 1
    return z


def overlapping_out_argument(x, y, dct):
    z = torch.zeros(1, 2).expand(3, 2)
    torch.add(x, y, out=z)
    return z


def overlapping_setitem_after_a_store(x, y, dct):  # seed 11, index 277
    dct["b"] = y
    t = x.mean(0, keepdim=True).expand_as(x)
    t[:, 0] = 1
    return t


def overlapping_dunder_setitem(x, y, dct):
    t = x[:1].expand(3, 2)
    t.__setitem__(0, 2.0)
    return t


@pytest.mark.parametrize(
    "fn", [overlapping_write_caught, overlapping_write_raises, overlapping_inplace_operator,
           overlapping_out_argument, overlapping_setitem_after_a_store, overlapping_dunder_setitem],
)
def test_write_into_expanded_tensor_behaves_as_eager(fn) -> None:
    x, y = torch.randn(3, 2), torch.randn(3, 2)
    eager_dct, compiled_dct = {"b": 0}, {"b": 0}
    expected = outcome(fn, x.clone(), y.clone(), eager_dct)
    actual = outcome(bytegraph.compile(fn, backend="eager"), x.clone(), y.clone(), compiled_dct)
    assert_same_value(actual, expected)
    assert_same_value(compiled_dct, eager_dct, "dct after the call")


def fill_expanded(x):
    z = torch.zeros(1, 2).expand(3, 2)
    z.fill_(2.0)
    return x * z


def test_fill_into_expanded_tensor_stays_in_the_graph(differential, counting_backend) -> None:
    compiled = differential.compile(fill_expanded)
    differential.check(fill_expanded, compiled, (torch.randn(3, 2),))
    assert counting_backend.calls == 1
