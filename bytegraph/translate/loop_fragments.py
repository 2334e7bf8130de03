"""Reuse of a traced loop iteration: the steps of a loop traced once, copied after.

``for _ in range(50): x = torch.tanh(x @ w) * 0.5 + x`` interprets the same
bytecode fifty times and builds the same four nodes each time. This module
treats one iteration as fragments.py treats a call: the loop's state at its
``FOR_ITER`` (its live locals) stands for the arguments, the state at the next
arrival for the result. An iteration is recorded with fragments.py's
``_Recording`` (no effect beside the graph, nodes that read only the state's
tensors and graph inputs, a result of new tensors, state tensors and
constants); an arrival whose state has the key of a recorded iteration's start
takes the loop's next item and copies the iteration's nodes instead of
interpreting its body (``_Template.replay``, with all of its checks), and the
state becomes the copy's result.

Only where the copy is provably what interpreting would build:

* the loop's target is a local the code never reads (``for _ in range(n)``):
  the item differs at each step, so it must not reach the graph; and the code
  names nothing that reads a frame's locals (``locals``, ``vars``, ``eval``...);
* the live locals hold tensors, constants, tuples of them, and objects that
  existed before the trace (modules, configs: the log records their changes,
  and a recorded iteration may change none); anything the trace made, such as
  a list, refuses (the body could fill it);
* the stack below the iterator is out of the body's reach and is left as is;
  a recording ends only at the same iterator, unmoved since the recording began
  (one pass through the body: a ``break`` leaves the loop, and entering it
  again makes a new iterator);
* no generator frame (a ``yield`` hands control to other code mid-iteration),
  no closure cells; fragments.py's ``_quiet`` trace;
* the root frame counts the steps a copy stands for, and copies no iteration
  across the step at which an earlier attempt of the trace broke the graph.

One recording is active at a time (an outer loop around an inner one is
never recorded; its inner loop is). ``config.reuse_fragments`` switches it off
with fragments.py; ``fragments.STATS`` counts its copies too.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import TYPE_CHECKING, Any

import torch

from bytegraph import config
from bytegraph.bytecode.depth import GENERATOR_FLAGS
from bytegraph.bytecode.stack_effects import locals_read
from bytegraph.graph.metadata import default_device
from bytegraph.translate import fragments
from bytegraph.translate.fragment_guards import Refused
from bytegraph.translate.regions import live_locals
from bytegraph.variables.containers import TupleVariable
from bytegraph.variables.iterators import IteratorVariable

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.base import VariableTracker

# Names whose call may read a frame's locals: a loop target never read by the bytecode
# may still be read through them.
_READS_FRAMES = frozenset({
    "locals", "vars", "eval", "exec", "dir", "_getframe", "currentframe", "f_locals",
    "getframeinfo", "stack", "trace",
})
_ACTIVE = ("loop", "active")  # the key, in the trace's fragment store, of the recording
# Per code object: its loops' FOR_ITER index -> (target, live locals), or None.
_STATIC: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()


@dataclasses.dataclass
class _Active:
    """The iteration being recorded."""

    tx: Tx
    arrival: Arrival
    iterator: IteratorVariable
    contents: Any  # the iterator's state when the recording began
    recording: fragments._Recording
    steps: int | None


@dataclasses.dataclass(frozen=True)
class _Iteration:
    """A recorded iteration: its nodes, and how the live locals end."""

    template: Any  # fragments._Template
    # (name, how it ends: "bound", "unread", "unbound", or "fixed": the same object)
    ends: tuple[tuple[str, str], ...]
    steps: int | None  # the root frame's steps of the body
    fixed: tuple[Any, ...]  # the objects the key names by id, kept alive with it


@dataclasses.dataclass(frozen=True)
class Arrival:
    """The loop's state at one arrival at its FOR_ITER."""

    index: int
    target: str
    names: tuple[str, ...]  # the live locals, in order; their values make ``call``
    call: fragments.Call
    fixed: dict[str, Any]  # the locals compared by identity


def arrive(tx: Tx, inst: Instruction, iterator: VariableTracker) -> Arrival | None:
    """At FOR_ITER, before the next item is taken: end the iteration being recorded here
    (its state now is the result), and describe the state; None where no reuse applies."""
    if not config.reuse_fragments or type(iterator) is not IteratorVariable:
        return None
    static = _static(tx, inst.index)
    if static is None:
        return None
    store = fragments._store(tx.output)
    active = store.get(_ACTIVE)
    if active is not None and active.tx is tx and active.arrival.index == inst.index:
        _finish(tx, store, active, iterator)
    target, names = static
    if not fragments._quiet(tx.output):
        return None
    try:
        return _describe(tx, inst.index, target, names)
    except Refused:
        return None


def enter(tx: Tx, arrival: Arrival | None, iterator: IteratorVariable, item: Any) -> bool:
    """After the item is taken: copy the iteration recorded from this state (True: the
    state is the next arrival's and the loop's FOR_ITER is next), or record this one."""
    if arrival is None:
        return False
    store = fragments._store(tx.output)
    key = arrival.call.key
    found = store.get(key)
    if isinstance(found, _Iteration):
        return _may_skip(tx, found.steps) and _replayed(tx, arrival, found, item)
    if found is fragments._NEVER:
        return False
    _start(tx, store, arrival, iterator)
    return False


