"""Decode a code object into immutable instruction records.

``decode(code)`` returns a ``DecodedCode``: the instructions (inline CACHE
entries dropped), with jump targets resolved to instruction indices, and the
exception table in index form. The translator walks these by index. A
FOR_ITER's target is where CPython lands when the loop ends, which from
3.12 on is past the END_FOR that ``dis`` names.
"""

from __future__ import annotations

import bisect
import dataclasses
import dis
import sys
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


_FOR_ITER = dis.opmap["FOR_ITER"]
_INTRINSIC_STOPITERATION_ERROR = 3
# Keyed by identity: code objects hash their co_consts (a generated code object
# may hold an unhashable constant), and two equal code objects are still two
# objects. Each record holds its code, so a key's id is never reused. A record is
# a pure function of its (immutable) code, so the cache outlives ``bytegraph.reset()``,
# as torch._dynamo's cache of cleaned instructions outlives its reset; it is emptied
# when full instead, so that generated code objects are not kept forever.
_decoded_cache: dict[int, DecodedCode] = {}
_DECODED_CACHE_LIMIT = 4096


def decode(code: types.CodeType) -> DecodedCode:
    """Decode ``code`` once; later calls return the same record."""
    cached = _decoded_cache.get(id(code))
    if cached is None:
        if len(_decoded_cache) >= _DECODED_CACHE_LIMIT:
            _decoded_cache.clear()
        cached = _decoded_cache[id(code)] = _decode(code)
    return cached


# How ``dis.get_instructions`` resolves an opcode's argument to ``argval``, one kind per
# opcode. ``_decode`` walks ``co_code`` itself and resolves each kind as ``dis`` does on
# the running interpreter (tests/bytecode/test_decode_exact.py compares every field of
# thousands of code objects with ``dis``). ``dis`` also builds an argrepr string and a
# Positions record per instruction, which made it most of the decode time.
(
    _NO_ARG, _PLAIN, _LOCAL, _NAME, _CONST, _JUMP_FORWARD, _JUMP_BACKWARD, _EXTENDED_ARG,
    _LOCAL_PAIR, _COMPARE, _JUMP_ABSOLUTE, _FORMAT_VALUE, _CONVERT_VALUE, _UNKNOWN,
) = range(14)
# 3.13 fuses two fast-local operations; the oparg's nibbles index the two locals.
_LOCAL_PAIRS = ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST")
# CONVERT_VALUE's (3.13) oparg: which conversion an f-string field asks for.
_CONVERTERS = (None, str, repr, ascii)
# ``dis`` reads the oparg as a signed 32-bit integer.
_INT_OVERFLOW = 2**31
# What the walk along ``co_lines`` reads past the last range: no line.
_PAST_LAST_LINE = (0, sys.maxsize, None)


def _arg_kind(deop: int) -> int:
    """How ``dis`` resolves the argument of (unspecialized) opcode ``deop``, in its order."""
    has_arg = deop in dis.hasarg if hasattr(dis, "hasarg") else deop >= dis.HAVE_ARGUMENT
    name = dis.opname[deop]
    if not has_arg:
        return _NO_ARG
    if name == "EXTENDED_ARG":
        return _EXTENDED_ARG
    if deop in dis.hasconst:
        # 3.11's dis resolves only LOAD_CONST's constant (KW_NAMES's argval is UNKNOWN).
        probe = object()
        return _CONST if dis._get_const_value(deop, 0, (probe,)) is probe else _UNKNOWN
    if deop in dis.hasname:
        return _NAME
    if deop in dis.hasjrel:
        return _JUMP_BACKWARD if dis._is_backward_jump(deop) else _JUMP_FORWARD
    if deop in dis.hasjabs:
        return _JUMP_ABSOLUTE
    if name in _LOCAL_PAIRS:
        return _LOCAL_PAIR
    if deop in dis.haslocal or deop in dis.hasfree:
        return _LOCAL
    if deop in dis.hascompare:
        return _COMPARE
    if name == "FORMAT_VALUE":
        return _FORMAT_VALUE
    if name == "CONVERT_VALUE":
        return _CONVERT_VALUE
    return _PLAIN


def _cache_entries(deop: int) -> int:
    """Inline CACHE code units after ``deop``: ``dis`` keeps them in a list by opcode
    (3.11, 3.12) or a dict by name (3.13)."""
    entries = dis._inline_cache_entries
    if isinstance(entries, dict):
        return entries.get(dis.opname[deop], 0)
    return entries[deop]


def _opcode_tables() -> tuple[list[int], list[int], list[int], list[str]]:
    """Per opcode byte: argument kind, code units to the next instruction, the oparg's
    flag bits below the index (names, comparisons) and the name ``dis`` prints."""
    kinds, steps, shifts, names = [], [], [], []
    for op in range(256):
        deop = dis._deoptop(op)
        kind = _arg_kind(deop)
        kinds.append(kind)
        steps.append(1 + _cache_entries(deop))
        if kind == _NAME:
            shifts.append(compat.NAME_OPARG_FLAG_BITS.get(dis.opname[deop], 0))
        else:
            shifts.append(compat.COMPARE_OP_ARG_SHIFT if kind == _COMPARE else 0)
        names.append(dis._all_opname[op])
    return kinds, steps, shifts, names


