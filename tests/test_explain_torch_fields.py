"""explain() speaks torch._dynamo.explain's dialect: a script written for torch's report runs
unchanged on bytegraph's.

``summarize`` below is such a script: it reads only the fields torch's
``ExplainOutput`` has (``graphs``, ``graph_count``, ``graph_break_count``,
``break_reasons`` with ``.reason`` and ``.user_stack`` of
``traceback.FrameSummary``, ``op_count``, ``ops_per_graph``, ``out_guards``,
``compile_times``). It runs on torch's report and on bytegraph's for the same
programs, and where the two capture the same graphs they must agree: graph
and break counts, and every break's user stack (file, line, function, source
line; outermost caller first). Op counts differ by design: torch counts
``call_function`` nodes only, bytegraph counts method calls too. Each program
also runs compiled and eager, with equal results.
"""

from __future__ import annotations

import traceback

import pytest
import torch

import bytegraph


def helper(t):
    print("in helper")
    return t.cos()


def one_break(x):
    y = x.sin() + 1
    print("one break")
    return y * 2


def inlined_break(x):
    y = helper(x * 3)
    return y.exp()


def data_dependent(x):
    y = x.sin()
    if y.sum() > 0:
        return y * 2
    return y - 1


def summarize(explanation) -> dict:
    """What a user's script written against torch._dynamo.explain might collect."""
    sites = [
        [(f.filename, f.lineno, f.name, f.line) for f in reason.user_stack]
        for reason in explanation.break_reasons
    ]
    assert all(isinstance(r.reason, str) and r.reason for r in explanation.break_reasons)
    assert all(isinstance(f, traceback.FrameSummary)
               for r in explanation.break_reasons for f in r.user_stack)
    assert isinstance(explanation.op_count, int)
    assert len(explanation.ops_per_graph) == len(explanation.graphs)
    assert all(isinstance(g, torch.fx.GraphModule) for g in explanation.graphs)
    assert all(str(guard) for guard in explanation.out_guards)
    assert isinstance(explanation.compile_times, str)
    text = str(explanation)
    assert str(explanation.graph_count) in text
    return {
        "graphs": explanation.graph_count,
        "breaks": explanation.graph_break_count,
        "sites": sites,
        "ops": explanation.op_count,
    }


@pytest.fixture
def torch_explain():
    dynamo = pytest.importorskip("torch._dynamo")
    dynamo.reset()
    yield dynamo.explain
    dynamo.reset()


@pytest.mark.parametrize("fn", [one_break, data_dependent], ids=lambda f: f.__name__)
def test_the_same_script_reads_both_reports(fn, torch_explain, differential) -> None:
    x = torch.ones(3)
    theirs = summarize(torch_explain(fn)(x.clone()))
    ours = summarize(bytegraph.explain(fn)(x.clone()))
    assert ours["graphs"] == theirs["graphs"] == 2
    assert ours["breaks"] == theirs["breaks"] == 1
    assert ours["sites"] == theirs["sites"]
    assert ours["ops"] >= theirs["ops"] > 0
    differential.check(fn, differential.compile(fn), (x,))


def test_an_inlined_break_has_the_same_user_stack(torch_explain, differential) -> None:
    x = torch.ones(3)
    theirs = summarize(torch_explain(inlined_break)(x.clone()))
    ours = summarize(bytegraph.explain(inlined_break)(x.clone()))
    assert ours["graphs"] == theirs["graphs"] == 3
    # Outermost first: the call in inlined_break, then the print in helper.
    assert ours["sites"][0] == theirs["sites"][0]
    assert [name for _, _, name, _ in ours["sites"][0]] == ["inlined_break", "helper"]
    differential.check(inlined_break, differential.compile(inlined_break), (x,))


def test_torch_fields_are_views_of_bytegraphs_own() -> None:
    out = bytegraph.explain(inlined_break)(torch.ones(3))
    assert out.op_count == sum(len(ops) for ops in out.ops_per_graph)
    assert len(out.break_reasons) == len(out.breaks) == out.graph_break_count
    for reason, brk in zip(out.break_reasons, out.breaks):
        assert reason.reason == brk.reason and reason.graph_break
        assert [(f.filename, f.lineno, f.name) for f in reason.user_stack] == [
            (f.filename, f.lineno, f.name) for f in reversed(brk.frames)
        ]
    assert out.out_guards == [line for block in out.guards for line in block.splitlines()]
    functions = {e.function for e in out.entries}
    assert all(name in out.compile_times for name in functions)
    assert out.compile_times.startswith("bytegraph compilation metrics:")
