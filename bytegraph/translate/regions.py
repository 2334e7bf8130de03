"""Which code a graph break runs in Python, and what flows in and out of it.

A break runs one *piece* of the frame in Python: the instruction that could
not be traced (``instruction_exits`` gives its exits and the stack layout at
each), the whole call when it is a method load (``call_region``), a
conversion to bool with the jump that takes it (``truth_region``, 3.13), or
the outermost loop around it, from its iterable's expression on
(``loop_region``). ``exit_depths`` finds where a piece can leave and with
what stack depth; ``live_locals`` which locals code from an instruction on
may read; ``refuse_reason`` where no break is possible at all. Input: the
decoded code (``bytecode/instructions.py``); output: indices, depths and
names for ``resume.py`` to plan with.
"""

from __future__ import annotations

import dis
import functools
import types
from collections.abc import Callable
from typing import Any

import bytecode as bc

from bytegraph.bytecode import compat
from bytegraph.bytecode.instructions import DecodedCode, Instruction, decode
from bytegraph.bytecode.stack_effects import (
    FRAME_EXITS,
    STACK_EFFECTS,
    jump_effect,
    loads_method,
    locals_read,
)
from bytegraph.exc import Unsupported

_CONDITIONAL_JUMPS = frozenset(
    name for name in dis.opmap if "JUMP" in name and ("_IF_" in name)
)
# (pops, pushes) of the instructions a break may run in Python; others refuse.
# ``pushes`` is a count of values, or per pushed slot (bottom first) whether it is a NULL.
_BREAKABLE = (
    "CALL", "CALL_FUNCTION_EX", "BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "CONTAINS_OP",
    "IS_OP", "UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_INVERT", "UNARY_NOT", "LOAD_ATTR",
    "STORE_ATTR", "DELETE_ATTR", "STORE_SUBSCR", "DELETE_SUBSCR", "GET_ITER",
    "UNPACK_SEQUENCE", "UNPACK_EX", "FORMAT_VALUE", "BUILD_STRING", "BUILD_TUPLE",
    "BUILD_LIST", "BUILD_SET", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "BUILD_SLICE",
    "LIST_TO_TUPLE", "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS", "MATCH_CLASS",
    "STORE_GLOBAL", "DELETE_GLOBAL", "LOAD_DEREF", "STORE_DEREF", "IMPORT_NAME",
    "LOAD_BUILD_CLASS", "LOAD_ASSERTION_ERROR",
    # 3.12 and 3.13
    "CALL_KW", "BINARY_SLICE", "STORE_SLICE", "CALL_INTRINSIC_1", "TO_BOOL", "CONVERT_VALUE",
    "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "LOAD_SUPER_ATTR",
)
_GLOBAL_WITH_NULL = (True, False) if compat.NULL_BEFORE_CALLABLE else (False, True)
_STACK_EFFECTS: dict[str, Callable[[int], tuple[int, int | tuple[bool, ...]]]] = {
    **{name: STACK_EFFECTS[name] for name in _BREAKABLE},
    # These also read the container ``arg`` slots down, which is on the real stack too.
    "LIST_APPEND": lambda arg: (1, 0),
    "SET_ADD": lambda arg: (1, 0),
    "MAP_ADD": lambda arg: (2, 0),
    "LIST_EXTEND": lambda arg: (1, 0),
    "SET_UPDATE": lambda arg: (1, 0),
    "DICT_UPDATE": lambda arg: (1, 0),
    "DICT_MERGE": lambda arg: (1, 0),
    "GET_LEN": lambda arg: (1, 2),
    "LOAD_GLOBAL": lambda arg: (0, _GLOBAL_WITH_NULL if arg & 1 else (False,)),
    "IMPORT_FROM": lambda arg: (1, 2),  # the module stays, the name goes on top
}
# Instructions that never continue: a break there runs them and resumes nowhere.
_NO_EXIT = frozenset({"RAISE_VARARGS"})
_TERMINATORS = FRAME_EXITS
# What may follow a break's instruction and run in Python with it, so that a value it
# produced and the program drops or stores never becomes a resume function's input
# (a float from ``time.time()`` would be guarded by value there, missing every call).
_ABSORBED = frozenset({"STORE_FAST", "POP_TOP"})
_JUMP_EFFECTS: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {
    # opname family -> ((pops, pushes) falling through, (pops, pushes) jumping)
    "POP_JUMP": ((1, 0), (1, 0)),
    "JUMP_IF": ((1, 0), (1, 1)),
}


