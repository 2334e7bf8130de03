"""Worker processes that run programs with a hard timeout each.

Importing torch costs about 2 s, so workers are reused: each is a 'spawn'
process that imports the runner once, says it is ready, then answers one
``Program`` at a time with an ``Outcome``. ``WorkerPool.map`` hands programs
to idle workers and collects outcomes in input order, so results do not
depend on timing. A program still running after ``timeout`` seconds is a
``timeout`` outcome; its worker is killed and replaced, as is one that dies
(a ``crash``). Only the pool's own workers are ever killed.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from tests.fuzz.runner import Outcome
from tests.fuzz.tree import Program

STARTUP_SECONDS = 180.0


def worker_main(conn: Connection) -> None:
    """The worker loop: import once, then run programs until told to stop (None)."""
    import torch

    torch.set_num_threads(1)
    from tests.fuzz.runner import run_program

    conn.send("ready")
    while True:
        program = conn.recv()
        if program is None:
            return
        started = time.perf_counter()
        outcome = run_program(program)
        conn.send(dataclasses.replace(outcome, seconds=time.perf_counter() - started))


@dataclasses.dataclass(eq=False)
class Worker:
    """One worker process, its pipe, and the index of the program it runs."""

    process: BaseProcess
    conn: Connection
    ready: bool = False
    task: int | None = None
    deadline: float = 0.0

    @property
    def waiting(self) -> bool:
        """Starting up or running a program: something is due before ``deadline``."""
        return self.task is not None or not self.ready


class WorkerPool:
    """``jobs`` reusable worker processes; use as a context manager."""

    def __init__(self, jobs: int, timeout: float) -> None:
        self.timeout = timeout
        self.context = multiprocessing.get_context("spawn")
        self.workers = [self.start() for _ in range(max(1, jobs))]

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> Worker:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=worker_main, args=(child,), daemon=True)
        process.start()
        child.close()
        return Worker(process, parent, deadline=time.monotonic() + STARTUP_SECONDS)

    def replace(self, worker: Worker) -> Worker:
        worker.process.kill()
        worker.process.join()
        worker.conn.close()
        fresh = self.start()
        self.workers[self.workers.index(worker)] = fresh
        return fresh

    def map(self, programs: list[Program]) -> list[Outcome]:
        """Run every program; outcomes in the order of ``programs``."""
        results: list[Outcome | None] = [None] * len(programs)
        pending = list(range(len(programs)))[::-1]
        while pending or any(w.task is not None for w in self.workers):
            for worker in self.workers:
                if worker.ready and worker.task is None and pending:
                    worker.task = pending.pop()
                    worker.deadline = time.monotonic() + self.timeout
                    worker.conn.send(programs[worker.task])
            self.collect(results, programs)
        return [r for r in results if r is not None]

    def collect(self, results: list[Outcome | None], programs: list[Program]) -> None:
        """Wait for one message or deadline; record outcomes, replace dead or late workers."""
        now = time.monotonic()
        soonest = min(w.deadline for w in self.workers if w.waiting)
        readable = wait([w.conn for w in self.workers], timeout=max(0.0, soonest - now))
        for worker in list(self.workers):
            if worker.conn in readable:
                self.receive(worker, results)
            elif time.monotonic() > worker.deadline and worker.waiting:
                self.fail(worker, results, "timeout", f"no answer within {self.timeout:g} s")

    def receive(self, worker: Worker, results: list[Outcome | None]) -> None:
        try:
            message = worker.conn.recv()
        except (EOFError, OSError):
            code = worker.process.exitcode
            self.fail(worker, results, "crash", f"worker died (exit code {code})")
            return
        if message == "ready":
            worker.ready = True
        elif worker.task is not None:
            results[worker.task] = message
            worker.task = None

    def fail(self, worker: Worker, results: list[Outcome | None], category: str, why: str) -> None:
        if worker.task is not None:
            results[worker.task] = Outcome(category, why, seconds=self.timeout)
        elif not worker.ready:
            raise RuntimeError(f"a fuzz worker could not start: {why}")
        self.replace(worker)

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
