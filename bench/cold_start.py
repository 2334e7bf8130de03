"""Cold start and compile-time peak memory, bytegraph beside torch.compile.

Every measurement is a fresh Python process (``--child``), so nothing either
system imported or cached in an earlier measurement helps it:

1. ``import torch`` and the program (model and inputs; transformers for GPT-2)
   are made first, outside the figures;
2. the clock starts; the compiler is imported (``import bytegraph``; for
   torch.compile its lazy ``torch._dynamo`` import happens inside the first
   call), the program compiled with ``backend="eager"`` and called once,
   in eval mode under ``torch.no_grad()``, one intra-op thread;
3. the child prints its figures as one JSON line.

The two systems alternate within each repeat (which one goes first alternates
too); the table shows medians and the ratio bytegraph / torch.compile. One
unmeasured run per system and program comes first: it writes the bytecode
caches (``PYTHONDONTWRITEBYTECODE`` is cleared in the children: a user's
installed package has its ``.pyc`` files).

Memory (``--memory``, GPT-2 by default): separate fresh processes measure,
over step 2 only, the tracemalloc peak (Python allocations) and the RSS
high-water mark (``VmHWM`` after resetting it through ``/proc/self/clear_refs``,
minus the RSS at the start; Linux only).

The programs are bench/models.py's mlp, cnn and gpt2; the first two come from
bench/plain_models.py, which does not import bytegraph.

Run: ``python bench/cold_start.py [--repeats N] [--only mlp,cnn,gpt2] [--memory-repeats N]
[--save bench/cold_start_latest.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

SYSTEMS = ("bytegraph", "torch.compile")
PROGRAMS = ("mlp", "cnn", "gpt2")
# Modules whose presence after the first call tells which of torch's lazy imports ran.
HEAVY = ("torch._dynamo", "torch._inductor", "sympy", "torch._decomp", "torch._refs",
         "torch._subclasses.fake_tensor", "torch.fx.experimental.symbolic_shapes", "numpy")

# -- the child: one measurement -------------------------------------------------------------


def _program(name: str) -> tuple[Any, dict[str, Any]]:
    import torch

    from bench.plain_models import SmallCNN, mlp

    torch.manual_seed(0)
    if name == "mlp":
        return mlp().eval(), {"input": torch.randn(8, 32)}
    if name == "cnn":
        return SmallCNN().eval(), {"x": torch.randn(2, 3, 16, 16)}
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    transformers.logging.set_verbosity_error()
    config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100)
    ids = torch.randint(0, 100, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 12:] = 0
    inputs = {"input_ids": ids, "attention_mask": mask, "use_cache": False}
    return transformers.GPT2LMHeadModel(config).eval(), inputs


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _compile_and_call(system: str, module: Any, inputs: dict[str, Any]) -> tuple[float, Any]:
    """The measured step: the compiler's import, compile, first call. (import seconds, output)"""
    import torch

    started = time.perf_counter()
    if system == "bytegraph":
        import bytegraph

        imported = time.perf_counter() - started
        compiled = bytegraph.compile(module, backend="eager")
    else:
        imported = 0.0  # torch.compile imports torch._dynamo inside the first call
        compiled = torch.compile(module, backend="eager")
    with torch.no_grad():
        out = compiled(**inputs)
    return imported, out


