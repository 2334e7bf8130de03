"""The stack size of a list of abstract instructions, without a control-flow graph.

``bytecode.Bytecode.to_code`` sizes the frame's stack (and each try block's
handler depth) by turning the instruction list into a ``ControlFlowGraph``
and back, which costs more than encoding the instructions. ``stack_depths``
walks the list itself: each instruction's (pre, post) stack effect is the
package's own (``Instr.pre_and_post_stack_effect``, cached by opcode and
argument), a jump carries its taken depth to its label, and the stack size is
the largest depth any reachable instruction leaves.

A try block (``TryBegin`` ... ``TryEnd``) is walked when it is straight-line
code (no label, jump or return inside): its handler starts at the lowest depth
seen inside the block, plus the exception (and the offset, with
``push_lasti``), and that lowest depth is the block's exception-table depth:
the package's answers for that shape. For anything else (a label reached at
two depths, a stack that would underflow, a try block with inner flow or
sharing its handler, one never reached, a jump to a missing label) the
answer is None and the caller leaves the sizing to the package, errors
included.
"""

from __future__ import annotations

import opcode as _opcode
from collections.abc import Sequence
from typing import Any

import bytecode as bc
from bytecode.instr import (
    BITFLAG2_OPCODES,
    BITFLAG_OPCODES,
    HAS_UNCONDITIONAL_JUMP,
    IS_INSTR_FINAL,
    MONITORING_ONLY_JUMP_OPS,
    opcode_has_argument,
)

from bytegraph.bytecode import compat

_HAS_CONST = frozenset(_opcode.hasconst)
GENERATOR_FLAGS = (
    bc.CompilerFlags.GENERATOR | bc.CompilerFlags.COROUTINE | bc.CompilerFlags.ASYNC_GENERATOR
)

# (opcode, the argument dis.stack_effect sees) -> (pre, post), as the package computes
# it, when a jump is taken and when the flow goes on. An int argument (not a constant's)
# is its own key: a finer key than needed, never a wrong one.
_TAKEN: dict[tuple[int, Any], tuple[int, int]] = {}
_FALL: dict[tuple[int, Any], tuple[int, int]] = {}


class _Unsized(Exception):
    """A shape only the package sizes."""


def stack_depths(items: Sequence[Any], flags: int) -> tuple[int, dict[bc.TryBegin, int]] | None:
    """The stack size ``items`` need and each try block's depth, or None where only
    the package should say."""
    walker = _Walker(items)
    if walker.label_count != len(walker.labels):
        return None  # a label placed twice: the package jumps to its last place
    # Before 3.13 a generator's frame starts with the value sent in on its stack.
    start = 1 if compat.PY_VERSION < (3, 13) and flags & GENERATOR_FLAGS else 0
    try:
        walker.run(start)
    except _Unsized:
        return None
    if walker.try_count != len(walker.tries):
        return None  # a try block in dead code
    return walker.deepest, walker.tries


