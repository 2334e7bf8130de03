"""Graph breaks: compile what came before, run a piece in Python, resume.

When the translator meets something it cannot trace at instruction ``i`` of
the frame being compiled, translation restarts and stops just before the
piece that must run in Python: instruction ``i`` itself (with a store or pop
of its result that follows), the whole call when ``i`` is a LOAD_METHOD,
or the outermost loop around ``i``. The transformed code then

1. calls the graph built so far,
2. materialises the live locals into their real slots and the symbolic stack
   into temporaries, then replays pending side effects,
3. returns ``part(*stack, *locals)``: the *Python part*, the original code
   entered at the piece's first instruction with the stack rebuilt from its
   arguments (a call of a user function whose body broke calls a compiled
   wrapper of it instead, so the callee's tensor work is still captured).
   At each exit of the piece (the next instruction, a jump target, a loop's
   exits) a stub returns ``resume(*stack, *live_locals)``.

The Python part runs in the original instructions and exception table, so
a with-block around it exits if it raises, and an exception that leaves it
goes on as Python to the end of the code, as in eager. A resume function is
the original code with the same kind of prologue, jumping to an exit; it is
itself a compiled entry point with its own guards and cache, generated once
per (code, exit, stack layout, locals). A bound method waiting on the stack
crosses as its receiver and is bound again in the prologue. Breaks are
refused, and the frame runs as plain Python, inside a ``try`` (compiled code
before and after the break would run outside its handler), in generators,
or where the frame owns closure cells.
"""

from __future__ import annotations

import dataclasses
import dis
import functools
import inspect
import os
import sysconfig
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.bytecode import assemble
from bytegraph.bytecode.instructions import DecodedCode, Instruction, decode
from bytegraph.exc import Unsupported
from bytegraph.variables.base import NullVariable, VariableTracker

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslator

_FLAGS_DROPPED = (
    bc.CompilerFlags.VARARGS | bc.CompilerFlags.VARKEYWORDS | bc.CompilerFlags.GENERATOR
    | bc.CompilerFlags.COROUTINE | bc.CompilerFlags.ASYNC_GENERATOR
)
_CONDITIONAL_JUMPS = frozenset(
    name for name in dis.opmap if "JUMP" in name and ("_IF_" in name)
)
# (pops, pushes) of the instructions a break may run in Python; others refuse.
# ``pushes`` is a count of values, or per pushed slot (bottom first) whether it is a NULL.
_STACK_EFFECTS: dict[str, Callable[[int], tuple[int, int | tuple[bool, ...]]]] = {
    "CALL": lambda arg: (arg + 2, 1),
    "CALL_FUNCTION_EX": lambda arg: (3 + (arg & 1), 1),
    "BINARY_OP": lambda arg: (2, 1),
    "BINARY_SUBSCR": lambda arg: (2, 1),
    "COMPARE_OP": lambda arg: (2, 1),
    "CONTAINS_OP": lambda arg: (2, 1),
    "IS_OP": lambda arg: (2, 1),
    "UNARY_NEGATIVE": lambda arg: (1, 1),
    "UNARY_POSITIVE": lambda arg: (1, 1),
    "UNARY_INVERT": lambda arg: (1, 1),
    "UNARY_NOT": lambda arg: (1, 1),
    "LOAD_ATTR": lambda arg: (1, 1),
    "STORE_ATTR": lambda arg: (2, 0),
    "DELETE_ATTR": lambda arg: (1, 0),
    "STORE_SUBSCR": lambda arg: (3, 0),
    "DELETE_SUBSCR": lambda arg: (2, 0),
    "GET_ITER": lambda arg: (1, 1),
    "UNPACK_SEQUENCE": lambda arg: (1, arg),
    "UNPACK_EX": lambda arg: (1, (arg & 0xFF) + (arg >> 8) + 1),
    "FORMAT_VALUE": lambda arg: (1 + ((arg & 0x04) == 0x04), 1),
    "BUILD_STRING": lambda arg: (arg, 1),
    "BUILD_TUPLE": lambda arg: (arg, 1),
    "BUILD_LIST": lambda arg: (arg, 1),
    "BUILD_SET": lambda arg: (arg, 1),
    "BUILD_MAP": lambda arg: (2 * arg, 1),
    "BUILD_CONST_KEY_MAP": lambda arg: (arg + 1, 1),
    "BUILD_SLICE": lambda arg: (arg, 1),
    "LIST_TO_TUPLE": lambda arg: (1, 1),
    # These also read the container ``arg`` slots down, which is on the real stack too.
    "LIST_APPEND": lambda arg: (1, 0),
    "SET_ADD": lambda arg: (1, 0),
    "MAP_ADD": lambda arg: (2, 0),
    "LIST_EXTEND": lambda arg: (1, 0),
    "SET_UPDATE": lambda arg: (1, 0),
    "DICT_UPDATE": lambda arg: (1, 0),
    "DICT_MERGE": lambda arg: (1, 0),
    "GET_LEN": lambda arg: (1, 2),
    "MATCH_MAPPING": lambda arg: (1, 2),
    "MATCH_SEQUENCE": lambda arg: (1, 2),
    "MATCH_KEYS": lambda arg: (2, 3),
    "MATCH_CLASS": lambda arg: (3, 1),
    "LOAD_GLOBAL": lambda arg: (0, (True, False) if arg & 1 else (False,)),
    "STORE_GLOBAL": lambda arg: (1, 0),
    "DELETE_GLOBAL": lambda arg: (0, 0),
    "LOAD_DEREF": lambda arg: (0, 1),
    "STORE_DEREF": lambda arg: (1, 0),
    "IMPORT_NAME": lambda arg: (2, 1),
    "IMPORT_FROM": lambda arg: (1, 2),  # the module stays, the name goes on top
    "LOAD_BUILD_CLASS": lambda arg: (0, 1),
    "LOAD_ASSERTION_ERROR": lambda arg: (0, 1),
}
# Instructions that never continue: a break there runs them and resumes nowhere.
_NO_EXIT = frozenset({"RAISE_VARARGS"})
_TERMINATORS = frozenset({"RETURN_VALUE", "RAISE_VARARGS", "RERAISE"})
# What may follow a break's instruction and run in Python with it, so that a value it
# produced and the program drops or stores never becomes a resume function's input
# (a float from ``time.time()`` would be guarded by value there, missing every call).
_ABSORBED = frozenset({"STORE_FAST", "POP_TOP"})
_JUMP_EFFECTS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    # opname family -> ((pops, pushes) falling through, (pops, pushes) jumping)
    "POP_JUMP": ((1, 0), (1, 0)),
    "JUMP_IF": ((1, 0), (1, 1)),
}


