"""The higher-order-op corpus (bench/hop_programs) under bytegraph and torch.compile, side by side.

    python bench/hop_corpus.py [--only NAME...] [--json bench/hop_corpus_latest.json]

Each program runs eagerly, then under bytegraph and under torch.compile, each
with a counting backend that runs its graphs as they are (``eager``), so the
comparison is of capture, not of a compiler. Per program and system: the
outcome (``pass``: outputs, gradients and inputs after the call equal to
eager's, or the same exception; ``wrong``: they differ; ``error``: raised where
eager did not; ``internal``: a bytegraph bug), graphs, graph breaks, ops (fx
call nodes of the top-level graphs) and ops_all (also the call nodes of every
subgraph installed in them: the bodies of cond, map, checkpoint, torch.func
transforms, invoke_subgraph...). The summary names the programs where
torch.compile compiles a graph and bytegraph none, and every wrong result.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.counting import CountingBackend  # noqa: E402
from bench.hop_programs import HopProgram, load  # noqa: E402
from bench.hop_programs.run import Observed, compare, observe  # noqa: E402


def outcome(actual: Observed, expected: Observed) -> tuple[str, str | None]:
    difference = compare(actual, expected)
    if difference is None:
        return "pass", None
    from bytegraph.exc import InternalError

    if isinstance(actual.error, InternalError):
        return "internal", difference
    if actual.error is not None and expected.error is None:
        return "error", difference
    return "wrong", difference


def run_bytegraph(prog: HopProgram, expected: Observed) -> dict[str, Any]:
    import bytegraph
    from bytegraph.inspect.explain import report_of
    from bytegraph.inspect.recording import Recording

    bytegraph.reset()
    backend = CountingBackend()
    with Recording() as recording:
        actual = observe(prog, bytegraph.compile(prog.fn, backend=backend))
    report = report_of(recording)
    row = _row(actual, expected, backend)
    row["breaks"] = report.graph_break_count
    row["break_reasons"] = sorted({b.reason.splitlines()[0][:200] for b in report.breaks})
    return row


def run_torch(prog: HopProgram, expected: Observed) -> dict[str, Any]:
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    backend = CountingBackend()
    actual = observe(prog, torch.compile(prog.fn, backend=backend))
    row = _row(actual, expected, backend)
    row["breaks"] = sum(counters["graph_break"].values())
    row["break_reasons"] = sorted(r.splitlines()[0][:200] for r in counters["graph_break"])
    return row


def _row(actual: Observed, expected: Observed, backend: CountingBackend) -> dict[str, Any]:
    kind, difference = outcome(actual, expected)
    row: dict[str, Any] = {
        "outcome": kind, "graphs": len(backend.graphs),
        "ops": backend.ops,
        "ops_all": backend.ops_all,
    }
    if difference is not None:
        row["difference"] = difference
    return row


def measure(prog: HopProgram) -> dict[str, Any]:
    expected = observe(prog, prog.fn)
    row: dict[str, Any] = {"name": prog.name, "origin": prog.origin,
                           "family": prog.fn.__module__.rsplit(".", 1)[-1]}
    for system, run in (("bytegraph", run_bytegraph), ("torch", run_torch)):
        started = time.perf_counter()
        try:
            row[system] = run(prog, expected)
        except Exception as error:  # noqa: BLE001  (the harness itself failed on this program)
            row[system] = {"outcome": "harness", "difference": f"{type(error).__name__}: {error}"}
        row[system]["seconds"] = round(time.perf_counter() - started, 3)
    return row


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def total(system: str, key: str) -> int:
        return sum(r[system].get(key, 0) for r in rows)

    summary: dict[str, Any] = {"programs": len(rows)}
    for system in ("bytegraph", "torch"):
        summary[system] = {
            "outcomes": dict(collections.Counter(r[system]["outcome"] for r in rows)),
            "graphs": total(system, "graphs"), "breaks": total(system, "breaks"),
            "ops": total(system, "ops"), "ops_all": total(system, "ops_all"),
            "no_graph": sum(1 for r in rows if r[system].get("graphs", 0) == 0),
        }
    summary["tc_graph_bg_none"] = [r["name"] for r in rows
                                   if r["torch"].get("graphs", 0) > 0
                                   and r["bytegraph"].get("graphs", 0) == 0]
    summary["bg_wrong"] = [r["name"] for r in rows if r["bytegraph"]["outcome"] == "wrong"]
    summary["tc_wrong"] = [r["name"] for r in rows if r["torch"]["outcome"] == "wrong"]
    summary["bg_not_pass"] = [r["name"] for r in rows if r["bytegraph"]["outcome"] != "pass"]
    summary["tc_not_pass"] = [r["name"] for r in rows if r["torch"]["outcome"] != "pass"]
    return summary


def print_table(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    print(f"{'program':44} {'family':22} {'bytegraph':>22} {'torch.compile':>22}")
    for r in rows:
        cells = [f"{r[s]['outcome']} g{r[s].get('graphs', '-')} b{r[s].get('breaks', '-')}"
                 for s in ("bytegraph", "torch")]
        flag = "  <- tc>0 bg=0" if r["name"] in summary["tc_graph_bg_none"] else ""
        print(f"{r['name']:44} {r['family']:22} {cells[0]:>22} {cells[1]:>22}{flag}")
    print()
    for system in ("bytegraph", "torch"):
        s = summary[system]
        print(f"{system:10} outcomes {s['outcomes']} graphs {s['graphs']} breaks {s['breaks']} "
              f"no-graph {s['no_graph']} ops {s['ops']} ops incl. bodies {s['ops_all']}")
    print(f"tc>0 bg=0: {len(summary['tc_graph_bg_none'])} {summary['tc_graph_bg_none']}")
    print(f"bytegraph wrong: {len(summary['bg_wrong'])} {summary['bg_wrong']}")
    print(f"torch.compile wrong: {len(summary['tc_wrong'])} {summary['tc_wrong']}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="program names")
    parser.add_argument("--json", default=None, help="write the rows and summary here")
    args = parser.parse_args(argv)
    import bytegraph

    bytegraph.config.strict = True  # an internal error is an outcome, not a silent fallback
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    programs = [p for p in load() if args.only is None or p.name in args.only]
    rows = [measure(p) for p in programs]
    summary = summarize(rows)
    print_table(rows, summary)
    result = {"torch": torch.__version__, "summary": summary, "programs": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


if __name__ == "__main__":
    main()
