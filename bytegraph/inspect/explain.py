"""explain(fn)(*args): what bytegraph did with one call, as a report a person can act on.

The report lists every graph captured (the function's own, its resume
functions' and those of callees compiled at a break), every graph break with
its reason, the user's file:line, the source line and the chain of inlined
frames, the ops of each graph, the guards of each cache entry, the recompiles
with the guard that failed, and the time spent tracing and in the backend.

``ExplainOutput`` also speaks ``torch._dynamo.explain``'s dialect: a script
written against torch's report reads ``graphs``, ``graph_count``,
``graph_break_count``, ``break_reasons`` (each with ``.reason`` and
``.user_stack``, a list of ``traceback.FrameSummary``, outermost first),
``op_count``, ``ops_per_graph``, ``out_guards`` and ``compile_times`` (a
str) unchanged. ``ops_per_graph`` holds op names (``"operator.add"``), not
torch's raw targets: the names are what a person compares and prints.

``report_of(recording)`` builds the same report from a ``Recording``
(recording.py) of a whole program; the command line (cli.py) uses it.
"""

from __future__ import annotations

import collections
import dataclasses
import dis
import traceback
import types
from collections.abc import Callable
from typing import Any

import torch

from bytegraph.exc import Unsupported, UserFrame
from bytegraph.graph.backends import Backend, lookup_backend
from bytegraph.inspect.recording import GraphReport, RecompileReport, Recording
from bytegraph.translate.resume import is_entered_code

__all__ = [
    "BreakReason", "BreakReport", "EntryReport", "ExplainOutput", "GraphReport",
    "RecompileReport", "explain", "report_of",
]


@dataclasses.dataclass(frozen=True)
class BreakReason:
    """One break in the shape of torch's ``GraphCompileReason``."""

    reason: str
    user_stack: list[traceback.FrameSummary]  # outermost caller first, as in a traceback
    graph_break: bool = True


@dataclasses.dataclass(frozen=True)
class BreakReport:
    kind: str
    reason: str
    frames: tuple[UserFrame, ...]  # where it happened first, then the callers that inlined it
    hint: str
    ran_as_python: str | None  # why the whole frame ran as Python instead, if it did
    entry: str = ""  # the graph-break catalogue's id and name: "B109 print_or_logging"

    def __str__(self) -> str:
        lines = [f"{self.reason} [{self.entry}, {self.kind}]" if self.entry else
                 f"{self.reason} [{self.kind}]"]
        for i, frame in enumerate(self.frames):
            lines.append(f"  {'at' if i == 0 else 'inlined from'} {frame}")
        lines.append(f"  hint: {self.hint}")
        if self.ran_as_python:
            lines.append(f"  no break possible, the frame ran as Python: {self.ran_as_python}")
        return "\n".join(lines)

    def as_compile_reason(self) -> BreakReason:
        stack = [
            traceback.FrameSummary(f.filename, f.lineno, f.name, line=f.source_line)
            for f in reversed(self.frames)
        ]
        return BreakReason(self.reason, stack)


