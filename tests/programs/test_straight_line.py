"""The straight-line corpus, each program eager vs compiled, plus the seed example's graph.

For every program: one graph, outputs and inputs after the call equal to
eager (bit for bit, with strides and aliasing), and a second call on inputs
of the same metadata that hits the cache (no new graph, no new entry).
"""

from __future__ import annotations

import operator

import pytest
import torch
from straight_line import PROGRAMS, Program

import bytegraph

assert len(PROGRAMS) >= 45
assert len({p.name for p in PROGRAMS}) == len(PROGRAMS), "program names must be unique"


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_program_matches_eager_in_one_graph(prog: Program, differential, counting_backend) -> None:
    compiled = differential.compile(prog.fn)
    inputs = prog.make_inputs()
    differential.check(prog.fn, compiled, inputs)
    assert counting_backend.calls == 1, f"expected one graph, got {counting_backend.calls}"
    assert len(compiled.entries) == 1
    assert compiled.entries[0].graphs == (counting_backend.graphs[0],)

    differential.check(prog.fn, compiled, prog.make_inputs())  # new values, same metadata
    assert counting_backend.calls == 1, "the second call retraced instead of hitting the cache"
    assert len(compiled.entries) == 1


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_program_compiles_with_fullgraph(prog: Program, differential) -> None:
    """No graph break anywhere: one graph could also come from a break at the last line."""
    compiled = differential.compile(prog.fn, backend="eager", fullgraph=True)
    differential.check(prog.fn, compiled, prog.make_inputs())


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_program_matches_eager_with_aot_eager(prog: Program, differential) -> None:
    """The corpus crossed with AOTAutograd: functionalized graphs, mutations copied back."""
    compiled = differential.compile(prog.fn, backend="aot_eager")
    differential.check(prog.fn, compiled, prog.make_inputs(), exact=False)
    differential.check(prog.fn, compiled, prog.make_inputs(), exact=False)
    assert len(compiled.entries) == 1 and len(compiled.entries[0].graphs) == 1


def test_seed_example_graph_is_add_then_mul(differential, counting_backend) -> None:
    def f(x, y):
        z = x + y
        z = z * 2
        return z

    compiled = differential.compile(f)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    out = differential.check(f, compiled, (x, y))
    torch.testing.assert_close(out, (x + y) * 2, rtol=0, atol=0)
    (gm,) = counting_backend.graphs
    calls = [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]
    assert [n.target for n in calls] == [operator.add, operator.mul]
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 2
    add, mul = calls
    assert add.args == tuple(placeholders)
    assert mul.args == (add, 2)


def test_inplace_ops_stay_in_place_in_the_graph(differential, counting_backend) -> None:
    """``x += y`` must mutate the caller's tensor, not rebind a copy."""

    def f(x, y):
        x += y
        return y * 2

    compiled = differential.compile(f)
    x, y = torch.zeros(3), torch.ones(3)
    compiled(x, y)
    assert torch.equal(x, torch.ones(3))
    compiled(x, y)  # cache hit: still mutates
    assert torch.equal(x, torch.full((3,), 2.0))
    assert counting_backend.calls == 1


def test_bool_mask_index_has_data_dependent_shape(differential) -> None:
    """``x[x > 0]``'s shape depends on the values: the result must still be right."""

    def f(x):
        return x[x > 0] * 2

    compiled = differential.compile(f)
    differential.check(f, compiled, (torch.randn(4, 5),))
    entries = len(compiled.entries)
    differential.check(f, compiled, (torch.randn(4, 5),))  # a different count of positives
    assert len(compiled.entries) == entries


@pytest.mark.parametrize(
    ("expr", "error"),
    [("x.size(5)", IndexError), ("x.view(7, -1) * 2", RuntimeError), ("x @ x", RuntimeError)],
)
def test_program_that_raises_in_eager_raises_the_same(expr: str, error: type) -> None:
    namespace: dict = {"torch": torch}
    exec(f"def f(x):\n    y = x + 1\n    return {expr}, y", namespace)
    f = namespace["f"]
    x = torch.randn(3, 4)
    with pytest.raises(error) as eager:
        f(x)
    with pytest.raises(error) as compiled:
        bytegraph.compile(f, backend="eager")(x)
    assert str(compiled.value) == str(eager.value)
