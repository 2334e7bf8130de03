"""Reuse of a traced loop iteration (translate/loop_fragments.py).

Each program runs eagerly and compiled (outputs, arguments after the call, and
gradients where the inputs require them). Where iterations are copied, the graph
must be the one plain tracing builds (the same ops in the same order), and the
number of copies is counted. Where a copy would differ from tracing (the body
reads the loop's item, fills a list, changes a module, writes into its input,
draws random numbers, or an earlier attempt broke the graph inside the loop),
nothing is copied and the program is traced as usual.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import bytegraph
from bytegraph import config
from bytegraph.translate import fragments


@pytest.fixture(autouse=True)
def _count_from_zero() -> None:
    fragments.STATS["reused"] = 0


def _ops(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


def _copies(fn, args, differential, counting_backend) -> int:
    """Copied iterations; checks against eager, and against plain tracing's graphs."""
    config.reuse_fragments = False
    try:
        differential.check(fn, differential.compile(fn), args)
    finally:
        config.reuse_fragments = True
    plain = [_ops(gm) for gm in counting_backend.graphs]
    del counting_backend.graphs[:]
    bytegraph.reset()
    fragments.STATS["reused"] = 0
    differential.check(fn, differential.compile(fn), args)
    assert [_ops(gm) for gm in counting_backend.graphs] == plain
    return fragments.STATS["reused"]


