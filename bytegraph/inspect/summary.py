"""The one-screen summary that ``bytegraph run`` prints when a script ends.

It reads the same report as ``bytegraph explain`` (``explain.report_of`` of
a ``Recording``) and keeps what fits on one screen: how many torch.compile
calls were routed, the frames compiled (functions handed to compile, resume
functions after breaks, callees compiled at a break) and their cache
entries, the graphs and their ops, the graph breaks grouped by place and
reason (most frequent first, the first ``top``), the recompiles grouped by
function, and the time spent tracing and compiling::

    bytegraph run: train.py
      torch.compile calls routed to bytegraph: 1
      frames compiled: 3 (1 compiled, 2 resume functions), 4 cache entries
      graphs: 3 (41 ops)
      graph breaks: 2 at 1 place
         2x model.py:31  call of print [B109 print_or_logging]
      recompiles: 1
         1x forward (model.py:12): guard failed: x.size()[0] == 8 (x.size()[0] is 16)
      time tracing and compiling: 1.24 s (backend: 0.81 s)
"""

from __future__ import annotations

import collections
import os

from bytegraph.inspect.explain import BreakReport, ExplainOutput

__all__ = ["run_summary"]

_WIDTH = 150  # one line of the summary at most, so that it stays one screen


def run_summary(report: ExplainOutput, script: str, routed_calls: int, top: int = 10) -> str:
    """The summary of a whole run (report: ``report_of`` the run's Recording)."""
    lines = [f"bytegraph run: {script}",
             f"  torch.compile calls routed to bytegraph: {routed_calls}"]
    lines.append(f"  frames compiled: {_frames(report)}")
    lines.append(f"  graphs: {report.graph_count} ({report.op_count} ops)")
    lines += _breaks(report.breaks, top)
    lines += _recompiles(report, top)
    lines.append(f"  time tracing and compiling: {report.trace_seconds:.2f} s "
                 f"(backend: {report.backend_seconds:.2f} s)")
    return "\n".join(_clip(line) for line in lines)


def _frames(report: ExplainOutput) -> str:
    """``3 (1 compiled, 2 resume functions), 4 cache entries``."""
    frames: dict[tuple[str, str, int], str] = {}
    for entry in report.entries:
        frames.setdefault((entry.function, entry.filename, entry.lineno), entry.role)
    roles = collections.Counter(frames.values())
    names = {"compiled": "compiled", "resume": "resume functions", "callee": "callees"}
    parts = [f"{roles[role]} {name}" for role, name in names.items() if roles[role]]
    detail = f" ({', '.join(parts)})" if parts else ""
    return f"{len(frames)}{detail}, {len(report.entries)} cache entries"


def _breaks(breaks: list[BreakReport], top: int) -> list[str]:
    places = collections.Counter((_where(b), _reason(b)) for b in breaks)
    if not breaks:
        return ["  graph breaks: 0"]
    plural = "s" if len(places) > 1 else ""
    lines = [f"  graph breaks: {len(breaks)} at {len(places)} place{plural}"]
    lines += [f"    {count:>3}x {where}  {reason}"
              for (where, reason), count in places.most_common(top)]
    if len(places) > top:
        lines.append(f"    ... and {len(places) - top} more (bytegraph explain lists them all)")
    return lines


def _where(report: BreakReport) -> str:
    if not report.frames:
        return "?"
    frame = report.frames[0]
    return f"{_short_path(frame.filename)}:{frame.lineno}"


def _reason(report: BreakReport) -> str:
    reason = " ".join(report.reason.split())  # one line
    return f"{reason} [{report.entry}]" if report.entry else reason


def _recompiles(report: ExplainOutput, top: int) -> list[str]:
    if not report.recompiles:
        return ["  recompiles: 0"]
    groups: dict[str, list[str]] = {}
    for r in report.recompiles:
        key = f"{r.function} ({_short_path(r.filename)}:{r.lineno})"
        groups.setdefault(key, []).append(" ".join(r.failed_guard.split()))
    ranked = sorted(groups.items(), key=lambda item: -len(item[1]))
    lines = [f"  recompiles: {len(report.recompiles)}"]
    lines += [f"    {len(guards):>3}x {key}: guard failed: {guards[-1]}"
              for key, guards in ranked[:top]]
    if len(ranked) > top:
        lines.append(f"    ... and {len(ranked) - top} more functions")
    return lines


def _short_path(path: str) -> str:
    """A path under the working directory relative to it, an installed package's from its
    package (``transformers/utils/generic.py``); others as they are."""
    _, installed, inside = path.rpartition("-packages" + os.sep)
    if installed:
        return inside
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith("..") else relative


def _clip(line: str) -> str:
    return line if len(line) <= _WIDTH else line[:_WIDTH - 3] + "..."
