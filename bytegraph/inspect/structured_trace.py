"""Structured traces: one log per process that ``tlparse`` renders as a web report.

``BYTEGRAPH_TRACE=folder`` (or ``bytegraph.config.trace_dir = "folder"``)
writes ``folder/bytegraph_trace_<pid>_<random>.log``; ``tlparse folder
--latest -o report --no-browser`` turns it into ``report/index.html``.

The format is torch's structured trace (TORCH_TRACE), which tlparse reads:
one record per line, a glog prefix then a JSON envelope naming the event, the
compile id and, when the record carries a payload, the payload's md5; the
payload follows on lines that each start with a tab::

    V1201 19:42:16.123456 4242 bytegraph/api.py:150] {"dynamo_start": {"stack": [...]}, \
"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    V1201 19:42:16.200000 4242 bytegraph/api.py:150] {"dynamo_output_graph": {}, \
"frame_id": 0, "frame_compile_id": 0, "attempt": 0, "has_payload": "5d41..."}
    \tclass GraphModule(torch.nn.Module):
    \t    def forward(self, L_x_: "f32[3]"):

A compile id ``[frame_id/frame_compile_id]`` numbers each compiled function
(a resume function or a compiled callee is a frame of its own) in the order
it first compiled, then its compiles. Each compile writes, in order:

1. ``dynamo_start``: the user's stack (bytegraph's own frames left out) and
   the function compiled; file names are interned by ``{"str": [name, i]}``;
2. ``artifact`` ``recompile_reasons`` for a recompile: the guard of the
   newest entry that failed, with its value, and what automatic dynamic
   shapes decided;
3. ``dynamo_output_graph`` per graph, its readable code as payload;
4. ``dynamo_guards``: the new entry's guards, one per line;
5. ``artifact`` ``dynamo_graph_break_reason`` per graph break: catalogue id,
   reason, user frames with source lines, hint;
6. ``artifact`` ``bytegraph_transformed_code``: the bytecode that runs;
7. ``compilation_metrics``: times, entry and guard counts, graph sizes, the
   breaks as ``restart_reasons`` (bytegraph translates again to break, which
   is a restart in tlparse's words) or the failure (``fail_type``).

Everything here runs on a cache miss, and only when tracing is on: the call
path never looks at it, and a compile with tracing off costs one attribute
read of ``config.trace_dir``. The core's events (``bytegraph/events.py``)
drive it: the subscribers at the end of this module.
"""

from __future__ import annotations

import dis
import hashlib
import itertools
import json
import os
import sys
import tempfile
import threading
import time
import traceback
import types
import weakref
from typing import Any

from bytegraph import config, events

_THIS_FILE = os.path.abspath(__file__)
_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(_THIS_FILE)), "")  # bytegraph/
_NOT_THE_CALLER = (_THIS_FILE, os.path.abspath(events.__file__))  # the caller: api.py
_MAX_STACK = 64  # frames of the user's stack kept in dynamo_start


class _TraceFile:
    """This process's log: opened at its first record, again after a fork or when
    ``config.trace_dir`` changes."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.stream: Any = None
        self.path: str | None = None
        self._folder: str | None = None
        self._pid: int | None = None
        self._strings: dict[str, int] = {}

    def write(self, event: str, metadata: Any, ids: dict[str, int], payload: str | None) -> None:
        record: dict[str, Any] = {event: metadata, **ids}
        if payload is not None:
            record["has_payload"] = hashlib.md5(payload.encode(), usedforsecurity=False).hexdigest()
        line = f"{_prefix()} {json.dumps(record, default=repr)}"
        if payload is not None:
            line += "".join(f"\n\t{text}" for text in payload.split("\n"))
        with self.lock:
            self._ensure_open().write(line + "\n")
            self.stream.flush()

    def intern(self, filename: str) -> int:
        """The index of ``filename`` in this log's string table, written at first use."""
        with self.lock:
            self._ensure_open()
            index = self._strings.get(filename)
            if index is None:
                index = self._strings[filename] = len(self._strings)
                self.stream.write(f"{_prefix()} {json.dumps({'str': [filename, index]})}\n")
            return index

    def _ensure_open(self) -> Any:
        folder = config.trace_dir
        if self.stream is not None and self._pid == os.getpid() and self._folder == folder:
            return self.stream
        if self.stream is not None and self._pid == os.getpid():
            self.stream.close()
        os.makedirs(folder, exist_ok=True)
        handle, self.path = tempfile.mkstemp(
            prefix=f"bytegraph_trace_{os.getpid()}_", suffix=".log", dir=folder
        )
        self.stream = os.fdopen(handle, "w", encoding="utf-8")
        self._folder, self._pid, self._strings = folder, os.getpid(), {}
        return self.stream


