"""Calls from code run as Python go through bytegraph: a call site rewritten to route.

bytegraph has no frame hook, so code it runs as Python on the user's behalf
(a break's Python part, a loop region, a frame that cannot be traced) would
call every function uncompiled. Instead, that code is rewritten so each call
site asks a router for what to call, the way a frame hook would compile the
callee's frame:

1. ``call_sites(code)`` simulates the stack of ``code`` over every path,
   recording for each slot the instruction that pushed it. At each CALL
   (CALL_KW, CALL_FUNCTION_EX), whose callable sits below its arguments with
   a NULL slot beside it (below it before 3.13, above it from 3.13), the
   instruction that pushed the callable is a site, if every path agrees on
   it, the slot beside it is a known NULL, and the value is never copied,
   merged with another or used but as that callable.
2. ``rewrite_sites`` inserts ``route(callable)`` right after each site's
   instruction: ``LOAD_CONST route; SWAP 2; CALL 0`` (``route`` and the
   callable as its one argument, the method layout of every version). A
   method load (3.11's LOAD_METHOD, LOAD_ATTR with its method bit), which
   pushes either a function and its receiver or a bound method and a NULL,
   becomes a plain LOAD_ATTR and a PUSH_NULL first (the same lookup, one
   layout); so does 3.13's LOAD_GLOBAL with its NULL bit, whose NULL lies
   above the callable.
3. At run time ``route`` (``bytegraph/runtime.py``) returns a compiled wrapper
   for a user function, method or nn.Module, and anything else as it is. Only
   the call sees the wrapper: the callable's identity is unchanged for every
   other use, since a site's value has no other use.

Where the simulation is unsure (an opcode it does not model, paths that push
the callable in different places) the call is left alone. Code that is
traced (resume functions) is never rewritten: only code that runs.
"""

from __future__ import annotations

import dataclasses
import dis
import types
from collections.abc import Callable, Iterable
from typing import Any

import bytecode as bc

from bytegraph.bytecode import assemble, compat, encode
from bytegraph.bytecode.instructions import DecodedCode, Instruction, decode
from bytegraph.bytecode.stack_effects import FRAME_EXITS, STACK_EFFECTS, loads_method

Slot = tuple[int, int] | None  # (index of the instruction that pushed it, which push), or unknown
_CALLEE = "callee"  # a slot consumed as the callable of a call
_NULL = "null"  # a slot consumed as the NULL (or receiver) below a callable
_OTHER = "other"