@dataclasses.dataclass(frozen=True)
class EntryReport:
    """One cache entry: the function it belongs to, its guards, graphs and break."""

    function: str  # qualified name; a resume function's reads ``f.<resume at 12>``
    filename: str
    lineno: int  # the function's first line; a resume function's: where it continues
    role: str  # "compiled" (handed to compile), "resume" or "callee"
    guards: str
    graphs: tuple[int, ...]  # indices into ExplainOutput.graphs
    break_index: int | None  # index into ExplainOutput.breaks
    compile_seconds: float
    # Seconds per stage of that compile: translate, graph, backend, codegen, guards
    # (translate/stage_times.py); the rest of compile_seconds is setting the trace up.
    stage_seconds: tuple[tuple[str, float], ...] = ()


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
    entries: list[EntryReport] = dataclasses.field(default_factory=list)
    recompiles: list[RecompileReport] = dataclasses.field(default_factory=list)

    @property
    def backend_seconds(self) -> float:
        return sum(g.backend_seconds for g in self.graph_reports)

    @property
    def break_reasons(self) -> list[BreakReason]:
        return [b.as_compile_reason() for b in self.breaks]

    @property
    def op_count(self) -> int:
        return sum(len(ops) for ops in self.ops_per_graph)

    @property
    def out_guards(self) -> list[str]:
        """Every guard of every entry, one readable condition each."""
        return [line for block in self.guards for line in block.splitlines()]

    @property
    def compile_times(self) -> str:
        """Seconds per compile of each function, as torch's ``compile_times`` table."""
        times: dict[str, list[float]] = {}
        for entry in self.entries:
            times.setdefault(entry.function, []).append(entry.compile_seconds)
        width = max((len(name) for name in times), default=8)
        rows = [f"{'Function':<{width}}  Runtimes (s)"]
        rows += [
            f"{name:<{width}}  {', '.join(f'{s:.4f}' for s in seconds)}"
            for name, seconds in times.items()
        ]
        return "bytegraph compilation metrics:\n" + "\n".join(rows)

    @property
    def stage_seconds(self) -> dict[str, float]:
        """Seconds per compile stage, summed over every entry (translate/stage_times.py)."""
        totals: dict[str, float] = {}
        for entry in self.entries:
            for stage, seconds in entry.stage_seconds:
                totals[stage] = totals.get(stage, 0.0) + seconds
        return totals

    def graph_owner(self, index: int) -> EntryReport | None:
        """The entry whose code calls graph ``index``."""
        return next((e for e in self.entries if index in e.graphs), None)

    def to_html(self) -> str:
        """This report as one self-contained HTML page (report_html.py)."""
        from bytegraph.inspect.report_html import render_html

        return render_html(self)

    def __str__(self) -> str:
        lines = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.graph_break_count}",
            f"Op count: {self.op_count}",
            f"Trace time: {self.trace_seconds * 1e3:.1f} ms "
            f"(of which backend: {self.backend_seconds * 1e3:.1f} ms)",
        ]
        if self.stage_seconds:
            stages = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in self.stage_seconds.items())
            lines.append(f"Trace time by stage: {stages} ms")
        for i, report in enumerate(self.graph_reports):
            lines.append(f"Graph {i}: {len(report.ops)} ops: {', '.join(report.ops)}")
        if self.breaks:
            lines.append("Break reasons:")
            lines.extend(f"  {i + 1}. " + str(b).replace("\n", "\n     ")
                         for i, b in enumerate(self.breaks))
        for i, report in enumerate(self.graph_reports):
            owner = self.graph_owner(i)
            lines.append(f"Code of graph {i}" + (f" (in {owner.function}):" if owner else ":"))
            lines.extend(f"  {line}" for line in graph_code(report.graph).splitlines())
        for i, guard in enumerate(self.guards):
            entry = self.entries[i] if i < len(self.entries) else None
            about = f" ({_describe_entry(entry)})" if entry else ""
            lines.append(f"Guards of cache entry {i}{about}:")
            lines.extend(f"  {line}" for line in guard.splitlines())
        if self.recompiles:
            lines.append("Recompiles:")
            lines.extend(f"  {_describe_recompile(r)}" for r in self.recompiles)
        return "\n".join(lines)


def graph_code(gm: torch.fx.GraphModule) -> str:
    """The graph's Python code (``gm.code``) without its surrounding blank lines."""
    return gm.code.strip("\n").rstrip()


def _describe_entry(entry: EntryReport) -> str:
    where = f"{entry.filename}:{entry.lineno}"
    role = {"resume": "resume function, continues at ", "callee": "callee at "}.get(entry.role, "")
    return f"{entry.function}, {role}{where}, compiled in {entry.compile_seconds * 1e3:.1f} ms"


def _describe_recompile(recompile: RecompileReport) -> str:
    text = (f"{recompile.function} ({recompile.filename}:{recompile.lineno}): "
            f"guard failed: {recompile.failed_guard}")
    return text + (f"; {recompile.decided}" if recompile.decided else "")


def explain(
    fn: Callable[..., Any], *, backend: str | Backend = "eager"
) -> Callable[..., ExplainOutput]:
    """``explain(fn)(*args, **kwargs)`` compiles and runs ``fn`` once and reports."""
    from bytegraph.api import compile

    backend_fn = lookup_backend(backend)

    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        with Recording() as recording:
            compiled = compile(fn, backend=backend_fn)
            compiled(*args, **kwargs)
        return report_of(recording)

    return run


