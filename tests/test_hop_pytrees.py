"""Pytree operands of torch.cond and map (tuples, lists and dicts of tensors, nested).

Each is one graph with ``fullgraph=True``; outputs and gradients equal eager's
under each backend. The op's node takes the flat tensor leaves; the bodies get
the structure back.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.utils._pytree
from torch._higher_order_ops.map import map as control_map

import bytegraph
from tests.test_higher_order import BACKENDS, Counting, check


def cond_nested_operands(x, y, z):
    def true_fn(pair, d):
        return pair[0] + pair[1] * d["z"]

    def false_fn(pair, d):
        return pair[0] - d["z"].sin()

    return torch.cond(x.sum() > 0, true_fn, false_fn, ((x, y), {"z": z}))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_nested_operands(backend: str, sign: float) -> None:
    x = (torch.rand(3) * sign).requires_grad_()
    y, z = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    counting = check(cond_nested_operands, (x, y, z), backend)
    assert torch.ops.higher_order.cond in counting.targets()


def map_dict_xs(xs, ys, w):
    return control_map(lambda d, b: {"s": d["a"] * d["b"][0] + b}, {"a": xs, "b": [ys]}, w)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])  # Inductor cannot lower map_impl
def test_map_dict_xs(backend: str) -> None:
    args = (torch.randn(4, 3, requires_grad=True), torch.randn(4, 3), torch.randn(3))
    counting = check(map_dict_xs, args, backend)
    assert torch.ops.higher_order.map_impl in counting.targets()


@dataclasses.dataclass
class Point:
    x: torch.Tensor
    y: torch.Tensor


torch.utils._pytree.register_dataclass(Point)


def grad_of_point(a, b):
    return torch.func.grad(lambda p: (p.x * p.y.sin()).sum())(Point(a, b))


def vmap_of_point(a, b):
    return torch.vmap(lambda p: p.x @ p.y)(Point(a, b))


def map_of_point(a, b):
    return control_map(lambda p: p.x + p.y.cos(), Point(a, b))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [grad_of_point, vmap_of_point, map_of_point])
def test_registered_dataclass_argument(backend: str, fn) -> None:
    """A dataclass registered with pytree is a node of its fields: one graph, and a
    Point of gradients comes back from grad as eager's does."""
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    if fn is vmap_of_point:
        b = torch.randn(4, 3, 2)
    counting = Counting(backend)
    got = bytegraph.compile(fn, backend=counting, fullgraph=True)(a, b)
    want = fn(a, b)
    assert type(got) is type(want)
    if isinstance(want, Point):
        got, want = (got.x, got.y), (want.x, want.y)
    torch.testing.assert_close(got, want)
    assert len(counting.graphs) == 1