_LOADS = frozenset({
    "LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_CONST", "LOAD_DEREF",
    "LOAD_CLOSURE", "LOAD_NAME", "LOAD_CLASSDEREF",
    "PUSH_NULL", "LOAD_ASSERTION_ERROR", "LOAD_BUILD_CLASS",
})
# The instructions whose pushed value may be routed when it is a call's callable.
_PRODUCERS = frozenset({
    "LOAD_FAST", "LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_ATTR",
    "BINARY_SUBSCR", "CALL",
})
_UNCHANGED = frozenset({
    "NOP", "RESUME", "PRECALL", "KW_NAMES", "EXTENDED_ARG", "CACHE", "DELETE_FAST",
    "DELETE_GLOBAL", "DELETE_NAME", "DELETE_DEREF", "COPY_FREE_VARS", "MAKE_CELL",
    "SETUP_ANNOTATIONS", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
})
# (pops, pushes) by opname (bytecode/stack_effects.py).
_EFFECTS = STACK_EFFECTS
# Instructions that read the slot ``arg`` deep (or the top) and leave it: (pops, pushes, depth).
_PEEKS: dict[str, Callable[[int], tuple[int, int, int]]] = {
    "LIST_APPEND": lambda a: (1, 0, a),
    "SET_ADD": lambda a: (1, 0, a),
    "LIST_EXTEND": lambda a: (1, 0, a),
    "SET_UPDATE": lambda a: (1, 0, a),
    "DICT_UPDATE": lambda a: (1, 0, a),
    "DICT_MERGE": lambda a: (1, 0, a),
    "MAP_ADD": lambda a: (2, 0, a),
    "GET_LEN": lambda a: (0, 1, 1),
    "IMPORT_FROM": lambda a: (0, 1, 1),
    "CHECK_EXC_MATCH": lambda a: (1, 1, 2),
    "WITH_EXCEPT_START": lambda a: (0, 1, 4),
}
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # generator, coroutine, async generator
_POP_JUMPS = frozenset(name for name in dis.opmap if name.startswith("POP_JUMP_"))
_ENDS = FRAME_EXITS | {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"}
# Which of a method load's two pushes is the callable, and which of CALL's two lowest
# popped slots is the callable (the other is its NULL or receiver).
_CALLABLE_PUSH = 1 if compat.NULL_BEFORE_CALLABLE else 0
_CALLABLE_POP = 1 if compat.NULL_BEFORE_CALLABLE else 0


@dataclasses.dataclass(frozen=True, slots=True)
class CallSite:
    """Route the value instruction ``producer`` pushes: it is only ever called, at ``calls``."""

    producer: int
    calls: tuple[int, ...]
    method: bool  # a method load or 3.13's LOAD_GLOBAL with a NULL: rewritten first


class _Unsure(Exception):
    """The stack of the code is not what the simulation expects: route nothing."""


@dataclasses.dataclass
class _Simulation:
    decoded: DecodedCode
    uses: dict[tuple[int, int], set[tuple[str, int]]] = dataclasses.field(default_factory=dict)
    # call index -> (callable slot, slot below it)
    calls: dict[int, tuple[Slot, Slot]] = dataclasses.field(default_factory=dict)

    def use(self, slot: Slot, role: str, where: int) -> None:
        if slot is not None:
            self.uses.setdefault(slot, set()).add((role, where))

    def forget(self, slots: Iterable[Slot], where: int) -> None:
        for slot in slots:
            self.use(slot, _OTHER, where)


_sites: dict[int, tuple[types.CodeType, tuple[CallSite, ...]]] = {}


def call_sites(code: types.CodeType) -> tuple[CallSite, ...]:
    """The call sites of ``code`` to route (cached per code object)."""
    cached = _sites.get(id(code))
    if cached is not None and cached[0] is code:
        return cached[1]
    sites: tuple[CallSite, ...] = ()
    # A generator's own frame is left alone.
    if not code.co_flags & _GENERATOR_FLAGS:
        try:
            sites = _find_sites(decode(code))
        except _Unsure:
            sites = ()
    _sites[id(code)] = (code, sites)
    return sites


def _find_sites(decoded: DecodedCode) -> tuple[CallSite, ...]:
    sim = _Simulation(decoded)
    _simulate(sim)
    instructions = decoded.instructions
    sites = []
    for slot, uses in sim.uses.items():
        producer, push = slot
        inst = instructions[producer]
        if {role for role, _ in uses} != {_CALLEE}:
            continue
        calls = tuple(sorted(where for _, where in uses))
        below = {sim.calls[c][1] for c in calls}
        if loads_method(inst.opname, inst.arg) or _global_with_null_above(inst):
            other = (producer, 1 - _CALLABLE_PUSH)
            if (
                push == _CALLABLE_PUSH and below == {other}
                and {r for r, _ in sim.uses[other]} == {_NULL}
            ):
                sites.append(CallSite(producer, calls, method=True))
        elif inst.opname in _PRODUCERS and push == _pushes(inst)[1] - 1:
            if all(_is_null(instructions, s) for s in below):
                sites.append(CallSite(producer, calls, method=False))
    return tuple(sorted(sites, key=lambda s: s.producer))


def _is_null(instructions: tuple[Instruction, ...], slot: Slot) -> bool:
    if slot is None:
        return False
    inst = instructions[slot[0]]
    if inst.opname == "PUSH_NULL":
        return True
    return inst.opname == "LOAD_GLOBAL" and bool(inst.arg & 1) and slot[1] == 1 - _CALLABLE_PUSH


def _global_with_null_above(inst: Instruction) -> bool:
    return (
        not compat.NULL_BEFORE_CALLABLE and inst.opname == "LOAD_GLOBAL" and bool(inst.arg & 1)
    )


def _pushes(inst: Instruction) -> tuple[int, int]:
    if inst.opname in _LOADS:
        return 0, 1
    effect = _EFFECTS.get(inst.opname)
    if effect is None:
        raise KeyError(inst.opname)
    return effect(inst.arg or 0)


def _simulate(sim: _Simulation) -> None:
    """Run every path, merging the stacks where paths meet (a disagreement: unknown)."""
    decoded = sim.decoded
    states: dict[int, tuple[Slot, ...]] = {0: ()}
    work = [0]
    while work:
        index = work.pop()
        for successor, state in _step(sim, index, states[index]):
            if successor >= len(decoded.instructions):
                raise _Unsure
            known = states.get(successor)
            if known is None:
                states[successor] = state
                work.append(successor)
                continue
            if len(known) != len(state):
                raise _Unsure
            merged = tuple(a if a == b else None for a, b in zip(known, state))
            if merged != known:
                sim.forget((a for a, b in zip(known, state) if a != b), successor)
                sim.forget((b for a, b in zip(known, state) if a != b), successor)
                states[successor] = merged
                work.append(successor)


def _step(
    sim: _Simulation, index: int, state: tuple[Slot, ...]
) -> list[tuple[int, tuple[Slot, ...]]]:
    """(successor, stack there) for each way out of instruction ``index``."""
    decoded = sim.decoded
    inst = decoded.instructions[index]
    out: list[tuple[int, tuple[Slot, ...]]] = []
    handler = decoded.handler_for(index)
    if handler is not None:  # an exception here keeps the slots below the handler's depth
        if handler.depth > len(state):
            raise _Unsure
        # (the slots above it are dropped: a routed callable there is never seen)
        sim.forget(state[: handler.depth], index)
        depth = handler.depth + handler.lasti + 1
        out.append((handler.target, (None,) * depth))
    name = inst.opname
    after = _after(sim, inst, state)
    if name in _POP_JUMPS:
        sim.forget(state[-1:], index)
        out += [(index + 1, state[:-1]), (inst.target, state[:-1])]
    elif name in ("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP"):
        sim.forget(state[-1:], index)
        out += [(index + 1, state[:-1]), (inst.target, state)]
    elif name == "FOR_ITER":
        sim.forget(state[-1:], index)
        out += [(index + 1, (*state, (index, 0))), (inst.target, state[:-1])]
    elif after is not None:
        if inst.target is not None:
            out.append((inst.target, after))
        if name not in _ENDS:
            out.append((index + 1, after))
    elif name not in ("RAISE_VARARGS", "RERAISE"):
        raise _Unsure  # an opcode not modelled: give up on the whole code
    else:
        sim.forget(state, index)
    return out


def _after(sim: _Simulation, inst: Instruction, state: tuple[Slot, ...]) -> tuple[Slot, ...] | None:
    """The stack after a straight-line instruction, or None if it is not one modelled here."""
    name, arg, index = inst.opname, inst.arg or 0, inst.index
    if name in _UNCHANGED:
        return state
    if name == "SWAP":
        if arg > len(state):
            raise _Unsure
        swapped = list(state)
        swapped[-1], swapped[-arg] = swapped[-arg], swapped[-1]
        return tuple(swapped)
    if name == "COPY":
        if arg > len(state):
            raise _Unsure
        sim.forget([state[-arg]], index)
        return (*state, (index, 0))
    if name in _PEEKS:
        pops, pushes, depth = _PEEKS[name](arg)
        if depth > len(state):
            raise _Unsure
        sim.forget(state[-pops:] if pops else (), index)
        sim.forget([state[-depth]], index)
        kept = state[: len(state) - pops]
        return (*kept, *((index, k) for k in range(pushes)))
    if name in _LOADS or name in _EFFECTS:
        pops, pushes = _pushes(inst)
        if pops > len(state):
            raise _Unsure
        popped = state[len(state) - pops:] if pops else ()
        if name in ("CALL", "CALL_KW", "CALL_FUNCTION_EX"):
            callee, null = popped[_CALLABLE_POP], popped[1 - _CALLABLE_POP]
            sim.calls[index] = (callee, null)
            sim.use(callee, _CALLEE, index)
            sim.use(null, _NULL, index)
            sim.forget(popped[2:], index)
        else:
            sim.forget(popped, index)
        kept = state[: len(state) - pops]
        return (*kept, *((index, k) for k in range(pushes)))
    return None


# -- rewriting -------------------------------------------------------------------------
def route_instrs(route: Any, anchor: bc.Instr) -> list[bc.Instr]:
    """``route(TOS)``: the callable on top replaced by what ``route`` returns."""
    where = anchor.location
    instrs = [bc.Instr("LOAD_CONST", route), bc.Instr("SWAP", 2), *assemble.call(0)]
    for instr in instrs:
        instr.location = where
    return instrs


def rewrite_sites(body: list[Any], anchored: list[tuple[CallSite, bc.Instr]], route: Any) -> None:
    """Insert the route call after each site's Instr (found in ``body`` by identity)."""
    where = {id(item): i for i, item in enumerate(body)}
    for _, instr in sorted(anchored, key=lambda p: where[id(p[1])], reverse=True):
        position = where[id(instr)]
        inserted = route_instrs(route, instr)
        if instr.name in ("LOAD_METHOD", "LOAD_ATTR", "LOAD_GLOBAL") and _is_split(instr):
            body[position : position + 1] = _split_load(instr, inserted)
        else:
            body[position + 1 : position + 1] = inserted


def _is_split(instr: bc.Instr) -> bool:
    """A load rewritten as a plain load of the callable plus the call's NULL slot."""
    if instr.name == "LOAD_METHOD":
        return True
    if instr.name == "LOAD_ATTR":
        return compat.LOAD_ATTR_METHOD_BIT and instr.arg[0]
    return not compat.NULL_BEFORE_CALLABLE and instr.arg[0]  # LOAD_GLOBAL


def _split_load(instr: bc.Instr, routed: list[bc.Instr]) -> list[bc.Instr]:
    """``instr`` as a plain load, routed, with the NULL where this version's CALL wants it."""
    name = instr.arg if instr.name == "LOAD_METHOD" else instr.arg[1]
    if instr.name == "LOAD_GLOBAL":
        plain = bc.Instr("LOAD_GLOBAL", (False, name))
    else:
        plain = assemble.load_attr(name)
    null = bc.Instr("PUSH_NULL")
    plain.location = null.location = instr.location
    if compat.NULL_BEFORE_CALLABLE:  # the object is on the stack already: NULL below it
        swap = bc.Instr("SWAP", 2, location=instr.location)
        return [null, swap, plain, *routed]
    return [plain, *routed, null]


def instr_positions(decoded: DecodedCode, body: list[Any]) -> dict[int, int]:
    """Decoded instruction index -> position of its Instr in ``body`` (``bytecode``'s list,
    where an EXTENDED_ARG is folded into the instruction it extends)."""
    indices = [inst.index for inst in decoded.instructions if inst.opname != "EXTENDED_ARG"]
    positions = [i for i, item in enumerate(body) if isinstance(item, bc.Instr)]
    return dict(zip(indices, positions))


def routed_code(code: types.CodeType, route: Any) -> types.CodeType:
    """``code`` with its call sites routed, or ``code`` itself if none can be."""
    from bytegraph.exc import Unsupported
    from bytegraph.translate.resume import _set_try_depths

    sites = call_sites(code)
    if not sites:
        return code
    body = bc.Bytecode.from_code(code)
    try:
        _set_try_depths(code, body)  # the table's own depths, as _entered_code keeps them
    except Unsupported:
        return code
    positions = instr_positions(decode(code), body)
    rewrite_sites(body, [(site, body[positions[site.producer]]) for site in sites], route)
    return encode.to_code(body, compute_exception_stack_depths=False)
