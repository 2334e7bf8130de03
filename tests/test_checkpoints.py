"""Activation checkpointing's forms (bytegraph/variables/checkpoints.py), each against eager.

Outputs and the gradients of inputs and parameters equal eager's under the
eager, aot_eager and inductor backends, one graph with a
``tag_activation_checkpoint`` node; the forms whose gradients would differ
are breaks with their reason, and then equal eager's exactly.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import bytegraph
from tests.test_higher_order import BACKENDS, Counting, check, refused

LINEAR = torch.nn.Linear(4, 4)
TAG = torch.ops.higher_order.tag_activation_checkpoint


def reentrant(x):
    return checkpoint(lambda a: torch.relu(LINEAR(a)).sin(), x, use_reentrant=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reentrant_with_an_argument_that_requires_grad(backend: str) -> None:
    x = torch.randn(3, 4, requires_grad=True)
    counting = check(reentrant, (x,), backend, params=tuple(LINEAR.parameters()))
    assert TAG in counting.targets()


def test_reentrant_without_an_argument_that_requires_grad_is_refused() -> None:
    """Eager's reentrant output does not require grad there, and the parameters get none."""
    x = torch.randn(3, 4)
    error = refused(reentrant, x)
    assert "use_reentrant=True" in error.detail
    counting = Counting("eager")
    out = bytegraph.compile(reentrant, backend=counting)(x)
    assert out.requires_grad is reentrant(x).requires_grad is False


def dropout_body(x, y):
    return checkpoint(lambda a, b: torch.nn.functional.dropout(a @ b, p=0.5), x, y,
                      use_reentrant=False)


def test_body_drawing_random_numbers_is_refused_and_gradients_are_eagers() -> None:
    """The op's eager form recomputes without restoring the generator: other masks."""
    error = refused(dropout_body, torch.randn(4, 4), torch.randn(4, 4))
    assert "random numbers" in error.detail
    results = []
    for run in (dropout_body, bytegraph.compile(dropout_body, backend="eager")):
        torch.manual_seed(0)
        x = torch.ones(4, 4, requires_grad=True)
        torch.manual_seed(1)
        run(x, torch.ones(4, 4)).sum().backward()
        results.append(x.grad)
    torch.testing.assert_close(results[1], results[0], rtol=0, atol=0)


# -- checkpoint_sequential: its Python inlined, one checkpoint per segment ------------------
SEQUENCE = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4),
                               torch.nn.Tanh(), torch.nn.Linear(4, 3))


def sequential_segments(x, reentrant):
    return checkpoint_sequential(SEQUENCE, 3, x, use_reentrant=reentrant)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_sequential(backend: str, reentrant: bool) -> None:
    x = torch.randn(2, 4, requires_grad=True)
    counting = check(sequential_segments, (x, reentrant), backend,
                     params=tuple(SEQUENCE.parameters()))
    assert counting.targets().count(TAG) == 2  # the last segment runs unchecked, as in eager


def sequential_with_a_stray_keyword(x):
    return checkpoint_sequential(SEQUENCE, 2, x, use_reentrant=False, stray=1)


def test_checkpoint_sequential_raises_eagers_error() -> None:
    with pytest.raises(ValueError, match="Unexpected keyword arguments: stray"):
        bytegraph.compile(sequential_with_a_stray_keyword, backend="eager")(torch.randn(2, 4))