def refuse_reason(decoded: DecodedCode, index: int) -> str | None:
    """Why a break at ``index`` would be unsafe, or None if it is safe.

    A break inside a try block is safe: the Python part and the resume functions
    run the original instructions under the original exception table, and a
    graph that fails at run time reruns the code as Python, where the handler
    catches it (``graph/rerun.py``; ``convert`` refuses a graph under a try
    block that cannot rerun).
    """
    code = decoded.code
    if code.co_flags & 0x20:
        return "breaks inside generators are not supported"
    return None


def in_try_block(decoded: DecodedCode, index: int) -> bool:
    """Whether an exception at ``index`` can reach an ``except`` clause, which may
    swallow it.

    The 3.11 table is flat: each instruction names its innermost handler only.
    A ``finally`` block, a with-block's cleanup and a handler's own cleanup
    (``COPY 3; POP_EXCEPT; RERAISE``) pass the exception on, so the walk
    follows them outward. (A ``return`` inside ``finally``, or an ``__exit__``
    returning True, also swallows; neither is seen here.)
    """
    if not decoded.exception_table:
        return False
    seen: set[int] = set()
    entry = decoded.handler_for(index)
    while entry is not None and entry.target not in seen:
        seen.add(entry.target)
        if _is_except_clause(decoded, entry.target):
            return True
        entry = decoded.handler_for(entry.target)
    return False


def _is_except_clause(decoded: DecodedCode, handler: int) -> bool:
    """``PUSH_EXC_INFO`` then a bare ``except:`` (POP_TOP) or an ``except X`` test."""
    instructions = decoded.instructions
    if instructions[handler].opname != "PUSH_EXC_INFO" or handler + 1 >= len(instructions):
        return False
    if instructions[handler + 1].opname == "POP_TOP":
        return True
    for inst in instructions[handler + 1 :]:
        if inst.opname in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH"):
            return True
        if not inst.opname.startswith(("LOAD_", "BUILD_", "BINARY_SUBSCR", "PRECALL", "CALL")):
            return False  # the finally body's first statement, or a with's cleanup
    return False


