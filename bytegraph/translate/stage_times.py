"""Where one compile's time goes, by stage: a cache entry's ``stage_seconds``.

A compile (``convert_frame``) runs five stages, some more than once (a graph
break translates the frame again, up to the break):

- ``translate``: the InstructionTranslator over the bytecode, metadata
  propagation (meta tensors, shape rules) and inlined calls included;
- ``graph``: closing the FX graph into a GraphModule (fx generates its code);
- ``backend``: the backend compiler on the GraphModule;
- ``codegen``: the transformed bytecode, assembled into a code object;
- ``guards``: the guard function, generated and compiled.

What is left of ``compile_seconds`` is binding the arguments and setting the
trace up. ``recording()`` collects the stages of the compile it surrounds
(``api.py`` wraps each ``convert_frame``); ``timed(stage)`` adds a stage's
wall time to the compile being recorded, if any. ``explain()`` and
``bench/bench_compile.py`` print them.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator

STAGES = ("translate", "graph", "backend", "codegen", "guards")
CLOCK = [time.perf_counter]
"""The clock stages are timed with: the wall clock; a benchmark on a shared machine sets
``time.thread_time`` (bench/bench_compile.py --cpu-time)."""

_current: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar(
    "bytegraph_stage_times", default=None
)


@contextlib.contextmanager
def recording() -> Iterator[dict[str, float]]:
    """Seconds per stage of the compile inside the block (a nested compile records its own)."""
    seconds: dict[str, float] = {}
    token = _current.set(seconds)
    try:
        yield seconds
    finally:
        _current.reset(token)


@contextlib.contextmanager
def timed(stage: str) -> Iterator[None]:
    seconds = _current.get()
    if seconds is None:
        yield
        return
    clock = CLOCK[0]
    started = clock()
    try:
        yield
    finally:
        seconds[stage] = seconds.get(stage, 0.0) + clock() - started


def ordered(seconds: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """The stages in pipeline order, those that ran."""
    return tuple((stage, seconds[stage]) for stage in STAGES if stage in seconds)
