"""Recording: what explain() and the command line watch while a program runs.

While a ``Recording`` is active (``with Recording() as rec:``):

1. every ``bytegraph.compile`` call hands its backend to ``rec.backend``,
   which wraps it so each graph the backend gets is kept with the time the
   backend took (``GraphReport``), in compile order;
2. every compiled function or module ``compile`` returns is kept as a root
   (``rec.roots``); its resume functions and compiled callees hang off it;
3. the ``recompiles`` log artifact is switched on for the duration and its
   records are kept (``rec.recompiles``): which function compiled again and
   the guard of its newest entry that failed.

Nothing here runs on the call path: ``api.compile`` looks at the active
recording once per ``compile`` call, and the recompile message is built only
on a cache miss. Recordings nest: an inner one passes what it sees on to the
outer one, so ``bytegraph explain`` still sees graphs that a script's own
``bytegraph.explain(...)`` call compiled.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from bytegraph import api, logs
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


class _RecompileHandler(logging.Handler):
    def __init__(self, reports: list[RecompileReport]) -> None:
        super().__init__(logging.INFO)
        self.reports = reports

    def emit(self, record: logging.LogRecord) -> None:
        # api.CompiledFunction._lookup_or_compile logs (qualname, file, line, failed, decided).
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            name, filename, lineno, failed, decided = args
            self.reports.append(RecompileReport(
                str(name), str(filename), int(lineno), str(failed), str(decided).lstrip("; "),
            ))


class Recording:
    """The graphs, compiled roots and recompiles of everything compiled while active."""

    def __init__(self) -> None:
        self.graphs: list[GraphReport] = []
        self.roots: list[Any] = []
        self.recompiles: list[RecompileReport] = []
        self._outer: Recording | None = None
        self._handler = _RecompileHandler(self.recompiles)
        self._saved: tuple[int, bool] | None = None

    def backend(self, backend: Backend) -> Backend:
        """``backend`` wrapped to record its graphs (and the outer recording's, if any)."""
        wrapped: Backend = RecordingBackend(backend, self.graphs)
        return self._outer.backend(wrapped) if self._outer is not None else wrapped

    def add_root(self, compiled: Any) -> None:
        if all(compiled is not r for r in self.roots):
            self.roots.append(compiled)
        if self._outer is not None:
            self._outer.add_root(compiled)

    def __enter__(self) -> Recording:
        self._outer = api.active_recording
        api.active_recording = self
        logger = logs.get_logger("recompiles")
        if not logs.enabled("recompiles"):
            # Switched on for us only: nothing should reach the user's log handlers.
            self._saved = (logger.level, logger.propagate)
            logger.setLevel(logging.INFO)
            logger.propagate = False
        logger.addHandler(self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        api.active_recording = self._outer
        logger = logs.get_logger("recompiles")
        logger.removeHandler(self._handler)
        if self._saved is not None:
            logger.setLevel(self._saved[0])
            logger.propagate = self._saved[1]
            self._saved = None
