"""Training step time under DDP: eager DDP, bytegraph (split on and off), torch.compile.

A world of 2 ranks (gloo on the CPU, started with torch.multiprocessing)
trains an MLP whose parameters fill several DDP buckets. Every rank builds
the same variants of it, each wrapped in DDP with the same ``bucket_cap_mb``:

- ``ddp``: DDP(model), uncompiled;
- ``bytegraph split``: DDP(bytegraph.compile(model)), one graph per bucket
  (``config.optimize_ddp``, the default), so each bucket's all-reduce starts
  while the backward of the earlier layers still runs;
- ``bytegraph one graph``: the same with ``config.optimize_ddp = False``: the
  whole backward is one autograd node, every gradient is ready at its end;
- ``torch.compile``: DDP(torch.compile(model)), whose DDP optimizer splits the
  same way.

With ``--fsdp``, the model is sharded with FSDP2's ``fully_shard`` on every
Linear and at the root instead, and the variants are ``fsdp`` (uncompiled),
``bytegraph`` (compile(model): each layer's forward a graph, FSDP's
all-gathers and reduce-scatters in its hooks) and ``torch.compile``.

A step is forward, loss, backward (with DDP's all-reduce), SGD step. After
warm-up steps (which compile), the variants take turns for ``--rounds``
rounds of ``--steps`` steps each, so a change in machine load falls on all of
them; the figure is the median step time over rounds, measured on rank 0
between barriers. The ratio column is over uncompiled DDP.

Run: ``python bench/ddp.py [--backend aot_eager|inductor] [--layers 8] [--width 1024]
[--batch 64] [--bucket-cap-mb 4] [--rounds 5] [--steps 5] [--fsdp] [--out results.json]``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

VARIANTS = ("ddp", "bytegraph split", "bytegraph one graph", "torch.compile")
FSDP_VARIANTS = ("fsdp", "bytegraph", "torch.compile")


def make_model(args: argparse.Namespace) -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(args.layers):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(args.width, 8))


class Pieces:
    """Counts the graphs the backend compiles (the pieces of a split graph)."""

    def __init__(self, backend: str) -> None:
        from bytegraph.graph.backends import lookup_backend

        self.inner = lookup_backend(backend)
        self.count = 0

    def __call__(self, gm: Any, example_inputs: list[Any]) -> Any:
        self.count += 1
        return self.inner(gm, example_inputs)


def shard(model: torch.nn.Module) -> torch.nn.Module:
    """FSDP2: ``fully_shard`` on every Linear and at the root."""
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    return fully_shard(model)


def build(variant: str, args: argparse.Namespace) -> tuple[torch.nn.Module, Any]:
    import bytegraph

    model = make_model(args)
    pieces = None
    if args.fsdp:
        model = shard(model)
        if variant == "bytegraph":
            pieces = Pieces(args.backend)
            return bytegraph.compile(model, backend=pieces), pieces
        if variant == "torch.compile":
            return torch.compile(model, backend=args.backend), None
        return model, None
    if variant.startswith("bytegraph"):
        pieces = Pieces(args.backend)
        model = bytegraph.compile(model, backend=pieces)
    elif variant == "torch.compile":
        model = torch.compile(model, backend=args.backend)
    return DistributedDataParallel(model, bucket_cap_mb=args.bucket_cap_mb), pieces


def step(model: torch.nn.Module, optimizer: Any, x: torch.Tensor, target: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()


def run_rank(rank: int, world: int, store: str, args: argparse.Namespace, out: Any) -> None:
    import bytegraph

    torch.set_num_threads(args.threads)
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=600),
    )
    x = torch.randn(args.batch, args.width, generator=torch.Generator().manual_seed(rank))
    target = torch.randn(args.batch, 8, generator=torch.Generator().manual_seed(100 + rank))
    runs = {}
    variants = FSDP_VARIANTS if args.fsdp else VARIANTS
    for variant in variants:
        bytegraph.config.optimize_ddp = variant != "bytegraph one graph"
        model, pieces = build(variant, args)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        started = time.perf_counter()
        for _ in range(args.warmup):  # compiles (inside DDP's forward, so split or not)
            step(model, optimizer, x, target)
        runs[variant] = {
            "model": model, "optimizer": optimizer, "times": [],
            "graphs": None if pieces is None else pieces.count,
            "warmup_s": time.perf_counter() - started,
        }
    for _ in range(args.rounds):
        for variant in variants:
            run = runs[variant]
            dist.barrier()
            started = time.perf_counter()
            for _ in range(args.steps):
                step(run["model"], run["optimizer"], x, target)
            dist.barrier()
            run["times"].append((time.perf_counter() - started) / args.steps)
    if rank == 0:
        out.put({
            variant: {key: run[key] for key in ("times", "graphs", "warmup_s")}
            for variant, run in runs.items()
        })
    dist.destroy_process_group()


def report(results: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    base = statistics.median(results["fsdp" if args.fsdp else "ddp"]["times"])
    rows = {}
    first = "vs fsdp" if args.fsdp else "vs ddp"
    print(f"{'variant':<22}{'step ms':>9}{first:>8}{'graphs':>8}{'warm-up s':>11}")
    for variant, run in results.items():
        median = statistics.median(run["times"])
        rows[variant] = {**run, "median_ms": median * 1e3, "ratio": median / base}
        graphs = "-" if run["graphs"] is None else str(run["graphs"])
        print(f"{variant:<22}{median * 1e3:>9.1f}{median / base:>7.2f}x{graphs:>8}"
              f"{run['warmup_s']:>11.1f}")
    params = sum(p.numel() for p in make_model(args).parameters())
    return {
        "settings": vars(args), "parameters": params,
        "python": platform.python_version(), "torch": torch.__version__, "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--bucket-cap-mb", type=float, default=4.0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    parser.add_argument("--fsdp", action="store_true",
                        help="FSDP2 (fully_shard per Linear and at the root) instead of DDP")
    parser.add_argument("--out", help="write the figures to this JSON file")
    args = parser.parse_args()
    context = mp.get_context("spawn")
    out = context.Queue()
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "store")
        procs = [
            context.Process(target=run_rank, args=(rank, 2, store, args, out))
            for rank in range(2)
        ]
        for proc in procs:
            proc.start()
        results = out.get(timeout=3600)
        for proc in procs:
            proc.join(timeout=60)
    figures = report(results, args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
