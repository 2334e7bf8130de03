"""bytegraph vs torch.compile, side by side in one process, as ratios.

For each program, both systems run with ``backend="eager"`` (so the backend
adds nothing and only capture and call overhead are compared):

- trace: the time of the first call after a reset (translate, guards,
  backend, codegen, run once); the median of ``--repeats`` resets, the two
  systems alternating which goes first. bytegraph's is also split by stage
  (its cache entries' ``stage_seconds``, translate/stage_times.py).
- overhead: compiled call time minus plain eager call time on a cache hit,
  each the best per-call time of several timeit-style repeats.
- per call: the compiled call time itself, bytegraph's over torch.compile's, and
  the time of bytegraph's guard function alone (a module with hundreds of
  parameters is mostly guard: compiled calls skip nn.Module.__call__, so they
  can be faster than eager and the overhead above negative).

With ``--inductor`` both also run with ``backend="inductor"`` and the table
adds their steady-state call times (median of 21 rounds; ``bench/models.py
--inductor`` does the same on the models).

Both systems are warmed up first on an unrelated function: the first
meta/fake tensor op in a process imports ``torch._dynamo`` (about 0.75 s),
which would otherwise be charged to whichever system traces first.

Run: ``python bench/bench_compile.py [--inductor] [--repeats N] [--only TEXT] [--cpu-time]
[--no-reuse]`` (``--no-reuse``: repeated blocks traced again, as before translate/fragments.py)
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import math
import platform
import statistics
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

import bytegraph  # noqa: E402
import bytegraph.guards.cache  # noqa: E402
from bytegraph.translate import stage_times  # noqa: E402
from bytegraph.translate.stage_times import STAGES as STAGE_NAMES  # noqa: E402

# The programs. Straight-line on purpose: weights are arguments.


def add_mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = x + y
    z = z * 2
    return z


def mlp4(
    x: torch.Tensor,
    w1: torch.Tensor, b1: torch.Tensor,
    w2: torch.Tensor, b2: torch.Tensor,
    w3: torch.Tensor, b3: torch.Tensor,
    w4: torch.Tensor, b4: torch.Tensor,
) -> torch.Tensor:
    h = F.relu(F.linear(x, w1, b1))
    h = F.relu(F.linear(h, w2, b2))
    h = F.relu(F.linear(h, w3, b3))
    return F.linear(h, w4, b4)


def attention(
    x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor, wo: torch.Tensor
) -> torch.Tensor:
    q = x @ wq
    k = x @ wk
    v = x @ wv
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores, dim=-1)
    return torch.matmul(weights, v) @ wo


def loop50(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A Python loop of small tensor ops: the same bytecode traced 50 times."""
    for _ in range(50):
        x = torch.tanh(x @ w) * 0.5 + x
    return x


def warmup_program(a: torch.Tensor) -> torch.Tensor:
    return torch.sin(a).sum(dim=0) + a.mean()


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    fn: Callable[..., Any]
    make_args: Callable[[], tuple[torch.Tensor, ...]]


def mlp4_args() -> tuple[torch.Tensor, ...]:
    layers = [(torch.randn(64, 64) / 8, torch.randn(64)) for _ in range(4)]
    return (torch.randn(32, 64), *(t for layer in layers for t in layer))


def attention_args() -> tuple[torch.Tensor, ...]:
    return (torch.randn(16, 64), *(torch.randn(64, 64) / 8 for _ in range(4)))


def mlp_module() -> torch.nn.Module:
    layers = [m for _ in range(4) for m in (torch.nn.Linear(64, 64), torch.nn.ReLU())]
    return torch.nn.Sequential(*layers[:-1]).eval()


def linear_stack(depth: int) -> torch.nn.Module:
    """``depth`` Linear layers, two parameters each: per-call cost is mostly guards."""
    return torch.nn.Sequential(*(torch.nn.Linear(16, 16) for _ in range(depth))).eval()


def transformer_layer() -> torch.nn.Module:
    layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True)
    return layer.eval()


class GPT2Hidden(torch.nn.Module):
    """transformers' GPT2Model (12 blocks, tiny width), returning its last hidden state."""

    def __init__(self) -> None:
        super().__init__()
        import transformers

        config = transformers.GPT2Config(n_embd=64, n_layer=12, n_head=4, vocab_size=100)
        self.model = transformers.GPT2Model(config).eval()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids, use_cache=False).last_hidden_state


