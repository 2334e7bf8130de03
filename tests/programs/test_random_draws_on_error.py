"""The random module's state when a graph that cannot rerun raises (random_draws.settle_on_error).

The transformed code makes every ``random`` draw before the graph. A graph that
writes into an input cannot rerun as Python when one of its ops fails on data,
so its error leaves the call: the state must then be eager's, which made only
the draws before the failing op (fuzz seed 2004 index 582: a scatter with an
index out of range, then ``random.random()``, then ``y.mul_``). Draws before
every op are kept, draws after every op undone; a draw between two ops breaks
the graph there. Each program runs eagerly and compiled from one seeded state:
the same result or exception (type and message), the same inputs after the
call, the same ``random.getstate()``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

import bytegraph


def scatter(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:  # out of range for k > 1
    return x.scatter(1, k * x.argsort(1), x)


def draw_between_ops(x, y, k):
    z = scatter(x, k)
    r = random.random()
    y.mul_(2)
    return z * r


def draw_after_ops(x, y, k):
    z = scatter(x, k)
    y.mul_(2)
    return z, random.random()


def draw_before_ops(x, y, k):
    r = random.random()
    z = scatter(x, k)
    y.mul_(2)
    return z * r


def draws_before_and_after(x, y, k):
    r = random.uniform(0.5, 1.5)
    z = scatter(x, k) * r
    y.mul_(2)
    return z, random.randint(1, 5)


def fuzz_campaign_program(x, y, k):  # seed 2004 index 582, shrunk
    out = x + y[0]
    t = scatter(x, k)
    s = x / (random.random() + 0.5) + random.randint(1, 3)
    out = out + s * t
    y.mul_(x.sum())
    return out


def _outcome(fn: Any, k: int) -> tuple[Any, ...]:
    random.seed(11)
    torch.manual_seed(3)
    x, y = torch.randn(2, 3), torch.ones(2)
    try:
        result: Any = fn(x, y, torch.tensor(k))
    except RuntimeError as e:
        result = ("raised", str(e))
    return result, y, random.getstate()


# Graphs per program: calls with k=1 (no error) then k=9 (the scatter fails).
@pytest.mark.parametrize(
    "fn, graphs",
    [
        (draw_between_ops, 2),  # a break at the draw: the ops before it, those after it
        (draw_after_ops, 1),
        (draw_before_ops, 1),
        (draws_before_and_after, 1),
        (fuzz_campaign_program, 3),  # a break at each draw: the second follows an op too
    ],
)
def test_state_after_a_failing_graph_is_eagers(fn, graphs, counting_backend) -> None:
    compiled = bytegraph.compile(fn, backend=counting_backend)
    for k in (1, 9, 1, 9):
        expected, actual = _outcome(fn, k), _outcome(compiled, k)
        torch.testing.assert_close(actual[1], expected[1], rtol=0, atol=0)
        assert actual[2] == expected[2], f"random state differs after k={k}"
        if isinstance(expected[0], tuple) and expected[0][0] == "raised":
            assert actual[0] == expected[0]
        else:
            torch.testing.assert_close(actual[0], expected[0], rtol=0, atol=0)
    assert counting_backend.calls == graphs
