"""explain()'s report as one self-contained HTML page: ``render_html(report)``.

The page (``ExplainOutput.to_html()``, ``bytegraph explain ... --html PATH``)
has no scripts and loads nothing: styles and drawings are inline, so it can
be mailed or attached to an issue. It shows, top to bottom:

1. a summary (graphs, breaks, ops, time);
2. the user's source, numbered, each break marked at its line with the
   reason and hint (and the lines of the callers that inlined it), the line
   where each compiled function starts and where each resume function
   continues;
3. each graph drawn as SVG, with its code;
4. the guards of each cache entry, the recompiles with the guard that
   failed, and the compile times.

The graphs are drawn by ``graph_svg``, a small layered layout of our own
(each node one row below the deepest node it uses), rather than by
``torch.fx.passes.graph_drawer.FxGraphDrawer``: that one needs pydot and
Graphviz's ``dot`` binary, which pip cannot install and many machines lack,
and it would make the report depend on an external program for a picture
that a few rows of boxes show as well.
"""

from __future__ import annotations

import html
import os
from typing import Any

import torch

from bytegraph.inspect.explain import BreakReport, ExplainOutput, graph_code
from bytegraph.inspect.recording import op_name

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #1d2330; background: #fff; }
h1 { font-size: 22px; margin: 0 0 8px; } h2 { font-size: 18px; margin: 28px 0 8px; }
.summary span { display: inline-block; margin-right: 18px; padding: 4px 10px;
  background: #eef2f8; border-radius: 4px; }
table.source { border-collapse: collapse; font: 12px/1.45 ui-monospace, monospace; width: 100%; }
table.source td { padding: 0 8px; white-space: pre; vertical-align: top; }
td.no { color: #8a93a3; text-align: right; user-select: none; width: 48px; }
tr.break td { background: #ffe3e0; } tr.inlined td { background: #fff3dd; }
tr.entry td.no, tr.resume td.no { color: #1d5fbf; font-weight: bold; }
tr.note td { white-space: normal; font-family: system-ui, sans-serif; font-size: 12px;
  padding: 2px 8px 6px 64px; color: #6b1a12; background: #fff7f6; }
tr.note.info td { color: #1d4f91; background: #f3f7fd; }
tr.gap td { color: #8a93a3; }
.file { margin: 12px 0 4px; font-weight: bold; }
.graph { border: 1px solid #d8dee8; border-radius: 6px; padding: 10px; margin: 12px 0; }
.graph .drawing { overflow: auto; max-height: 900px; }
pre { background: #f6f8fb; padding: 8px; overflow: auto; font-size: 12px; }
.break-item { margin: 8px 0; } .kind { color: #8a93a3; } .hint { color: #3b6b2e; }
table.rows { border-collapse: collapse; font-size: 13px; }
table.rows td, table.rows th { border: 1px solid #d8dee8; padding: 3px 8px; text-align: left; }
"""

_CONTEXT = 12  # lines shown around each marked line of a long file
_LONG_FILE = 400
_MAX_NODES = 250


def render_html(report: ExplainOutput) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>bytegraph report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>What bytegraph did</h1>",
        _summary(report),
        "<h2>Source</h2>",
        _sources(report),
        "<h2>Graphs</h2>",
        *(_graph_section(report, i) for i in range(report.graph_count)),
        "<h2>Graph breaks</h2>",
        _breaks(report.breaks),
        "<h2>Guards</h2>",
        _guards(report),
        "<h2>Recompiles</h2>",
        _recompiles(report),
        "<h2>Compile times</h2>",
        f"<pre>{_e(report.compile_times)}</pre>",
        "</body></html>",
    ]
    return "\n".join(parts)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _summary(report: ExplainOutput) -> str:
    items = [
        f"Graphs: <b>{report.graph_count}</b>",
        f"Graph breaks: <b>{report.graph_break_count}</b>",
        f"Ops: <b>{report.op_count}</b>",
        f"Cache entries: <b>{len(report.guards)}</b>",
        f"Recompiles: <b>{len(report.recompiles)}</b>",
        f"Trace time: <b>{report.trace_seconds * 1e3:.1f} ms</b>",
        f"Backend time: <b>{report.backend_seconds * 1e3:.1f} ms</b>",
    ]
    return '<div class="summary">' + "".join(f"<span>{i}</span>" for i in items) + "</div>"


# --- source --------------------------------------------------------------------------------


def _marks(report: ExplainOutput) -> dict[str, dict[int, list[tuple[str, str]]]]:
    """file -> line -> [(css class, note)]: breaks, inlining callers, entries, resumes.

    The same note from several entries (a break met again after a recompile) is shown
    once, naming every break number or the count of entries."""
    found: dict[str, dict[int, dict[tuple[str, str], list[str]]]] = {}

    def add(filename: str, line: int | None, kind: str, note: str, label: str) -> None:
        if line is not None:
            at = found.setdefault(filename, {}).setdefault(line, {})
            at.setdefault((kind, note), []).append(label)

    for i, brk in enumerate(report.breaks):
        for depth, frame in enumerate(brk.frames):
            if depth == 0:
                note = f"{brk.reason} [{_kind(brk)}]. Hint: {brk.hint}"
                if brk.ran_as_python:
                    note += f" (no break possible, the frame ran as Python: {brk.ran_as_python})"
                add(frame.filename, frame.lineno, "break", note, str(i + 1))
            else:
                add(frame.filename, frame.lineno, "inlined", "inside this call (inlined)",
                    str(i + 1))
    for entry in report.entries:
        if entry.role == "resume":
            add(entry.filename, entry.lineno, "resume", f"{entry.function} continues here", "")
        else:
            add(entry.filename, entry.lineno, "entry", f"compiled: {entry.function}", "")
    return {
        filename: {
            line: [(kind, _note(kind, note, labels)) for (kind, note), labels in notes.items()]
            for line, notes in lines.items()
        }
        for filename, lines in found.items()
    }


def _note(kind: str, note: str, labels: list[str]) -> str:
    if kind in ("break", "inlined"):
        numbers = ", ".join(dict.fromkeys(labels))
        what = "graph breaks" if len(set(labels)) > 1 else "graph break"
        return f"{what} {numbers}: {note}" if kind == "break" else f"{what} {numbers} {note}"
    return note + (f" ({len(labels)} cache entries)" if len(labels) > 1 else "")


def _sources(report: ExplainOutput) -> str:
    marks = _marks(report)
    sections = []
    for filename, lines in marks.items():
        source = _read(filename)
        if source is None:
            continue
        sections.append(f'<div class="file">{_e(filename)}</div>')
        sections.append(_source_table(source, lines))
    return "\n".join(sections) or "<p>No source file to show.</p>"


def _read(filename: str) -> list[str] | None:
    if not os.path.isfile(filename):
        return None
    try:
        with open(filename, encoding="utf-8") as f:
            return f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None


def _source_table(source: list[str], marks: dict[int, list[tuple[str, str]]]) -> str:
    shown = set(range(1, len(source) + 1))
    if len(source) > _LONG_FILE:
        shown = {
            n for line in marks for n in range(line - _CONTEXT, line + _CONTEXT + 1)
            if 1 <= n <= len(source)
        }
    rows, previous = [], 0
    for number in sorted(shown):
        if number != previous + 1:
            rows.append('<tr class="gap"><td class="no">…</td><td></td></tr>')
        previous = number
        here = marks.get(number, [])
        kinds = " ".join(dict.fromkeys(kind for kind, _ in here))
        rows.append(
            f'<tr class="line {kinds}" data-line="{number}"><td class="no">{number}</td>'
            f"<td>{_e(source[number - 1])}</td></tr>"
        )
        for kind, note in here:
            info = "" if kind in ("break", "inlined") else " info"
            rows.append(f'<tr class="note{info}" data-line="{number}" data-kind="{kind}">'
                        f'<td colspan="2">{_e(note)}</td></tr>')
    return '<table class="source">' + "\n".join(rows) + "</table>"


# --- graphs -------------------------------------------------------------------------------


def _graph_section(report: ExplainOutput, index: int) -> str:
    graph = report.graph_reports[index]
    owner = report.graph_owner(index)
    where = f" in {_e(owner.function)} ({_e(owner.filename)}:{owner.lineno})" if owner else ""
    return (
        f'<div class="graph" id="graph-{index}"><b>Graph {index}</b>{where}: '
        f"{len(graph.ops)} ops, backend {graph.backend_seconds * 1e3:.1f} ms"
        f'<div class="drawing">{graph_svg(graph.graph, index)}</div>'
        f"<details><summary>Code</summary><pre>{_e(graph_code(graph.graph))}</pre></details>"
        "</div>"
    )


_FILL = {"placeholder": "#dbe8fb", "output": "#dcf3dc", "get_attr": "#ececec"}
_CHAR_W, _BOX_H, _ROW_H, _GAP, _PER_ROW = 7.2, 34, 64, 16, 6


def graph_svg(gm: torch.fx.GraphModule, index: int = 0) -> str:
    """The graph's nodes as boxes in rows, each below every node it uses, with edges."""
    nodes = list(gm.graph.nodes)[:_MAX_NODES]
    rows = _rows(nodes)
    boxes: dict[torch.fx.Node, tuple[float, float, float]] = {}  # node -> x, y, width
    width = 0.0
    for r, row in enumerate(rows):
        x = _GAP
        for node in row:
            w = max(len(node.name), len(_label(node))) * _CHAR_W + 16
            boxes[node] = (x, r * _ROW_H + _GAP, w)
            x += w + _GAP
        width = max(width, x)
    height = len(rows) * _ROW_H + _GAP
    edges = [_edge(boxes[src], boxes[dst]) for dst in nodes for src in dst.all_input_nodes
             if src in boxes]
    drawn = [_box(node, *boxes[node]) for node in nodes]
    more = len(gm.graph.nodes) - len(nodes)
    note = (f'<text x="{_GAP}" y="{height + 4}" font-size="12">… {more} more nodes</text>'
            if more > 0 else "")
    return (
        f'<svg class="fx-graph" data-graph="{index}" data-nodes="{len(nodes)}" '
        f'xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height + 20:.0f}" '
        f'viewBox="0 0 {width:.0f} {height + 20:.0f}" font-family="ui-monospace, monospace">'
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#7a8699"/></marker>'
        "</defs>" + "".join(edges) + "".join(drawn) + note + "</svg>"
    )


def _rows(nodes: list[torch.fx.Node]) -> list[list[torch.fx.Node]]:
    """Nodes by depth (one more than the deepest input), wide depths split over rows."""
    depth: dict[torch.fx.Node, int] = {}
    for node in nodes:
        depth[node] = 1 + max((depth[i] for i in node.all_input_nodes if i in depth), default=-1)
    rows: list[list[torch.fx.Node]] = []
    for level in range(max(depth.values(), default=-1) + 1):
        members = [n for n in nodes if depth[n] == level]
        rows += [members[i:i + _PER_ROW] for i in range(0, len(members), _PER_ROW)]
    return rows


def _label(node: torch.fx.Node) -> str:
    if node.op in ("call_function", "call_method"):
        return op_name(node)
    if node.op == "call_module":
        return f"module {node.target}"
    return {"placeholder": "input", "output": "output"}.get(node.op, str(node.target))


def _box(node: torch.fx.Node, x: float, y: float, w: float) -> str:
    fill = _FILL.get(node.op, "#fff6d6")
    return (
        f'<g class="node" data-node="{_e(node.name)}" data-op="{_e(node.op)}">'
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{_BOX_H}" rx="5" '
        f'fill="{fill}" stroke="#7a8699"/>'
        f'<text x="{x + 8:.1f}" y="{y + 14:.1f}" font-size="12" font-weight="bold">'
        f"{_e(node.name)}</text>"
        f'<text x="{x + 8:.1f}" y="{y + 28:.1f}" font-size="11" fill="#4a5466">'
        f"{_e(_label(node))}</text></g>"
    )


def _edge(src: tuple[float, float, float], dst: tuple[float, float, float]) -> str:
    x1, y1 = src[0] + src[2] / 2, src[1] + _BOX_H
    x2, y2 = dst[0] + dst[2] / 2, dst[1]
    bend = (y2 - y1) / 2
    return (f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} '
            f'{x2:.1f},{y2 - bend:.1f} {x2:.1f},{y2:.1f}" fill="none" stroke="#7a8699" '
            'marker-end="url(#arrow)"/>')


# --- breaks, guards, recompiles -----------------------------------------------------------


def _breaks(breaks: list[BreakReport]) -> str:
    if not breaks:
        return "<p>No graph break.</p>"
    items = []
    for i, brk in enumerate(breaks):
        chain = "<br>".join(
            f"{'at' if d == 0 else 'inlined from'} {_e(f.filename)}:{f.lineno} in {_e(f.name)}"
            f"<br><code>{_e(f.source_line)}</code>"
            for d, f in enumerate(brk.frames)
        )
        python = (f"<br>No break possible, the frame ran as Python: {_e(brk.ran_as_python)}"
                  if brk.ran_as_python else "")
        items.append(
            f'<li class="break-item" data-break="{i}"><b>{_e(brk.reason)}</b> '
            f'<span class="kind">[{_e(_kind(brk))}]</span><br>{chain}'
            f'<br><span class="hint">Hint: {_e(brk.hint)}</span>{python}</li>'
        )
    return "<ol>" + "".join(items) + "</ol>"


def _kind(brk: BreakReport) -> str:
    """``B109 print_or_logging, unsupported_call``: the catalogue entry and the family."""
    return f"{brk.entry}, {brk.kind}" if brk.entry else brk.kind


def _guards(report: ExplainOutput) -> str:
    blocks = []
    for i, guards in enumerate(report.guards):
        entry = report.entries[i] if i < len(report.entries) else None
        title = f"Cache entry {i}"
        if entry is not None:
            title += (f": {entry.function} ({entry.filename}:{entry.lineno}), "
                      f"{len(guards.splitlines())} guards, "
                      f"compiled in {entry.compile_seconds * 1e3:.1f} ms")
        blocks.append(f'<details class="guards" data-entry="{i}"><summary>{_e(title)}</summary>'
                      f"<pre>{_e(guards)}</pre></details>")
    return "\n".join(blocks) or "<p>No cache entry.</p>"


def _recompiles(report: ExplainOutput) -> str:
    if not report.recompiles:
        return "<p>No recompile.</p>"
    rows = "".join(
        f'<tr class="recompile"><td>{_e(r.function)}</td><td>{_e(r.filename)}:{r.lineno}</td>'
        f"<td>{_e(r.failed_guard)}</td><td>{_e(r.decided)}</td></tr>"
        for r in report.recompiles
    )
    return ('<table class="rows"><tr><th>Function</th><th>Where</th><th>Guard that failed'
            f"</th><th>Decided</th></tr>{rows}</table>")