@dataclasses.dataclass(frozen=True, slots=True)
class ResumeSpec:
    """What identifies a resume function: where it continues and what it receives."""

    base_code: types.CodeType
    target: int  # instruction index in base_code
    stack_nulls: tuple[bool, ...]  # per stack slot, bottom first: True where it is a NULL
    local_names: tuple[str, ...]
    # per stack slot: the name of a method the slot's argument (its receiver) is bound to
    stack_methods: tuple[str | None, ...] = ()


@dataclasses.dataclass(frozen=True)
class FrameContext:
    """What a break needs from the compiled function it happens in."""

    fn: types.FunctionType
    compile_function: Callable[[types.FunctionType], Any]
    resume_cache: dict[ResumeSpec, Any]
    callee_cache: dict[types.FunctionType, Any]

    def resume_function(self, spec: ResumeSpec) -> Any:
        compiled = self.resume_cache.get(spec)
        if compiled is None:
            code = build_resume_code(spec)
            fn = types.FunctionType(
                code, self.fn.__globals__, code.co_name, None, self.fn.__closure__
            )
            compiled = self.resume_cache[spec] = self.compile_function(fn)
        return compiled

    def compiled_callee(self, fn: types.FunctionType) -> Any:
        compiled = self.callee_cache.get(fn)
        if compiled is None:
            compiled = self.callee_cache[fn] = self.compile_function(fn)
        return compiled


# resume code -> (base code, number of prologue instructions before the base ones)
_origins: dict[types.CodeType, tuple[types.CodeType, int]] = {}


def base_position(code: types.CodeType, index: int) -> tuple[types.CodeType, int]:
    """Map an instruction of a resume function back to the original code."""
    origin = _origins.get(code)
    if origin is None:
        return code, index
    base, shift = origin
    return base, index - shift


def build_resume_code(spec: ResumeSpec) -> types.CodeType:
    base = spec.base_code
    concrete = _entered_code(
        base, spec.target, spec.stack_nulls, spec.stack_methods, spec.local_names, {},
        f"{base.co_qualname}.<resume at {spec.target}>",
    )
    shift = len(decode(concrete).instructions) - len(decode(base).instructions)
    _origins[concrete] = (base, shift)
    return concrete