_FILE = _TraceFile()
_frames: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
_frame_counter = itertools.count()
_entries_compiled = itertools.count(1)


def _prefix() -> str:
    """``V1201 19:42:16.123456 <pid> bytegraph/api.py:150]``: glog's, as tlparse parses it."""
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now))
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename in _NOT_THE_CALLER:
        frame = frame.f_back
    where = os.path.relpath(frame.f_code.co_filename, os.path.dirname(_PACKAGE_DIR[:-1]))
    return f"V{stamp}.{int(now % 1 * 1e6):06d} {os.getpid()} {where}:{frame.f_lineno}]"


def current_path() -> str | None:
    """The log this process writes, once it has written a record."""
    return _FILE.path


class CompileTrace:
    """The records of one compile: ``with compiling(...) as trace: ... trace.compiled(entry)``."""

    def __init__(self, owner: Any, fn: types.FunctionType) -> None:
        self.owner = owner
        counters = _frames.get(owner)
        if counters is None:
            counters = _frames[owner] = [next(_frame_counter), 0]
        self.ids = {"frame_id": counters[0], "frame_compile_id": counters[1], "attempt": 0}
        counters[1] += 1
        self.fn = fn
        self.started = time.time()
        self.recompile_reason: str | None = None
        self.finished = False

    def __enter__(self) -> CompileTrace:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, tb: Any) -> bool:
        if error is not None and not self.finished:
            self._metrics(_failure(error))
        return False

    def start(self, args: tuple, kwargs: dict, decided: list[str]) -> None:
        """dynamo_start, and for a recompile the guard of the newest entry that failed."""
        code = self.fn.__code__
        stack = [
            _frame(f.filename, f.lineno, f.name, f.line)
            for f in traceback.extract_stack(sys._getframe(1))[-_MAX_STACK:]
            if not f.filename.startswith(_PACKAGE_DIR)
        ]
        stack.append(_frame(code.co_filename, code.co_firstlineno, code.co_qualname, None))
        _FILE.write("dynamo_start", {"stack": stack}, self.ids, None)
        entries = getattr(self.owner, "entries", None)
        if entries:
            failed = entries[0].guard.explain_failure(args, kwargs)
            self.recompile_reason = f"{failed}" + "".join(f"; {d}" for d in decided)
            self._artifact("recompile_reasons", "json", json.dumps([self.recompile_reason]))

    def compiled(self, entry: Any, cache_size: int) -> None:
        """The new cache entry: its graphs, guards, breaks, code and metrics."""
        for gm in entry.graphs:
            _FILE.write("dynamo_output_graph", {}, self.ids, _readable(gm))
        guards = [json.dumps({"code": g, "stack": None, "user_stack": None})
                  for g in map(entry.guard.describe, entry.guard.parts)]
        _FILE.write("dynamo_guards", {}, self.ids, "[\n" + ",\n".join(guards) + "\n]")
        if entry.breaks:
            self._artifact("dynamo_graph_break_reason", "string", _break_text(entry.breaks))
        if entry.run is not self.fn:
            code = entry.run.__code__
            self._artifact("bytegraph_transformed_code", "string", dis.Bytecode(code).dis())
        nodes = [n for gm in entry.graphs for n in gm.graph.nodes]
        self._metrics({
            "cache_size": cache_size,
            "accumulated_cache_size": next(_entries_compiled),
            "guard_count": len(entry.guard.parts),
            "graph_op_count": sum(n.op.startswith("call_") for n in nodes),
            "graph_node_count": len(nodes),
            "graph_input_count": sum(n.op == "placeholder" for n in nodes),
            "restart_reasons": [_restart_reason(entry.breaks[0])] if entry.breaks else [],
        })

    def _artifact(self, name: str, encoding: str, payload: str) -> None:
        _FILE.write("artifact", {"name": name, "encoding": encoding}, self.ids, payload)

    def _metrics(self, fields: dict[str, Any]) -> None:
        code = self.fn.__code__
        _FILE.write("compilation_metrics", {
            "co_name": code.co_qualname,
            "co_filename": code.co_filename,
            "co_firstlineno": code.co_firstlineno,
            "start_time": self.started,
            "entire_frame_compile_time_s": time.time() - self.started,
            "recompile_reason": self.recompile_reason,
            **fields,
        }, self.ids, None)
        self.finished = True


