"""What each rank runs in tests/distributed/test_ddp.py (imported by spawned ranks, so no fixtures).

Every scenario trains or calls a compiled model beside its uncompiled twin,
on the same rank, from the same initial weights and the same inputs, and
compares after every step: the loss, every parameter's gradient (after
DDP's all-reduce) and every parameter (after the optimizer's step). Eager
and aot_eager must match bit for bit; Inductor, which fuses, within
``torch.testing.assert_close``'s tolerances. A scenario returns what the
parent asserts on (graph counts, DDP's bucket count), the same on every rank.

``run_scenarios(rank, world, names)`` runs several in one world, so the
test file pays for starting processes once; a scenario that raises is
returned as its traceback, and the others still run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from world import run_named

import bytegraph
from bytegraph.graph.backends import lookup_backend


class Counting:
    """A backend that counts the graphs it compiles and hands them to a named backend."""

    def __init__(self, name: str) -> None:
        self.inner = lookup_backend(name)
        self.calls = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.calls += 1
        return self.inner(gm, example_inputs)


def mlp(layers: int, width: int, out: int = 4) -> torch.nn.Module:
    torch.manual_seed(0)
    parts: list[torch.nn.Module] = []
    for _ in range(layers):
        parts += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    parts.append(torch.nn.Linear(width, out))
    return torch.nn.Sequential(*parts)


class WithUnused(torch.nn.Module):
    """A layer never used, and one used only when ``extra`` is true."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(16, 64)
        self.extra_layer = torch.nn.Linear(64, 64)
        self.never = torch.nn.Linear(64, 64)
        self.last = torch.nn.Linear(64, 4)

    def forward(self, x: torch.Tensor, extra: bool = False) -> torch.Tensor:
        h = torch.relu(self.first(x))
        if extra:
            h = torch.relu(self.extra_layer(h))
        return self.last(h)


def wrap(kind: str, model: torch.nn.Module, backend: Any, **ddp_kwargs: Any) -> torch.nn.Module:
    """``inner``: DDP(compile(model)); ``outer``: compile(DDP(model)); ``none``: DDP(model)."""
    if kind == "inner":
        return DistributedDataParallel(bytegraph.compile(model, backend=backend), **ddp_kwargs)
    if kind == "outer":
        return bytegraph.compile(DistributedDataParallel(model, **ddp_kwargs), backend=backend)
    return DistributedDataParallel(model, **ddp_kwargs)


def assert_same(actual: Any, expected: Any, exact: bool, what: str) -> None:
    if exact:
        assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"
    else:
        torch.testing.assert_close(actual, expected, msg=what)


def train(
    rank: int, kind: str, backend_name: str, make_model: Callable[[], torch.nn.Module],
    steps: int = 3, in_features: int = 32, extra_for_step: Any = None, hooked: bool = False,
    **ddp_kwargs: Any,
) -> dict[str, Any]:
    """``steps`` SGD steps of the compiled and the uncompiled DDP model, compared each step.
    ``hooked``: both outermost modules get a forward hook that doubles the output."""
    backend = Counting(backend_name)
    expected_model = DistributedDataParallel(make_model(), **ddp_kwargs)
    compiled_model = wrap(kind, make_model(), backend, **ddp_kwargs)
    if hooked:
        for model in (expected_model, compiled_model):
            model.register_forward_hook(lambda module, args, output: output * 2)
    # Two ranks' sums are a + b in any order; with more ranks, gloo's ring sums each slice
    # of a bucket in an order that depends on where it lies in the bucket, and DDP lays its
    # buckets out again after the first step by the order gradients arrived in.
    exact = backend_name != "inductor" and dist.get_world_size() == 2
    optimizers = [
        torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        for m in (expected_model, compiled_model)
    ]
    for step in range(steps):
        generator = torch.Generator().manual_seed(100 * step + rank)
        x = torch.randn(8, in_features, generator=generator)
        args = (x,) if extra_for_step is None else (x, extra_for_step(step))
        losses = []
        for model in (expected_model, compiled_model):
            loss = model(*args).square().mean()
            loss.backward()
            losses.append(loss.detach())
        assert_same(losses[1], losses[0], exact, f"loss at step {step}")
        pairs = list(zip(expected_model.parameters(), compiled_model.parameters(), strict=True))
        for i, (p, q) in enumerate(pairs):
            assert (p.grad is None) == (q.grad is None), f"grad {i} at step {step}"
            if p.grad is not None:
                assert_same(q.grad, p.grad, exact, f"grad of parameter {i} at step {step}")
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad()
        for i, (p, q) in enumerate(pairs):
            assert_same(q.detach(), p.detach(), exact, f"parameter {i} after step {step}")
    return {"graphs": backend.calls, "ddp_buckets": ddp_buckets(expected_model)}