PROGRAMS = [
    Program("add_mul 4x4", add_mul, lambda: (torch.randn(4, 4), torch.randn(4, 4))),
    Program("mlp 4x64, batch 32", mlp4, mlp4_args),
    Program("mlp nn.Sequential 4x64", mlp_module(), lambda: (torch.randn(32, 64),)),
    Program("attention seq 16, dim 64", attention, attention_args),
    Program("Linear x60 (120 params)", linear_stack(60), lambda: (torch.randn(4, 16),)),
    Program("Linear x150 (300 params)", linear_stack(150), lambda: (torch.randn(4, 16),)),
    Program("TransformerEncoderLayer d64", transformer_layer(), lambda: (torch.randn(2, 16, 64),)),
    Program("loop 50 steps 8x8", loop50, lambda: (torch.randn(8, 8), torch.randn(8, 8) / 8)),
    Program("GPT2Model 12 blocks d64", GPT2Hidden(), lambda: (torch.randint(0, 100, (2, 16)),)),
]


# The two systems, behind one interface.


@dataclasses.dataclass(frozen=True)
class System:
    reset: Callable[[], None]
    compile: Callable[..., Callable[..., Any]]

    def fresh(self, fn: Callable[..., Any], backend: str) -> Callable[..., Any]:
        self.reset()
        return self.compile(own_copy(fn), backend=backend)