def residual_steps(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for _ in range(12):
        x = torch.tanh(x @ w) * 0.5 + x
    return x


def test_the_steps_of_a_loop_are_traced_twice_and_copied_after(
    differential, counting_backend
) -> None:
    args = (torch.randn(4, 4), torch.randn(4, 4) / 4)
    # The first step reads the frame's x (a graph input), the second an op's result;
    # from the third on, each is a copy of the second.
    assert _copies(residual_steps, args, differential, counting_backend) == 10
    assert counting_backend.calls == 1


def test_gradients_through_copied_steps(differential, counting_backend) -> None:
    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    compiled = differential.compile(residual_steps)
    got_out = compiled(x, w)
    got_out.sum().backward()
    got = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    want_out = residual_steps(x, w)
    want_out.sum().backward()
    torch.testing.assert_close(got_out, want_out, rtol=0, atol=0)
    torch.testing.assert_close(got, (x.grad, w.grad), rtol=0, atol=0)
    assert fragments.STATS["reused"] == 10


def one_line(x: torch.Tensor) -> torch.Tensor:
    for _ in range(8): x = x * 0.5 + torch.sin(x)  # noqa: E701  (3.13: one fused store-load)
    return x


def test_a_loop_on_one_line(differential, counting_backend) -> None:
    assert _copies(one_line, (torch.randn(4),), differential, counting_backend) == 6


def two_states(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = 0.5
    for _ in range(8):
        x, y = y * scale, torch.sin(x) + y  # two tensors carried, a constant read
        h = x - y  # a local of the body, read after the loop
    return x, h


def test_several_tensors_and_a_body_local(differential, counting_backend) -> None:
    args = (torch.randn(3), torch.randn(3))
    assert _copies(two_states, args, differential, counting_backend) >= 5


def draws(x: torch.Tensor) -> torch.Tensor:
    for _ in range(6):
        x = x * torch.rand_like(x) + torch.sin(x) - 0.25
    return x


def test_steps_that_draw_random_numbers(differential, counting_backend) -> None:
    """A copied step's draws are nodes of the graph in the same order: the same numbers."""
    assert _copies(draws, (torch.randn(4),), differential, counting_backend) == 4


def nested(x: torch.Tensor) -> torch.Tensor:
    for _ in range(3):
        for _ in range(6):
            x = torch.cos(x) * 0.9 + 0.1
        x = x.flip(0)
    return x


def test_nested_loops_copy_the_inner_steps(differential, counting_backend) -> None:
    assert _copies(nested, (torch.randn(5),), differential, counting_backend) >= 10


def reads_the_item(x: torch.Tensor) -> torch.Tensor:
    for i in range(6):
        x = torch.sin(x) * i + x
    return x


def item_through_locals(x: torch.Tensor) -> torch.Tensor:
    for i in range(6):  # noqa: B007  (read through locals())
        x = torch.sin(x) * locals()["i"] + x
    return x


def fills_a_list(x: torch.Tensor) -> list[torch.Tensor]:
    seen = [x]
    for _ in range(6):
        x = torch.sin(x) * 2 + x
        seen.append(x)
    return seen


def writes_its_input(x: torch.Tensor) -> torch.Tensor:
    for _ in range(6):
        x.mul_(0.5).add_(torch.sin(x)).sub_(1)
    return x


def grows(x: torch.Tensor) -> torch.Tensor:
    for _ in range(4):
        x = torch.cat([torch.sin(x), x * 2]) + 1
    return x


@pytest.mark.parametrize(
    "fn", [reads_the_item, item_through_locals, fills_a_list, writes_its_input, grows]
)
def test_no_copy_where_a_step_differs(fn, differential, counting_backend) -> None:
    assert _copies(fn, (torch.randn(4),), differential, counting_backend) == 0


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(5):
            x = torch.relu(self.lin(x)) * 0.5 + x
            self.steps += 1  # a change to the module: no copy
        return x


class Steps(nn.Module):
    def __init__(self, count: int = 6) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.count = count

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.count):
            x = torch.relu(self.lin(x)) * 0.5 + x
        return x


def test_a_module_loop_copies_unless_it_changes_the_module(counting_backend) -> None:
    for kind, expected in ((Steps, 4), (Counter, 0)):
        torch.manual_seed(0)
        model, twin = kind(), kind()
        twin.load_state_dict(model.state_dict())
        fragments.STATS["reused"] = 0
        x = torch.randn(2, 4)
        torch.testing.assert_close(bytegraph.compile(twin, backend=counting_backend)(x),
                                   model(x), rtol=0, atol=0)
        assert vars(twin).get("steps") == vars(model).get("steps")
        assert fragments.STATS["reused"] == expected, kind


class OuterLoop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Steps(3) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            for block in self.blocks:  # a call recorded for reuse, its own loop inside
                x = block(x)
        return x


def test_loops_inside_calls_recorded_for_reuse(counting_backend) -> None:
    torch.manual_seed(0)
    model, twin = OuterLoop(), OuterLoop()
    twin.load_state_dict(model.state_dict())
    x = torch.randn(2, 4)
    config.reuse_fragments = False
    try:
        bytegraph.compile(copy.deepcopy(model), backend=counting_backend)(x)
    finally:
        config.reuse_fragments = True
    plain = _ops(counting_backend.graphs[-1])
    got = bytegraph.compile(twin, backend=counting_backend)(x)
    torch.testing.assert_close(got, model(x), rtol=0, atol=0)
    assert _ops(counting_backend.graphs[-1]) == plain
    assert fragments.STATS["reused"] > 0


def breaks_in_the_loop(x: torch.Tensor) -> torch.Tensor:
    for _ in range(8):
        x = torch.tanh(x) * 0.5 + x
    bytegraph.graph_break()
    for _ in range(8):
        x = torch.sin(x) * 0.5 + x
    return x


def test_a_graph_break_after_copied_steps_lands_where_it_did(
    differential, counting_backend
) -> None:
    assert _copies(breaks_in_the_loop, (torch.randn(4),), differential, counting_backend) >= 6
    assert counting_backend.calls == 2


def test_the_switch_turns_loop_copies_off(differential, counting_backend) -> None:
    config.reuse_fragments = False
    try:
        differential.check(residual_steps, differential.compile(residual_steps),
                           (torch.randn(4, 4), torch.randn(4, 4)))
    finally:
        config.reuse_fragments = True
    assert fragments.STATS["reused"] == 0