def _entered_code(
    base: types.CodeType,
    target: int,
    stack_nulls: tuple[bool, ...],
    stack_methods: tuple[str | None, ...],
    local_names: tuple[str, ...],
    stubs: dict[int, list[Any]],
    qualname: str,
) -> types.CodeType:
    """``base`` entered at instruction ``target`` with the stack rebuilt from arguments.

    The arguments are the stack (``___stack<i>``, NULLs pushed by the prologue,
    methods bound again to their receivers), then ``local_names``. Before
    each instruction of ``stubs``, its stub runs instead. Every instruction
    and exception-table entry is ``base``'s own, depths included: the
    prologue jumps into the middle of ranges that no flow from the entry
    opens, so depths computed from the flow would be wrong.
    """
    body = list(bc.Bytecode.from_code(base))
    _set_try_depths(base, body)
    label = bc.Label()
    inserts = [(_abstract_index(base, body, index), stub) for index, stub in stubs.items()]
    inserts.append((_abstract_index(base, body, target), [label]))
    for position, items in sorted(inserts, key=lambda p: p[0], reverse=True):
        opened = _open_try(body, position)
        if opened is not None and items[0] is not label:
            # The resume function handles its own exceptions: its call is in no range.
            reopened = bc.TryBegin(opened.target, opened.push_lasti, opened.stack_depth)
            _retarget_try_end(body, position, opened, reopened)
            items = [bc.TryEnd(opened), *items, reopened]
        body[position:position] = items
    prologue: list[Any] = assemble.prologue(base)
    methods = stack_methods or (None,) * len(stack_nulls)
    for i, (is_null, method) in enumerate(zip(stack_nulls, methods)):
        load = bc.Instr("PUSH_NULL") if is_null else bc.Instr("LOAD_FAST", f"___stack{i}")
        prologue.append(load)
        if method is not None:
            prologue.append(bc.Instr("LOAD_ATTR", method))
    prologue.append(bc.Instr("JUMP_FORWARD", label))
    code = bc.Bytecode(prologue + body)
    # The user's name, so tracebacks and break reports read as the original function.
    code.name = base.co_name
    if hasattr(code, "qualname"):
        code.qualname = qualname
    code.filename = base.co_filename
    code.first_lineno = base.co_firstlineno
    code.argnames = [f"___stack{i}" for i, n in enumerate(stack_nulls) if not n]
    code.argnames += list(local_names)
    code.argcount = len(code.argnames)
    code.freevars = list(base.co_freevars)
    code.flags = bc.CompilerFlags(base.co_flags) & ~_FLAGS_DROPPED
    return code.to_code(compute_exception_stack_depths=False)


def _set_try_depths(base: types.CodeType, body: list[Any]) -> None:
    """Give each TryBegin of ``body`` the stack depth of its entry in ``base``'s table.

    ``bytecode`` leaves them unset when decoding and computes them from the
    flow when assembling, which cannot see ranges only reached by a jump into
    their middle.
    """
    decoded = decode(base)
    real = [inst.index for inst in decoded.instructions if inst.opname != "EXTENDED_ARG"]
    depths = {(e.start, e.target): e.depth for e in decoded.exception_table}
    at_label: dict[bc.Label, int] = {}
    pending: list[bc.Label] = []
    count = 0
    for item in body:
        if isinstance(item, bc.Label):
            pending.append(item)
        elif isinstance(item, bc.Instr):
            at_label.update((label, real[count]) for label in pending)
            pending.clear()
            count += 1
    count = 0
    for item in body:
        if isinstance(item, bc.Instr):
            count += 1
        elif isinstance(item, bc.TryBegin):
            start = real[count] if count < len(real) else len(decoded.instructions)
            target = at_label.get(item.target)
            depth = depths.get((start, target))
            # A range may start at the EXTENDED_ARG before its first instruction.
            while depth is None and start > 0 and (
                decoded.instructions[start - 1].opname == "EXTENDED_ARG"
            ):
                start -= 1
                depth = depths.get((start, target))
            if depth is None:
                raise Unsupported("unsupported_opcode", "an exception-table entry not found")
            item.stack_depth = depth


def _abstract_index(base: types.CodeType, body: list[Any], index: int) -> int:
    """Position in ``body`` (bytecode's abstract list) of decoded instruction ``index``."""
    decoded = decode(base).instructions
    wanted = sum(1 for inst in decoded[:index] if inst.opname != "EXTENDED_ARG")
    seen = 0
    for position, item in enumerate(body):
        if isinstance(item, bc.Instr):
            if seen == wanted:
                return position
            seen += 1
    raise Unsupported("unsupported_opcode", f"resume target {index} not found")


# -- where a break is allowed ---------------------------------------------------
def refuse_reason(decoded: DecodedCode, index: int) -> str | None:
    """Why a break at ``index`` would be unsafe, or None if it is safe."""
    code = decoded.code
    if code.co_cellvars:
        return "the frame owns closure cells, which a resume function cannot share"
    if code.co_flags & 0x20:
        return "breaks inside generators are not supported"
    for entry in decoded.exception_table:
        if entry.start <= index <= entry.end and not _is_with_cleanup(decoded, entry.target):
            return "a break inside a try block: its handler would not cover the Python part"
    return None