def report_of(recording: Recording) -> ExplainOutput:
    """The report of everything compiled while ``recording`` was active."""
    graph_index = {id(g.graph): i for i, g in enumerate(recording.graphs)}
    functions = _related([compiled_function(r) for r in recording.roots])
    roots = {id(compiled_function(r)) for r in recording.roots}
    entries, breaks, guards = [], [], []
    for compiled, resume_line in functions:
        for entry in reversed(compiled.entries):  # oldest first
            break_index = None
            if entry.breaks:
                break_index = len(breaks)
                breaks.append(_break_report(entry.breaks))
            guards.append(str(entry.guard))
            entries.append(_entry_report(
                compiled, entry, resume_line, roots, graph_index, break_index, guards[-1]
            ))
    return ExplainOutput(
        graphs=[g.graph for g in recording.graphs],
        graph_count=len(recording.graphs),
        graph_break_count=len(breaks),
        breaks=breaks,
        ops_per_graph=[list(g.ops) for g in recording.graphs],
        guards=guards,
        graph_reports=list(recording.graphs),
        trace_seconds=sum(e.compile_seconds for e in entries),
        entries=entries,
        recompiles=list(recording.recompiles),
    )


def _entry_report(
    compiled: Any, entry: Any, resume_line: int | None, roots: set[int],
    graph_index: dict[int, int], break_index: int | None, guards: str,
) -> EntryReport:
    code = compiled.fn.__code__
    role = "compiled" if id(compiled) in roots else "callee"
    if resume_line is not None:
        role = "resume"
    return EntryReport(
        function=code.co_qualname,
        filename=code.co_filename,
        lineno=resume_line if resume_line is not None else code.co_firstlineno,
        role=role,
        guards=guards,
        graphs=tuple(graph_index[id(g)] for g in entry.graphs if id(g) in graph_index),
        break_index=break_index,
        compile_seconds=entry.compile_seconds,
        stage_seconds=entry.stage_seconds,
    )


def compiled_function(root: Any) -> Any:
    """The CompiledFunction behind what ``compile`` returned (a module's forward, a method)."""
    root = getattr(root, "_compiled_forward", root)
    return root.__func__ if isinstance(root, types.MethodType) else root


def _related(roots: list[Any]) -> list[tuple[Any, int | None]]:
    """The compiled functions, their resume functions and compiled callees, each once, with
    the line a resume function continues at (None for the others)."""
    seen: dict[int, tuple[Any, int | None]] = {}
    work = collections.deque(roots)  # breadth first: roughly the order they compiled in
    while work:
        compiled = work.popleft()
        if id(compiled) in seen:
            continue
        seen[id(compiled)] = (compiled, resume_line(compiled.fn.__code__))
        work.extend(compiled.resume_cache.values())
        work.extend(compiled.context.callee_cache.values())
        work.extend(c for c in compiled.router.compiled() if c is not compiled)
    return list(seen.values())


def resume_line(code: types.CodeType) -> int | None:
    """The user's line where a resume function's code continues; None for other code.

    A resume function's prologue (translate/resume.py) ends with a jump to its
    target instruction, which keeps the original code's line.
    """
    if not is_entered_code(code):
        return None
    instructions = list(dis.get_instructions(code))
    jump = next((i for i in instructions if i.opname.startswith("JUMP")), None)
    if jump is None:
        return None
    target = next((i for i in instructions if i.offset == jump.argval), None)
    return target.positions.lineno if target is not None and target.positions else None


def _break_report(reasons: tuple[Exception, ...]) -> BreakReport:
    reason = reasons[0]
    assert isinstance(reason, Unsupported)
    refused = None
    if len(reasons) > 1 and isinstance(reasons[1], Unsupported):
        refused = reasons[1].detail
    entry = f"{reason.entry.id} {reason.entry.name}"
    return BreakReport(reason.kind, reason.detail, reason.frames, reason.hint, refused, entry)
