"""A fuzzing campaign: generate programs, run them in the pool, shrink and report failures.

``run_campaign`` is what both the command line (``bench/fuzz.py``) and the
CI test call. Programs ``start .. start + n - 1`` of one seed are generated
here, run in a ``WorkerPool`` in chunks (so a long run reports progress),
and each failure of the first ``shrink_per_category`` of its category is
shrunk with the same pool. ``Report.render`` is the text both print.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from collections.abc import Callable

from tests.fuzz.grammar import generate
from tests.fuzz.pool import WorkerPool
from tests.fuzz.runner import Outcome
from tests.fuzz.shrink import Shrunk, reproducer, shrink
from tests.fuzz.tree import Program, count_nodes

CHUNK = 100


@dataclasses.dataclass
class Failure:
    """One failing program, and its shrunk form when it was shrunk."""

    program: Program
    outcome: Outcome
    shrunk: Shrunk | None = None

    def render(self) -> str:
        head = f"[{self.outcome.category}] seed={self.program.seed} index={self.program.index}"
        if self.shrunk is None:
            return f"{head} (not shrunk)\n  {self.outcome.detail.splitlines()[0][:300]}"
        program, outcome = self.shrunk.program, self.shrunk.outcome
        sizes = f"{count_nodes(self.program)} -> {count_nodes(program)} nodes"
        return (
            f"{head} shrunk {sizes} in {self.shrunk.runs} runs\n"
            + reproducer(program, outcome)
            + "# full detail:\n# " + outcome.detail.replace("\n", "\n# ") + "\n"
        )


@dataclasses.dataclass
class Report:
    """Counts over all outcomes, and the failures."""

    seed: int
    outcomes: list[Outcome]
    failures: list[Failure]
    seconds: float

    def count(self, prefix: str) -> int:
        return sum(1 for o in self.outcomes if o.category and o.category.startswith(prefix))

    @property
    def wrong(self) -> int:
        return self.count("wrong:")

    @property
    def internal(self) -> int:
        return self.count("internal:")

    def render(self) -> str:
        n = len(self.outcomes)
        traced = sum(1 for o in self.outcomes if o.graphs)
        raised = sum(1 for o in self.outcomes if o.eager_errors)
        categories = collections.Counter(o.category for o in self.outcomes if o.category)
        lines = [
            f"seed {self.seed}: {n} programs in {self.seconds:.1f} s "
            f"({n / max(self.seconds, 1e-9):.1f} programs/s)",
            f"  wrong results: {self.wrong}, internal errors: {self.internal}, "
            f"timeouts: {self.count('timeout')}, crashes: {self.count('crash')}, "
            f"harness errors: {self.count('harness:')}",
            f"  compiled at least one graph: {traced}; eager raised in some call: {raised}",
        ]
        lines += [f"  {count:5d}  {category}" for category, count in categories.most_common()]
        lines += ["", *(failure.render() for failure in self.failures)]
        return "\n".join(lines)


def run_campaign(
    seed: int,
    n: int,
    jobs: int = 2,
    timeout: float = 20.0,
    start: int = 0,
    shrink_per_category: int = 2,
    shrink_budget: int = 300,
    progress: Callable[[str], None] | None = None,
) -> Report:
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    failures: list[Failure] = []
    with WorkerPool(jobs, timeout) as pool:
        for first in range(start, start + n, CHUNK):
            programs = [generate(seed, i) for i in range(first, min(first + CHUNK, start + n))]
            chunk = pool.map(programs)
            outcomes += chunk
            failures += [Failure(p, o) for p, o in zip(programs, chunk) if o.category]
            if progress:
                progress(f"seed {seed}: {len(outcomes)}/{n}, failures so far {len(failures)}")
        seconds = time.perf_counter() - started
        shrink_failures(pool, failures, shrink_per_category, shrink_budget, progress)
    return Report(seed, outcomes, failures, seconds)


def shrink_failures(
    pool: WorkerPool,
    failures: list[Failure],
    per_category: int,
    budget: int,
    progress: Callable[[str], None] | None,
) -> None:
    shrunk: collections.Counter[str] = collections.Counter()
    for failure in failures:
        category = failure.outcome.category or ""
        if shrunk[category] >= per_category:
            continue
        shrunk[category] += 1
        runs_allowed = budget if category != "timeout" else max(4, budget // 20)
        failure.shrunk = shrink(
            failure.program, failure.outcome, pool.map, len(pool.workers), runs_allowed
        )
        if progress:
            progress(f"shrunk {category} index {failure.program.index}: {failure.shrunk.runs} runs")
