"""Worker processes with a hard timeout per task, for the corpus runner.

Each worker is a 'spawn' process that imports torch, torch._dynamo and bytegraph
(from ``root`` when given, so an older checkout can be measured) once, then
answers tasks: ``("discover", ref)`` with the calls to run, ``("run", ref, call)``
with one ``("partial", system, outcome)`` message per system as it finishes and
a final ``("result", None)``. A task still running after ``timeout`` seconds is
killed with its worker (the systems that had not answered are ``timeout``), and
a worker that dies takes only its current task's unanswered systems with it
(``crash``). The workers' own stdout and stderr (the tests' prints, torch's
warnings) go to ``log``.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import sys
import time
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any

STARTUP_SECONDS = 180.0
SYSTEMS = ("eager", "bytegraph", "torch")


def worker_main(conn: Connection, root: str | None, log: str) -> None:
    if root:
        sys.path.insert(0, root)
    with open(log, "ab") as sink:  # the tests' prints and torch's warnings
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
    import torch

    torch.set_num_threads(1)
    import torch._dynamo  # noqa: F401  (the runner compares with it; bytegraph never imports it)

    import bytegraph
    from bench.dynamo_corpus import worker

    conn.send(("ready", bytegraph.__file__))
    while True:
        task = conn.recv()
        if task is None:
            return
        if task[0] == "discover":
            conn.send(("result", worker.discover(task[1])))
        else:
            def send(system: str, outcome: dict) -> None:
                conn.send(("partial", system, outcome))

            worker.run_program(task[1], task[2], send)
            conn.send(("result", None))


@dataclasses.dataclass(eq=False)
class Worker:
    process: BaseProcess
    conn: Connection
    ready: bool = False
    task: int | None = None
    deadline: float = 0.0

    @property
    def waiting(self) -> bool:
        return self.task is not None or not self.ready


class WorkerPool:
    """``jobs`` reusable workers; use as a context manager."""

    def __init__(self, jobs: int, timeout: float, root: str | None, log: str) -> None:
        self.timeout, self.root, self.log = timeout, root, log
        self.context = multiprocessing.get_context("spawn")
        self.bytegraph_file = ""
        self.workers = [self.start() for _ in range(max(1, jobs))]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Worker:
        parent, child = self.context.Pipe()
        process = self.context.Process(
            target=worker_main, args=(child, self.root, self.log), daemon=True
        )
        process.start()
        child.close()
        return Worker(process, parent, deadline=time.monotonic() + STARTUP_SECONDS)

    def replace(self, worker: Worker) -> None:
        worker.process.kill()
        worker.process.join()
        worker.conn.close()
        self.workers[self.workers.index(worker)] = self.start()

    def map(self, tasks: list[tuple], progress: Any = None) -> list[Any]:
        """Every task's answer, in the order of ``tasks``."""
        self.results: list[Any] = [None] * len(tasks)
        self.done = [False] * len(tasks)
        self.tasks = tasks
        pending = list(range(len(tasks)))[::-1]
        while pending or any(w.task is not None for w in self.workers):
            for worker in self.workers:
                if worker.ready and worker.task is None and pending:
                    worker.task = pending.pop()
                    worker.deadline = time.monotonic() + self.timeout
                    if tasks[worker.task][0] == "run":
                        self.results[worker.task] = {}
                    worker.conn.send(tasks[worker.task])
            finished = self.collect()
            if progress is not None:
                for _ in range(finished):
                    progress()
        return self.results

    def collect(self) -> int:
        """Wait for one message or deadline; the number of tasks that finished."""
        now = time.monotonic()
        soonest = min(w.deadline for w in self.workers if w.waiting)
        readable = wait([w.conn for w in self.workers], timeout=max(0.0, soonest - now))
        finished = 0
        for worker in list(self.workers):
            if worker.conn in readable:
                finished += self.receive(worker)
            elif time.monotonic() > worker.deadline and worker.waiting:
                finished += self.fail(worker, "timeout", f"no answer within {self.timeout:g} s")
        return finished

    def receive(self, worker: Worker) -> int:
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            code = worker.process.exitcode
            return self.fail(worker, "crash", f"worker died (exit code {code})")
        if message[0] == "ready":
            worker.ready = True
            self.bytegraph_file = message[1]
            return 0
        assert worker.task is not None
        if message[0] == "partial":
            self.results[worker.task][message[1]] = message[2]
            return 0
        if message[1] is not None:
            self.results[worker.task] = message[1]
        worker.task = None
        return 1

    def fail(self, worker: Worker, outcome: str, why: str) -> int:
        if worker.task is None:
            if not worker.ready:
                raise RuntimeError(f"a corpus worker could not start: {why}")
            self.replace(worker)
            return 0
        index = worker.task
        if self.tasks[index][0] == "discover":
            self.results[index] = {"calls": [], "skip": f"discovery {outcome}: {why}"}
        else:
            for system in SYSTEMS:
                self.results[index].setdefault(
                    system, {"outcome": outcome, "detail": why, "graphs": 0, "break": ""}
                )
        self.replace(worker)
        return 1

    def close(self) -> None:
        for worker in self.workers:
            if worker.process.is_alive():
                try:
                    worker.conn.send(None)
                except OSError:
                    pass
        for worker in self.workers:
            worker.process.join(timeout=5)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
