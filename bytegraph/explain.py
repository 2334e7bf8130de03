"""explain(fn)(*args): what bytegraph did with one call, as a report a person can act on.

The report lists every graph captured (the function's own, its resume
functions' and those of callees compiled at a break), every graph break with
its reason, the user's file:line, the source line and the chain of inlined
frames, the ops of each graph, the guards of each cache entry, and the time
spent tracing and in the backend.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import torch

from bytegraph.exc import Unsupported, UserFrame
from bytegraph.graph.backends import Backend, lookup_backend


@dataclasses.dataclass(frozen=True)
class BreakReport:
    kind: str
    reason: str
    frames: tuple[UserFrame, ...]  # where it happened first, then the callers that inlined it
    hint: str
    ran_as_python: str | None  # why the whole frame ran as Python instead, if it did

    def __str__(self) -> str:
        lines = [f"{self.reason} [{self.kind}]"]
        for i, frame in enumerate(self.frames):
            lines.append(f"  {'at' if i == 0 else 'inlined from'} {frame}")
        lines.append(f"  hint: {self.hint}")
        if self.ran_as_python:
            lines.append(f"  no break possible, the frame ran as Python: {self.ran_as_python}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class GraphReport:
    graph: torch.fx.GraphModule
    ops: tuple[str, ...]
    backend_seconds: float


@dataclasses.dataclass(frozen=True)
class ExplainOutput:
    graphs: list[torch.fx.GraphModule]
    graph_count: int
    graph_break_count: int
    breaks: list[BreakReport]
    ops_per_graph: list[list[str]]
    guards: list[str]  # one block per cache entry
    graph_reports: list[GraphReport]
    trace_seconds: float

    @property
    def backend_seconds(self) -> float:
        return sum(g.backend_seconds for g in self.graph_reports)

    def __str__(self) -> str:
        lines = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.graph_break_count}",
            f"Trace time: {self.trace_seconds * 1e3:.1f} ms "
            f"(of which backend: {self.backend_seconds * 1e3:.1f} ms)",
        ]
        for i, report in enumerate(self.graph_reports):
            lines.append(f"Graph {i}: {len(report.ops)} ops: {', '.join(report.ops)}")
        if self.breaks:
            lines.append("Break reasons:")
            lines.extend(f"  {i + 1}. " + str(b).replace("\n", "\n     ")
                         for i, b in enumerate(self.breaks))
        for i, guard in enumerate(self.guards):
            lines.append(f"Guards of cache entry {i}:")
            lines.extend(f"  {line}" for line in guard.splitlines())
        return "\n".join(lines)


class _RecordingBackend:
    """Wraps a backend, keeping each graph and the time the backend took."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.graphs: list[GraphReport] = []
        self.__name__ = getattr(backend, "__name__", "backend")

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        started = time.perf_counter()
        compiled = self.backend(gm, example_inputs)
        ops = tuple(_op_name(n) for n in gm.graph.nodes if n.op in ("call_function", "call_method"))
        self.graphs.append(GraphReport(gm, ops, time.perf_counter() - started))
        return compiled


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    if isinstance(target, str):
        return f"Tensor.{target}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", repr(target))
    return f"{module.replace('_operator', 'operator')}.{name}" if module else name


def explain(
    fn: Callable[..., Any], *, backend: str | Backend = "eager"
) -> Callable[..., ExplainOutput]:
    """``explain(fn)(*args, **kwargs)`` compiles and runs ``fn`` once and reports."""
    from bytegraph.api import CompiledModule, compile

    recorder = _RecordingBackend(lookup_backend(backend))

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        compiled = compile(fn, backend=recorder)
        compiled(*args, **kwargs)
        root = compiled._compiled_forward if isinstance(compiled, CompiledModule) else compiled
        entries = [e for f in _related(root) for e in f.entries]
        breaks = [_break_report(e.breaks) for e in entries if e.breaks]
        return ExplainOutput(
            graphs=[g.graph for g in recorder.graphs],
            graph_count=len(recorder.graphs),
            graph_break_count=len(breaks),
            breaks=breaks,
            ops_per_graph=[list(g.ops) for g in recorder.graphs],
            guards=[str(e.guard) for e in entries],
            graph_reports=list(recorder.graphs),
            trace_seconds=sum(e.compile_seconds for e in entries),
        )

    return run


def _related(root: Any) -> list[Any]:
    """The compiled function, its resume functions and compiled callees."""
    seen: dict[int, Any] = {}
    work = [root]
    while work:
        compiled = work.pop()
        if id(compiled) in seen:
            continue
        seen[id(compiled)] = compiled
        work.extend(compiled.resume_cache.values())
        work.extend(compiled.context.callee_cache.values())
    return list(seen.values())


def _break_report(reasons: tuple[Exception, ...]) -> BreakReport:
    reason = reasons[0]
    assert isinstance(reason, Unsupported)
    refused = None
    if len(reasons) > 1 and isinstance(reasons[1], Unsupported):
        refused = reasons[1].detail
    return BreakReport(reason.kind, reason.detail, reason.frames, reason.hint, refused)
