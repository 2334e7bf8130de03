"""Graphs and breaks of the exception/generator/with corpus, on whichever bytegraph imports.

Issue 9's closing figure: how many corpus programs compile to one graph with
no break, and how many breaks the corpus needs in all. Run it on the working
tree, then on an older commit to compare::

    python -m bench.exception_corpus          # from the repository root
    git worktree add /tmp/before a8ba65e      # the commit before issue 9
    script=$PWD/bench/exception_corpus.py
    cd /tmp/before && PYTHONPATH=. python $script --label before

The programs are the ``Corpus`` lists of the test files below (each program
carries its inputs). A program whose compiled result differs from eager is
counted as wrong; one that raises is compared on the exception's type and
args.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import io
import sys
from pathlib import Path
from typing import Any

import torch

import bytegraph

PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"
MODULES = (
    "test_exceptions", "test_builtin_raises", "test_generators_contextlib", "test_try_breaks",
    "test_user_exceptions",
)


def _outcome(fn: Any, args: tuple) -> tuple[str, Any]:
    try:
        return "value", fn(*args)
    except Exception as e:  # the program's own exception, compared with eager's
        return "raised", (type(e), e.args)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if hasattr(a, "__dict__") and type(a) is type(b) and not isinstance(a, type):
        return _same(vars(a), vars(b))
    try:
        return bool(a == b)
    except Exception:
        return a is b


def measure(module_name: str) -> list[tuple[str, int, int, bool]]:
    """(program, graphs, breaks, equal to eager) for each program of one test module."""
    module = importlib.import_module(module_name)
    rows = []
    for prog in module.corpus:
        bytegraph.reset()
        torch.manual_seed(0)
        inputs = prog.make_inputs()
        torch.manual_seed(1)
        want = _outcome(prog.fn, copy.deepcopy(inputs)), copy.deepcopy(inputs)
        try:
            report = bytegraph.explain(prog.fn)(*copy.deepcopy(inputs))
            graphs, breaks = report.graph_count, report.graph_break_count
        except Exception:  # the program raised through explain
            graphs, breaks = -1, -1
        bytegraph.reset()
        compiled_inputs = copy.deepcopy(inputs)
        torch.manual_seed(1)
        got = _outcome(bytegraph.compile(prog.fn, backend="eager"), compiled_inputs)
        eager_inputs = copy.deepcopy(inputs)
        torch.manual_seed(1)
        want = _outcome(prog.fn, eager_inputs)
        same = want[0] == got[0] and _same(want[1], got[1]) and _same(compiled_inputs, eager_inputs)
        rows.append((prog.name, graphs, breaks, same))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="now")
    parser.add_argument("--show", action="store_true", help="one line per program")
    options = parser.parse_args()
    sys.path.insert(0, str(PROGRAMS))
    print(f"[{options.label}] bytegraph from {Path(bytegraph.__file__).parent}")
    total = one_graph = breaks_total = wrong = 0
    for name in MODULES:
        if not (PROGRAMS / f"{name}.py").exists():
            continue
        with contextlib.redirect_stdout(io.StringIO()):  # programs that print
            rows = measure(name)
        n_one = sum(g == 1 and b == 0 for _, g, b, _ in rows)
        n_breaks = sum(max(b, 0) for _, _, b, _ in rows)
        n_wrong = sum(not ok for *_, ok in rows)
        print(f"{name}: {len(rows)} programs, {n_one} in one graph with no break, "
              f"{n_breaks} breaks, {n_wrong} differ from eager")
        if options.show:
            for prog, g, b, ok in rows:
                print(f"    {prog}: graphs={g} breaks={b}{'' if ok else ' DIFFERS'}")
        total, one_graph = total + len(rows), one_graph + n_one
        breaks_total, wrong = breaks_total + n_breaks, wrong + n_wrong
    print(f"total: {total} programs, {one_graph} in one graph with no break, "
          f"{breaks_total} breaks, {wrong} differ from eager")


if __name__ == "__main__":
    main()
