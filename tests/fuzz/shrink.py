"""Minimise a failing program while it keeps failing the same way.

Greedy delta debugging over the program tree, deterministic:

1. list the candidate edits of the current program, largest first: delete a
   chunk of a block (half, quarter, ... one statement; helpers are module
   statements, so they go the same way), replace a compound statement by one
   of its clause bodies, drop an optional clause (``elif``, ``else``,
   ``finally``), replace an expression by its kind's leaf or by a child of
   the same kind;
2. run them in batches (one per worker) and take the first, in list order,
   whose outcome has the same category (same kind of mismatch, or the same
   exception type for internal errors);
3. repeat from the new program until no edit reproduces or the run budget is
   spent. Sources already tried are never run twice.

``reproducer`` renders the result as a script to paste into a test.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from tests.fuzz.runner import Outcome
from tests.fuzz.tree import LEAVES, Expr, Program, Stmt

Path = tuple[Any, ...]
Evaluate = Callable[[list[Program]], list[Outcome]]


def resolve(root: Any, path: Path) -> Any:
    for step in path:
        root = root[step] if isinstance(step, int) else getattr(root, step)
    return root


def statements(program: Program) -> Iterator[tuple[Path, Stmt]]:
    """Every statement with its path, outer before inner."""
    work: list[tuple[Path, Stmt]] = [(("module", i), s) for i, s in enumerate(program.module)]
    while work:
        path, stmt = work.pop(0)
        yield path, stmt
        for j, clause in enumerate(stmt.clauses):
            work.extend((path + ("clauses", j, "body", i), s) for i, s in enumerate(clause.body))


def blocks(program: Program) -> Iterator[Path]:
    yield ("module",)
    for path, stmt in statements(program):
        for j in range(len(stmt.clauses)):
            yield path + ("clauses", j, "body")


def expressions(program: Program) -> Iterator[tuple[Path, Expr]]:
    """Every expression with its path, outer before inner."""
    work: list[tuple[Path, Expr]] = []
    for path, stmt in statements(program):
        work.extend((path + ("exprs", i), e) for i, e in enumerate(stmt.exprs))
        for j, clause in enumerate(stmt.clauses):
            work.extend((path + ("clauses", j, "exprs", i), e) for i, e in enumerate(clause.exprs))
    while work:
        path, expr = work.pop(0)
        yield path, expr
        work.extend((path + ("args", i), a) for i, a in enumerate(expr.args))


def edited(program: Program, path: Path, edit: Callable[[Any, Any], None]) -> Program:
    """A copy of ``program`` with ``edit(parent, last step)`` applied at ``path``."""
    clone = copy.deepcopy(program)
    edit(resolve(clone, path[:-1]), path[-1])
    return clone


def chunk_sizes(n: int) -> list[int]:
    sizes, size = [], n
    while size >= 1:
        sizes.append(size)
        size //= 2
    return sizes


def deletions(program: Program) -> Iterator[Program]:
    for path in blocks(program):
        n = len(resolve(program, path))
        for size in chunk_sizes(n):
            for start in range(0, n, size):
                yield edited(program, path + (start,), _deleter(size))


def _deleter(size: int) -> Callable[[Any, Any], None]:
    def delete(block: list, start: int) -> None:
        del block[start:start + size]

    return delete


def unwrappings(program: Program) -> Iterator[Program]:
    """A compound statement replaced by one clause's body, or without an optional clause."""
    for path, stmt in statements(program):
        for j, clause in enumerate(stmt.clauses):
            body = clause.body
            yield edited(program, path, lambda block, i, body=body: block.__setitem__(
                slice(i, i + 1), copy.deepcopy(body)))
            if clause.removable:
                yield edited(program, path + ("clauses", j), lambda cs, k: cs.pop(k))


def simplifications(program: Program) -> Iterator[Program]:
    for path, expr in expressions(program):
        leaf = LEAVES[expr.kind]
        if expr.template != leaf or expr.args:
            yield edited(program, path, _replacer(Expr(expr.kind, leaf)))
        for child in expr.args:
            if child.kind == expr.kind:
                yield edited(program, path, _replacer(child))


def _replacer(new: Expr) -> Callable[[Any, Any], None]:
    def replace(parent: Any, step: Any) -> None:
        value = copy.deepcopy(new)
        if isinstance(step, int):
            parent[step] = value
        else:
            setattr(parent, step, value)

    return replace


def candidates(program: Program) -> Iterator[Program]:
    yield from deletions(program)
    yield from unwrappings(program)
    yield from simplifications(program)


def batches(items: Iterator[Program], size: int, tried: set[str]) -> Iterator[list[Program]]:
    """Untried candidates, ``size`` at a time; each source is recorded as tried."""
    batch: list[Program] = []
    for item in items:
        source = item.source()
        if source in tried:
            continue
        tried.add(source)
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


@dataclasses.dataclass
class Shrunk:
    """The smallest failing program found, how it failed, and the runs it took."""

    program: Program
    outcome: Outcome
    runs: int


def shrink(
    program: Program, outcome: Outcome, evaluate: Evaluate, jobs: int = 1, budget: int = 400
) -> Shrunk:
    """Cut ``program`` while it still fails with ``outcome.category``."""
    best, runs, tried = Shrunk(program, outcome, 0), 0, {program.source()}
    improved = True
    while improved and runs < budget:
        improved = False
        for batch in batches(candidates(best.program), jobs, tried):
            outcomes = evaluate(batch)
            runs += len(batch)
            hits = [(c, o) for c, o in zip(batch, outcomes) if o.category == outcome.category]
            if hits:
                best, improved = Shrunk(*hits[0], runs), True
                break
            if runs >= budget:
                break
    best.runs = runs
    return best


def reproducer(program: Program, outcome: Outcome) -> str:
    """The program's source with a driver that shows the failure, ready to paste."""
    return (
        f"# bytegraph fuzz seed={program.seed} index={program.index}: {outcome.category}\n"
        f"# {outcome.detail.splitlines()[0] if outcome.detail else ''}\n"
        + program.source()
        + DRIVER
    )


DRIVER = '''

if __name__ == "__main__":  # from the repo root: python this_file.py
    import sys

    sys.path.insert(0, ".")
    from tests.fuzz.runner import run_source

    print(run_source(open(__file__).read(), __file__))
'''
"""Runs the reproducer through the fuzzer's runner: eager vs compiled, three calls each."""