def _static(tx: Tx, index: int) -> tuple[str, tuple[str, ...]] | None:
    """(the loop's target, the live locals at its FOR_ITER) where the code allows reuse."""
    code = tx.code
    known = _STATIC.get(code)
    if known is None:
        known = _STATIC[code] = {}
    elif index in known:
        return known[index]
    found = None
    instructions = tx.instructions
    target = _target(instructions[index + 1]) if index + 1 < len(instructions) else None
    if (
        target is not None
        and not code.co_flags & GENERATOR_FLAGS
        and not code.co_cellvars and not code.co_freevars
        and _READS_FRAMES.isdisjoint(code.co_names)
        and not any(target in locals_read(i.opname, i.argval) for i in instructions)
    ):
        found = (target, tuple(sorted(live_locals(code, index) - {target})))
    known[index] = found
    return found


def _target(after: Instruction) -> str | None:
    """The local a loop's item is stored in, from the instruction after its FOR_ITER (3.13
    fuses the store with the body's first load when both are on the loop's line)."""
    if after.opname == "STORE_FAST":
        return after.argval  # type: ignore[return-value]
    if after.opname == "STORE_FAST_LOAD_FAST":
        return after.argval[0]  # type: ignore[index]
    return None


def _describe(tx: Tx, index: int, target: str, names: tuple[str, ...]) -> Arrival:
    walk = fragments._Walk()
    parts: list[Any] = []
    fixed: dict[str, Any] = {}
    for name in names:
        vt = tx.symbolic_locals.get(name)
        if vt is None:
            parts.append((_status(tx, name),))
            continue
        mutation = vt.mutation_type
        if mutation is not None and mutation.scope == 0 and type(vt) is not TupleVariable:
            parts.append(("F", id(vt)))  # an object from before the trace: by identity
            fixed[name] = vt
        else:
            parts.append(walk.abstract(tx, vt))  # Refused for anything else
    if walk.roots:
        raise Refused("a module inside a tuple")
    state = (torch.is_grad_enabled(), torch.get_default_dtype(), str(default_device()))
    key = (tx.code, ("loop", index, id(tx.f_globals)), state, tuple(parts))
    return Arrival(index, target, names, fragments.Call(key, (), tuple(walk.tensors)), fixed)


def _start(tx: Tx, store: dict[Any, Any], arrival: Arrival, iterator: IteratorVariable) -> None:
    effects = tx.output.side_effects
    if effects.reads is None:
        # On for the rest of the trace: a call recorded inside the loop's body
        # (fragments.py) reads the same list, and may outlive this recording.
        effects.reads = []
    store[_ACTIVE] = _Active(
        tx, arrival, iterator, _position(tx, iterator),
        fragments._Recording.start(tx.output, arrival.call), getattr(tx, "steps", None),
    )


def _finish(tx: Tx, store: dict[Any, Any], active: _Active, iterator: Any) -> None:
    """The recorded iteration's template, kept under its start's key, if it was one pass
    through the body that the checks accept."""
    try:
        if iterator is active.iterator and _position(tx, iterator) is active.contents:
            store[active.arrival.call.key] = _iteration(tx, active)
        # else: not one pass from this FOR_ITER back to it
    except Refused:
        store[active.arrival.call.key] = fragments._NEVER
    finally:
        store.pop(_ACTIVE, None)


def _iteration(tx: Tx, active: _Active) -> _Iteration:
    arrival = active.arrival
    ends = []
    for name in arrival.names:
        if name in arrival.fixed:
            if tx.symbolic_locals.get(name) is not arrival.fixed[name]:
                raise Refused(f"the loop rebinds {name!r}")
            ends.append((name, "fixed"))
        else:
            ends.append((name, _status(tx, name)))
    values = tuple(tx.symbolic_locals[name] for name, end in ends if end == "bound")
    template = active.recording.finish(tx.output, arrival.call, TupleVariable(values))
    steps = None if active.steps is None else tx.steps - active.steps - 1  # type: ignore[attr-defined]
    fragments.STATS["recorded"] += 1
    return _Iteration(template, tuple(ends), steps, tuple(arrival.fixed.values()))


def _status(tx: Tx, name: str) -> str:
    if name in tx.symbolic_locals:
        return "bound"
    return "unread" if name in tx.frame_values else "unbound"


def _position(tx: Tx, iterator: IteratorVariable) -> Any:
    """The iterator's state, read unseen by the recording (no read of the iteration's)."""
    effects = tx.output.side_effects
    reads, effects.reads = effects.reads, None
    try:
        return iterator.state(tx)
    finally:
        effects.reads = reads


def _may_skip(tx: Tx, steps: int | None) -> bool:
    """Whether a copy may stand for ``steps`` steps of the root frame: not across the step
    where an earlier attempt broke the graph (the break must land where it did)."""
    if steps is None:
        return True
    at = getattr(tx, "break_at", None)
    return at is None or not tx.steps <= at < tx.steps + steps  # type: ignore[attr-defined]


def _replayed(tx: Tx, arrival: Arrival, iteration: _Iteration, item: Any) -> bool:
    result = iteration.template.replay(tx, arrival.call)
    if result is None:
        return False
    values = iter(result.items)
    for name, end in iteration.ends:
        if end == "bound":
            tx.symbolic_locals[name] = next(values)
        elif end == "unbound":
            tx.symbolic_locals.pop(name, None)
            tx.frame_values.pop(name, None)
    tx.symbolic_locals[arrival.target] = item
    tx.jump(arrival.index)
    if iteration.steps is not None:
        tx.steps += iteration.steps  # type: ignore[attr-defined]
    return True
