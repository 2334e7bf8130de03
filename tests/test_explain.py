"""explain(fn)(*args): graphs, breaks with their reasons and places, ops, guards, summary.

Every expected line number is computed from the source with ``inspect``
(``line_of``), never written as a literal, so editing this file cannot make
the tests lie.
"""

from __future__ import annotations

import os
import time

import torch
from source_lines import line_of, source_of

import bytegraph
from bytegraph.bytecode.compat import COMPARE_OP_TO_BOOL_BIT
from bytegraph.catalogue import CATALOGUE

THIS_FILE = os.path.abspath(__file__)


# --- programs -----------------------------------------------------------------------------


def no_break(x):
    y = x + 1
    return y * 2


def one_break(x):
    y = x + 1
    print("one break", y.shape)
    return y * 2


def two_breaks(x):
    y = x.sin()
    print("first")
    y = y.cos()
    bytegraph.graph_break()
    return y + 1


def helper_prints(t):
    print("in helper")
    return t - 1


def calls_helper(x):
    y = x * 3
    z = helper_prints(y)
    return z.exp()


def helper_depth_two(t):
    return helper_prints(t + 2) * 4


def calls_helper_depth_two(x):
    return helper_depth_two(x.neg()).sum()


def data_dependent(x):
    if x.sum() > 0:
        return x * 2
    return x * 3


def except_block(x):
    y = x * 2
    try:
        raise KeyError("k")
    except KeyError:
        bytegraph.graph_break()
        y = x
    return y


def calls_c_function(x):
    y = x + 1
    time.sleep(0)
    return y * 2


# --- tests ---------------------------------------------------------------------------------


def test_no_break_one_graph() -> None:
    out = bytegraph.explain(no_break)(torch.randn(3, 4))
    assert out.graph_count == 1
    assert out.graph_break_count == 0
    assert out.breaks == []
    assert len(out.graphs) == 1 and isinstance(out.graphs[0], torch.fx.GraphModule)
    assert out.ops_per_graph == [["operator.add", "operator.mul"]]
    assert len(out.guards) == 1  # one cache entry
    assert "x" in out.guards[0] and "(3, 4)" in out.guards[0]
    assert out.trace_seconds > 0
    text = str(out)
    assert "Graph count: 1" in text
    assert "Graph break count: 0" in text
    assert "Break reasons" not in text


def test_one_break(capsys) -> None:
    out = bytegraph.explain(one_break)(torch.randn(3, 4))
    assert capsys.readouterr().out == "one break torch.Size([3, 4])\n"  # ran once, really
    assert out.graph_count == 2
    assert out.graph_break_count == 1
    assert out.ops_per_graph == [["operator.add"], ["operator.mul"]]
    (brk,) = out.breaks
    assert brk.kind == "unsupported_call"
    assert brk.reason
    assert brk.hint == CATALOGUE["print_or_logging"].hint
    assert brk.entry == f"{CATALOGUE['print_or_logging'].id} print_or_logging"
    assert brk.ran_as_python is None
    (frame,) = brk.frames
    assert os.path.abspath(frame.filename) == THIS_FILE
    assert frame.lineno == line_of(one_break, "print(")
    assert frame.name == "one_break"
    assert frame.source_line == source_of(one_break, "print(")
    # Two cache entries: the function's (guarding x) and its resume function's
    # (guarding y, the tensor that crosses the break).
    assert len(out.guards) == 2
    root, resume = out.guards
    assert "x" in root and "(3, 4)" in root
    assert "y" in resume and "(3, 4)" in resume

    text = str(out)
    assert "Graph count: 2" in text
    assert "Graph break count: 1" in text
    assert f"{THIS_FILE}:{frame.lineno}" in text
    assert source_of(one_break, "print(") in text
    assert brk.reason in text
    assert f"[{brk.entry}, unsupported_call]" in text
    assert "operator.add" in text and "operator.mul" in text
    assert text.count("Guards of cache entry") == 2


def test_two_breaks_in_order() -> None:
    out = bytegraph.explain(two_breaks)(torch.randn(5))
    assert out.graph_count == 3
    assert out.graph_break_count == 2
    assert out.ops_per_graph == [["Tensor.sin"], ["Tensor.cos"], ["operator.add"]]
    first, second = out.breaks
    assert first.kind == "unsupported_call" and first.reason
    assert first.frames[0].lineno == line_of(two_breaks, 'print("first")')
    assert second.kind == "explicit"
    assert second.frames[0].lineno == line_of(two_breaks, "graph_break()")
    assert second.frames[0].source_line == "bytegraph.graph_break()"
    assert second.hint == CATALOGUE["explicit_graph_break"].hint
    assert len(out.guards) == 3
    text = str(out)
    for b in out.breaks:
        assert f"{THIS_FILE}:{b.frames[0].lineno}" in text
    assert text.index(first.reason) < text.index(second.reason)


def test_break_inside_helper_reports_the_chain_of_frames() -> None:
    out = bytegraph.explain(calls_helper)(torch.randn(3))
    # g1: mul; helper_prints compiled: print first (no graph), then sub; the root: exp.
    assert out.graph_count == 3
    assert out.ops_per_graph == [["operator.mul"], ["operator.sub"], ["Tensor.exp"]]
    assert out.graph_break_count >= 1
    brk = out.breaks[0]
    inner, outer = brk.frames
    assert (inner.name, inner.lineno) == ("helper_prints", line_of(helper_prints, "print("))
    assert inner.source_line == source_of(helper_prints, "print(")
    assert (outer.name, outer.lineno) == (
        "calls_helper", line_of(calls_helper, "helper_prints(y)")
    )
    assert outer.source_line == source_of(calls_helper, "helper_prints(y)")
    text = str(out)
    assert f"{THIS_FILE}:{inner.lineno} in helper_prints" in text
    assert f"inlined from {THIS_FILE}:{outer.lineno} in calls_helper" in text


