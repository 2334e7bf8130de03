"""What one cache entry's guard costs per call, in total and per family of conditions.

For each program of ``bench/bench_compile.py`` (or those named with ``--only``),
bytegraph compiles it once (backend "eager") and the guard function of its entry is
timed alone, then rebuilt from each family of its guards alone and timed again:

- global state: grad mode, default dtype, no TorchFunctionMode (every entry has them);
- types and identity: ``type(x) is C``, ``x is obj``, lengths, dict keys, ``DISTINCT``;
- tensor metadata (inputs) and tensor metadata (parameters): ``TENSOR_MATCH`` on a
  source that reads a module's ``_parameters``, or on any other;
- module hooks and dicts: empty hook dicts, keys absent from an instance ``__dict__``;
- globals: any guard on a module global, a builtin or a closure cell.

A family's function reads its sources itself (``self._modules['0']`` is read again by
each family that needs it), so the families add up to more than the whole; global state
is counted once, in its own row (subtracted from the others). Times are the best per-call
time of 7 rounds, thread CPU time with ``--cpu-time``.

Run: ``python bench/guard_cost.py [--only TEXT] [--cpu-time]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import bytegraph  # noqa: E402
from bench.bench_compile import PROGRAMS, own_copy  # noqa: E402
from bytegraph.guards.build import build_guard_function  # noqa: E402
from bytegraph.guards.guard import Guard, GuardKind  # noqa: E402
from bytegraph.guards.sources import (  # noqa: E402
    BuiltinSource,
    ClosureCellSource,
    GetItemSource,
    GlobalSource,
    ModuleGlobalSource,
    Source,
)

FAMILIES = (
    "types and identity",
    "tensor metadata (inputs)",
    "tensor metadata (parameters)",
    "module hooks and dicts",
    "globals",
)
_TYPES = {
    GuardKind.TYPE_MATCH, GuardKind.ID_MATCH, GuardKind.LEN_MATCH, GuardKind.DICT_KEYS,
    GuardKind.SAME_OBJECT, GuardKind.DISTINCT, GuardKind.CONSTANT_MATCH, GuardKind.SHAPE,
}
_GLOBAL_ROOTS = (GlobalSource, ModuleGlobalSource, BuiltinSource, ClosureCellSource)


def family(guard: Guard) -> str:
    """The family of ``guard``, as listed in the module docstring."""
    root = guard.source.root
    if isinstance(root, _GLOBAL_ROOTS) or type(root).__name__.endswith("GlobalSource"):
        return "globals"
    if guard.kind is GuardKind.TENSOR_MATCH:
        return "tensor metadata (parameters)" if _reads_parameters(guard.source) else (
            "tensor metadata (inputs)"
        )
    if guard.kind in _TYPES:
        return "types and identity"
    return "module hooks and dicts"


def _reads_parameters(source: Source) -> bool:
    return isinstance(source, GetItemSource) and "_parameters" in source.base.expr()


def best_call_time(check: Callable[[], Any], clock: Callable[[], float]) -> float:
    """Best per-call seconds of ``check`` over 7 rounds of about 30 ms each."""
    timer = timeit.Timer(check, timer=clock)
    number, elapsed = timer.autorange()
    number = max(1, int(number * 0.03 / max(elapsed, 1e-9)))
    return min(timer.timeit(number) / number for _ in range(7))


def measure(program: Any, clock: Callable[[], float]) -> dict[str, tuple[int, float]]:
    """(guards, seconds) per family, the whole guard and the global state."""
    bytegraph.reset()
    torch.manual_seed(0)
    args = program.make_args()
    fn = own_copy(program.fn)
    compiled = bytegraph.compile(fn, backend="eager")
    compiled(*args)
    function = getattr(compiled, "_compiled_forward", compiled)
    full = (fn, *args) if function is not compiled else args
    entry = function.entries[0]
    guards, code_fn = list(entry.guard._guards), entry.run
    default_device = entry.guard._default_device

    def timed(subset: list[Guard]) -> float:
        check = build_guard_function(subset, code_fn, default_device).check
        if not check(*full):
            sys.exit(f"{program.name}: a guard built from a part of the entry's guards failed")
        return best_call_time(lambda: check(*full), clock)

    base = timed([])
    rows = {"whole guard": (len(guards), best_call_time(lambda: entry.guard.check(*full), clock))}
    rows["global state"] = (0, base)
    for name in FAMILIES:
        subset = [g for g in guards if family(g) == name]
        if subset:
            rows[name] = (len(subset), timed(subset) - base)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="only the programs whose name has TEXT")
    parser.add_argument("--cpu-time", action="store_true", help="thread CPU time, not wall")
    opts = parser.parse_args()
    torch.set_num_threads(1)
    clock = time.thread_time if opts.cpu_time else time.perf_counter
    print(f"torch {torch.__version__}, {'thread CPU time' if opts.cpu_time else 'wall clock'}")
    for program in (p for p in PROGRAMS if opts.only in p.name):
        print(f"\n{program.name}")
        for name, (count, seconds) in measure(program, clock).items():
            print(f"  {name:30} {count:5} guards  {seconds * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
