"""Values and sizes the data decides: ``Tensor.item()``, ``nonzero``, ``x[mask]``, ``unique``.

Off by default (as in torch.compile): each is a ``data_dependent`` graph break
whose message names the switch that would keep it in the graph.
``config.capture_scalar_outputs`` keeps ``.item()`` in the graph as an
unbacked symbol; ``config.capture_dynamic_output_shape_ops`` keeps ops whose
output size the data decides. What then needs a Python value (a branch on
it) breaks there, never guesses. Every result is compared with eager.
"""

from __future__ import annotations

import pytest
import torch

import bytegraph
from bytegraph import config


def nonzero_rows(x):
    return x.nonzero() + 1


def masked(x, m):
    picked = x[m]
    return picked * 2, picked.shape[0] * 3


def unique_doubled(x):
    return torch.unique(x) * 2


def masked_select_sum(x, m):
    picked = x.masked_select(m)
    return picked.sum() + picked.numel()


def scaled_by_item(x):
    s = x.sum().item()
    return x * s + s, s * 2


def shifted_by_count(x):
    n = (x > 0).sum().item()
    return x + n, n + 1


def branch_on_item(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1


SHAPE_OPS = [
    (nonzero_rows, lambda: (torch.randn(5, 3),)),
    (masked, lambda: (torch.randn(5, 3), torch.randn(5, 3) > 0)),
    (unique_doubled, lambda: (torch.randint(0, 4, (9,)),)),
    (masked_select_sum, lambda: (torch.randn(4, 3), torch.randn(4, 3) > 0)),
]
SCALAR_OPS = [
    (scaled_by_item, lambda: (torch.randn(6),)),
    (shifted_by_count, lambda: (torch.randn(6),)),
]


@pytest.fixture
def capture(monkeypatch):
    monkeypatch.setattr(config, "capture_scalar_outputs", True)
    monkeypatch.setattr(config, "capture_dynamic_output_shape_ops", True)


@pytest.mark.parametrize(
    "fn, make_args, switch",
    [(fn, args, "capture_dynamic_output_shape_ops") for fn, args in SHAPE_OPS]
    + [(fn, args, "capture_scalar_outputs") for fn, args in SCALAR_OPS],
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else None,
)
def test_off_a_break_that_names_the_switch(fn, make_args, switch, differential) -> None:
    compiled = differential.compile(fn)
    differential.check(fn, compiled, make_args())
    (entry,) = compiled.entries
    (reason,) = entry.breaks
    assert reason.kind == "data_dependent"
    assert f"bytegraph.config.{switch} = True" in reason.detail
    assert "failed on metadata" not in reason.detail
    # fullgraph=True opts into capturing them, as torch.compile(fullgraph=True) does
    whole = differential.compile(fn, fullgraph=True)
    differential.check(fn, whole, make_args())
    assert len(whole.entries[0].graphs) == 1 and not whole.entries[0].breaks
    assert not getattr(config, switch)


def test_off_in_a_dynamic_trace_too(differential) -> None:
    compiled = differential.compile(masked, dynamic=True)
    differential.check(masked, compiled, (torch.randn(5, 3), torch.randn(5, 3) > 0))
    (reason,) = compiled.entries[0].breaks
    assert "capture_dynamic_output_shape_ops" in reason.detail


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize(
    "fn, make_args", SHAPE_OPS + SCALAR_OPS,
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else None,
)
def test_on_one_graph_for_every_value(fn, make_args, backend, capture, differential) -> None:
    compiled = bytegraph.compile(fn, backend=backend, fullgraph=True)
    for _ in range(4):  # other values, other output sizes: the same entry
        differential.check(fn, compiled, make_args(), exact=backend == "eager")
    assert len(compiled.entries) == 1
    assert not compiled.entries[0].breaks


def test_on_a_branch_on_the_value_breaks_there(capture, differential) -> None:
    compiled = differential.compile(branch_on_item)
    differential.check(branch_on_item, compiled, (torch.ones(3),))
    differential.check(branch_on_item, compiled, (-torch.ones(3),))  # the other branch
    assert len(compiled.entries) == 1
    (reason,) = compiled.entries[0].breaks
    assert reason.kind == "data_dependent" and "only the tensor's data decides" in reason.detail


def loop_to_count(x):
    total = x
    for _ in range(int((x > 0).sum().item())):  # a trip count the data decides
        total = total * 2
    return total


def test_on_a_trip_count_breaks_and_stays_correct(capture, differential) -> None:
    compiled = differential.compile(loop_to_count)
    for x in (torch.tensor([1.0, -1.0, 2.0]), torch.tensor([-1.0, -1.0, 2.0])):
        differential.check(loop_to_count, compiled, (x,))


def masked_loss(x, w):
    keep = x.abs().sum(-1) > 1
    return (x[keep] @ w).pow(2).mean()


def test_on_training_through_a_mask_under_aot_eager(capture) -> None:
    w = torch.randn(4, 3, requires_grad=True)
    compiled = bytegraph.compile(masked_loss, backend="aot_eager", fullgraph=True)
    for _ in range(3):
        x = torch.randn(8, 4, requires_grad=True)
        want = torch.autograd.grad(masked_loss(x, w), (x, w))
        got = torch.autograd.grad(compiled(x, w), (x, w))
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e)
    assert len(compiled.entries) == 1


def test_on_with_dynamic_sizes(capture, differential) -> None:
    compiled = differential.compile(masked, dynamic=True, fullgraph=True)
    for b in (3, 6, 9):
        differential.check(masked, compiled, (torch.randn(b, 3), torch.randn(b, 3) > 0))
    assert len(compiled.entries) == 1