def enclosing_loop(decoded: DecodedCode, index: int) -> tuple[int, int] | None:
    """(header, last instruction) of the outermost loop around ``index``, if any.

    A backward jump only an exception reaches is no loop: 3.12+ ends a with-block's
    exit handler with a jump back to the code after the block.
    """
    backward = [
        (inst.target, inst.index) for inst in decoded.instructions
        if inst.target is not None and inst.target <= inst.index
        and _normally_reaches(decoded, inst.target, inst.index)
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


def _normally_reaches(decoded: DecodedCode, start: int, goal: int) -> bool:
    """Whether ``goal`` follows ``start`` on a path within ``start..goal`` that raises no
    exception."""
    return goal in _normally_reached(decoded, start, range(start, goal + 1))


def _normally_reached(decoded: DecodedCode, start: int, within: range) -> set[int]:
    """The instructions of ``within`` that paths from ``start`` inside it reach without
    raising."""
    reached = {start}
    work = [start]
    while work:
        for successor, _ in _successors(decoded, work.pop()):
            if successor in within and successor not in reached:
                reached.add(successor)
                work.append(successor)
    return reached


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


def truth_region(decoded: DecodedCode, index: int) -> tuple[int, int] | None:
    """(the conversion, its POP_JUMP_IF_TRUE/FALSE) for a break at a conversion to bool
    that a conditional jump takes (3.13's TO_BOOL, or a COMPARE_OP with its bool bit).

    The jump takes only an exact bool, so the resume function after the conversion
    would be entered with a bool guarded by value; run both in Python instead, and
    resume at the branch taken, as a break at a 3.11 jump does.
    """
    instructions = decoded.instructions
    inst = instructions[index]
    converts = inst.opname == "TO_BOOL" or (
        inst.opname == "COMPARE_OP" and inst.arg & compat.COMPARE_OP_TO_BOOL_BIT
    )
    if not converts or index + 1 >= len(instructions):
        return None
    if instructions[index + 1].opname not in ("POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE"):
        return None
    return index, index + 1


def call_region(decoded: DecodedCode, index: int) -> tuple[int, int] | None:
    """(a method load, its CALL[, a STORE_FAST or POP_TOP of the result]) for a break there.

    A method load (3.11's LOAD_METHOD, LOAD_ATTR with its method bit on 3.12+)
    leaves a method and its receiver, or a NULL and a bound method,
    and which one only Python knows; no resume function could take either
    layout. So the whole call, arguments included, runs in Python instead,
    with the store of its result when one follows. None if the arguments
    contain a jump (the call is then no straight line).
    """
    instructions = decoded.instructions
    if not loads_method(instructions[index].opname, instructions[index].arg):
        return None
    depth = 0
    for inst in instructions[index:]:
        if inst.target is not None or inst.opname in FRAME_EXITS:
            return None
        depth += dis.stack_effect(inst.opcode, inst.arg)
        if depth <= 0:
            after = inst.index + 1
            if after < len(instructions) and instructions[after].opname in _ABSORBED:
                return index, after
            return index, inst.index
    return None


def with_regions(decoded: DecodedCode, index: int) -> list[tuple[int, int]]:
    """(the context expression, the last instruction of the with statement) of each
    ``with`` around ``index`` (or starting at its BEFORE_WITH), innermost first: what
    a break no resume function can take runs in Python, inside the block of a context
    manager the trace does not model, whose ``__exit__`` no resume function could
    hold. The whole statement runs in Python, the code before and after it compiled.

    Only the layout where the exit handler lies inside the statement (3.11: body,
    normal exit, JUMP_FORWARD over the handler) qualifies.
    """
    spans = []
    for w, inst in enumerate(decoded.instructions[: index + 1]):
        if inst.opname == "BEFORE_WITH":
            span = _with_span(decoded, w)
            if span is not None and span[0] <= index <= span[1]:
                spans.append(span)
    return sorted(spans, key=lambda span: span[1] - span[0])


def _with_span(decoded: DecodedCode, before_with: int) -> tuple[int, int] | None:
    instructions = decoded.instructions
    entry = decoded.handler_for(before_with + 1)
    if entry is None or not _is_with_cleanup(decoded, entry.target):
        return None
    handler = entry.target
    after_body = max(e.end for e in decoded.exception_table if e.target == handler) + 1
    while after_body < handler and instructions[after_body].opname == "NOP":
        after_body += 1  # a NOP raises nothing: no table entry covers it
    exit_call = [i.opname for i in instructions[after_body : after_body + 7]]
    normal = ["LOAD_CONST"] * 3 + ["PRECALL"] * ("PRECALL" in exit_call) + ["CALL", "POP_TOP"]
    if exit_call[: len(normal)] != normal or after_body + len(normal) >= len(instructions):
        return None
    jump = instructions[after_body + len(normal)]
    if jump.opname != "JUMP_FORWARD" or handler != jump.index + 1:
        return None
    start = _expression_start(decoded, before_with)
    return None if start is None else (start, jump.target - 1)


def _expression_start(decoded: DecodedCode, index: int) -> int | None:
    """Where the straight-line code that pushes the one value used at ``index`` begins."""
    instructions = decoded.instructions
    targets = {inst.target for inst in instructions if inst.target is not None}
    depth = 1
    for i in range(index - 1, 0, -1):
        inst = instructions[i]
        if inst.target is not None or inst.opname in ("RESUME", "NOP"):
            return None
        depth -= dis.stack_effect(inst.opcode, inst.arg)
        if depth == 0:
            return i
        if depth < 0 or i in targets:
            return None
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
        names.update(locals_read(inst.opname, inst.argval))
        if inst.target is not None:
            work.append(inst.target)
        if inst.opname not in FRAME_EXITS and not (
            inst.opname.startswith("JUMP_") and inst.opname not in _CONDITIONAL_JUMPS
        ):
            work.append(i + 1)
        handler = decoded.handler_for(i)
        if handler is not None:
            work.append(handler.target)
    return frozenset(names)


def absorbed_after(
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



def deleted_in(region: tuple[Instruction, ...]) -> set[str]:
    return {i.argval for i in region if i.opname == "DELETE_FAST"}



def exit_depths(decoded: DecodedCode, start: int, end: int, entry_depth: int) -> dict[int, int]:
    """Stack depth at each instruction outside the region ``start..end`` it can reach.

    Code inside the range that never comes back to the loop's jump and never
    leaves the range (a ``return`` or ``raise`` in the loop body, and on 3.12+
    the code after a ``while True`` loop, which the compiler places before the
    backward jump) is no part of the loop: the region exits into it, so it is
    compiled in a resume function instead of running as Python.

    An exit at a POP_TOP moves past it (the Python part drops the value): 3.12+
    compiles a ``break`` out of a ``for`` loop as a jump out of the loop's body
    to a POP_TOP of the iterator, which must not cross into a resume function
    (a guard on its identity would fail at every call).
    """
    region = range(start, end + 1)
    tails = _tails(decoded, region)
    depth_at = {start: entry_depth}
    # Whether every path to an instruction left the entry stack alone: a return from a
    # with block inside the loop calls (and pops) the block's __exit__ from below it.
    intact_at = {start: True}
    exits: dict[int, int] = {}
    work = [start]
    while work:
        i = work.pop()
        successors = _successors(decoded, i)
        handler = _region_handler(decoded, i, region)
        if handler is not None:  # a try of the region: the handler's depth is absolute
            successors.append((handler.target, handler.depth + handler.lasti + 1 - depth_at[i]))
        intact = intact_at[i] and depth_at[i] - _reach(decoded.instructions[i]) >= entry_depth
        for successor, effect in successors:
            depth = depth_at[i] + effect
            # (a tail is left only where the region pushed nothing and kept what it was
            # given: what the caller knows of the stack, NULLs included, is the stack it
            # entered with)
            if successor not in region or (
                successor in tails and depth <= entry_depth and intact
            ):
                exits[successor] = depth
            elif successor not in depth_at:
                depth_at[successor] = depth
                intact_at[successor] = intact
                work.append(successor)
            elif intact_at[successor] and not intact:
                intact_at[successor] = False
                work.append(successor)
    return dict(_past_pops(decoded, region, target, depth) for target, depth in exits.items())


# Instructions that read or write none of the stack below their own pushes.
_NO_REACH = frozenset({
    "NOP", "RESUME", "PUSH_NULL", "LOAD_CONST", "LOAD_FAST", "LOAD_NAME", "LOAD_CLOSURE",
    "MAKE_CELL", "COPY_FREE_VARS", "JUMP_FORWARD", "JUMP_BACKWARD",
    "JUMP_BACKWARD_NO_INTERRUPT", "EXTENDED_ARG", "KW_NAMES", "DELETE_FAST", "DELETE_NAME",
    "DELETE_DEREF", "LOAD_CLASSDEREF", "JUMP", "JUMP_NO_INTERRUPT",
})
# Those that read or replace a fixed number of slots, or ``arg`` and more slots down.
_FIXED_REACH = {"FOR_ITER": 1, "GET_LEN": 1, "IMPORT_FROM": 1, "SEND": 2, "CHECK_EXC_MATCH": 2,
                "LOAD_FROM_DICT_OR_GLOBALS": 1, "LOAD_FROM_DICT_OR_DEREF": 1,
                "STORE_FAST_MAYBE_NULL": 1}
_ARG_REACH = {"SWAP": 0, "COPY": 0, "PRECALL": 2, "LIST_APPEND": 1, "SET_ADD": 1, "MAP_ADD": 2,
              "LIST_EXTEND": 1, "SET_UPDATE": 1, "DICT_MERGE": 1, "DICT_UPDATE": 1}


def _reach(inst: Instruction) -> float:
    """How many stack slots, from the top, ``inst`` may read or replace (inf: unknown)."""
    name, arg = inst.opname, inst.arg or 0
    if name in _NO_REACH:
        return 0
    if name in _CONDITIONAL_JUMPS:
        return 1
    if name in _FIXED_REACH:
        return _FIXED_REACH[name]
    if name in _ARG_REACH:  # PRECALL (3.11): the call's callable and arguments
        return arg + _ARG_REACH[name]
    effect = STACK_EFFECTS.get(name)
    return effect(arg)[0] if effect is not None else float("inf")


def _successors(decoded: DecodedCode, i: int) -> list[tuple[int, int]]:
    """(successor, stack effect) of instruction ``i``, exception handlers aside."""
    inst = decoded.instructions[i]
    successors = []
    if inst.opname not in FRAME_EXITS:
        name = inst.opname
        unconditional = name.startswith("JUMP_") and name not in _CONDITIONAL_JUMPS
        if not unconditional:
            successors.append((i + 1, dis.stack_effect(inst.opcode, inst.arg, jump=False)))
        if inst.target is not None:
            successors.append((inst.target, jump_effect(inst.opcode, inst.arg)))
    return successors


def _region_handler(decoded: DecodedCode, i: int, region: range) -> Any:
    """The handler of ``i`` if its try block starts in the region."""
    handler = decoded.handler_for(i)
    return handler if handler is not None and handler.start in region else None


def _tails(decoded: DecodedCode, region: range) -> frozenset[int]:
    """Instructions of ``region`` that the loop reaches without an exception and from which
    no path reaches its last instruction (the loop's backward jump) or leaves it: each
    path ends in a return or a raise. (Code run only while an exception propagates, a
    handler's cleanup, stays in the region.)"""
    reaches = {region[-1]}
    preds: dict[int, list[int]] = {}
    for i in region:
        handler = _region_handler(decoded, i, region)
        handled = [(handler.target, 0)] if handler is not None else []
        for successor, _ in _successors(decoded, i) + handled:
            if successor not in region:
                reaches.add(i)
            else:
                preds.setdefault(successor, []).append(i)
    work = list(reaches)
    while work:
        for pred in preds.get(work.pop(), ()):
            if pred not in reaches:
                reaches.add(pred)
                work.append(pred)
    return frozenset(_normally_reached(decoded, region[0], region) - reaches)


def _past_pops(
    decoded: DecodedCode, region: range, target: int, depth: int
) -> tuple[int, int]:
    instructions = decoded.instructions
    while depth > 0 and instructions[target].opname == "POP_TOP" and target + 1 not in region:
        target, depth = target + 1, depth - 1
    return target, depth



def instruction_exits(
    inst: Instruction,
) -> list[tuple[bc.Label | None, int, tuple[int, tuple[bool, ...]]]]:
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
    if loads_method(inst.opname, inst.arg):  # which layout it leaves, only Python knows
        raise Unsupported("break_impossible", f"cannot break the graph at {inst.opname}")
    effect = _STACK_EFFECTS.get(inst.opname)
    if effect is None:
        raise Unsupported("break_impossible", f"cannot break the graph at {inst.opname}")
    pops, pushes = effect(inst.arg or 0)
    pushed = (False,) * pushes if isinstance(pushes, int) else pushes
    return [(None, inst.index + 1, (pops, pushed))]
