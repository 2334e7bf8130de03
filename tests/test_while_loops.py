"""``while_loop(cond_fn, body_fn, carried_inputs)`` as one node (variables/while_loops.py).

Outputs equal eager's under each backend, one graph with ``fullgraph=True``,
the op in the graph; the forms left to Python break with their reason and
still compute eager's result.
"""

from __future__ import annotations

import pytest
import torch
from torch._higher_order_ops.while_loop import while_loop

import bytegraph
from tests.test_higher_order import BACKENDS, Counting, check, refused

# Positive (closes_over's loop adds |W| + 0.5, so (v * W).sum() grows and the loop ends)
# and drawn from its own generator: a global torch.randn(3) depended on what the test
# files imported before consumed of the global RNG, and some draws never ended the loop.
W = torch.rand(3, generator=torch.Generator().manual_seed(0)) + 0.25


def counter(x):
    return while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v.sin()), (torch.tensor(0), x))


def value_condition(x):
    return while_loop(lambda v: v.sum() < 10, lambda v: (v.abs() + 1,), (x,))


def closes_over(x, limit):
    def cond_fn(v):
        return (v * W).sum() < limit.sum()

    def body_fn(v):
        return (v + W.abs() + 0.5,)

    return while_loop(cond_fn, body_fn, [x])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", [counter, value_condition])
def test_while_loop_is_one_node(backend: str, program) -> None:
    counting = check(program, (torch.randn(3),), backend)
    assert torch.ops.higher_order.while_loop in counting.targets()


@pytest.mark.parametrize("start", [0.0, 100.0])
def test_data_decides_the_iterations_without_a_recompile(start: float) -> None:
    """A loop that runs several times and one that never runs (eager returns clones)."""
    counting = Counting("eager")
    compiled = bytegraph.compile(value_condition, backend=counting)
    for x in (torch.full((3,), start), torch.full((3,), start + 1.0)):
        (expected,), (got,) = value_condition(x), compiled(x)
        torch.testing.assert_close(got, expected)
        assert got is not x
    assert len(counting.graphs) == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_free_variables_are_passed_after_the_carried_values(backend: str) -> None:
    counting = check(closes_over, (torch.randn(3), torch.full((2,), 4.0)), backend)
    (graph,) = counting.graphs
    (node,) = [n for n in graph.graph.nodes if n.target is torch.ops.higher_order.while_loop]
    assert len(node.args[2]) == 1 and len(node.args[3]) >= 1


def grows(x):
    return while_loop(lambda v: v.abs().sum() < 100, lambda v: (torch.cat([v, v]),), (x,))


def python_condition(x):
    return while_loop(lambda v: False, lambda v: (v + 1,), (x,))


def int_carry(x):
    return while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v.sin()), (0, x))


@pytest.mark.parametrize("program, reason", [
    (grows, "changes a carried value's shape"),
    (python_condition, "Python value"),
    (int_carry, "carried_inputs must be a tuple or list of tensors"),
])
def test_forms_left_to_python_say_why(program, reason: str) -> None:
    error = refused(program, torch.randn(2))
    assert reason in error.detail


def test_grad_is_left_to_python_and_equals_eager() -> None:
    x = torch.randn(3, requires_grad=True)
    error = refused(value_condition, x)
    assert "requires grad" in error.detail
    counting = Counting("eager")
    (got,) = bytegraph.compile(value_condition, backend=counting)(x)
    (expected,) = value_condition(x)
    torch.testing.assert_close(got, expected)
    with torch.no_grad():
        counting = check(value_condition, (x.detach(),), "eager")
    assert len(counting.graphs) == 1


def test_dynamic_shapes_one_graph_for_two_sizes() -> None:
    counting = Counting("aot_eager")
    compiled = bytegraph.compile(value_condition, backend=counting, dynamic=True)
    for n in (3, 5):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x)[0], value_condition(x)[0])
    assert len(counting.graphs) == 1


def writes_its_carry(x):
    def body_fn(v):
        v.add_(1)
        return (v * 1,)

    return while_loop(lambda v: v.sum() < 10, body_fn, (x,))


def test_in_place_write_to_a_carried_value_is_left_to_python() -> None:
    error = refused(writes_its_carry, torch.zeros(3))
    assert error.entry.name == "side_effect_in_higher_order_body"


LIMIT = torch.tensor(5.0, requires_grad=True)


def condition_reads_a_grad_tensor(x):
    out = while_loop(lambda v: v.sum() < LIMIT, lambda v: (v.abs() + 1,), (x,))[0]
    return out * 2, out.requires_grad


def test_condition_closing_over_a_grad_tensor_is_left_to_python() -> None:
    """The op then runs its autograd form, whose outputs require grad, though the
    condition's bool does not."""
    error = refused(condition_reads_a_grad_tensor, torch.randn(3))
    assert "requires grad" in error.detail
    x = torch.randn(3)
    got = bytegraph.compile(condition_reads_a_grad_tensor, backend="aot_eager")(x)
    expected = condition_reads_a_grad_tensor(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] is expected[1] is True


def test_free_variable_computed_from_grad_free_inputs_is_captured() -> None:
    counting = check(closes_over, (torch.randn(3), torch.full((2,), 4.0)), "eager")
    assert torch.ops.higher_order.while_loop in counting.targets()
