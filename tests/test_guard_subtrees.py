"""Repeated module subtrees checked by one shared helper (bytegraph/guards/subtrees.py).

A model of repeated blocks is compiled; its guard function checks each kind of
block with one helper. Each test changes one copy in the middle (its float
constant, a parameter's layout or flag, a hook, the module itself, an alias)
in the model and its compiled twin alike, and compares the compiled call with
eager: a change the trace relied on must recompile, as it did with the guards
written out flat.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

import bytegraph
from bytegraph.guards import subtrees
from bytegraph.guards.guard import GuardKind

MIDDLE = 13


class Block(nn.Module):
    def __init__(self, scale: float = 0.5) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x)) * self.scale + x


class SignOfZero(nn.Module):
    """Its output tells ``0.0`` from ``-0.0``: atan2(+0, -1) is pi, atan2(-0, -1) is -pi."""

    def __init__(self) -> None:
        super().__init__()
        self.c = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.atan2(x.abs() * self.c, torch.full_like(x, -1.0)) + x


def _stack(count: int = 24) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[Block() for _ in range(count)])


def _twin(model: nn.Module, backend) -> tuple[nn.Module, nn.Module]:
    twin = copy.deepcopy(model)
    return twin, bytegraph.compile(twin, backend=backend)


def _same(compiled: Callable, model: nn.Module, x: torch.Tensor) -> None:
    expected = model(x)
    actual = compiled(x)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert actual.requires_grad == expected.requires_grad


def _entry(compiled: nn.Module):
    return compiled._compiled_forward.entries[0]


def test_repeated_blocks_are_checked_by_one_helper_per_kind(counting_backend) -> None:
    model = _stack()
    twin, compiled = _twin(model, counting_backend)
    x = torch.randn(2, 8)
    _same(compiled, model, x)
    guards = _entry(compiled).guard._guards
    assert len(guards) >= subtrees.MIN_GUARDS
    helpers: list[list] = []
    main = subtrees.factored(guards, lambda gs, several: helpers.append(gs) or (lambda *r: True))
    # One helper each for Block, Linear and LayerNorm; the guard function calls the
    # Block helper on each of the 24 blocks, which calls the other two.
    assert len(helpers) == 3
    assert sum(g.kind is GuardKind.SUBTREE for g in main) == 24
    assert len(main) < len(guards) // 5
    assert all(g.source.root is subtrees.HELPER_ARGUMENT for h in helpers for g in h)
    # Reports keep one condition per guard.
    assert len(_entry(compiled).guard.parts) >= len(guards) // 2
    _same(compiled, model, torch.randn(2, 8))
    assert counting_backend.calls == 1


def _set_scale(m: nn.Module) -> None:
    m[MIDDLE].scale = 0.25


def _transpose_weight(m: nn.Module) -> None:
    weight = m[MIDDLE].linear.weight
    weight.data = weight.data.t().contiguous().t()  # same values, other strides


def _freeze_norm_weight(m: nn.Module) -> None:
    m[MIDDLE].norm.weight.requires_grad_(False)


def _replace_norm(m: nn.Module) -> None:
    m[MIDDLE].norm = nn.Identity()


def _resize_norm(m: nn.Module) -> None:
    m[MIDDLE].norm.eps = 0.5


def _hook(m: nn.Module) -> None:
    m[MIDDLE].linear.register_forward_hook(lambda mod, args, out: out * 2)


def _shadow_forward(m: nn.Module) -> None:
    linear = m[MIDDLE].linear
    linear.forward = lambda x: nn.functional.linear(x, linear.weight, linear.bias) + 1


@pytest.mark.parametrize(
    "change",
    [_set_scale, _transpose_weight, _freeze_norm_weight, _replace_norm, _resize_norm, _hook,
     _shadow_forward],
)
def test_a_change_to_one_copy_recompiles(counting_backend, change) -> None:
    model = _stack()
    twin, compiled = _twin(model, counting_backend)
    x = torch.randn(2, 8)
    _same(compiled, model, x)
    change(model)
    change(twin)
    _same(compiled, model, x)
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_the_failed_guard_is_named_on_a_recompile(counting_backend) -> None:
    model = _stack()
    twin, compiled = _twin(model, counting_backend)
    x = torch.randn(2, 8)
    _same(compiled, model, x)
    twin[MIDDLE].norm.weight.requires_grad_(False)
    failure = _entry(compiled).guard.explain_failure((twin, x), {})
    assert failure is not None
    assert f"['{MIDDLE}']" in failure and "requires_grad" in failure, failure
    assert failure.endswith("(value: False)"), failure


def test_copies_whose_floats_differ_only_in_sign_are_told_apart(
    counting_backend, monkeypatch
) -> None:
    monkeypatch.setattr(subtrees, "MIN_GUARDS", 0)  # a small model, factored all the same
    model = nn.Sequential(*[SignOfZero() for _ in range(6)])
    twin, compiled = _twin(model, counting_backend)
    x = torch.rand(3) + 0.1
    _same(compiled, model, x)
    before = model(x)
    for m in (model, twin):
        m[3].c = -0.0
    assert not torch.equal(model(x), before)  # a stale guard would be a wrong answer
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_aliased_copies_stay_guarded_as_aliases(counting_backend) -> None:
    model = _stack()
    for m in (model,):
        m[MIDDLE + 1].linear = m[MIDDLE].linear  # one Linear in two blocks
    twin, compiled = _twin(model, counting_backend)
    assert twin[MIDDLE + 1].linear is twin[MIDDLE].linear
    x = torch.randn(2, 8)
    _same(compiled, model, x)
    for m in (model, twin):
        m[MIDDLE + 1].linear = copy.deepcopy(m[MIDDLE].linear)
        with torch.no_grad():
            m[MIDDLE + 1].linear.weight.mul_(-1)
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_a_model_below_the_threshold_is_left_flat(counting_backend) -> None:
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(3)])
    twin, compiled = _twin(model, counting_backend)
    _same(compiled, model, torch.randn(2, 4))
    guards = _entry(compiled).guard._guards
    assert len(guards) < subtrees.MIN_GUARDS
    assert subtrees.factored(guards, lambda gs, several: pytest.fail("a helper was made")) == list(
        guards
    )
