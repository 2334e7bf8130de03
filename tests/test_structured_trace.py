"""Structured traces (BYTEGRAPH_TRACE / config.trace_dir) in the format tlparse renders."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import warnings

import pytest
import torch
from source_lines import line_of

import bytegraph
from bytegraph import config
from bytegraph.inspect import structured_trace

THIS_FILE = os.path.abspath(__file__)
GLOG = re.compile(r"^V\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^:]+:\d+\] (?P<json>\{.*\})$")


def helper(x):
    print("from helper")
    return x.cos()


def traced_program(x, n):
    y = x.sin() + n
    z = helper(y)
    return z * 2


def prints_in_fullgraph(x):
    print("refused")
    return x + 1


def shape_specialised(x):
    return x.relu() * x.shape[0]


@pytest.fixture
def trace_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "trace_dir", str(tmp_path / "trace"))
    return tmp_path / "trace"


def read_records(folder) -> list[tuple[dict, str | None]]:
    """(envelope, payload) of every record of the one log in ``folder``, checking the format."""
    (log,) = os.listdir(folder)
    assert log.startswith(f"bytegraph_trace_{os.getpid()}_") and log.endswith(".log")
    records: list[tuple[dict, str | None]] = []
    lines = (folder / log).read_text().split("\n")
    assert lines[-1] == ""
    for line in lines[:-1]:
        if line.startswith("\t"):
            envelope, payload = records[-1]
            payload = line[1:] if payload is None else payload + "\n" + line[1:]
            records[-1] = (envelope, payload)
            continue
        match = GLOG.match(line)
        assert match, line
        records.append((json.loads(match["json"]), None))
    for envelope, payload in records:
        if "has_payload" in envelope:  # tlparse checks the md5 of the payload lines
            assert hashlib.md5(payload.encode()).hexdigest() == envelope["has_payload"]
    return records


def events(records, name: str) -> list[tuple[dict, str | None]]:
    return [(e, p) for e, p in records if name in e]


def compile_id(envelope: dict) -> tuple[int, int]:
    return envelope["frame_id"], envelope["frame_compile_id"]


def run_program(capsys) -> list[torch.Tensor]:
    compiled = bytegraph.compile(traced_program, backend="eager")
    inputs = [torch.randn(3), torch.randn(4, 2)]
    for x in inputs:
        assert torch.allclose(compiled(x.clone(), 1), traced_program(x.clone(), 1))
    assert capsys.readouterr().out == "from helper\n" * 4  # compiled, then eager, each call
    return inputs


def test_trace_records_frames_graphs_guards_breaks_recompiles(trace_dir, capsys) -> None:
    run_program(capsys)
    records = read_records(trace_dir)
    strings = {e["str"][1]: e["str"][0] for e, _ in records if "str" in e}

    starts = events(records, "dynamo_start")
    first = starts[0][0]
    root = (first["frame_id"], 0)
    assert compile_id(first) == root
    *callers, frame = first["dynamo_start"]["stack"]
    assert (frame["name"], frame["line"]) == ("traced_program", line_of(traced_program, "def "))
    assert strings[frame["filename"]] == THIS_FILE
    assert callers[-1]["name"] == "run_program"  # the user's stack, bytegraph's frames left out
    assert "compiled(x.clone(), 1)" in callers[-1]["loc"]
    assert not any(strings[f["filename"]].startswith(os.path.dirname(bytegraph.__file__))
                   for f in first["dynamo_start"]["stack"])
    # The function compiled twice (a new shape); its resume function and helper are frames too.
    ids = [compile_id(e) for e, _ in starts]
    assert ids.count(root) == 1 and (root[0], 1) in ids
    assert len({frame_id for frame_id, _ in ids}) >= 3

    graphs = [p for e, p in events(records, "dynamo_output_graph") if compile_id(e) == root]
    assert len(graphs) == 1 and "sin" in graphs[0] and "class GraphModule" in graphs[0]

    (guards,) = [p for e, p in events(records, "dynamo_guards") if compile_id(e) == root]
    codes = [g["code"] for g in json.loads(guards)]
    assert "x.shape == (3,)" in codes and "n == 1" in codes

    artifacts = {
        (e["artifact"]["name"], compile_id(e)): p for e, p in events(records, "artifact")
    }
    reason = artifacts[("dynamo_graph_break_reason", root)]
    assert "[B109 print_or_logging]" in reason
    assert f"{THIS_FILE}:{line_of(helper, 'print(')} in helper" in reason
    assert 'print("from helper")' in reason
    assert f"inlined from {THIS_FILE}:{line_of(traced_program, 'helper(y)')}" in reason
    assert "LOAD_CONST" in artifacts[("bytegraph_transformed_code", root)]
    (recompile,) = json.loads(artifacts[("recompile_reasons", (root[0], 1))])
    assert recompile.startswith("x.shape == (3,)") and "torch.Size([4, 2])" in recompile

    metrics = {
        compile_id(e): e["compilation_metrics"] for e, _ in events(records, "compilation_metrics")
    }
    assert set(metrics) == set(ids)
    m0, m1 = metrics[root], metrics[(root[0], 1)]
    assert m0["co_name"] == "traced_program" and m0["co_filename"] == THIS_FILE
    assert (m0["cache_size"], m1["cache_size"]) == (1, 2)
    assert m1["accumulated_cache_size"] > m0["accumulated_cache_size"]
    assert m0["graph_op_count"] == 2 and m0["guard_count"] == len(codes)
    assert m0["restart_reasons"] == [
        "B109 print_or_logging: call of builtins.print (reorderable_logging is off) "
        f"({THIS_FILE}:{line_of(helper, 'print(')})"
    ]
    assert m1["recompile_reason"] == recompile and m0["recompile_reason"] is None
    assert m0["entire_frame_compile_time_s"] > 0


def test_fullgraph_error_and_recompile_limit_are_failures(trace_dir, monkeypatch) -> None:
    compiled = bytegraph.compile(prints_in_fullgraph, backend="eager", fullgraph=True)
    with pytest.raises(bytegraph.Unsupported):
        compiled(torch.randn(2))
    monkeypatch.setattr(config, "recompile_limit", 1)
    limited = bytegraph.compile(shape_specialised, backend="eager", dynamic=False)
    for size in (2, 3):
        x = torch.randn(size)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            assert torch.equal(limited(x), shape_specialised(x))
    records = read_records(trace_dir)
    metrics = [e["compilation_metrics"] for e, _ in events(records, "compilation_metrics")]
    failed, ok, limit = metrics
    assert failed["fail_type"] == "Unsupported B109 print_or_logging"
    assert failed["fail_user_frame_filename"] == THIS_FILE
    assert failed["fail_user_frame_lineno"] == line_of(prints_in_fullgraph, "print(")
    assert "fail_type" not in ok and ok["co_name"] == "shape_specialised"
    assert limit["fail_type"] == "RecompileLimit" and "x.shape == (2,)" in limit["fail_reason"]


def test_off_makes_no_record(monkeypatch) -> None:
    monkeypatch.setattr(config, "trace_dir", None)

    def refuse(*args, **kwargs):
        raise AssertionError("a trace record was made with tracing off")

    monkeypatch.setattr(structured_trace.CompileTrace, "__init__", refuse)
    compiled = bytegraph.compile(traced_program, backend="eager")
    x = torch.randn(3)
    assert torch.allclose(compiled(x, 2), traced_program(x, 2))
    assert len(compiled.entries) == 1


def _tlparse() -> str | None:
    beside = os.path.join(os.path.dirname(sys.executable), "tlparse")
    return beside if os.path.exists(beside) else shutil.which("tlparse")


def _text(path) -> str:
    """An HTML page's text, tags and entities gone."""
    import html

    page = re.sub(r"<(style|script)>.*?</\1>", "", path.read_text(), flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_tlparse_renders_the_trace(trace_dir, tmp_path, capsys) -> None:
    tlparse = _tlparse()
    if tlparse is None:
        pytest.skip("tlparse is not installed (pip install tlparse, part of the test extra)")
    run_program(capsys)
    (log,) = trace_dir.iterdir()
    out = tmp_path / "report"
    done = subprocess.run(
        [tlparse, str(log), "-o", str(out), "--no-browser", "--strict"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    index = _text(out / "index.html")
    # Frames: the stack trie ends in the compiled function, the caller's line shown.
    assert f"{THIS_FILE}:{line_of(traced_program, 'def ')} in traced_program" in index
    assert "compiled(x.clone(), 1)" in index
    assert "in traced_program.<resume" in index  # a resume function is a frame of its own
    # Graphs, guards, breaks and recompiles are listed per compile id.
    for product in ("dynamo_output_graph", "dynamo_guards", "dynamo_graph_break_reason",
                    "recompile_reasons", "compilation_metrics"):
        assert product in index
    assert re.search(r"This run had \d+ restart\(s\)", index)
    breaks = _text(out / "failures_and_restarts.html")
    assert "B109 print_or_logging: call of builtins.print" in breaks
    assert f"{THIS_FILE}:{line_of(helper, 'print(')}" in breaks
