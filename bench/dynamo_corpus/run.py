"""Run the Dynamo-test corpus on eager, bytegraph and torch.compile; summarize by family.

    python -m bench.dynamo_corpus.run                       # the whole corpus, 2 workers
    python -m bench.dynamo_corpus.run --family numpy --jobs 2 --json out.json
    python -m bench.dynamo_corpus.run --test test_misc::test_numpy_int_constant
    python -m bench.dynamo_corpus.run --json after.json --baseline bench/dynamo_corpus/baseline.json
    python -m bench.dynamo_corpus.run --report bench/dynamo_corpus/baseline.json   # no run
    python -m bench.dynamo_corpus.run --bytegraph-root /work/wt-base --json before.json

Each program is a call that one of Dynamo's own tests made to an optimized
function (see ``source.py`` for where the tests come from and ``worker.py`` for
how a call becomes a program). Outcomes per system, compared with eager:
pass, wrong (a different result or state, or returned where eager raised),
error (raised differently than eager), internal (the compiler's own error
reached the user), timeout, crash. The key figure is ``torch>0 bg=0``: programs
where torch.compile compiles at least one graph and bytegraph none.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.dynamo_corpus import source
from bench.dynamo_corpus.pool import WorkerPool

HERE = Path(__file__).resolve().parent
BAD = ("wrong", "error", "internal", "timeout", "crash", "harness")


def program_id(ref: source.TestRef, call: int, shared: set[tuple[str, str]]) -> str:
    """``file::test[#call]``; ``file::Class.test[#call]`` where classes share a test name."""
    test = f"{ref.cls}.{ref.name}" if (ref.file, ref.name) in shared else ref.name
    return f"{ref.file}::{test}" + (f"#{call}" if call else "")


def select(refs: list[source.TestRef], args: argparse.Namespace) -> list[source.TestRef]:
    if args.family:
        refs = [r for r in refs if r.family in args.family.split(",")]
    if args.test:
        refs = [r for r in refs if any(
            f"{r.file}::{r.name}".startswith(t.split("#")[0])
            or f"{r.file}::{r.cls}.{r.name}".startswith(t.split("#")[0]) for t in args.test
        )]
    return refs


def measure(args: argparse.Namespace) -> dict[str, Any]:
    src = args.source
    refs = select(source.all_tests(src, args.newer), args)
    skipped = collections.Counter(r.skip for r in refs if r.skip)
    candidates = [r for r in refs if not r.skip]
    root = str(Path(args.bytegraph_root).resolve()) if args.bytegraph_root else None
    if root:
        sys.path.insert(0, root)
    log = args.log or os.path.join(tempfile.gettempdir(), f"dynamo_corpus_{os.getpid()}.log")
    started = time.perf_counter()
    with WorkerPool(args.jobs, args.timeout, root, log) as pool:
        found = pool.map([("discover", r) for r in candidates])
        programs = []
        for ref, answer in zip(candidates, found):
            if answer["skip"]:
                skipped[answer["skip"].split(":")[0]] += 1
            programs += [(ref, call) for call in answer["calls"]]
        print(f"{len(programs)} programs from {len(candidates)} tests "
              f"({sum(skipped.values())} tests skipped); running...", file=sys.stderr)
        count = [0]

        def progress() -> None:
            count[0] += 1
            if count[0] % 50 == 0:
                print(f"  {count[0]}/{len(programs)}", file=sys.stderr)

        outcomes = pool.map([("run", ref, call) for ref, call in programs], progress)
        bytegraph_file = pool.bytegraph_file
    names = collections.Counter((r.file, r.name) for r in source.all_tests(src, args.newer))
    shared = {key for key, count in names.items() if count > 1}
    rows = []
    for (ref, call), result in zip(programs, outcomes):
        eager = result.get("eager", {"outcome": "crash", "detail": "no answer"})
        if eager["outcome"] == "skip":
            skipped["eager: " + eager["detail"].split(":")[0]] += 1
            continue
        row = {"id": program_id(ref, call, shared), "family": ref.family, "eager": eager}
        for system in ("bytegraph", "torch"):
            row[system] = result.get(system) or {
                "outcome": eager["outcome"], "detail": eager.get("detail", ""), "graphs": 0,
                "break": "",
            }
        rows.append(row)
    return {
        "meta": {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "bytegraph": bytegraph_file,
            "bytegraph_commit": git_commit(Path(bytegraph_file).parent.parent),
            "source_commit": source.SNAPSHOT_COMMIT,
            "torch": torch_version(),
            "timeout_s": args.timeout,
            "seconds": round(time.perf_counter() - started, 1),
            "log": log,
        },
        "skipped": dict(skipped.most_common()),
        "programs": rows,
    }


def dump(data: dict[str, Any]) -> str:
    """The results as JSON, one program a line (diffs of two runs stay readable)."""
    def lean(row: dict) -> dict:  # empty details and breaks left out (readers default them)
        return {k: ({f: v for f, v in o.items() if v != ""} if isinstance(o, dict) else o)
                for k, o in row.items()}

    programs = ",\n".join("  " + json.dumps(lean(row)) for row in data["programs"])
    return (f'{{\n "meta": {json.dumps(data["meta"])},\n "skipped": {json.dumps(data["skipped"])},'
            f'\n "programs": [\n{programs}\n ]\n}}\n')


def git_commit(directory: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def torch_version() -> str:
    from importlib.metadata import version

    return version("torch")


def misses_graph(row: dict) -> bool:
    """torch.compile compiled at least one graph, bytegraph none."""
    return row["torch"].get("graphs", 0) > 0 and row["bytegraph"].get("graphs", 0) == 0


def tally(rows: list[dict]) -> dict[str, collections.Counter]:
    """family -> counter of figures (and the 'all' row)."""
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in rows:
        for family in (row["family"], "all"):
            t = table[family]
            t["programs"] += 1
            for system, tag in (("bytegraph", "bg"), ("torch", "tc")):
                t[f"{tag} {row[system]['outcome']}"] += 1
                t[f"{tag} graphs>0"] += row[system].get("graphs", 0) > 0
            t["tc>0 bg=0"] += misses_graph(row)
    return table


COLUMNS = ("programs", "bg pass", "bg wrong", "bg error", "bg internal", "bg timeout",
           "tc pass", "tc wrong", "tc error", "tc internal", "tc timeout",
           "bg graphs>0", "tc graphs>0", "tc>0 bg=0")


def print_table(data: dict[str, Any]) -> None:
    table = tally(data["programs"])
    families = sorted((f for f in table if f != "all"), key=lambda f: -table[f]["programs"])
    width = max([len(f) for f in families] + [6])
    print(" " * width + " " + " ".join(f"{c:>11}" for c in COLUMNS))
    for family in [*families, "all"]:
        t = table[family]
        print(f"{family:<{width}} " + " ".join(f"{t[c]:>11}" for c in COLUMNS))


def print_lists(data: dict[str, Any]) -> None:
    rows = data["programs"]
    print(f"\nskipped tests (reason: count): {data['skipped']}")
    for outcome in ("wrong", "internal", "error", "timeout", "crash", "harness"):
        bad = [r for r in rows if r["bytegraph"]["outcome"] == outcome]
        if bad:
            print(f"\nbytegraph {outcome} ({len(bad)}):")
            for r in bad:
                print(f"  {r['id']} [{r['family']}]: {r['bytegraph'].get('detail', '')[:160]}")
    missing = [r for r in rows if misses_graph(r)]
    print(f"\ntorch.compile compiles >= 1 graph, bytegraph none ({len(missing)}):")
    for r in missing:
        reason = r["bytegraph"].get("break") or f"({r['bytegraph']['outcome']}, no break recorded)"
        print(f"  {r['id']} [{r['family']}] (tc {r['torch']['graphs']}): {reason[:150]}")


def print_comparison(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Before/after by family: the key figure, wrong and internal of bytegraph."""
    old, new = tally(before["programs"]), tally(after["programs"])
    families = sorted({*old, *new} - {"all"}) + ["all"]
    figures = ("programs", "tc>0 bg=0", "bg wrong", "bg internal", "bg error", "bg pass")
    print(f"\nbefore ({before['meta']['bytegraph_commit']}) -> after "
          f"({after['meta']['bytegraph_commit']})")
    print(" " * 12 + "".join(f"{f:>16}" for f in figures))
    for family in families:
        cells = "".join(f"{f'{old[family][f]} -> {new[family][f]}':>16}" for f in figures)
        print(f"{family:<12}{cells}")
    was = {r["id"]: r for r in before["programs"]}
    for r in after["programs"]:
        prior = was.get(r["id"])
        now = r["bytegraph"]["outcome"]
        if prior and prior["bytegraph"]["outcome"] == "pass" and now != "pass":
            print(f"  regression: {r['id']}: {r['bytegraph']['outcome']} "
                  f"{r['bytegraph'].get('detail', '')[:120]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", help="comma-separated families to run")
    parser.add_argument("--test", action="append", help="file::test (prefix) to run; repeatable")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per program")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--baseline", help="a results JSON to compare with")
    parser.add_argument("--report", help="print the summary of a results JSON; run nothing")
    parser.add_argument("--bytegraph-root", help="import bytegraph from this checkout")
    parser.add_argument("--source", default=source.source_dir(),
                        help="the torchdynamo snapshot: a git dir or checkout")
    parser.add_argument("--newer", default=source.newer_dir(),
                        help="a directory with test/dynamo/ files from PyTorch (generators, "
                             "sets, exceptions); '' for none")
    parser.add_argument("--log", help="where the workers' stdout and stderr go")
    args = parser.parse_args(argv)
    if args.report:
        data = json.loads(Path(args.report).read_text())
    else:
        data = measure(args)
        if args.json:
            Path(args.json).write_text(dump(data))
    meta = data["meta"]
    print(f"bytegraph {meta['bytegraph_commit']} ({meta['bytegraph']}), torch {meta['torch']}, "
          f"{len(data['programs'])} programs, {meta['seconds']} s")
    print_table(data)
    print_lists(data)
    if args.baseline:
        print_comparison(json.loads(Path(args.baseline).read_text()), data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
