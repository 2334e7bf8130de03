"""Decode a code object into immutable instruction records.

``decode(code)`` returns a ``DecodedCode``: the instructions (inline CACHE
entries dropped), with jump targets resolved to instruction indices, and the
exception table in index form. The translator walks these by index. A
FOR_ITER's target is where CPython lands when the loop ends, which from
3.12 on is past the END_FOR that ``dis`` names.
"""

from __future__ import annotations

import dataclasses
import dis
import types

from bytegraph.bytecode import compat


@dataclasses.dataclass(frozen=True, slots=True)
class Instruction:
    """One decoded instruction; ``target`` is the jump target's index, if any."""

    index: int
    opcode: int
    opname: str
    arg: int | None
    argval: object
    offset: int
    lineno: int | None
    is_jump_target: bool
    target: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ExceptionTableEntry:
    """Instructions ``start..end`` (inclusive indices) jump to ``target`` on error."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


@dataclasses.dataclass(frozen=True, slots=True)
class DecodedCode:
    code: types.CodeType
    instructions: tuple[Instruction, ...]
    exception_table: tuple[ExceptionTableEntry, ...]
    offset_to_index: dict[int, int]

    def handler_for(self, index: int) -> ExceptionTableEntry | None:
        """The innermost exception-table entry covering instruction ``index``."""
        for entry in self.exception_table:
            if entry.start <= index <= entry.end:
                return entry
        return None

    def runs_code_on_error(self, index: int) -> bool:
        """Whether an exception at ``index`` reaches a handler that does more than pass it
        on: 3.12+ wraps a generator's body in one that only checks for StopIteration
        (PEP 479), and an inlined comprehension in one that only restores its variable."""
        seen: set[int] = set()
        entry = self.handler_for(index)
        while entry is not None and entry.target not in seen:
            seen.add(entry.target)
            if not self._passes_on(entry.target):
                return True
            entry = self.handler_for(entry.target)
        return False

    def _passes_on(self, start: int) -> bool:
        for inst in self.instructions[start:]:
            if inst.opname == "RERAISE":
                return True
            if inst.opname == "CALL_INTRINSIC_1" and inst.arg == _INTRINSIC_STOPITERATION_ERROR:
                continue
            if inst.opname not in ("SWAP", "POP_TOP", "STORE_FAST", "NOP"):
                return False
        return False


_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
_FOR_ITER = dis.opmap["FOR_ITER"]
_INTRINSIC_STOPITERATION_ERROR = 3
# Keyed by identity: code objects hash their co_consts (a generated code object
# may hold an unhashable constant), and two equal code objects are still two
# objects. Each record holds its code, so a key's id is never reused.
_decoded_cache: dict[int, DecodedCode] = {}


def decode(code: types.CodeType) -> DecodedCode:
    """Decode ``code`` once; later calls return the same record."""
    cached = _decoded_cache.get(id(code))
    if cached is None:
        cached = _decoded_cache[id(code)] = _decode(code)
    return cached


def _decode(code: types.CodeType) -> DecodedCode:
    raw = list(dis.get_instructions(code))
    offset_to_index = {inst.offset: i for i, inst in enumerate(raw)}

    def target(inst: dis.Instruction) -> int | None:
        if inst.opcode not in _JUMPS:
            return None
        if inst.opcode == _FOR_ITER:  # where an exhausted loop really lands
            return offset_to_index[inst.argval] + compat.FOR_ITER_TARGET_SKIP
        return offset_to_index[inst.argval]

    instructions = tuple(
        Instruction(
            index=i,
            opcode=inst.opcode,
            opname=inst.opname,
            arg=inst.arg,
            argval=inst.argval,
            offset=inst.offset,
            lineno=inst.positions.lineno if inst.positions else None,
            is_jump_target=inst.is_jump_target,
            target=target(inst),
        )
        for i, inst in enumerate(raw)
    )
    return DecodedCode(code, instructions, _exception_table(code, offset_to_index), offset_to_index)


def _exception_table(
    code: types.CodeType, offset_to_index: dict[int, int]
) -> tuple[ExceptionTableEntry, ...]:
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is None:
        return ()
    entries = []
    for entry in parse(code):
        # ``end`` is exclusive in bytes; the last covered instruction starts before it.
        last = max(i for off, i in offset_to_index.items() if off < entry.end)
        entries.append(
            ExceptionTableEntry(
                offset_to_index[entry.start], last, offset_to_index[entry.target],
                entry.depth, entry.lasti,
            )
        )
    return tuple(entries)


def reset() -> None:
    _decoded_cache.clear()
