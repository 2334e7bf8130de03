"""What the core tells the inspection layer: one small publish/subscribe interface.

The core (``api.py``, ``translate/convert.py``) announces what happened while
compiling; the inspection tools in ``bytegraph/inspect/`` (explain's
``Recording``, the dump, the structured trace) subscribe to what they need.
The core never imports them, so a new inspection tool subscribes here and
leaves the translator alone.

Each event keeps its subscribers as a tuple, replaced whole on every change;
``publish`` calls them in subscription order with the arguments below. With
nothing subscribed it is a loop over an empty tuple. Every event is published
on a cache miss or by ``compile()``, never on a cache hit: the call path does
no extra work whatever is subscribed.

Events (the arguments each subscriber receives):

- ``ROOT_COMPILED(compiled)``: ``bytegraph.compile`` returned a compiled
  function or module (a root: its resume functions and compiled callees
  hang off it).
- ``COMPILE_STARTED(owner, fn, args, kwargs, decided)``: a cache miss of
  ``owner`` (its CompiledFunction) starts compiling ``fn(*args, **kwargs)``;
  ``decided``: what automatic dynamic shapes decided for the new entry.
- ``RECOMPILE(qualname, filename, lineno, failed, decided)``: that compile is
  a recompile; ``failed``: the guard of the newest entry that failed, with its
  value; ``decided``: automatic dynamic shapes' decisions, ``"; "``-joined.
- ``TRACE_STARTED(output)``: a frame's trace starts with this OutputGraph (a
  subscriber may set its ``on_new_guard``).
- ``ENTRY_MADE(fn, entry, output)``: the trace of ``fn`` made a cache entry:
  its guards, graphs and graph breaks (``entry.breaks``), and the OutputGraph.
- ``FRAME_COMPILED(owner, fn, entry, cache_size)``: the compile finished with
  ``entry`` (its ``compile_seconds`` set); ``cache_size``: entries with it.
- ``COMPILE_FAILED(owner, fn, error)``: the compile raised ``error`` (a
  graph break under fullgraph, a backend's failure, an internal error).
- ``RECOMPILE_LIMIT(owner, fn, message)``: ``fn`` hit
  ``config.recompile_limit`` and runs as Python from now on.

And one filter: ``WRAP_BACKEND.apply(backend)``: each ``compile()`` call's
backend, wrapped by every subscriber, the newest innermost (a Recording
wraps it to keep each graph the backend gets and the time it took).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Event:
    """One kind of event and its subscribers."""

    __slots__ = ("name", "subscribers")

    def __init__(self, name: str) -> None:
        self.name = name
        self.subscribers: tuple[Callable[..., Any], ...] = ()

    def subscribe(self, subscriber: Callable[..., Any]) -> None:
        self.subscribers = (*self.subscribers, subscriber)

    def unsubscribe(self, subscriber: Callable[..., Any]) -> None:
        """Remove ``subscriber`` (its last subscription, compared by equality)."""
        subscribers = list(self.subscribers)
        for i in range(len(subscribers) - 1, -1, -1):
            if subscribers[i] == subscriber:
                del subscribers[i]
                break
        self.subscribers = tuple(subscribers)

    def publish(self, *args: Any) -> None:
        for subscriber in self.subscribers:
            subscriber(*args)

    def apply(self, value: Any) -> Any:
        """A filter's value: passed through every subscriber, the newest first."""
        for subscriber in reversed(self.subscribers):
            value = subscriber(value)
        return value

    def __repr__(self) -> str:
        return f"<event {self.name}: {len(self.subscribers)} subscribers>"


ROOT_COMPILED = Event("root_compiled")
COMPILE_STARTED = Event("compile_started")
RECOMPILE = Event("recompile")
TRACE_STARTED = Event("trace_started")
ENTRY_MADE = Event("entry_made")
FRAME_COMPILED = Event("frame_compiled")
COMPILE_FAILED = Event("compile_failed")
RECOMPILE_LIMIT = Event("recompile_limit")
WRAP_BACKEND = Event("wrap_backend")
