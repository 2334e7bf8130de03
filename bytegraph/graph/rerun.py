"""When a graph raises at run time, the call runs again as plain Python.

Some ops fail only on data (an index out of range, a negative probability, a
singular matrix), which a trace on meta tensors cannot see. Eager has done
everything before the failing op by then: list appends, attribute stores,
prints. bytegraph replays those *after* the graph, so an exception leaving
the graph call would lose them. Instead the transformed code catches an
exception from the graph call and calls the original function with the same
arguments. The graph call is the first thing the transformed code does, so
nothing observable has happened yet, and the rerun does exactly what eager
does: the same state behind it, the same exception from the user's line.

That holds only for a graph that changes nothing outside itself before it
fails: ``reruns_safely`` refuses graphs that draw random numbers (they advanced
the generator) or communicate (a collective: the peers would see it twice).
Those let the exception through. A graph that writes into an input's memory
(the trace notes which: ``OutputGraph.written_inputs``; in-place ops on tensors
the graph made itself are fine) reruns only if it failed before the first
write: the code reads those inputs' version counters before the call, and the
handler (``rerun_unless_written``) compares them; a write bumps the counter. Where
the graph has a check, a random draw made before it or an op under ``try``, its
exception is let through as before (convert.py passes no written inputs).

Either way, a graph that switches grad mode (a ``no_grad`` block inside it)
may fail between the switch and the switch back: the handler first puts the
mode back to what it was when the graph started, which the entry's guards
fix at trace time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch.fx.operator_schemas import normalize_function

from bytegraph.graph.metadata import op_name, op_namespace
from bytegraph.guards.sources import Source

# Substrings of the names of ops that draw from the random generator.
_RANDOM_NAMES = (
    "rand", "dropout", "bernoulli", "multinomial", "normal", "poisson", "rrelu", "uniform",
    "exponential", "geometric", "cauchy",
)


@dataclasses.dataclass(frozen=True)
class OnGraphError:
    """What the transformed code does when its graph call raises."""

    grad_mode: bool | None  # the mode to put back first (None: the graph never switches it)
    rerun: Callable[..., Any] | None  # the original function to run instead, or None: re-raise
    # The inputs the graph writes into: the rerun only if none was written yet.
    unless_written: tuple[Source, ...] = ()

    @staticmethod
    def plan(
        gm: torch.fx.GraphModule,
        writes_inputs: bool,
        switches_grad_mode: bool,
        original: Callable[..., Any],
        written: tuple[Source, ...] = (),
    ) -> OnGraphError | None:
        """``written``: the inputs the graph writes into, where a rerun before the first
        write is wanted (else a graph that writes inputs lets its exception through)."""
        grad_mode = torch.is_grad_enabled() if switches_grad_mode else None
        unless_written = written if writes_inputs else ()
        safe = reruns_safely(gm, writes_inputs and not unless_written)
        rerun = original if safe else None
        if grad_mode is None and rerun is None:
            return None
        return OnGraphError(grad_mode, rerun, unless_written if safe else ())


def reruns_safely(gm: torch.fx.GraphModule, writes_inputs: bool) -> bool:
    """Whether running ``gm`` partway, then the original code, is the same as the code alone."""
    if writes_inputs:
        return False
    for node in gm.graph.nodes:
        if node.op == "call_module":
            return False
        if node.op in ("call_function", "call_method") and draws_random_numbers(node):
            return False
        if op_namespace(node.target) == "_c10d_functional":
            return False  # a collective: the rerun would communicate again
    return True


def draws_random_numbers(node: torch.fx.Node) -> bool:
    """Whether a call node draws from torch's random generator (by its op's name)."""
    name = op_name(node.op, node.target).lower()
    return any(word in name for word in _RANDOM_NAMES) and not _not_training(node)


def _not_training(node: torch.fx.Node) -> bool:
    """A dropout (or rrelu) called with ``training=False``, or a dropout with ``p=0``: the
    identity, it draws nothing (every dropout of a model in eval mode, or configured off)."""
    if node.op != "call_function":
        return False
    normalized = normalize_function(
        node.target, tuple(node.args), dict(node.kwargs), normalize_to_only_use_kwargs=True
    )
    if normalized is None:
        return False
    keywords = normalized.kwargs
    off = keywords.get("p") == 0 and "dropout" in getattr(node.target, "__name__", "")
    return keywords.get("training", keywords.get("train")) is False or off


def rerun(
    fn: Callable[..., Any],
    positional: tuple,
    extra: tuple,
    keywords: dict[str, Any],
    extra_keywords: dict[str, Any] | None,
) -> Any:
    """``fn`` called with the transformed function's own arguments, unpacked."""
    return fn(*positional, *extra, **keywords, **(extra_keywords or {}))


def rerun_unless_written(
    error: BaseException,
    versions: tuple[int, ...],
    written: tuple[torch.Tensor, ...],
    fn: Callable[..., Any],
    *arguments: Any,
) -> Any:
    """``rerun(fn, *arguments)`` if no tensor of ``written`` was written since its version
    was ``versions``; else ``error`` again (the graph changed an input before failing)."""
    if tuple(t._version for t in written) != versions:
        raise error
    return rerun(fn, *arguments)