def own_copy(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Each system compiles its own copy of a module: compiling may set attributes on it."""
    return copy.deepcopy(fn) if isinstance(fn, torch.nn.Module) else fn


def reset_dynamo() -> None:
    import torch._dynamo

    torch._dynamo.reset()


# --clear-caches: each trace starts without the pure memos a reset keeps (decoded
# bytecode, op metadata, compiled check text; torch.compile's cleaned instructions and
# FakeTensor dispatch cache), as the first trace of a program in a process does.
CLEAR_CACHES = [False]


def clear_pure_caches() -> None:
    from torch._dynamo.bytecode_transformation import _cached_cleaned_instructions
    from torch._subclasses.fake_tensor import FakeTensorMode

    from bytegraph.bytecode import instructions
    from bytegraph.graph import metadata
    from bytegraph.guards import compiled_text

    for cache in (instructions._decoded_cache, metadata._memo, metadata._worth_memoizing,
                  compiled_text._compiled):
        cache.clear()
    _cached_cleaned_instructions.cache_clear()
    FakeTensorMode.cache_clear()


SYSTEMS = {
    "bytegraph": System(bytegraph.reset, bytegraph.compile),
    "torch.compile": System(reset_dynamo, torch.compile),
}


# Timing.

# What the figures measure: wall-clock time, or with --cpu-time this thread's CPU time
# (with one intra-op thread the calling thread does all the work; a machine shared with
# other jobs then slows the figures much less, as time spent descheduled is not counted).
CLOCK: list[Callable[[], float]] = [time.perf_counter]


def time_first_call(
    system: System, program: Program, args: tuple
) -> tuple[float, dict[str, float]]:
    """Seconds for compile() + the first call (the trace), after a reset; and bytegraph's
    seconds per stage of that compile (its entries' ``stage_seconds``, wall clock)."""
    system.reset()
    if CLEAR_CACHES[0]:
        clear_pure_caches()
    fn = own_copy(program.fn)  # copying the module is neither system's work
    gc.collect()
    gc.disable()
    try:
        start = CLOCK[0]()
        compiled = system.compile(fn, backend="eager")
        compiled(*args)
        seconds = CLOCK[0]() - start
    finally:
        gc.enable()
    stages: dict[str, float] = {}
    for entry in getattr(getattr(compiled, "_compiled_forward", compiled), "entries", ()):
        if isinstance(entry, bytegraph.guards.cache.CacheEntry):
            for stage, spent in entry.stage_seconds:
                stages[stage] = stages.get(stage, 0.0) + spent
    return seconds, stages


def median_trace_times(
    program: Program, args: tuple, repeats: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median first-call time per system (the systems alternate going first), and the
    stages of bytegraph's median run."""
    samples: dict[str, list[tuple[float, dict[str, float]]]] = {name: [] for name in SYSTEMS}
    order = list(SYSTEMS)
    for _ in range(repeats):
        for name in order:
            samples[name].append(time_first_call(SYSTEMS[name], program, args))
        order.reverse()
    medians = {name: sorted(runs, key=lambda run: run[0])[len(runs) // 2]
               for name, runs in samples.items()}
    return {name: run[0] for name, run in medians.items()}, medians["bytegraph"][1]


def per_call_times(fns: dict[str, Callable[..., Any]], args: tuple) -> dict[str, float]:
    """Best per-call seconds of each function over 7 rounds.

    Each round times every function once, in turn, for about 35 ms, so a burst
    of load on a shared machine hits all of them alike rather than one.
    """
    timers = {
        name: timeit.Timer(lambda fn=fn: fn(*args), timer=CLOCK[0]) for name, fn in fns.items()
    }
    numbers = {}
    for name, timer in timers.items():
        number, elapsed = timer.autorange()
        numbers[name] = max(1, int(number * 0.035 / max(elapsed, 1e-9)))
    best = {name: float("inf") for name in fns}
    for _ in range(7):
        for name, timer in timers.items():
            best[name] = min(best[name], timer.timeit(numbers[name]) / numbers[name])
    return best


def median_call_times(
    fns: dict[str, Callable[..., Any]], args: tuple, rounds: int = 21
) -> dict[str, float]:
    """Median per-call seconds of each function over ``rounds`` rounds.

    Each round times every function in turn for about 20 ms (the mean of that
    many calls), so load on a shared machine hits all of them alike; the median
    of the rounds is the steady-state figure (Inductor's calls vary more than the
    Python overhead that ``per_call_times`` takes the best of).
    """
    timers = {
        name: timeit.Timer(lambda fn=fn: fn(*args), timer=CLOCK[0]) for name, fn in fns.items()
    }
    numbers = {}
    for name, timer in timers.items():
        number, elapsed = timer.autorange()
        numbers[name] = max(1, int(number * 0.02 / max(elapsed, 1e-9)))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, timer in timers.items():
            samples[name].append(timer.timeit(numbers[name]) / numbers[name])
    return {name: statistics.median(times) for name, times in samples.items()}


def check_same(program: Program, args: tuple, compiled: Callable[..., Any], system: str) -> None:
    try:
        torch.testing.assert_close(compiled(*args), program.fn(*args))
    except AssertionError as e:
        sys.exit(f"{system} computed a different result on {program.name}: {e}")


def bytegraph_graph_count(compiled: Any) -> int:
    compiled = getattr(compiled, "_compiled_forward", compiled)  # a compiled nn.Module
    return sum(len(entry.graphs) for entry in compiled.entries)


def bytegraph_guard(compiled: Any, args: tuple) -> Callable[[], Any]:
    """A call of the guard function of the entry that ``args`` hit (a module's with itself)."""
    function = getattr(compiled, "_compiled_forward", compiled)
    full = (compiled._orig_mod, *args) if function is not compiled else args
    check = function.entries[0].guard.check
    if not check(*full):
        sys.exit("bytegraph's guard failed on the arguments it was compiled for")
    return lambda: check(*full)


@dataclasses.dataclass
class Row:
    program: str
    trace: dict[str, float]
    eager_call: float
    overhead: dict[str, float]
    graphs: int
    call: dict[str, float] = dataclasses.field(default_factory=dict)
    guard: float = 0.0
    inductor_call: dict[str, float] = dataclasses.field(default_factory=dict)
    stages: dict[str, float] = dataclasses.field(default_factory=dict)  # bytegraph's trace


def measure(program: Program, repeats: int, inductor: bool) -> Row:
    torch.manual_seed(0)
    args = program.make_args()
    trace, stages = median_trace_times(program, args, repeats)
    compiled = {name: system.fresh(program.fn, "eager") for name, system in SYSTEMS.items()}
    for name, fn in compiled.items():
        check_same(program, args, fn, name)
    guard = bytegraph_guard(compiled["bytegraph"], args)
    times = per_call_times({"eager": program.fn, **compiled, "guard": lambda *_: guard()}, args)
    eager_call = times.pop("eager")
    guard_time = times.pop("guard")
    overhead = {name: t - eager_call for name, t in times.items()}
    graphs = bytegraph_graph_count(compiled["bytegraph"])
    row = Row(program.name, trace, eager_call, overhead, graphs, dict(times), guard_time,
              stages=stages)
    if inductor:
        for name, system in SYSTEMS.items():
            compiled[name] = system.fresh(program.fn, "inductor")
            check_same(program, args, compiled[name], name)
        row.inductor_call = median_call_times(compiled, args)
    return row


def warm_up() -> None:
    """Pay the one-time costs (torch._dynamo import, first meta/fake op) outside the figures."""
    args = (torch.randn(8, 8),)
    for system in SYSTEMS.values():
        for _ in range(2):
            system.fresh(warmup_program, "eager")(*args)
    warmup_program(*args)


# Report.


def us(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} us"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms"


def ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}x" if b > 0 else "   n/a"


def format_row(cells: list[str], widths: list[int]) -> str:
    """The first column left-aligned, the others right-aligned."""
    pairs = enumerate(zip(cells, widths, strict=True))
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in pairs)


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = format_row(headers, widths)
    print(line)
    print("-" * len(line))
    for r in rows:
        print(format_row(r, widths))
    print()


def report(rows: list[Row], repeats: int) -> None:
    bg, tc = SYSTEMS
    print(f"\nFirst call (trace), backend='eager', median of {repeats}; ratio = {bg} / {tc}")
    print_table(
        ["program", "graphs", bg, tc, "ratio"],
        [
            [r.program, str(r.graphs), ms(r.trace[bg]), ms(r.trace[tc]),
             ratio(r.trace[bg], r.trace[tc])]
            for r in rows
        ],
    )
    print(f"{bg}'s trace by stage (its median run): 'rest' is binding the "
          "arguments, setting the trace up and the first call")
    print_table(
        ["program", "trace", *STAGE_NAMES, "rest"],
        [
            [r.program, ms(r.trace[bg]), *(ms(r.stages.get(s, 0.0)) for s in STAGE_NAMES),
             ms(r.trace[bg] - sum(r.stages.values()))]
            for r in rows
        ],
    )
    print("Cache-hit overhead per call = compiled call - eager call, backend='eager'; best of 7")
    print_table(
        ["program", "eager call", bg, tc, "ratio"],
        [
            [r.program, us(r.eager_call), us(r.overhead[bg]), us(r.overhead[tc]),
             ratio(r.overhead[bg], r.overhead[tc])]
            for r in rows
        ],
    )
    print("Per-call time (cache hit), backend='eager'; best of 7; bytegraph's guard alone")
    print_table(
        ["program", "eager call", bg, tc, "ratio", f"{bg} guard"],
        [
            [r.program, us(r.eager_call), us(r.call[bg]), us(r.call[tc]),
             ratio(r.call[bg], r.call[tc]), us(r.guard)]
            for r in rows
        ],
    )
    if rows and rows[0].inductor_call:
        print("Steady-state call time, backend='inductor'; median of 21 rounds")
        print_table(
            ["program", "eager call", bg, tc, "ratio"],
            [
                [r.program, us(r.eager_call), us(r.inductor_call[bg]), us(r.inductor_call[tc]),
                 ratio(r.inductor_call[bg], r.inductor_call[tc])]
                for r in rows
            ],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--inductor", action="store_true", help="also time backend='inductor' calls"
    )
    parser.add_argument("--repeats", type=int, default=5, help="trace measurements per system")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch intra-op threads (1: small kernels time steadily on a loaded machine)",
    )
    parser.add_argument("--only", default="", help="only the programs whose name has TEXT")
    parser.add_argument(
        "--cpu-time", action="store_true",
        help="time with this thread's CPU time instead of the wall clock (a shared machine)",
    )
    parser.add_argument(
        "--no-reuse", action="store_true",
        help="bytegraph traces every repeated block again (config.reuse_fragments off)",
    )
    parser.add_argument(
        "--clear-caches", action="store_true",
        help="each trace starts without either system's pure memos (decoded bytecode, op "
             "metadata...), which a reset keeps: a program's first trace in a process",
    )
    opts = parser.parse_args()
    bytegraph.config.reuse_fragments = not opts.no_reuse
    CLEAR_CACHES[0] = opts.clear_caches
    torch.set_num_threads(opts.threads)
    if opts.cpu_time:
        CLOCK[0] = stage_times.CLOCK[0] = time.thread_time
    print(
        f"torch {torch.__version__}, Python {platform.python_version()}, "
        f"{torch.get_num_threads()} threads, {platform.machine()}, "
        f"{'thread CPU time' if opts.cpu_time else 'wall clock'}"
        f"{', no block reuse' if opts.no_reuse else ''}"
        f"{', pure caches cleared before each trace' if opts.clear_caches else ''}"
    )
    start = time.perf_counter()
    warm_up()
    programs = [p for p in PROGRAMS if opts.only in p.name]
    rows = [measure(program, opts.repeats, opts.inductor) for program in programs]
    report(rows, opts.repeats)
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