def child(system: str, program: str, memory: bool) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    module, inputs = _program(program)
    before = set(sys.modules)
    loaded_before = [m for m in HEAVY if m in sys.modules]
    figures: dict[str, Any] = {}
    if memory:
        import tracemalloc

        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the RSS high-water mark to the current RSS
        rss_start = _rss_kib("VmRSS")
        tracemalloc.start()
        _compile_and_call(system, module, inputs)
        figures["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        figures["rss_hwm_growth_mib"] = (_rss_kib("VmHWM") - rss_start) / 1024
        figures["rss_hwm_mib"] = _rss_kib("VmHWM") / 1024
        return figures
    started = time.perf_counter()
    figures["import_s"], _ = _compile_and_call(system, module, inputs)
    figures["total_s"] = time.perf_counter() - started
    figures["new_modules"] = len(set(sys.modules) - before)
    figures["heavy_before"] = loaded_before
    figures["heavy_after"] = [m for m in HEAVY if m in sys.modules and m not in loaded_before]
    if "bytegraph" in sys.modules:
        figures["bytegraph_file"] = sys.modules["bytegraph"].__file__
    return figures


# -- the parent: fresh processes, alternating ---------------------------------------------


def spawn(system: str, program: str, memory: bool = False) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # The checkout's bytegraph, not whichever one the interpreter has installed.
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               PYTHONWARNINGS="ignore", PYTHONPATH=os.pathsep.join(
                   p for p in (root, os.environ.get("PYTHONPATH")) if p))
    args = [sys.executable, os.path.abspath(__file__), "--child", system, program]
    done = subprocess.run(args + (["--child-memory"] if memory else []), env=env, cwd=root,
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{system} {program} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(programs: list[str], repeats: int, memory_programs: list[str],
            memory_repeats: int) -> dict[str, Any]:
    results: dict[str, Any] = {"time": {}, "memory": {}}
    for program in programs:
        for system in SYSTEMS:
            spawn(system, program)  # writes the bytecode caches; not counted
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
        for r in range(repeats):
            for system in SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]:
                runs[system].append(spawn(system, program))
        results["time"][program] = runs
        print(f"  {program}: {_time_line(runs)}", flush=True)
    for program in memory_programs:
        runs = {s: [] for s in SYSTEMS}
        for r in range(memory_repeats):
            for system in SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]:
                runs[system].append(spawn(system, program, memory=True))
        results["memory"][program] = runs
    return results


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _time_line(runs: dict[str, list[dict[str, Any]]]) -> str:
    bg, tc = (_median(runs[s], "total_s") for s in SYSTEMS)
    return f"bytegraph {bg * 1e3:.0f} ms, torch.compile {tc * 1e3:.0f} ms, {bg / tc:.2f}x"


def report(results: dict[str, Any]) -> None:
    print("\nCold start (fresh process, import torch excluded: compiler import, compile, "
          "first call), medians, ms")
    print(f"{'program':8} {'bytegraph':>10} {'(import)':>9} {'torch.compile':>14} {'ratio':>6}"
          f"  torch's lazy imports after the first call (bytegraph | torch.compile)")
    for program, runs in results["time"].items():
        bg, tc = (_median(runs[s], "total_s") for s in SYSTEMS)
        imp = _median(runs["bytegraph"], "import_s")
        heavy = " | ".join(",".join(runs[s][-1]["heavy_after"]) or "-" for s in SYSTEMS)
        print(f"{program:8} {bg * 1e3:10.0f} {imp * 1e3:9.0f} {tc * 1e3:14.0f} "
              f"{bg / tc:5.2f}x  {heavy}")
    for program, runs in results["memory"].items():
        if not runs["bytegraph"]:  # --memory-repeats 0
            continue
        print(f"\nPeak memory while compiling {program} (median of {len(runs['bytegraph'])}), MiB")
        for key in ("tracemalloc_peak_mib", "rss_hwm_growth_mib", "rss_hwm_mib"):
            bg, tc = (_median(runs[s], key) for s in SYSTEMS)
            print(f"  {key:22} bytegraph {bg:7.1f}  torch.compile {tc:7.1f}  {bg / tc:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per system")
    parser.add_argument("--only", default=",".join(PROGRAMS), help="comma-separated programs")
    parser.add_argument("--memory", default="gpt2", help="programs for the memory figures")
    parser.add_argument("--memory-repeats", type=int, default=3)
    parser.add_argument("--save", default="", help="write the raw figures to this JSON file")
    parser.add_argument("--child", nargs=2, metavar=("SYSTEM", "PROGRAM"), help=argparse.SUPPRESS)
    parser.add_argument("--child-memory", action="store_true", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(child(*opts.child, memory=opts.child_memory)))
        return
    import torch

    print(f"torch {torch.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} CPUs, 1 intra-op thread, backend 'eager'")
    programs = [p for p in opts.only.split(",") if p]
    memory = [p for p in opts.memory.split(",") if p]
    results = measure(programs, opts.repeats, memory, opts.memory_repeats)
    report(results)
    if opts.save:
        with open(opts.save, "w") as f:
            json.dump({"torch": torch.__version__, "python": platform.python_version(),
                       "repeats": opts.repeats, **results}, f, indent=1)


if __name__ == "__main__":
    main()