def test_break_two_calls_deep() -> None:
    out = bytegraph.explain(calls_helper_depth_two)(torch.randn(3))
    # g1: neg; helper_depth_two compiled: add; helper_prints compiled: sub;
    # helper_depth_two resumes: mul; the root resumes: sum.
    assert out.graph_count == 5
    assert out.ops_per_graph == [
        ["Tensor.neg"], ["operator.add"], ["operator.sub"], ["operator.mul"], ["Tensor.sum"]
    ]
    names = [f.name for f in out.breaks[0].frames]
    lines = [f.lineno for f in out.breaks[0].frames]
    assert names == ["helper_prints", "helper_depth_two", "calls_helper_depth_two"]
    assert lines == [
        line_of(helper_prints, "print("),
        line_of(helper_depth_two, "helper_prints("),
        line_of(calls_helper_depth_two, "return helper_depth_two("),
    ]


def test_data_dependent_break() -> None:
    out = bytegraph.explain(data_dependent)(torch.ones(3))
    assert out.graph_count == 2
    # 3.13 compares and converts to bool in one COMPARE_OP, which runs with the jump in
    # Python (regions.truth_region); on 3.11/3.12 the comparison is in the graph.
    compared = [] if COMPARE_OP_TO_BOOL_BIT else ["operator.gt"]
    assert out.ops_per_graph == [["Tensor.sum", *compared], ["operator.mul"]]
    (brk,) = out.breaks
    assert brk.kind == "data_dependent"
    assert brk.frames[0].lineno == line_of(data_dependent, "if x.sum()")


def test_print_break_names_the_function() -> None:
    """The reason says what was called: a person must see it is ``print``."""
    out = bytegraph.explain(one_break)(torch.randn(3))
    assert "print" in out.breaks[0].reason, out.breaks[0].reason
    assert "print" in str(out)


def test_c_function_break_names_the_function() -> None:
    out = bytegraph.explain(calls_c_function)(torch.randn(2))
    assert out.graph_count == 2
    (brk,) = out.breaks
    assert brk.kind == "unsupported_call"
    assert "sleep" in brk.reason, brk.reason
    assert brk.frames[0].lineno == line_of(calls_c_function, "time.sleep(0)")


def test_frame_that_cannot_break_runs_as_python() -> None:
    out = bytegraph.explain(except_block)(torch.randn(3))
    assert out.graph_count == 0
    assert out.graph_break_count == 1
    (brk,) = out.breaks
    assert brk.kind == "explicit"
    assert brk.ran_as_python is not None and "except" in brk.ran_as_python
    assert brk.frames[0].lineno == line_of(except_block, "graph_break()")
    assert "ran as Python" in str(out)


def test_explain_a_module_with_a_break() -> None:
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            bytegraph.graph_break()
            return y.relu()

    out = bytegraph.explain(Net())(torch.randn(2, 4))
    assert out.graph_count == 2
    assert out.graph_break_count == 1
    assert out.ops_per_graph[1] == ["Tensor.relu"]
    assert out.breaks[0].frames[0].lineno == line_of(Net.forward, "graph_break()")


def test_explain_runs_the_function_once_per_call(capsys) -> None:
    report = bytegraph.explain(one_break)
    report(torch.randn(2))
    report(torch.randn(2))
    assert capsys.readouterr().out.count("one break") == 2


# --- compile time by stage ----------------------------------------------------------------


def _slow_backend(gm, example_inputs):
    time.sleep(0.02)
    return gm.forward


def test_each_entry_says_where_its_compile_time_went() -> None:
    """Stages in pipeline order, none longer than the compile; the backend's sleep lands in
    the backend stage, and a break's two entries have their own stages."""
    out = bytegraph.explain(one_break, backend=_slow_backend)(torch.randn(3))
    assert len(out.entries) == 2
    for entry in out.entries:
        stages = dict(entry.stage_seconds)
        assert list(stages) == ["translate", "graph", "backend", "codegen", "guards"]
        assert all(seconds >= 0 for seconds in stages.values())
        assert sum(stages.values()) <= entry.compile_seconds
        assert stages["backend"] >= 0.02
    totals = out.stage_seconds
    assert totals["backend"] == sum(dict(e.stage_seconds)["backend"] for e in out.entries)
    assert "Trace time by stage: translate " in str(out)


def test_an_entry_without_a_graph_has_no_graph_stages() -> None:
    def no_ops(x):
        return x

    out = bytegraph.explain(no_ops)(torch.randn(3))
    assert [stage for stage, _ in out.entries[0].stage_seconds] == ["translate", "guards"]


def test_stage_times_nest_and_stay_out_of_plain_calls() -> None:
    from bytegraph.translate import stage_times

    with stage_times.timed("translate"):  # no compile recorded: nothing kept, no error
        pass
    with stage_times.recording() as outer:
        with stage_times.recording() as inner, stage_times.timed("graph"):
            pass
        with stage_times.timed("guards"):
            pass
    assert list(inner) == ["graph"] and list(outer) == ["guards"]
    assert stage_times.ordered({"guards": 1.0, "translate": 2.0}) == (
        ("translate", 2.0), ("guards", 1.0))