def ddp_buckets(model: DistributedDataParallel) -> int:
    """How many buckets DDP's reducer makes of the parameters (in reverse order, as it sees
    gradients arrive) when it sizes them by its caps: its first bucket's, then the others'."""
    params = [p for p in model.parameters() if p.requires_grad]
    limits = [model._bucket_config.first_bucket_bytes_cap, model.bucket_bytes_cap]
    buckets, _ = dist._compute_bucket_assignment_by_size(list(reversed(params)), limits)
    return len(buckets)


# --- FSDP2 ----------------------------------------------------------------------------------


def sharded_mlp() -> torch.nn.Module:
    """``mlp(2, 32)`` with ``fully_shard`` on every Linear and at the root."""
    from torch.distributed.fsdp import fully_shard

    model = mlp(2, 32)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    return model


def fsdp_train(rank: int, backend_name: str, steps: int = 3) -> dict[str, Any]:
    """compile(model) of a model sharded per layer and at the root, beside the uncompiled one:
    loss, full gradients and full parameters equal after every step."""
    backend = Counting(backend_name)
    expected_model = sharded_mlp()
    compiled_model = bytegraph.compile(sharded_mlp(), backend=backend)
    optimizers = [
        torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        for m in (expected_model, compiled_model)
    ]
    for step in range(steps):
        x = torch.randn(8, 32, generator=torch.Generator().manual_seed(100 * step + rank))
        losses = []
        for model in (expected_model, compiled_model):
            loss = model(x).square().mean()
            loss.backward()
            losses.append(loss.detach())
        assert torch.equal(losses[1], losses[0]), f"loss at step {step}"
        pairs = list(zip(expected_model.parameters(), compiled_model.parameters(), strict=True))
        for i, (p, q) in enumerate(pairs):
            assert torch.equal(q.grad.full_tensor(), p.grad.full_tensor()), f"grad {i}, {step}"
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad()
        for i, (p, q) in enumerate(pairs):
            assert torch.equal(q.full_tensor(), p.full_tensor()), f"parameter {i}, {step}"
    return {"graphs": backend.calls}


# --- the registry ------------------------------------------------------------------------

SMALL = dict(make_model=lambda: mlp(2, 64), in_features=64, bucket_cap_mb=0.015)
SEVERAL = dict(make_model=lambda: mlp(5, 96), in_features=96, bucket_cap_mb=0.05)


def _unused(kind: str) -> Callable[[int], dict[str, Any]]:
    return lambda rank: train(
        rank, kind, "aot_eager", WithUnused, in_features=16, steps=4,
        extra_for_step=lambda step: step % 2 == 1, find_unused_parameters=True,
        bucket_cap_mb=0.01,
    )


def _split_off(rank: int) -> dict[str, Any]:
    bytegraph.config.optimize_ddp = False
    try:
        return train(rank, "inner", "aot_eager", **SEVERAL)
    finally:
        bytegraph.config.optimize_ddp = True


SCENARIOS: dict[str, Callable[[int], dict[str, Any]]] = {
    "inner_eager": lambda rank: train(rank, "inner", "eager", **SMALL),
    "inner_aot_eager": lambda rank: train(rank, "inner", "aot_eager", **SMALL),
    "outer_eager": lambda rank: train(rank, "outer", "eager", **SMALL),
    "outer_aot_eager": lambda rank: train(rank, "outer", "aot_eager", **SMALL),
    "outer_hooked": lambda rank: train(rank, "outer", "aot_eager", **SMALL, hooked=True),
    "several_buckets": lambda rank: train(rank, "outer", "aot_eager", **SEVERAL),
    "one_big_bucket": lambda rank: train(
        rank, "outer", "aot_eager", **{**SEVERAL, "bucket_cap_mb": 25}
    ),
    "split_off": _split_off,
    "unused_inner": _unused("inner"),
    "unused_outer": _unused("outer"),
    "inductor": lambda rank: train(rank, "inner", "inductor", **SMALL, steps=2),
    "fsdp_eager": lambda rank: fsdp_train(rank, "eager"),
    "fsdp_aot_eager": lambda rank: fsdp_train(rank, "aot_eager"),
}


def run_scenarios(rank: int, world_size: int, names: list[str]) -> dict[str, Any]:
    """Each named scenario's result, or ``{"error": traceback}`` (world.run_named)."""
    return run_named(SCENARIOS, rank, names)


def raise_on_rank_one(rank: int, world_size: int) -> None:
    """Rank 1 raises; the others wait in a collective it never joins."""
    if rank == 1:
        raise RuntimeError("rank 1 failed on purpose")
    dist.barrier()
