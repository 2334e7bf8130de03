"""Values a store lets go of: a generator paused inside a with/try block.

CPython frees an object the moment its last reference goes. For a generator
paused at a yield that a with/try covers, that moment runs user code: the
generator's finalizer closes it, which runs its ``finally`` or ``__exit__``.
The replay after the graph stores at another moment than eager (after the
graph, in two phases, a container rewritten whole), so that code would run
late and see, or leave, state other than eager's: ``GD['acc'] = gen``
replacing the previous call's generator ran the old one's ``finally`` inside
the replay, whose ``GL[:] = ...`` then overwrote what it appended.

1. Every store the trace records over state that existed before it (a
   container's contents, an attribute, a global) names the values it lets go
   of (``check_dropped``, ``check_replaced``): VTs, or the real old value where
   the trace never read it.
2. One that is a real generator whose close runs code
   (``runs_code_when_closed``) is refused: a graph break at the store, which
   then runs in Python, at eager's moment.
3. One the trace read through a source and let pass gets a guard that it still
   closes quietly (``GuardKind.CLOSES_QUIETLY``): a later call where that slot
   holds such a generator traces again, and breaks, instead of replaying.

4. The trace's own objects (VTs, the translator: cycles, which only the
   collector frees) still hold the refused generator when the compiled code
   runs the store in Python, so it would outlive the store and close late:
   after a compile that refused one, ``collect_after_refusal`` runs the
   collector once, before the compiled code runs.

The trace counts no references: a store that drops one of several references
to such a generator breaks too (needlessly, never wrongly). A generator the
trace itself made and left paused is generators.py's concern
(``refuse_abandoned_generators``).
"""

from __future__ import annotations

import gc
import inspect
import types
from collections.abc import Callable, Iterable
from typing import Any

from bytegraph.bytecode.instructions import decode
from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import Source

AddGuard = Callable[..., None]
DROPPED_TYPES = frozenset({types.GeneratorType})
"""The types of real values whose freeing may run code, as far as this module knows."""


def runs_code_when_closed(value: Any) -> bool:
    """Whether freeing ``value`` runs user code: a generator paused at a yield that a
    with/try covers, or in a ``yield from`` (closing it closes the delegate first)."""
    if type(value) is not types.GeneratorType:
        return False
    if inspect.getgeneratorstate(value) != inspect.GEN_SUSPENDED:
        return False
    if value.gi_yieldfrom is not None:
        return True
    decoded = decode(value.gi_code)
    index = decoded.offset_to_index[value.gi_frame.f_lasti]
    if decoded.instructions[index].opname == "RESUME":  # 3.13 points past the yield
        index -= 1
    return decoded.runs_code_on_error(index)


def closes_quietly(value: Any) -> bool:
    """The guard's check: freeing ``value`` runs no user code."""
    return type(value) is not types.GeneratorType or not runs_code_when_closed(value)


def check_dropped(vts: Iterable[Any], add_guard: AddGuard) -> None:
    """``vts`` leave the slot a store writes: refuse a generator whose close runs code;
    guard one that closes quietly now."""
    for vt in vts:
        value = getattr(vt, "value", None)
        if type(value) in DROPPED_TYPES:
            check_replaced(value, vt.source, add_guard)


_refused = False  # a store was refused since the last collect_after_refusal


def collect_after_refusal() -> None:
    """After a compile: free the trace's cycles if they hold a refused generator."""
    global _refused
    if _refused:
        _refused = False
        gc.collect()


def check_replaced(old: Any, source: Source | None, add_guard: AddGuard) -> None:
    """The real ``old`` value (read through ``source``) leaves its slot."""
    global _refused
    if runs_code_when_closed(old):
        _refused = True
        raise Unsupported(
            "generator_protocol",
            f"a store lets go of generator {old.__qualname__} paused inside a with/try block: "
            "freeing it runs its exit code at that very moment, which a replay after the "
            "graph would not",
        )
    if source is not None and add_guard is not None:
        add_guard(GuardKind.CLOSES_QUIETLY, source)


def dropped(before: Iterable[Any], after: Iterable[Any]) -> list[Any]:
    """The VTs of ``before`` not in ``after`` (by identity)."""
    kept = {id(vt) for vt in after}
    return [vt for vt in before if id(vt) not in kept]


def check_replaced_global(tx: Any, name: str) -> None:
    """A STORE_GLOBAL or DELETE_GLOBAL of ``name`` lets go of its current value."""
    from bytegraph.translate.ops.names import global_source

    side_effects = tx.output.side_effects
    pending = side_effects.load_global(tx.f_globals, name)
    if pending is not None:
        check_dropped([pending], tx.output.add_guard)  # (DELETED has no value)
    elif name in tx.f_globals:
        check_replaced(tx.f_globals[name], global_source(tx, name), tx.output.add_guard)
