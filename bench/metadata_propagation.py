"""Metadata propagation per op: meta tensors + memo (bytegraph) vs FakeTensorMode.

bytegraph propagates shapes through meta-device tensors, with a memo keyed on
the op and its inputs' metadata (``bytegraph/graph/metadata.py``). This
measures, for the ops the bench programs use, on 64x64 float32 inputs:

- meta 1st: the op's first call through ``metadata.run`` in a process where
  meta tensors are already in use (fresh subprocesses, median);
- meta: ``metadata.run`` with the memo off (every trace-time miss pays this);
- meta raw: the op called directly on meta tensors (no bytegraph wrapper);
- memo hit: ``metadata.run`` answering from the memo;
- fake 1st / fake: the same op under ``FakeTensorMode`` on fake tensors, first
  call and repeated (repeated calls hit FakeTensorMode's own dispatch cache).

Then the one-time cost of each in a fresh subprocess: the first op after
``import torch`` (and whether it imported ``torch._dynamo``), and for meta
the import of bytegraph itself.

Run: ``python bench/metadata_propagation.py [--cold-runs N]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import operator
import statistics
import subprocess
import sys
import time
import timeit
import warnings
from collections.abc import Callable
from typing import Any

# Before torch: importing it on a machine without NumPy warns, and bench output should be clean.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402, N812 (the universal alias)
from torch.utils import _pytree as pytree  # noqa: E402

N = 64


@dataclasses.dataclass(frozen=True)
class Op:
    """One traced op, as bytegraph records it: an fx node kind, target and arguments."""

    name: str
    kind: str
    target: Any
    make_args: Callable[[], tuple[tuple, dict]]

    def call(self, args: tuple, kwargs: dict) -> Any:
        if self.kind == "call_method":
            return getattr(args[0], self.target)(*args[1:], **kwargs)
        return self.target(*args, **kwargs)


def square() -> torch.Tensor:
    return torch.randn(N, N)


def vector() -> torch.Tensor:
    return torch.randn(N)


OPS = [
    Op("add", "call_function", operator.add, lambda: ((square(), square()), {})),
    Op("mul (by scalar)", "call_function", operator.mul, lambda: ((square(), 2), {})),
    Op("relu", "call_function", F.relu, lambda: ((square(),), {})),
    Op("linear (bias)", "call_function", F.linear, lambda: ((square(), square(), vector()), {})),
    Op("linear (no bias)", "call_function", F.linear, lambda: ((square(), square()), {})),
    Op("matmul", "call_function", torch.matmul, lambda: ((square(), square()), {})),
    Op("softmax", "call_function", torch.softmax, lambda: ((square(),), {"dim": -1})),
    Op(
        "layer_norm",
        "call_function",
        F.layer_norm,
        lambda: ((square(), (N,), vector(), vector()), {}),
    ),
    Op("view", "call_method", "view", lambda: ((square(), 16, 256), {})),
    Op("transpose", "call_method", "transpose", lambda: ((square(), 0, 1), {})),
]


def convert(tree: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    return pytree.tree_map_only(torch.Tensor, fn, tree)


def once(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def per_call(fn: Callable[[], Any], budget_s: float = 0.1) -> float:
    """Best per-call seconds over 5 repeats, each sized to take about budget_s / 5."""
    timer = timeit.Timer(fn)
    number = max(1, int(budget_s / 5 / max(once(fn), 1e-7)))
    return min(timer.repeat(repeat=5, number=number)) / number


# Cold figures: run in a fresh subprocess, printed as JSON.


def cold_meta() -> dict[str, Any]:
    """First meta op after import torch; bytegraph's import; each op's first run()."""
    x = torch.randn(N, N)
    first_use = once(lambda: torch.empty(N, N, device="meta").neg())
    dynamo_imported = "torch._dynamo" in sys.modules
    start = time.perf_counter()
    from bytegraph.graph import metadata

    import_s = time.perf_counter() - start
    del x
    ops = {}
    for op in OPS:
        args, kwargs = convert(op.make_args(), metadata.to_meta)
        ops[op.name] = once(lambda op=op, a=args, k=kwargs: metadata.run(op.kind, op.target, a, k))
    return {"first_use": first_use, "import": import_s, "dynamo": dynamo_imported, "ops": ops}


def cold_fake() -> dict[str, Any]:
    """First fake op after import torch (mode creation included); each op's first call."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    x = torch.randn(N, N)

    def first() -> FakeTensorMode:
        mode = FakeTensorMode()
        with mode:
            mode.from_tensor(x).neg()
        return mode

    start = time.perf_counter()
    mode = first()
    first_use = time.perf_counter() - start
    dynamo_imported = "torch._dynamo" in sys.modules
    ops = {}
    for op in OPS:
        args, kwargs = convert(op.make_args(), mode.from_tensor)
        with mode:
            ops[op.name] = once(lambda op=op, a=args, k=kwargs: op.call(a, k))
    return {"first_use": first_use, "import": 0.0, "dynamo": dynamo_imported, "ops": ops}


