"""The benchmarks' counting backend: keeps each graph, runs it as is, counts its ops."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

CALLS = ("call_function", "call_method", "call_module")


class CountingBackend:
    """Keeps each GraphModule it receives and runs it as is."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs.append(gm)
        return gm.forward

    @property
    def ops(self) -> int:
        return sum(op_count(gm, nested=False) for gm in self.graphs)

    @property
    def ops_all(self) -> int:
        """``ops`` plus the call nodes of every subgraph installed in the graphs (the
        bodies of cond, checkpoint, torch.func transforms, invoke_subgraph...), so a
        system that keeps a body as a subgraph and one that inlines it count alike."""
        return sum(op_count(gm, nested=True) for gm in self.graphs)


def op_count(gm: torch.nn.Module, nested: bool) -> int:
    """Call nodes of ``gm``; with ``nested``, also of every GraphModule installed in it."""
    own = sum(1 for n in gm.graph.nodes if n.op in CALLS) if hasattr(gm, "graph") else 0
    if not nested:
        return own
    return own + sum(op_count(child, True) for child in gm.children()
                     if isinstance(child, torch.fx.GraphModule))