def enclosing_loop(decoded: DecodedCode, index: int) -> tuple[int, int] | None:
    """(header, last instruction) of the outermost loop around ``index``, if any."""
    backward = [
        (inst.target, inst.index) for inst in decoded.instructions
        if inst.target is not None and inst.target <= inst.index
    ]
    start = end = index
    grown = True
    while grown:
        grown = False
        for target, jump in backward:
            if target <= end and jump >= start and (target < start or jump > end):
                start, end, grown = min(start, target), max(end, jump), True
        if (start, end) != (index, index):
            # A try inside the loop: its handlers (laid out after the body) run with it.
            for entry in decoded.exception_table:
                if start <= entry.start <= end and entry.target > end:
                    end, grown = _block_end(decoded, entry.target), True
    return None if (start, end) == (index, index) else (start, end)


def _block_end(decoded: DecodedCode, index: int) -> int:
    """The last instruction of the straight-line block starting at ``index``."""
    instructions = decoded.instructions
    while index + 1 < len(instructions):
        inst = instructions[index]
        if inst.opname in _TERMINATORS or (
            inst.opname.startswith("JUMP_") and inst.opname not in _CONDITIONAL_JUMPS
        ):
            break
        index += 1
    return index


def loop_region(decoded: DecodedCode, index: int) -> tuple[int, int] | None:
    """What runs in Python for a break inside a loop: the outermost loop around ``index``.

    A ``for`` loop starts with the expression of its iterable: at FOR_ITER the
    iterator is on the stack, and an iterator the trace built (``enumerate``,
    ``zip``, ``map``) may have no Python form to hand over, so the region
    begins where the iterable's evaluation does, when that is straight-line code.
    """
    loop = enclosing_loop(decoded, index)
    if loop is None:
        return None
    start, end = loop
    instructions = decoded.instructions
    if instructions[start].opname != "FOR_ITER" or instructions[start - 1].opname != "GET_ITER":
        return loop
    targets = {inst.target for inst in instructions if inst.target is not None}
    depth = 1  # the iterator, after GET_ITER
    for i in range(start - 1, 0, -1):
        inst = instructions[i]
        if inst.target is not None or inst.opname in ("RESUME", "NOP"):
            break
        depth -= dis.stack_effect(inst.opcode, inst.arg)
        if depth <= 0:
            return (i, end) if depth == 0 else loop
        if i in targets:  # reached from elsewhere: not one straight-line expression
            break
    return loop


def call_region(decoded: DecodedCode, index: int) -> tuple[int, int] | None:
    """(LOAD_METHOD, its CALL[, a STORE_FAST or POP_TOP of the result]) for a break there.

    LOAD_METHOD leaves a method and its receiver, or a NULL and a bound method,
    and which one only Python knows; no resume function could take either
    layout. So the whole call, arguments included, runs in Python instead,
    with the store of its result when one follows. None if the arguments
    contain a jump (the call is then no straight line).
    """
    instructions = decoded.instructions
    if instructions[index].opname != "LOAD_METHOD":
        return None
    depth = 0
    for inst in instructions[index:]:
        if inst.target is not None or inst.opname in ("RETURN_VALUE", "RAISE_VARARGS"):
            return None
        depth += dis.stack_effect(inst.opcode, inst.arg)
        if depth <= 0:
            after = inst.index + 1
            if after < len(instructions) and instructions[after].opname in _ABSORBED:
                return index, after
            return index, inst.index
    return None


def _is_with_cleanup(decoded: DecodedCode, handler: int) -> bool:
    following = decoded.instructions[handler : handler + 3]
    return any(inst.opname == "WITH_EXCEPT_START" for inst in following)


@functools.cache
def live_locals(code: types.CodeType, index: int) -> frozenset[str]:
    """Locals that some instruction reachable from ``index`` may read."""
    decoded = decode(code)
    instructions = decoded.instructions
    seen: set[int] = set()
    work = [index]
    names: set[str] = set()
    while work:
        i = work.pop()
        if i in seen or i >= len(instructions):
            continue
        seen.add(i)
        inst = instructions[i]
        if inst.opname in ("LOAD_FAST", "LOAD_FAST_CHECK", "DELETE_FAST", "LOAD_CLOSURE"):
            names.add(inst.argval)
        if inst.target is not None:
            work.append(inst.target)
        if inst.opname not in ("RETURN_VALUE", "RAISE_VARARGS", "RERAISE") and not (
            inst.opname.startswith("JUMP_") and inst.opname not in _CONDITIONAL_JUMPS
        ):
            work.append(i + 1)
        handler = decoded.handler_for(i)
        if handler is not None:
            work.append(handler.target)
    return frozenset(names)