def run_cold(system: str, runs: int) -> dict[str, Any]:
    """Median over ``runs`` fresh subprocesses of the cold figures of one system."""
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, __file__, "--cold", system],
            check=True, capture_output=True, text=True,
        ).stdout
        samples.append(json.loads(out))
    return {
        "first_use": statistics.median(s["first_use"] for s in samples),
        "import": statistics.median(s["import"] for s in samples),
        "dynamo": any(s["dynamo"] for s in samples),
        "ops": {op.name: statistics.median(s["ops"][op.name] for s in samples) for op in OPS},
    }


# Warm figures: measured in this process.


def warm_meta(op: Op) -> dict[str, float | None]:
    """Per-call seconds: memo off, raw op, memo hit (None where the op is never memoized)."""
    from bytegraph import config
    from bytegraph.graph import metadata

    args, kwargs = convert(op.make_args(), metadata.to_meta)

    def through_run() -> Any:
        return metadata.run(op.kind, op.target, args, kwargs)

    saved = config.memoize_metadata
    try:
        config.memoize_metadata = False
        miss = per_call(through_run)
        config.memoize_metadata = True
        metadata.reset()
        through_run()
        # The memo is private; a bench of this module may look at it to avoid mislabelling
        # a repeated miss (views and in-place ops are not memoized) as a hit.
        memoized = bool(getattr(metadata, "_memo", True))
        hit = per_call(through_run) if memoized else None
    finally:
        config.memoize_metadata = saved
        metadata.reset()
    return {"meta": miss, "raw": per_call(lambda: op.call(args, kwargs)), "hit": hit}


def warm_fake(op: Op, mode: Any) -> float:
    args, kwargs = convert(op.make_args(), mode.from_tensor)
    with mode:
        return per_call(lambda: op.call(args, kwargs))


# Report.


def us(seconds: float | None) -> str:
    return "not memoized" if seconds is None else f"{seconds * 1e6:.1f}"


def times(a: float, b: float | None, digits: int) -> str:
    return "-" if b is None else f"{a / b:.{digits}f}x"


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    for cells in [headers, ["-" * w for w in widths], *rows]:
        pairs = enumerate(zip(cells, widths, strict=True))
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in pairs))
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-runs", type=int, default=5, help="fresh subprocesses per system")
    parser.add_argument("--cold", choices=["meta", "fake"], help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.cold:
        print(json.dumps(cold_meta() if opts.cold == "meta" else cold_fake()))
        return
    from torch._subclasses.fake_tensor import FakeTensorMode

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, inputs {N}x{N} float32")
    cold = {system: run_cold(system, opts.cold_runs) for system in ("meta", "fake")}
    mode = FakeTensorMode()
    rows = []
    for op in OPS:
        meta = warm_meta(op)
        fake = warm_fake(op, mode)
        rows.append([
            op.name,
            us(cold["meta"]["ops"][op.name]), us(meta["meta"]), us(meta["raw"]), us(meta["hit"]),
            us(cold["fake"]["ops"][op.name]), us(fake),
            times(fake, meta["meta"], 2), times(fake, meta["hit"], 1),
        ])
    print(
        f"\nPer op, microseconds (1st: median of {opts.cold_runs} fresh processes; "
        "others: best of 5)"
    )
    print_table(
        ["op", "meta 1st", "meta", "meta raw", "memo hit", "fake 1st", "fake",
         "fake/meta", "fake/hit"],
        rows,
    )
    print("One-time cost in a fresh process, after import torch (milliseconds)")
    print_table(
        ["system", "first op", "imports torch._dynamo", "import bytegraph"],
        [
            ["meta", f"{cold['meta']['first_use'] * 1e3:.0f}", str(cold["meta"]["dynamo"]),
             f"{cold['meta']['import'] * 1e3:.0f}"],
            ["FakeTensorMode", f"{cold['fake']['first_use'] * 1e3:.0f}",
             str(cold["fake"]["dynamo"]), "-"],
        ],
    )


if __name__ == "__main__":
    main()
