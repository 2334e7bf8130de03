"""Operators of ``torch.ops`` in the trace: ATen's and custom ones, one graph node each.

``torch.ops.aten.<op>`` (a packet), ``torch.ops.aten.<op>.<overload>`` and a
``torch.library.custom_op`` function with a fake kernel compile into the graph
as torch.compile compiles them (before: each was a call of an unknown object,
a graph break; Dynamo's test_repros ``test_torch_ops_aten``). What an operator
writes comes from its schema; a custom op without a fake kernel, or one that
writes into an argument other than its first, is a break that says so.
"""

from __future__ import annotations

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph


@torch.library.custom_op("bytegraph_test::scale", mutates_args=())
def scale(x: torch.Tensor, k: float) -> torch.Tensor:
    return x * k


@scale.register_fake
def _(x, k):
    return torch.empty_like(x)


@torch.library.custom_op("bytegraph_test::bump", mutates_args=("x",))
def bump(x: torch.Tensor) -> None:
    x.add_(1)


@bump.register_fake
def _(x):
    return None


@torch.library.custom_op("bytegraph_test::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@torch.library.custom_op("bytegraph_test::add_into", mutates_args=("out_arg",))
def add_into(x: torch.Tensor, out_arg: torch.Tensor) -> None:
    out_arg.add_(x)


@add_into.register_fake
def _(x, out_arg):
    return None


corpus = Corpus()
add = corpus.add


def x_only() -> tuple:
    return (randn(3, 4),)


@add(x_only)
def aten_packets(x):
    return torch.ops.aten.absolute(x) + torch.ops.aten.sin(x)


@add(x_only)
def aten_overloads(x):
    return torch.ops.aten.add.Tensor(x, x) + torch.ops.aten.relu.default(x)


@add(x_only)
def aten_in_place_on_input(x):
    torch.ops.aten.add_.Tensor(x, 1)
    torch.ops.aten.mul_(x, 2)
    return x.sum()


@add(x_only)
def custom_op_every_spelling(x):
    return scale(x, 2.0) + torch.ops.bytegraph_test.scale(x, 3.0) + (
        torch.ops.bytegraph_test.scale.default(x, 0.5)
    )


@add(x_only)
def custom_op_writing_its_first_argument(x):
    bump(x)
    torch.ops.bytegraph_test.bump(x)
    return x * 2


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_operator_program(prog, differential, counting_backend):
    check_program(prog, differential, counting_backend)


@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
def test_custom_ops_under_aot_and_dynamic_shapes(backend):
    def f(x):
        y = x.clone()
        bump(y)
        return scale(y, 3.0) + torch.ops.aten.absolute(x)

    compiled = bytegraph.compile(f, backend=backend, dynamic=backend == "eager")
    for rows in (3, 5):
        x = torch.randn(rows, 2)
        torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)


def _first_break(fn, *args) -> str:
    report = bytegraph.explain(fn)(*args)
    return str(report.break_reasons[0].reason)


def test_custom_op_without_fake_kernel_breaks_with_its_reason():
    def f(x):
        return no_fake(x * 2) - 1

    x = torch.randn(3)
    torch.testing.assert_close(bytegraph.compile(f, backend="eager")(x), f(x))
    reason = _first_break(f, x)
    assert "no_fake" in reason and "torch.library.register_fake" in reason


def test_custom_op_writing_another_argument_breaks():
    def f(x):
        total = torch.zeros(3)
        add_into(x, total)
        return total + 1

    x = torch.randn(3)
    torch.testing.assert_close(bytegraph.compile(f, backend="eager")(x), f(x))
    assert "writes into its argument(s) out_arg" in _first_break(f, x)