class _Walker:
    """Follows the flow through ``items`` from the start and from each handler."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items
        self.labels: dict[bc.Label, int] = {}
        self.try_count = self.label_count = 0
        for i, item in enumerate(items):
            if type(item) is bc.Label:
                self.labels[item] = i
                self.label_count += 1
            elif type(item) is bc.TryBegin:
                self.try_count += 1
        self.entered: dict[bc.Label, int] = {}
        self.pending: list[tuple[int, int]] = []
        self.tries: dict[bc.TryBegin, int] = {}
        self.deepest = 0

    def run(self, start: int) -> None:
        self.pending.append((0, start))
        while self.pending:
            self.walk(*self.pending.pop())

    def enter(self, label: Any, depth: int) -> None:
        """Flow reaches ``label`` at ``depth`` from elsewhere: walk it later, once."""
        seen = self.entered.get(label)
        if seen is None:
            if label not in self.labels:
                raise _Unsized
            self.entered[label] = depth
            self.pending.append((self.labels[label], depth))
        elif seen != depth:
            raise _Unsized

    def walk(self, index: int, depth: int) -> None:
        """From ``items[index]`` at ``depth`` until the flow leaves or meets a walked label."""
        items = self.items
        opened: bc.TryBegin | None = None
        lowest = deepest = 0
        for pos in range(index, len(items)):
            item = items[pos]
            kind = type(item)
            if kind is bc.Instr:
                op = item.opcode
                arg = item.arg
                if type(arg) is bc.Label and op not in MONITORING_ONLY_JUMP_OPS:
                    depth = self.jump(item, op, arg, depth, opened is not None)
                    if depth < 0:
                        break
                else:
                    # Inlined: this runs once per instruction of every assembled body.
                    if type(arg) is int and op not in _HAS_CONST:
                        key = (op, arg)
                    else:
                        key = (op, _effect_arg(op, arg))
                    pre, post = _FALL.get(key) or _effect(item, key, False)
                    if depth + pre < 0:
                        raise _Unsized  # the package reports the underflow
                    depth += pre + post
                    if depth > deepest:
                        deepest = depth
                    if op in IS_INSTR_FINAL:
                        if opened is not None:
                            raise _Unsized
                        break
                if depth < lowest:
                    lowest = depth
            elif kind is bc.Label:
                seen = self.entered.get(item)
                if opened is not None or (seen is not None and seen != depth):
                    raise _Unsized
                if seen is None:
                    self.entered[item] = depth
                elif pos != index:
                    break  # the rest of the way is walked from this label
            elif kind is bc.TryBegin:
                if opened is not None or item in self.tries:
                    raise _Unsized
                opened, lowest = item, depth
            elif kind is bc.TryEnd:
                if opened is None or item.entry is not opened:
                    raise _Unsized
                self.tries[opened] = lowest
                # The handler starts with the exception (and the offset) pushed.
                handler = lowest + 1 + bool(opened.push_lasti)
                deepest = max(deepest, handler)
                self.enter(opened.target, handler)
                opened = None
            elif kind is not bc.SetLineno:
                raise _Unsized
        self.deepest = max(self.deepest, deepest)

    def jump(self, instr: bc.Instr, op: int, label: bc.Label, depth: int, in_try: bool) -> int:
        """The depth after jump ``instr`` if it falls through, else -1."""
        if in_try:
            raise _Unsized
        key = (op, _effect_arg(op, label))
        pre, post = _TAKEN.get(key) or _effect(instr, key, True)
        if depth + pre < 0:
            raise _Unsized
        taken = depth + pre + post
        self.deepest = max(self.deepest, taken)
        self.enter(label, taken)
        if op in HAS_UNCONDITIONAL_JUMP:
            return -1
        pre, post = _FALL.get(key) or _effect(instr, key, False)
        if depth + pre < 0:
            raise _Unsized
        depth += pre + post
        self.deepest = max(self.deepest, depth)
        if op in IS_INSTR_FINAL:
            return -1
        return depth


def _effect(instr: bc.Instr, key: tuple[int, Any], jump: bool) -> tuple[int, int]:
    """``instr``'s (pre, post) stack effect as the package counts it, cached under ``key``."""
    try:
        effect = instr.pre_and_post_stack_effect(jump=jump)
    except (ValueError, TypeError) as e:
        raise _Unsized from e
    (_TAKEN if jump else _FALL)[key] = effect
    return effect


def _effect_arg(op: int, arg: Any) -> Any:
    """The argument ``Instr.stack_effect`` hands to ``dis.stack_effect``."""
    if not opcode_has_argument(op):
        return None
    if (op in BITFLAG_OPCODES or op in BITFLAG2_OPCODES) and isinstance(arg, tuple):
        return arg[0]
    if not isinstance(arg, int) or op in _HAS_CONST:
        return 0
    return arg