_KINDS, _STEPS, _SHIFTS, _OPNAMES = _opcode_tables()


class _InstructionBuilder:
    """An Instruction under construction: the same slots, writable.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
    which cost more than all the rest of decoding; plain slot stores and one change of
    ``__class__`` to Instruction (same layout, so CPython allows it) make the record.
    That change raises an audit event: under a Python audit hook (filelock, which
    transformers imports, adds one on 3.12+) it costs about what setting the nine slots
    through their descriptors would, and without one a fifth of that.
    """

    __slots__ = Instruction.__slots__


def _decode(code: types.CodeType) -> DecodedCode:
    """What ``dis.get_instructions`` gives, in our records, from one walk of ``co_code``."""
    raw = code.co_code
    opcodes, opargs = raw[0::2], raw[1::2]
    units = len(opcodes)
    consts, names, varname = code.co_consts, code.co_names, code._varname_from_oparg
    kinds, steps, shifts, opnames = _KINDS, _STEPS, _SHIFTS, _OPNAMES
    new, builder = object.__new__, _InstructionBuilder
    built: list[_InstructionBuilder] = []
    offsets: list[int] = []
    jumps: list[_InstructionBuilder] = []
    # ``co_lines`` ranges, walked along: the line ``co_positions`` gives each code unit,
    # one record per range rather than four fields per code unit.
    line_ranges = code.co_lines()
    line_start = line_end = 0
    line = None
    extended = index = unit = 0
    while unit < units:
        op = opcodes[unit]
        kind = kinds[op]
        offset = unit * 2
        inst = new(builder)
        if kind == _NO_ARG:
            arg = argval = None
            extended = 0
        else:
            arg = opargs[unit] | extended
            extended = 0
            if kind == _LOCAL:
                argval = varname(arg)
            elif kind == _NAME:
                argval = names[arg >> shifts[op]]
            elif kind == _CONST:
                argval = consts[arg]
            elif kind == _PLAIN:
                argval = arg
            elif kind == _JUMP_FORWARD:
                # Relative to the end of the jump's caches (3.11's dis leaves them out,
                # but no 3.11 jump has any).
                argval = (unit + steps[op] + arg) * 2
                jumps.append(inst)
            elif kind == _JUMP_BACKWARD:
                argval = (unit + steps[op] - arg) * 2
                jumps.append(inst)
            elif kind == _EXTENDED_ARG:
                argval = arg
                extended = arg << 8
                if extended >= _INT_OVERFLOW:
                    extended -= 2 * _INT_OVERFLOW
            elif kind == _LOCAL_PAIR:
                argval = (varname(arg >> 4), varname(arg & 15))
            elif kind == _COMPARE:
                argval = dis.cmp_op[arg >> shifts[op]]
            elif kind == _JUMP_ABSOLUTE:
                argval = arg * 2
                jumps.append(inst)
            elif kind == _FORMAT_VALUE:
                argval = (dis.FORMAT_VALUE_CONVERTERS[arg & 0x3][0], bool(arg & 0x4))
            elif kind == _CONVERT_VALUE:
                argval = _CONVERTERS[arg]
            else:
                argval = dis.UNKNOWN
        while offset >= line_end:
            line_start, line_end, line = next(line_ranges, _PAST_LAST_LINE)
        inst.index = index
        inst.opcode = op
        inst.opname = opnames[op]
        inst.arg = arg
        inst.argval = argval
        inst.offset = offset
        inst.lineno = line if offset >= line_start else None
        inst.is_jump_target = False
        inst.target = None
        built.append(inst)
        offsets.append(offset)
        index += 1
        unit += steps[op]

    offset_to_index = dict(zip(offsets, range(index)))
    for inst in jumps:
        target = offset_to_index[inst.argval]
        built[target].is_jump_target = True
        # FOR_ITER's target is where an exhausted loop really lands.
        inst.target = target + compat.FOR_ITER_TARGET_SKIP if inst.opcode == _FOR_ITER else target
    instruction = Instruction
    for inst in built:
        inst.__class__ = instruction
    instructions: tuple[Instruction, ...] = tuple(built)  # type: ignore[arg-type]
    return DecodedCode(
        code, instructions, _exception_table(code, offset_to_index, offsets), offset_to_index
    )


def _exception_table(
    code: types.CodeType, offset_to_index: dict[int, int], offsets: list[int]
) -> tuple[ExceptionTableEntry, ...]:
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is None:
        return ()
    entries = []
    for entry in parse(code):
        # ``end`` is exclusive in bytes; the last covered instruction starts before it.
        last = bisect.bisect_left(offsets, entry.end) - 1
        entries.append(
            ExceptionTableEntry(
                offset_to_index[entry.start], last, offset_to_index[entry.target],
                entry.depth, entry.lasti,
            )
        )
    return tuple(entries)

