"""Command line of the differential fuzzer (tests/fuzz/): eager vs compiled on generated programs.

    python -m bench.fuzz --n 1000 --seed 1 --jobs 2 --timeout 20
    python -m bench.fuzz --seed 1 --index 42 --show      # print one program's source
    python -m bench.fuzz --seed 1 --index 42             # run (and shrink) just that one

Prints the counts (programs, wrong results, internal errors, timeouts),
programs per second, and for each failure its category line and, for the
first few of each category, a shrunk reproducer. Exit status 1 when any
program failed.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.fuzz.campaign import run_campaign  # noqa: E402
from tests.fuzz.grammar import generate  # noqa: E402


def parse(argv: list[str] | None) -> argparse.Namespace:
    summary = (__doc__ or "").split("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=summary)
    parser.add_argument("--n", type=int, default=200, help="programs to run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="index of the first program")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per program")
    parser.add_argument("--shrink-per-category", type=int, default=2)
    parser.add_argument("--shrink-budget", type=int, default=300, help="runs per shrink")
    parser.add_argument("--index", type=int, help="run (or with --show, print) just this program")
    parser.add_argument("--show", action="store_true", help="print the program and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.show:
        print(generate(args.seed, args.index if args.index is not None else args.start).source())
        return 0
    if args.index is not None:
        args.start, args.n = args.index, 1
    report = run_campaign(
        args.seed, args.n, jobs=args.jobs, timeout=args.timeout, start=args.start,
        shrink_per_category=args.shrink_per_category, shrink_budget=args.shrink_budget,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    print(report.render())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
