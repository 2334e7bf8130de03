"""Dynamic shapes, bytegraph vs torch.compile: compiles and compile time over a size sweep.

For each workload, both systems (``backend`` a counting eager backend, so the
backend adds nothing) are called at 10 sizes in a row, from a reset, as a
user would: static first, then automatic dynamic shapes.

- compiles: graphs the backend received over the sweep (the static graph,
  then the size-generic one; a recompile per size would show here).
- compile ms: the sweep's wall time minus eager's time for the same calls,
  i.e. what tracing, guards, recompiles and guard checks cost in total.
- hit overhead: at a cache hit of the dynamic entry (a size of the sweep
  served by the size-generic graph), compiled call time minus eager call time.

Both systems are warmed up first on an unrelated function called at three
sizes (the first fake-tensor op, ShapeEnv and torch._dynamo imports), then
each workload's sweep runs once per system unmeasured (torch's one-time cost
of each op's first meta/fake run would go to whichever system ran first), and
the systems alternate going first from one workload to the next. Each
system's sweep is then measured ``REPEATS`` times, each from a reset, the two
systems' sweeps interleaved, and the fastest counts (on a shared machine a
single sweep varies by half, and a slow spell lasts seconds: measured back to
back, one system's sweeps could all fall in it). Times are this process's CPU
time (``time.process_time``): compiling is CPU work on one thread, and another
process's load on the same cores then costs it nothing. Kernels
run on one thread: the eager time subtracted from each call is then steady
(with threads competing for 2 busy cores, an MLP call took 0.03 ms or 24 ms).

Run: ``python bench/dynamic_shapes.py``  (about 3 minutes on 2 cores)
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import math
import sys
import time
import timeit
import warnings
from collections.abc import Callable
from typing import Any

warnings.filterwarnings("ignore")

import torch  # noqa: E402

import bytegraph  # noqa: E402


@dataclasses.dataclass
class Workload:
    name: str
    make_model: Callable[[], Callable[..., Any]]
    make_input: Callable[[int], tuple]  # size -> call arguments
    sizes: tuple[int, ...]
    hit_size: int  # a size of the sweep served by the dynamic entry


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 8),
    ).eval()


def transformer_block() -> torch.nn.Module:
    return torch.nn.TransformerEncoderLayer(
        d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True
    ).eval()


def gpt2() -> torch.nn.Module:
    import transformers

    config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100)
    return transformers.GPT2LMHeadModel(config).eval()


WORKLOADS = [
    Workload("MLP (batch)", mlp, lambda b: (torch.randn(b, 32),), tuple(range(2, 21, 2)), 14),
    Workload(
        "TransformerEncoderLayer (seq)", transformer_block,
        lambda n: (torch.randn(2, n, 32),), tuple(range(4, 41, 4)), 28,
    ),
    Workload(
        "tiny GPT-2 (seq)", gpt2, lambda n: (torch.randint(0, 100, (2, n)),),
        tuple(range(5, 51, 5)), 35,
    ),
]


class CountingBackend:
    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        self.graphs += 1
        return gm.forward


def reset_dynamo() -> None:
    import torch._dynamo

    torch._dynamo.reset()


SYSTEMS: dict[str, tuple[Callable[[], None], Callable[..., Any]]] = {
    "bytegraph": (bytegraph.reset, bytegraph.compile),
    "torch.compile": (reset_dynamo, torch.compile),
}


def output_of(result: Any) -> Any:
    return result.logits if hasattr(result, "logits") else result


REPEATS = 5


def sweep(system: str, model: Any, inputs: list[tuple], eager_times: list[float]) -> tuple:
    """(compiled, graphs, seconds over eager) for one system's sweep from a reset."""
    reset, compile_fn = SYSTEMS[system]
    reset()
    backend = CountingBackend()
    compiled = compile_fn(copy.deepcopy(model), backend=backend)
    gc.collect()
    elapsed = 0.0
    with torch.no_grad():
        for args, eager_time in zip(inputs, eager_times):
            start = time.process_time()
            compiled(*args)
            elapsed += time.process_time() - start - eager_time
    return compiled, backend.graphs, elapsed


