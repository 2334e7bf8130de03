"""User controls over what is traced: graph_break, disable, allow/disallow_in_graph,
assume_constant_result.

Each marks a function by identity. The builder consults these sets before
anything else, so a marked function is treated the same wherever the trace
reaches it. Where none of them marks a function, the markers written for
torch.compile count the same (``torch_markers.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from bytegraph.torch_markers import torch_marking

F = TypeVar("F", bound=Callable[..., Any])

_disabled: set[int] = set()
_allowed: set[int] = set()
_disallowed: set[int] = set()
_constant: set[int] = set()
_keepalive: list[Any] = []  # marked functions stay alive, so their ids are never reused


def graph_break() -> None:
    """Break the graph here when traced; does nothing when run."""


def disable(fn: F) -> F:
    """Never trace ``fn``: calls of it run in Python (a graph break where traced)."""
    _mark(_disabled, fn)
    return fn


def allow_in_graph(fn: F) -> F:
    """Record calls of ``fn`` as one graph node instead of tracing into it.

    ``fn`` must take and return tensors (and constants) and must run on meta
    tensors, which is how bytegraph learns its output's shape and dtype.
    """
    _check_callable(fn, "allow_in_graph")
    _disallowed.discard(id(fn))
    _mark(_allowed, fn)
    return fn


def disallow_in_graph(fn: F) -> F:
    """Always break the graph at calls of ``fn`` (even a torch function)."""
    _check_callable(fn, "disallow_in_graph")
    _allowed.discard(id(fn))
    _mark(_disallowed, fn)
    return fn


def assume_constant_result(fn: F) -> F:
    """Call ``fn`` once while tracing and use its result as a constant, unguarded (as
    ``torch.compiler.assume_constant_result``): the caller promises it never changes.

    Its arguments must be constants and its result a constant value; otherwise the
    call is a graph break and runs in Python. The mark is torch's as well
    (``fn._dynamo_marked_constant``), so torch.compile reads it the same way.
    """
    _mark(_constant, fn)
    try:
        fn._dynamo_marked_constant = True  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # a builtin: bytegraph's registry only
        pass
    return fn


def _check_callable(fn: Any, name: str) -> None:
    if not callable(fn):
        raise TypeError(f"bytegraph.{name} expects a function, not {type(fn).__name__}")


def _mark(registry: set[int], fn: Any) -> None:
    _check_callable(fn, "disable" if registry is _disabled else "marker")
    registry.add(id(fn))
    _keepalive.append(fn)


def marking(value: Any) -> str | None:
    """"disabled", "allowed", "disallowed", "graph_break", "constant", "compiling"
    (torch._dynamo.is_compiling), or None."""
    key = id(value)
    if value is graph_break:
        return "graph_break"
    if key in _disabled:
        return "disabled"
    if key in _allowed:
        return "allowed"
    if key in _disallowed:
        return "disallowed"
    if key in _constant:
        return "constant"
    return torch_marking(value)


def is_disabled(fn: Any) -> bool:
    """Marked by bytegraph.disable or torch.compiler.disable."""
    return id(fn) in _disabled or torch_marking(fn) == "disabled"