# -- the code a break emits -----------------------------------------------------
@dataclasses.dataclass(frozen=True)
class BreakPlan:
    """Everything the transformed code needs to run ``inst`` in Python and resume."""

    inst: Instruction
    stack: tuple[VariableTracker, ...]
    locals: dict[str, VariableTracker | None]  # None: an argument never read, still in its slot
    exits: tuple[tuple[bc.Label | None, int, tuple[bool, ...]], ...]  # (label, index, nulls)
    callee_slot: int | None  # stack slot of a user function to call compiled
    live: dict[int, tuple[str, ...]]  # exit index -> bound locals read from there on
    region: tuple[int, int] | None = None  # a loop run in Python: first and last index
    entry_live: tuple[str, ...] = ()  # bound locals the region itself may read
    # Stack slots holding a bound method the Python part leaves in place: slot -> (receiver,
    # method name). The method crosses into resume functions as its receiver.
    methods: dict[int, tuple[VariableTracker, str]] = dataclasses.field(default_factory=dict)

    def needed_locals(self) -> list[str]:
        """Bound locals that code run after the graph may read."""
        names = set(self.entry_live).union(*self.live.values())
        return sorted(n for n in names if n in self.locals)


def plan_break(tx: InstructionTranslator, inst: Instruction) -> BreakPlan:
    """Check that a break before ``inst`` is safe and work out its exits."""
    reason = refuse_reason(tx.decoded, inst.index)
    if reason is not None:
        raise Unsupported("unsupported_opcode", f"cannot break the graph here: {reason}")
    stack = tuple(tx.stack)
    nulls = tuple(isinstance(v, NullVariable) for v in stack)
    exits = []
    for label, target, (pops, pushed) in _exits(inst):
        if pops > len(stack):
            raise Unsupported("unsupported_opcode", f"{inst.opname} pops below the stack")
        exits.append((label, target, nulls[: len(stack) - pops] + pushed))
    bound: dict[str, VariableTracker | None] = dict(tx.symbolic_locals)
    bound.update({name: None for name in tx.frame_values if name not in bound})
    absorbed: tuple[Instruction, ...] = ()
    stored: set[str] = set()  # bound by the absorbed stores, in the Python part
    if len(exits) == 1 and exits[0][0] is None:
        _, target, layout = exits[0]
        absorbed = _absorbed(tx.instructions, target, layout)
        stored = {i.argval for i in absorbed if i.opname == "STORE_FAST"}
        exits = [(None, target + len(absorbed), layout[: len(layout) - len(absorbed)])]
    live = {
        target: tuple(sorted(live_locals(tx.code, target) & (set(bound) | stored)))
        for _, target, _ in exits
    }
    # What the part may read, exception paths included (a with-block that swallows
    # the exception goes on as Python from its end).
    entry_live = tuple(sorted(live_locals(tx.code, inst.index) & set(bound)))
    callee = _callee_slot(inst, stack)
    kept = len(stack) - max((pops for _, _, (pops, _) in _exits(inst)), default=len(stack))
    return BreakPlan(
        inst, stack, bound, tuple(exits), callee, live, entry_live=entry_live,
        methods=_method_slots(tx, stack[: max(kept, 0)], callee),
    )


def _absorbed(
    instructions: tuple[Instruction, ...], start: int, layout: tuple[bool, ...]
) -> tuple[Instruction, ...]:
    """The STORE_FAST / POP_TOP run right after a break's instruction, from ``start``."""
    taken: list[Instruction] = []
    depth = len(layout)
    while (
        start + len(taken) < len(instructions)
        and instructions[start + len(taken)].opname in _ABSORBED
        and depth > 0 and not layout[depth - 1]
    ):
        taken.append(instructions[start + len(taken)])
        depth -= 1
    return tuple(taken)


