"""torch.compiler.nested_compile_region: one invoke_subgraph node per call, the
subgraph shared by calls that trace the same code on the same input metadata."""

from __future__ import annotations

import pytest
import torch

import bytegraph
from tests.test_higher_order import BACKENDS, check

W = torch.randn(3, requires_grad=True)


@torch.compiler.nested_compile_region
def block(a, w, scale=1.0):
    return a.sin() * w * scale + 1


def three_calls(x):
    return block(block(x, W), W) + block(x * 2, W)


def calls_with_different_constants(x):
    return block(x, W, scale=2.0) + block(x, W, scale=3.0)


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return torch.relu(self.lin(x)) + x


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer() for _ in range(4))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def invoke_nodes(counting) -> list:
    return [n for g in counting.graphs for n in g.graph.nodes
            if n.target is torch.ops.higher_order.invoke_subgraph]


def subgraph_names(counting) -> set:
    return {n.args[1] for n in invoke_nodes(counting)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_region_called_three_times_in_inference_shares_one_subgraph(
    backend: str,
) -> None:
    with torch.no_grad():
        counting = check(three_calls, (torch.randn(3),), backend)
    assert len(invoke_nodes(counting)) == 3
    assert len(subgraph_names(counting)) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_differentiated_calls_are_inlined(backend: str) -> None:
    counting = check(three_calls, (torch.randn(3, requires_grad=True),), backend, params=(W,))
    assert invoke_nodes(counting) == []


def shared_then_trained(x):
    return block(block(x, W), W) + block(x * 2, W)


def test_inductor_backward_of_invoke_subgraph_is_wrong_in_torch() -> None:
    """Why differentiated calls are inlined: torch.compile's gradients are wrong here."""
    x = torch.randn(3)
    grads = []
    for run in (shared_then_trained, torch.compile(shared_then_trained, backend="inductor")):
        W.grad = None
        before = W.detach().clone()
        run(x.clone().requires_grad_()).sum().backward()
        grads.append(W.grad)
        with torch.no_grad():
            W.copy_(before)
    W.grad = None
    assert not torch.allclose(grads[0], grads[1])


def test_calls_tracing_different_code_do_not_share() -> None:
    with torch.no_grad():
        counting = check(calls_with_different_constants, (torch.randn(3),))
    assert len(invoke_nodes(counting)) == 2
    assert len(subgraph_names(counting)) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_layers_of_a_module_share_the_subgraph_of_their_forward(backend: str) -> None:
    torch.manual_seed(0)
    stack = Stack().eval()
    with torch.no_grad():
        counting = check(stack, (torch.randn(2, 4),), backend)
    assert len(invoke_nodes(counting)) == 4
    assert len(subgraph_names(counting)) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_a_stack_of_regions(backend: str) -> None:
    torch.manual_seed(0)
    stack = Stack()
    counting = check(stack, (torch.randn(2, 4, requires_grad=True),), backend,
                     params=tuple(stack.parameters()))
    assert invoke_nodes(counting) == []


SEEN: list = []


@torch.compiler.nested_compile_region
def appends(a):
    SEEN.append(1)
    return a * 2


def calls_a_region_with_a_side_effect(x):
    return appends(x) + 1


def test_region_with_a_side_effect_breaks_and_runs_as_python() -> None:
    x = torch.randn(3)
    SEEN.clear()
    expected = calls_a_region_with_a_side_effect(x)
    SEEN.clear()
    report = bytegraph.explain(calls_a_region_with_a_side_effect)(x)
    assert SEEN == [1]
    assert any("nested_compile_region" in b.reason for b in report.breaks)
    SEEN.clear()
    got = bytegraph.compile(calls_a_region_with_a_side_effect, backend="eager")(x)
    torch.testing.assert_close(got, expected)
    assert SEEN == [1]
