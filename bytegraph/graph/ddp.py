"""DDP bucket splitting: one graph per gradient bucket, so all-reduce overlaps the backward.

DistributedDataParallel all-reduces gradients in buckets of about
``bucket_cap_mb``, each launched by autograd hooks as soon as every gradient
in it is ready. A graph compiled by AOTAutograd (aot_eager, Inductor) runs
its whole backward as one autograd node, so every gradient becomes ready at
once, at the end, and no all-reduce overlaps any backward work. Splitting the
graph restores the overlap: each piece has its own backward, which hands its
parameters' gradients to DDP as soon as it finishes.

How a graph compiled while a DDP forward runs (``DistributedDataParallel.
_get_active_ddp_module()``, which DDP sets around its module's call, is
not None) is split, when ``config.optimize_ddp`` is on:

1. The parameters among the graph's inputs that DDP reduces (a Parameter
   that requires grad and that DDP does not ignore, ``_ddp_ignored``) are
   each charged, by size, to the node that uses it first in forward order:
   its gradient is complete only once that node's backward has run.
2. The nodes are walked backwards (the backward's order). A bucket takes
   nodes until the parameters charged to it reach DDP's cap (the first
   bucket's cap for the first one, as DDP sizes its own first bucket); the
   next node opens a new bucket, provided the full one hands a value on
   (otherwise it keeps growing until one of its nodes does).
3. ``torch.fx.passes.split_module`` cuts the graph into one GraphModule per
   bucket, each returning a tuple (the form AOTAutograd expects).
4. Each piece is compiled by the user's backend on the first call, with the
   values it really receives as example inputs (exact strides: the previous
   piece's output is what the backend sees). A piece that does not compile
   raises as an unsplit graph would.

What is never split (one graph, compiled as usual, still correct): a graph
of one bucket; a graph that switches grad mode or autocast inside it or
holds a higher-order op's body (a piece boundary inside such a region would
lose the region); a dynamic-shape trace (its example inputs are fake tensors
and a piece compiled on real values would be size-specific).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.fx

from bytegraph import config, logs
from bytegraph.graph.backends import Backend, call_backend


def wrap_for_ddp(backend: Backend) -> Backend:
    """``backend``, or a splitting backend when a DDP forward is running and splitting is on."""
    ddp = active_ddp_module()
    if ddp is None or not config.optimize_ddp:
        return backend
    return BucketSplitter(backend, bucket_caps(ddp))


def active_ddp_module() -> Any:
    """The DistributedDataParallel whose forward is running (DDP's own marker), or None."""
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel._get_active_ddp_module()


def bucket_caps(ddp: Any) -> tuple[int, int]:
    """DDP's (first bucket, other buckets) caps in bytes: ``bucket_cap_mb``, and the
    1 MiB first bucket DDP uses when ``bucket_cap_mb`` is left to its default."""
    cap = int(ddp.bucket_bytes_cap)
    bucket_config = getattr(ddp, "_bucket_config", None)
    first = getattr(bucket_config, "first_bucket_bytes_cap", None)
    if first is None:
        first = min(cap, torch.distributed._DEFAULT_FIRST_BUCKET_BYTES)
    return int(first), cap


@dataclasses.dataclass
class Bucket:
    """Nodes of one piece (in reverse order) and the bytes of parameters charged to it."""

    nodes: list[torch.fx.Node] = dataclasses.field(default_factory=list)
    size: int = 0


class BucketSplitter:
    """A backend: the graph cut at DDP's bucket boundaries, each piece compiled by ``backend``."""

    def __init__(self, backend: Backend, caps: tuple[int, int]) -> None:
        self.backend = backend
        self.first_cap, self.cap = caps
        self.__name__ = getattr(backend, "__name__", type(backend).__name__)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        reason = unsplittable(gm, example_inputs)
        buckets = [] if reason else self.buckets(gm, example_inputs)
        if len(buckets) <= 1:
            if logs.enabled("ddp"):
                logs.get_logger("ddp").info("not split: %s", reason or "one bucket")
            return self.backend(gm, example_inputs)
        split = split_at(gm, buckets, self.backend)
        if logs.enabled("ddp"):
            logs.get_logger("ddp").info(
                "split into %d graphs:\n%s", len(buckets), split.print_readable(print_output=False)
            )
        return split.forward

    def buckets(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[Bucket]:
        """The pieces, first in backward order (the last piece of the forward) first."""
        charges = parameter_charges(gm, example_inputs)
        buckets = [Bucket()]
        for node in reversed(gm.graph.nodes):
            if node.op in ("placeholder", "output"):
                continue
            current = buckets[-1]
            cap = self.first_cap if len(buckets) == 1 else self.cap
            if current.size >= cap and hands_on(current):
                current = Bucket()
                buckets.append(current)
            current.nodes.append(node)
            current.size += charges.get(node, 0)
        if len(buckets) > 1 and buckets[-1].size == 0:
            # Nodes before the first parameter's use: no gradient of theirs to wait for.
            buckets[-2].nodes.extend(buckets.pop().nodes)
        return buckets


def unsplittable(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> str | None:
    """Why ``gm`` stays one graph, or None."""
    if any(isinstance(value, torch.SymInt) or _is_fake(value) for value in example_inputs):
        return "a dynamic-shape trace"
    for node in gm.graph.nodes:
        if node.op == "get_attr" and isinstance(
            getattr(gm, node.target, None), torch.fx.GraphModule
        ):
            return "a higher-order op's body in the graph"
        if node.op == "call_function" and _switches_state(node.target):
            return f"{getattr(node.target, '__name__', node.target)} in the graph"
    return None


def _is_fake(value: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(value, FakeTensor)


def _switches_state(target: Any) -> bool:
    """A call that sets global state later nodes run under (grad mode, autocast)."""
    name = getattr(target, "__name__", "")
    return target is torch._C._set_grad_enabled or "autocast" in name


def parameter_charges(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> dict[Any, int]:
    """Bytes of DDP-reduced parameters charged to each node: to a parameter's first user."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    order = {node: i for i, node in enumerate(gm.graph.nodes)}
    charges: dict[Any, int] = {}
    for node, value in zip(placeholders, example_inputs):
        if not _reduced_by_ddp(value) or not node.users:
            continue
        first_user = min(node.users, key=order.__getitem__)
        charges[first_user] = charges.get(first_user, 0) + value.untyped_storage().nbytes()
    return charges


def _reduced_by_ddp(value: Any) -> bool:
    return (
        isinstance(value, torch.nn.Parameter)
        and value.requires_grad
        and not getattr(value, "_ddp_ignored", False)
    )


def hands_on(bucket: Bucket) -> bool:
    """Some node of ``bucket`` is used outside it (else a piece cut here would give nothing)."""
    inside = set(bucket.nodes)
    return any(user not in inside for node in bucket.nodes for user in node.users)


def split_at(
    gm: torch.fx.GraphModule, buckets: list[Bucket], backend: Backend
) -> torch.fx.GraphModule:
    """``gm`` as one GraphModule calling a piece per bucket, each compiled on first call."""
    from torch.fx.passes.split_module import split_module

    count = len(buckets)
    piece_of = {
        node: count - 1 - index for index, bucket in enumerate(buckets) for node in bucket.nodes
    }
    split = split_module(gm, None, piece_of.__getitem__, tuple_return=True)
    for name, piece in list(_pieces(split)):
        setattr(split, name, LazyPiece(piece, backend))
    return split


def _pieces(split: torch.fx.GraphModule) -> Iterator[tuple[str, torch.fx.GraphModule]]:
    for node in split.graph.nodes:
        if node.op == "call_module":
            yield node.target, getattr(split, node.target)


class LazyPiece(torch.nn.Module):
    """One piece: compiled by the backend on its first call, with that call's values."""

    def __init__(self, piece: torch.fx.GraphModule, backend: Backend) -> None:
        super().__init__()
        self.piece = piece
        self.backend = backend
        self.compiled: Callable[..., Any] | None = None
        self.lock = threading.Lock()

    def forward(self, *args: Any) -> Any:
        compiled = self.compiled
        if compiled is None:
            with self.lock:
                if self.compiled is None:
                    self.compiled = call_backend(self.backend, self.piece, list(args))
                compiled = self.compiled
        return tuple(compiled(*args))