def plan_loop_break(tx: InstructionTranslator, loop: tuple[int, int]) -> BreakPlan:
    """Run the loop ``loop`` in Python: the graph ends at its header.

    (A call region from ``call_region`` is planned the same way: a stretch of
    code, entered at its first instruction, that runs as Python.)

    Each exit of the loop resumes in a compiled function, unless a local that
    is read after the loop might be unbound there (assigned only inside the
    loop): then everything from the header on runs as Python, where
    boundness is exact.
    """
    decoded = tx.decoded
    start, end = loop
    reason = refuse_reason(decoded, start)
    if reason is not None:
        raise Unsupported("unsupported_opcode", f"cannot break the graph here: {reason}")
    stack = tuple(tx.stack)
    nulls = tuple(isinstance(v, NullVariable) for v in stack)
    bound: dict[str, VariableTracker | None] = dict(tx.symbolic_locals)
    bound.update({name: None for name in tx.frame_values if name not in bound})
    region = decoded.instructions[start : end + 1]
    assigned = {i.argval for i in region if i.opname in ("STORE_FAST", "DELETE_FAST")}
    maybe_unbound = assigned - {n for n in bound if n not in _deleted(region)}
    if all(i.target is None for i in region):  # straight line: every store happens
        maybe_unbound = _deleted(region)
    depths = _exit_depths(decoded, start, end, len(stack))
    exits, live = [], {}
    for target, depth in depths.items():
        names = live_locals(tx.code, target) & (set(bound) | assigned)
        if names & maybe_unbound:
            return _tail_plan(tx, start, stack, bound)
        layout = nulls[:depth] + (False,) * max(0, depth - len(nulls))
        exits.append((bc.Label(), target, layout))
        live[target] = tuple(sorted(names))
    entry_live = tuple(sorted(live_locals(tx.code, start) & set(bound)))
    # A loop never pops below the stack it starts on; a call region pops its receiver.
    kept = len(stack) - (decoded.instructions[start].opname == "LOAD_METHOD")
    return BreakPlan(
        decoded.instructions[start], stack, bound, tuple(exits), None, live, (start, end),
        entry_live, methods=_method_slots(tx, stack[:kept], None),
    )


def _deleted(region: tuple[Instruction, ...]) -> set[str]:
    return {i.argval for i in region if i.opname == "DELETE_FAST"}


def _tail_plan(
    tx: InstructionTranslator,
    start: int,
    stack: tuple[VariableTracker, ...],
    bound: dict[str, VariableTracker | None],
) -> BreakPlan:
    """Everything from ``start`` to the end of the code runs as Python."""
    entry_live = tuple(sorted(live_locals(tx.code, start) & set(bound)))
    last = len(tx.instructions) - 1
    return BreakPlan(tx.instructions[start], stack, bound, (), None, {}, (start, last), entry_live)


def _exit_depths(decoded: DecodedCode, start: int, end: int, entry_depth: int) -> dict[int, int]:
    """Stack depth at each instruction outside ``start..end`` the region can reach."""
    depth_at = {start: entry_depth}
    exits: dict[int, int] = {}
    work = [start]
    while work:
        i = work.pop()
        inst = decoded.instructions[i]
        successors = []
        if inst.opname not in ("RETURN_VALUE", "RAISE_VARARGS", "RERAISE"):
            name = inst.opname
            unconditional = name.startswith("JUMP_") and name not in _CONDITIONAL_JUMPS
            if not unconditional:
                successors.append((i + 1, dis.stack_effect(inst.opcode, inst.arg, jump=False)))
            if inst.target is not None:
                successors.append((inst.target, dis.stack_effect(inst.opcode, inst.arg, jump=True)))
        handler = decoded.handler_for(i)
        if handler is not None and start <= handler.start <= end:  # a try of the region
            successors.append((handler.target, handler.depth + handler.lasti + 1 - depth_at[i]))
        for successor, effect in successors:
            depth = depth_at[i] + effect
            if not start <= successor <= end:
                exits[successor] = depth
            elif successor not in depth_at:
                depth_at[successor] = depth
                work.append(successor)
    return exits


def _exits(inst: Instruction) -> list[tuple[bc.Label | None, int, tuple[int, tuple[bool, ...]]]]:
    """(label, target, (pops, pushed slots' NULL flags)) for each way out of ``inst``."""
    if inst.opname in _CONDITIONAL_JUMPS:
        family = "POP_JUMP" if inst.opname.startswith("POP_JUMP") else "JUMP_IF"
        (fall_pops, fall_pushes), (jump_pops, jump_pushes) = _JUMP_EFFECTS[family]
        return [
            (None, inst.index + 1, (fall_pops, (False,) * fall_pushes)),
            (bc.Label(), inst.target, (jump_pops, (False,) * jump_pushes)),
        ]
    if inst.opname in _NO_EXIT:
        return []
    effect = _STACK_EFFECTS.get(inst.opname)
    if effect is None:
        raise Unsupported("unsupported_opcode", f"cannot break the graph at {inst.opname}")
    pops, pushes = effect(inst.arg or 0)
    pushed = (False,) * pushes if isinstance(pushes, int) else pushes
    return [(None, inst.index + 1, (pops, pushed))]