class _Off:
    """Stands in for a CompileTrace while tracing is off: every method does nothing."""

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False

    def compiled(self, entry: Any, cache_size: int) -> None:
        pass


_OFF = _Off()


def compiling(
    owner: Any, fn: types.FunctionType, args: tuple, kwargs: dict, decided: list[str]
) -> CompileTrace | _Off:
    """The trace of one compile of ``fn(*args, **kwargs)`` by ``owner`` (its
    CompiledFunction, whose ``entries`` failed this call), started; ``decided``: what
    automatic dynamic shapes decided for it."""
    if config.trace_dir is None:
        return _OFF
    trace = CompileTrace(owner, fn)
    trace.start(args, kwargs, decided)
    return trace


def recompile_limit(owner: Any, fn: types.FunctionType, message: str) -> None:
    """``fn`` hit ``config.recompile_limit``: a failed compile of its next id."""
    if config.trace_dir is not None:
        CompileTrace(owner, fn)._metrics({"fail_type": "RecompileLimit", "fail_reason": message})


def _frame(filename: str, line: int | None, name: str, source: str | None) -> dict[str, Any]:
    frame = {"line": line or 0, "name": name, "filename": _FILE.intern(filename)}
    if source:
        frame["loc"] = source
    return frame


def _readable(gm: Any) -> str:
    return gm.print_readable(print_output=False).rstrip("\n")


def _break_text(breaks: tuple[BaseException, ...]) -> str:
    text = str(breaks[0])
    if len(breaks) > 1:
        text += f"\nno break possible there, the frame ran as Python: {breaks[1]}"
    return text


def _restart_reason(reason: BaseException) -> str:
    entry, frames = getattr(reason, "entry", None), getattr(reason, "frames", ())
    text = getattr(reason, "detail", str(reason))
    if entry is not None:
        text = f"{entry.id} {entry.name}: {text}"
    if frames:
        text += f" ({frames[0].filename}:{frames[0].lineno})"
    return text


def _failure(error: BaseException) -> dict[str, Any]:
    fields: dict[str, Any] = {"fail_type": type(error).__name__, "fail_reason": str(error)}
    entry, frames = getattr(error, "entry", None), getattr(error, "frames", ())
    if entry is not None:
        fields["fail_type"] = f"{type(error).__name__} {entry.id} {entry.name}"
    if frames:
        fields["fail_user_frame_filename"] = frames[0].filename
        fields["fail_user_frame_lineno"] = frames[0].lineno or 0
    return fields


# The compiles under way, innermost last: (owner, its trace or None while tracing is off).
_under_way: list[tuple[Any, CompileTrace | None]] = []


def _compile_started(
    owner: Any, fn: types.FunctionType, args: tuple, kwargs: dict, decided: list[str]
) -> None:
    trace = compiling(owner, fn, args, kwargs, decided)
    _under_way.append((owner, trace if isinstance(trace, CompileTrace) else None))


def _frame_compiled(owner: Any, fn: types.FunctionType, entry: Any, cache_size: int) -> None:
    if _under_way and _under_way[-1][0] is owner:
        trace = _under_way[-1][1]
        if trace is not None:
            trace.compiled(entry, cache_size)  # on an error: _compile_failed ends it
        _under_way.pop()


def _compile_failed(owner: Any, fn: types.FunctionType, error: BaseException) -> None:
    if _under_way and _under_way[-1][0] is owner:
        trace = _under_way.pop()[1]
        if trace is not None:
            trace.__exit__(type(error), error, error.__traceback__)


events.COMPILE_STARTED.subscribe(_compile_started)
events.FRAME_COMPILED.subscribe(_frame_compiled)
events.COMPILE_FAILED.subscribe(_compile_failed)
events.RECOMPILE_LIMIT.subscribe(recompile_limit)
