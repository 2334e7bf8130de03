"""Every transformers architecture, tiny and random, eager vs bytegraph vs torch.compile.

The sweep takes every ``model_type`` of transformers' ``MODEL_MAPPING_NAMES`` (with
``--causal-lm``, also each ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` class, as ``<type>:causal-lm``),
builds its base model from a shrunk default config with random weights (bench/zoo_models.py),
runs it eagerly on generic inputs, then under bytegraph and torch.compile with a counting
backend that runs the graphs as they are (bench/zoo_worker.py). Inference: ``eval()``,
``torch.no_grad()``, seeded. What cannot be built or run eagerly is "not built", with the
reason, and left out of the comparison.

Each model runs in one of ``--jobs`` long-lived worker processes (spawned once, recycled every
``--recycle`` models): a model still running after ``--timeout`` seconds is a "timeout" and its
worker is killed and replaced, a worker that dies marks its model "crashed". The parent keeps
what the worker reported before (eager facts, the systems that finished).

The JSON (``--out``) holds one row per architecture; the printed report has the totals, a
summary per family (from the task mappings the type appears in), the models where bytegraph
has more graphs or fewer ops than torch.compile, the failures, the recompiles and the most
common graph-break reasons (numbers, quoted names and the model's own class prefix stripped so
that the same cause aggregates across models). ``--report-only`` prints the report of a JSON.

Run: ``python bench/zoo.py [--jobs 2] [--timeout 240] [--only bert,gpt2] [--limit N]
[--causal-lm] [--out bench/zoo_latest.json]``; the worker log goes to ``<out>.log``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import platform
import subprocess
import sys
import time
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from bench.zoo_models import Architecture, architectures  # noqa: E402
from bench.zoo_report import report  # noqa: E402
from bench.zoo_worker import SYSTEMS, worker_main  # noqa: E402

STARTUP_SECONDS = 300.0


@dataclasses.dataclass(eq=False)
class Worker:
    process: BaseProcess
    conn: Connection
    started: float
    ready: bool = False
    row: dict[str, Any] | None = None
    deadline: float = 0.0
    done: int = 0


class Pool:
    """``jobs`` long-lived workers answering one architecture at a time."""

    def __init__(self, jobs: int, timeout: float, log: str, recycle: int,
                 systems: tuple[str, ...] = SYSTEMS) -> None:
        self.timeout, self.log, self.recycle, self.systems = timeout, log, recycle, systems
        self.context = multiprocessing.get_context("spawn")
        self.bytegraph_file = ""
        self.workers = [self.start() for _ in range(max(1, jobs))]

    def start(self) -> Worker:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=worker_main, args=(child, self.log, ROOT),
                                       daemon=True)
        process.start()
        child.close()
        now = time.monotonic()
        return Worker(process, parent, now, deadline=now + STARTUP_SECONDS)

    def replace(self, worker: Worker, kill: bool) -> None:
        if kill:
            worker.process.kill()
        else:
            worker.conn.send(None)
        worker.process.join(timeout=10)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()
        self.workers[self.workers.index(worker)] = self.start()

    def run(self, archs: list[Architecture], on_row: Any) -> None:
        pending = list(reversed(archs))
        while pending or any(w.row is not None for w in self.workers):
            for worker in self.workers:
                if worker.ready and worker.row is None and pending:
                    arch = pending.pop()
                    worker.row = {"name": arch.name, "family": arch.family,
                                  "class": arch.class_name}
                    worker.deadline = time.monotonic() + self.timeout
                    worker.conn.send({"arch": dataclasses.asdict(arch), "systems": self.systems})
            self.collect(on_row)

    def collect(self, on_row: Any) -> None:
        soonest = min(w.deadline for w in self.workers if w.row is not None or not w.ready)
        ready = wait([w.conn for w in self.workers], timeout=max(0.0, soonest - time.monotonic()))
        for worker in list(self.workers):
            if worker.conn in ready:
                self.receive(worker, on_row)
            elif time.monotonic() > worker.deadline and (worker.row is not None
                                                          or not worker.ready):
                self.fail(worker, "timeout", f"no answer within {self.timeout:g} s", on_row)

    def receive(self, worker: Worker, on_row: Any) -> None:
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            self.fail(worker, "crashed", f"worker died (exit code {worker.process.exitcode})",
                      on_row)
            return
        if message[0] == "ready":
            worker.ready, self.bytegraph_file = True, message[1]
        elif message[0] == "part" and worker.row is not None:
            worker.row[message[1]] = message[2]
        elif message[0] == "done" and worker.row is not None:
            row, worker.row = worker.row, None
            worker.done += 1
            on_row(row)
            if worker.done >= self.recycle:
                self.replace(worker, kill=False)

    def fail(self, worker: Worker, outcome: str, why: str, on_row: Any) -> None:
        row, worker.row = worker.row, None
        if row is None:
            if not worker.ready:
                raise RuntimeError(f"a zoo worker could not start: {why}")
        else:
            on_row(failed_row(row, outcome, why))
        self.replace(worker, kill=True)

    def close(self) -> None:
        for worker in self.workers:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        for worker in self.workers:
            worker.process.join(timeout=10)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()


def failed_row(row: dict[str, Any], outcome: str, why: str) -> dict[str, Any]:
    """A row whose worker timed out or died: the stage it was in gets the outcome."""
    row["outcome"] = outcome
    if row.get("status") != "built":
        row["status"], row["reason"] = "not built", f"{outcome} while building or in eager: {why}"
        return row
    for system in SYSTEMS:
        row.setdefault(system, {"ran": False, "error": {
            "type": outcome, "message": why, "kind": outcome, "where": ""}})
    return row


def select(opts: argparse.Namespace) -> list[Architecture]:
    wanted = [n.strip() for n in opts.only.split(",") if n.strip()]
    archs = architectures(opts.causal_lm or any(n.endswith(":causal-lm") for n in wanted))
    if wanted:
        by_name = {a.name: a for a in archs}
        unknown = [n for n in wanted if n not in by_name]
        if unknown:
            raise SystemExit(f"unknown model types: {', '.join(unknown)}")
        archs = [by_name[n] for n in wanted]
    return archs[: opts.limit] if opts.limit else archs


def write(path: str, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    ordered = sorted(rows, key=lambda r: r["name"])
    Path(path).write_text(json.dumps({"meta": meta, "rows": ordered}, indent=None,
                                     separators=(",", ":")) + "\n")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated model types")
    parser.add_argument("--limit", type=int, default=0, help="the first N architectures")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds per model")
    parser.add_argument("--recycle", type=int, default=40, help="models per worker process")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="systems to compare with eager ('' builds and runs eagerly only)")
    parser.add_argument("--causal-lm", action="store_true",
                        help="also each MODEL_FOR_CAUSAL_LM class, as <type>:causal-lm")
    parser.add_argument("--out", default=str(Path(ROOT) / "bench" / "zoo_latest.json"))
    parser.add_argument("--report-only", action="store_true", help="print --out's report")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    opts = parse(argv)
    if opts.report_only:
        report(json.loads(Path(opts.out).read_text())["rows"])
        return
    import torch
    import transformers

    transformers.logging.set_verbosity_error()  # default configs of sub-models warn
    archs = select(opts)
    meta = {"commit": _commit(), "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(), "jobs": opts.jobs, "timeout": opts.timeout,
            "models": len(archs), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    rows: list[dict[str, Any]] = []
    started = time.monotonic()

    def on_row(row: dict[str, Any]) -> None:
        rows.append(row)
        print(f"[{len(rows)}/{len(archs)} {time.monotonic() - started:.0f}s] {progress(row)}",
              flush=True)
        if len(rows) % 20 == 0:
            write(opts.out, meta, rows)

    systems = tuple(s for s in opts.systems.split(",") if s)
    pool = Pool(opts.jobs, opts.timeout, opts.out + ".log", opts.recycle, systems)
    try:
        pool.run(archs, on_row)
    finally:
        pool.close()
        meta["seconds"] = round(time.monotonic() - started, 1)
        meta["bytegraph"] = os.path.relpath(pool.bytegraph_file or ROOT, ROOT)
        write(opts.out, meta, rows)
    report(rows)
    print(f"\n{len(rows)} architectures in {meta['seconds']:.0f} s; rows in {opts.out}")


def _commit() -> str:
    """The measured checkout's commit, when it is a git checkout."""
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def progress(row: dict[str, Any]) -> str:
    if row.get("status") != "built":
        return f"{row['name']}: not built: {row.get('reason', '')[:100]}"
    parts = []
    for system in SYSTEMS:
        r = row.get(system, {})
        if not r.get("ran"):
            parts.append(f"{system} {r.get('error', {}).get('message', '?')[:80]}")
        else:
            same = "equal" if r.get("equal") else "NOT EQUAL"
            parts.append(f"{system} {r['graphs']}g {r['ops']}ops {same} {r['first_s']:.2f}s")
    return f"{row['name']} ({row.get('level')}): " + "; ".join(parts)


if __name__ == "__main__":
    main()