def _callee_slot(inst: Instruction, stack: tuple[VariableTracker, ...]) -> int | None:
    """The slot of a user function called by ``inst`` (its body is what broke)."""
    from bytegraph.variables.functions import UserFunctionVariable

    if inst.opname == "CALL":
        slot = len(stack) - inst.arg - 2
        if isinstance(stack[slot], NullVariable):
            slot += 1
    elif inst.opname == "CALL_FUNCTION_EX":
        slot = len(stack) - 2 - (inst.arg & 1)
    else:
        return None
    vt = stack[slot]
    if not isinstance(vt, UserFunctionVariable) or _is_standard_library(vt.fn.__code__.co_filename):
        return None
    return slot


@functools.cache
def _is_standard_library(filename: str) -> bool:
    """Whether ``filename`` is a module of Python's standard library.

    A standard-library function whose body broke runs as is rather than as a
    compiled callee: it does no tensor work worth a graph, and some of it
    looks at its callers' frames (logging's findCaller, ``stacklevel``),
    which a compiled callee's extra dispatch frame would shift.
    """
    paths = sysconfig.get_paths()
    name = os.path.abspath(filename)
    packages = [os.path.join(paths[key], "") for key in ("purelib", "platlib")]
    return (
        name.startswith(os.path.join(paths["stdlib"], ""))
        and not any(name.startswith(p) for p in packages)
        and not {"site-packages", "dist-packages"} & set(name.split(os.sep))
    )


def _method_slots(
    tx: InstructionTranslator, kept: tuple[VariableTracker, ...], callee: int | None
) -> dict[int, tuple[VariableTracker, str]]:
    """Slots of ``kept`` (left in place by the Python part) that hold a bound method.

    A bound method object is made anew by every attribute access, so handed
    to a resume function as is, the guard on its identity would fail on every
    call. Its receiver crosses instead, and the resume function's prologue
    binds the method again (``receiver.name``), where the trace sees it as
    it saw it here.
    """
    slots = {}
    for i, vt in enumerate(kept):
        if i != callee:
            rebinding = _rebinding(tx, vt)
            if rebinding is not None:
                slots[i] = rebinding
    return slots


def _rebinding(
    tx: InstructionTranslator, vt: VariableTracker
) -> tuple[VariableTracker, str] | None:
    """(receiver, name) when ``receiver.name`` in Python gives the method ``vt`` stands for."""
    from bytegraph.variables.base import BoundMethodVariable

    if isinstance(vt, BoundMethodVariable):
        return vt.receiver, vt.name  # its own reconstruction is ``receiver.name``
    if type(vt).__name__ != "UserMethodVariable":
        return None
    receiver, function = vt.obj, getattr(vt.fn, "fn", None)
    if not isinstance(function, types.FunctionType):
        return None
    name = function.__name__
    try:
        on_class = inspect.getattr_static(receiver.python_type(), name, None)
    except Exception:  # noqa: BLE001  (a python_type() the VT cannot tell: no rebinding)
        return None
    if on_class is not function:
        return None
    # An instance attribute of the same name would win over the class's method.
    if name in tx.output.side_effects.pending_attrs(receiver):
        return None
    value = getattr(receiver, "value", None)
    if value is not None and name in getattr(value, "__dict__", {}):
        return None
    return receiver, name


def live_roots(plan: BreakPlan) -> list[VariableTracker]:
    """The VTs the generated code will rebuild (their tensors become graph outputs)."""
    roots = [
        plan.methods[i][0] if i in plan.methods else v
        for i, v in enumerate(plan.stack) if not isinstance(v, NullVariable)
    ]
    locals_ = (plan.locals[name] for name in plan.needed_locals())
    return roots + [vt for vt in locals_ if vt is not None]


def emit_break(
    tx: InstructionTranslator, plan: BreakPlan, ctx: FrameContext
) -> Callable[[PyCodegen], None]:
    """The tail of the transformed code for a break described by ``plan``."""

    def emit(codegen: PyCodegen) -> None:
        if plan.inst.lineno is not None:
            # What runs from here on is the user's line: tracebacks and code that
            # inspects its caller (logging's findCaller) see the line that broke.
            codegen.append(bc.SetLineno(plan.inst.lineno))
        # Rebuild every value first, store afterwards: a store must not change what
        # a later rebuild reads (``x, y = y, x`` before the break).
        targets = []
        for i, vt in enumerate(plan.stack):
            if isinstance(vt, NullVariable):
                continue
            if i == plan.callee_slot:
                codegen.load_const(ctx.compiled_callee(vt.fn))
            elif i in plan.methods:
                codegen(plan.methods[i][0])
            else:
                codegen(vt)
            targets.append(f"___stack{i}")
        for name in plan.needed_locals():
            vt = plan.locals[name]
            if vt is not None and not _is_own_slot(vt, name):
                codegen(vt)
                targets.append(name)
        codegen.append(*(bc.Instr("STORE_FAST", t) for t in reversed(targets)))
        codegen.side_effects.replay_all(codegen)
        part = _python_part(tx, plan, ctx)
        args = [f"___stack{i}" for i, v in enumerate(plan.stack) if not isinstance(v, NullVariable)]
        args += plan.needed_locals()
        codegen.append(*assemble.push_null())
        codegen.load_const(part)
        codegen.append(*(bc.Instr("LOAD_FAST", a) for a in args))
        codegen.append(*assemble.call(len(args)), bc.Instr("RETURN_VALUE"))

    return emit