def call_time(fn: Callable[..., Any], args: tuple) -> float:
    """Best per-call seconds (of this process's CPU time) over 7 rounds of about 20 ms."""
    timer = timeit.Timer(lambda: fn(*args), timer=time.process_time)
    number, elapsed = timer.autorange()
    number = max(1, int(number * 0.02 / max(elapsed, 1e-9)))
    return min(timer.timeit(number) / number for _ in range(7))


def hit_overhead(compiled: Callable[..., Any], model: Any, args: tuple) -> float:
    """Compiled minus eager per-call seconds: the best of 15 rounds of each, the rounds
    alternating so that a slow spell of the machine hits both."""
    timers = [
        timeit.Timer(lambda f=f: f(*args), timer=time.process_time) for f in (compiled, model)
    ]
    number, elapsed = timers[1].autorange()
    number = max(1, int(number * 0.02 / max(elapsed, 1e-9)))
    best = [math.inf, math.inf]
    for _ in range(15):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(number) / number)
    return best[0] - best[1]


def eager_call_times(model: Any, inputs: list[tuple]) -> list[float]:
    with torch.no_grad():
        for args in inputs:  # warm the allocator and kernels
            model(*args)
        return [call_time(model, args) for args in inputs]


def warm_up() -> None:
    def program(a: torch.Tensor) -> torch.Tensor:
        return torch.sin(a).sum(0) + a.mean()

    for reset, compile_fn in SYSTEMS.values():
        reset()
        compiled = compile_fn(program, backend="eager")
        for n in (3, 5, 7):
            compiled(torch.randn(n, 4))


@dataclasses.dataclass
class Row:
    name: str
    graphs: dict[str, int]
    compile_seconds: dict[str, float]
    overhead: dict[str, float]


def measure(workload: Workload, order: list[str]) -> Row:
    torch.manual_seed(0)
    model = workload.make_model()
    inputs = [workload.make_input(n) for n in workload.sizes]
    eager_times = eager_call_times(model, inputs)
    hit_args = inputs[workload.sizes.index(workload.hit_size)]
    with torch.no_grad():
        want = output_of(model(*hit_args))
    for system in order:  # torch's one-time costs per op (meta kernels, decompositions)
        sweep(system, model, inputs, eager_times)
    graphs, seconds, overhead = {}, {}, {}
    runs: dict[str, list[tuple]] = {system: [] for system in order}
    for _ in range(REPEATS):  # interleaved: a slow spell of the machine hits both
        for system in order:
            runs[system].append(sweep(system, model, inputs, eager_times))
    for system in order:
        compiled, graphs[system], seconds[system] = min(runs[system], key=lambda run: run[2])
        with torch.no_grad():
            got = output_of(compiled(*hit_args))
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
            overhead[system] = hit_overhead(compiled, model, hit_args)
    return Row(workload.name, graphs, seconds, overhead)


def main() -> None:
    torch.set_num_threads(1)
    warm_up()
    rows = []
    order = list(SYSTEMS)
    for workload in WORKLOADS:
        rows.append(measure(workload, order))
        order.reverse()
    headers = [
        "workload (10 sizes)", "compiles bg/tc", "compile ms bg/tc", "ratio",
        "hit overhead us bg/tc",
    ]
    table = [headers]
    total = {name: 0.0 for name in SYSTEMS}
    for row in rows:
        bg, tc = row.compile_seconds["bytegraph"], row.compile_seconds["torch.compile"]
        total["bytegraph"] += bg
        total["torch.compile"] += tc
        table.append([
            row.name,
            f"{row.graphs['bytegraph']} / {row.graphs['torch.compile']}",
            f"{bg * 1e3:.0f} / {tc * 1e3:.0f}",
            f"{bg / tc:.2f}x",
            f"{row.overhead['bytegraph'] * 1e6:.1f} / {row.overhead['torch.compile'] * 1e6:.1f}",
        ])
    table.append([
        "total", "",
        f"{total['bytegraph'] * 1e3:.0f} / {total['torch.compile'] * 1e3:.0f}",
        f"{total['bytegraph'] / total['torch.compile']:.2f}x", "",
    ])
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, backend: counting eager")
    for i, r in enumerate(table):
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        print("| " + " | ".join(cells) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 1) + ("-" if j == 0 else ":") for j, w in
                                 enumerate(widths)) + "|")


if __name__ == "__main__":
    main()
