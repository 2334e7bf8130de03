"""Recording: what explain() and the command line watch while a program runs.

While a ``Recording`` is active (``with Recording() as rec:``):

1. every ``bytegraph.compile`` call hands its backend to ``rec.backend``,
   which wraps it so each graph the backend gets is kept with the time the
   backend took (``GraphReport``), in compile order;
2. every compiled function or module ``compile`` returns is kept as a root
   (``rec.roots``); its resume functions and compiled callees hang off it;
3. every recompile is kept (``rec.recompiles``): which function compiled
   again and the guard of its newest entry that failed.

It subscribes to the core's events (``bytegraph/events.py``) while active:
``WRAP_BACKEND``, ``ROOT_COMPILED`` and ``RECOMPILE``. Nothing here runs on
the call path: ``compile()`` publishes once per call, and the recompile
message is built only on a cache miss. Recordings nest: every active one
sees what is compiled, so ``bytegraph explain`` still sees graphs that a
script's own ``bytegraph.explain(...)`` call compiled.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

from bytegraph import events
from bytegraph.graph.backends import Backend


@dataclasses.dataclass(frozen=True)
class GraphReport:
    graph: torch.fx.GraphModule
    ops: tuple[str, ...]
    backend_seconds: float


@dataclasses.dataclass(frozen=True)
class RecompileReport:
    """A function compiled again because a guard of its newest entry failed."""

    function: str  # qualified name
    filename: str
    lineno: int
    failed_guard: str  # the guard's text and the value that failed it
    decided: str  # what automatic dynamic shapes decided for the new entry, if anything


class RecordingBackend:
    """Wraps a backend, keeping each graph and the time the backend took."""

    def __init__(self, backend: Backend, graphs: list[GraphReport]) -> None:
        self.backend = backend
        self.graphs = graphs
        self.__name__ = getattr(backend, "__name__", "backend")

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        started = time.perf_counter()
        compiled = self.backend(gm, example_inputs)
        ops = tuple(op_name(n) for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
        self.graphs.append(GraphReport(gm, ops, time.perf_counter() - started))
        return compiled


def op_name(node: torch.fx.Node) -> str:
    """``operator.add``, ``Tensor.relu``, ``torch.sin``: a node's target as a person reads it."""
    target = node.target
    if isinstance(target, str):
        return f"Tensor.{target}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", repr(target))
    return f"{module.replace('_operator', 'operator')}.{name}" if module else name


class Recording:
    """The graphs, compiled roots and recompiles of everything compiled while active."""

    def __init__(self) -> None:
        self.graphs: list[GraphReport] = []
        self.roots: list[Any] = []
        self.recompiles: list[RecompileReport] = []

    def backend(self, backend: Backend) -> Backend:
        """``backend`` wrapped to record its graphs."""
        return RecordingBackend(backend, self.graphs)

    def add_root(self, compiled: Any) -> None:
        if all(compiled is not r for r in self.roots):
            self.roots.append(compiled)

    def _recompiled(
        self, function: str, filename: str, lineno: int, failed: str, decided: str
    ) -> None:
        self.recompiles.append(RecompileReport(
            function, filename, lineno, str(failed), decided.lstrip("; ")
        ))

    def _subscriptions(self) -> tuple[tuple[events.Event, Callable[..., Any]], ...]:
        return (
            (events.WRAP_BACKEND, self.backend),
            (events.ROOT_COMPILED, self.add_root),
            (events.RECOMPILE, self._recompiled),
        )

    def __enter__(self) -> Recording:
        for event, subscriber in self._subscriptions():
            event.subscribe(subscriber)
        return self

    def __exit__(self, *exc: object) -> None:
        for event, subscriber in self._subscriptions():
            event.unsubscribe(subscriber)