def _python_part(tx: InstructionTranslator, plan: BreakPlan, ctx: FrameContext) -> Any:
    """The function that runs the Python part of a break, then returns a resume call.

    It is ``tx.code`` entered where the part starts, taking the stack and the
    locals the part and its exits read; at each exit a stub returns
    ``resume(*stack, *live_locals)``. Running in the original instructions,
    the part keeps every exception handler around it: a with-block's
    ``__exit__`` runs if it raises, a try inside a loop catches, and an
    exception that leaves it goes on as Python to the end of the code, as in
    eager.
    """
    stubs = {}
    for _, target, nulls in plan.exits:
        base, base_target = base_position(tx.code, target)
        methods = tuple(
            plan.methods[i][1] if i in plan.methods else None for i in range(len(nulls))
        )
        spec = ResumeSpec(base, base_target, nulls, plan.live[target], methods)
        stubs[target] = _resume_call(ctx.resume_function(spec), nulls, plan.live[target], methods)
    entry = _entry_index(tx, plan)
    nulls = tuple(isinstance(vt, NullVariable) for vt in plan.stack)
    methods = tuple(
        plan.methods[i][1] if i in plan.methods else None for i in range(len(plan.stack))
    )
    code = _entered_code(
        tx.code, entry, nulls, methods, tuple(plan.needed_locals()), stubs,
        f"{tx.code.co_qualname}.<python at {entry}>",
    )
    fn = ctx.fn
    return types.FunctionType(code, fn.__globals__, code.co_name, None, fn.__closure__)


def _is_own_slot(vt: VariableTracker, name: str) -> bool:
    from bytegraph.guards.sources import LocalSource

    return vt.source == LocalSource(name)


def _entry_index(tx: InstructionTranslator, plan: BreakPlan) -> int:
    """Where the Python part starts: the region's first instruction, or the broken one.

    A CALL is entered at its KW_NAMES (and PRECALL), which set up the call.
    """
    if plan.region is not None:
        return plan.region[0]
    index = plan.inst.index
    for before in ("PRECALL", "KW_NAMES"):
        if index > 0 and tx.instructions[index - 1].opname == before:
            index -= 1
    return index


def _open_try(body: list[Any], position: int) -> bc.TryBegin | None:
    """The exception-table range that covers ``body[position]``, if any."""
    opened = None
    for item in body[:position]:
        if isinstance(item, bc.TryBegin):
            opened = item
        elif isinstance(item, bc.TryEnd) and item.entry is opened:
            opened = None
    return opened


def _retarget_try_end(
    body: list[Any], position: int, opened: bc.TryBegin, reopened: bc.TryBegin
) -> None:
    """Make the TryEnd that closes ``opened`` after ``position`` close ``reopened``."""
    for i in range(position, len(body)):
        item = body[i]
        if isinstance(item, bc.TryEnd) and item.entry is opened:
            body[i] = bc.TryEnd(reopened)
            return


_NOOP = lambda: None  # noqa: E731  (called only to consume a NULL stack slot)


def _resume_call(
    resume: Any, nulls: tuple[bool, ...], names: tuple[str, ...], methods: tuple[str | None, ...]
) -> list[Any]:
    """Move the stack into temporaries, then ``return resume(*stack, *locals)``.

    A slot holding a bound method passes its receiver, kept in ``___stack<i>``.
    """
    instrs: list[Any] = []
    for i in reversed(range(len(nulls))):
        if nulls[i]:  # a NULL can only be consumed by a call: call a no-op on it
            instrs += [bc.Instr("LOAD_CONST", _NOOP), *assemble.call(0), bc.Instr("POP_TOP")]
        elif methods[i] is not None:
            instrs.append(bc.Instr("POP_TOP"))
        else:
            instrs.append(bc.Instr("STORE_FAST", f"___exit{i}"))
    args = [
        f"___stack{i}" if methods[i] is not None else f"___exit{i}"
        for i, null in enumerate(nulls) if not null
    ] + list(names)
    instrs += [*assemble.push_null(), bc.Instr("LOAD_CONST", resume)]
    instrs += [bc.Instr("LOAD_FAST", a) for a in args]
    instrs += [*assemble.call(len(args)), bc.Instr("RETURN_VALUE")]
    return instrs
