"""Encode a ``bytecode.Bytecode`` into a code object, as the package does but faster.

``to_code(code, stacksize=None, compute_exception_stack_depths=True)`` returns
what ``code.to_code(stacksize=..., compute_exception_stack_depths=...)``
returns, byte for byte (co_code, co_linetable, co_exceptiontable, the name
tuples; ``tests/bytecode/test_fast_assembly.py`` holds it to that). The
package sizes the stack through a control-flow graph, then builds one
``ConcreteInstr`` per code unit (CACHE slots too) before joining bytes; here
the stack is sized by ``depth.stack_depths`` and the instructions go to flat
lists of opcodes, arguments and sizes, then to bytes, the line table and the
exception table directly.

What this module does not model it hands back to the package, which then
also raises what it raises: an explicit CACHE or EXTENDED_ARG, 3.13's fused
pairs of locals, an argument the package would reject, a jump that does not
settle, a try block whose handler depth the package must compute, a stack
``stack_depths`` will not size.
"""

from __future__ import annotations

import dis
import types
from typing import Any

import bytecode as bc
from bytecode.concrete import HAS_COMPARE, HAS_CONST, HAS_FREE, HAS_LOCAL, HAS_NAME
from bytecode.instr import (
    BITFLAG2_OPCODES,
    BITFLAG_OPCODES,
    CACHE_OPCODE,
    DUAL_ARG_OPCODES,
    EXTENDEDARG_OPCODE,
    HAS_BACKWARD_RELATIVE_JUMP,
    HAS_FORWARD_RELATIVE_JUMP,
    INTRINSIC,
    UNSET,
    Compare,
    InstrLocation,
    Intrinsic1Op,
    Intrinsic2Op,
    const_key,
)

from bytegraph.bytecode import compat
from bytegraph.bytecode.depth import stack_depths

_JUMP_PASSES = 10  # as the package: give up on jumps whose sizes have not settled by then
_MAX_ARG = 2147483647
_CACHE_PAIR = bytes((CACHE_OPCODE, 0))
_PY313 = compat.PY_VERSION >= (3, 13)


class _Declined(Exception):
    """Something the package, not this module, should assemble."""


def _cache_counts() -> list[int]:
    """The CACHE units after each opcode (3.13's table is keyed by name)."""
    entries: Any = dis._inline_cache_entries  # type: ignore[attr-defined]
    if isinstance(entries, dict):
        return [entries.get(dis.opname[op], 0) for op in range(256)]
    return [entries[op] if op < len(entries) else 0 for op in range(256)]


_CACHES = _cache_counts()


def to_code(
    code: bc.Bytecode, stacksize: int | None = None, *,
    compute_exception_stack_depths: bool = True,
) -> types.CodeType:
    """``code.to_code(stacksize=stacksize, compute_exception_stack_depths=...)``."""
    encoded = try_encode(
        code, stacksize, compute_exception_stack_depths=compute_exception_stack_depths
    )
    if encoded is not None:
        return encoded
    if stacksize is not None and not compute_exception_stack_depths:
        return code.to_code(stacksize=stacksize, compute_exception_stack_depths=False)
    return code.to_code(compute_exception_stack_depths=compute_exception_stack_depths)


def try_encode(
    code: bc.Bytecode, stacksize: int | None = None, *,
    compute_exception_stack_depths: bool = True,
) -> types.CodeType | None:
    """What ``to_code`` returns, or None where the package must assemble ``code``."""
    items = list.copy(code)  # a plain list: Bytecode's own indexing and iterating are Python
    depths: dict[bc.TryBegin, int] = {}
    if stacksize is None or compute_exception_stack_depths:
        # The package sizes the stack itself then, even if a size is passed.
        sized = stack_depths(items, int(code.flags))
        if sized is None:
            return None
        stacksize = sized[0]
        if compute_exception_stack_depths:
            depths = sized[1]
    try:
        return _Encoder(code, items, depths).code_object(stacksize)
    except _Declined:
        return None


class _Encoder:
    """One pass from abstract instructions to flat lists, then to the code's bytes."""

    def __init__(
        self, code: bc.Bytecode, items: list[Any], depths: dict[bc.TryBegin, int]
    ) -> None:
        self.code = code
        self.items = items
        self.depths = depths  # each try block's depth, where not the TryBegin's own
        self.consts: list[Any] = []
        self.const_index: dict[Any, int] = {}
        self.names: list[str] = []
        self.name_index: dict[str, int] = {}
        self.varnames: list[str] = []
        self.varname_index: dict[str, int] = {}
        # One entry per real instruction: opcode, argument (UNSET for none), code units
        # (1 + its EXTENDED_ARGs), CACHE units after it, location.
        self.ops: list[int] = []
        self.args: list[Any] = []
        self.units: list[int] = []
        self.caches: list[int] = []
        self.locations: list[InstrLocation] = []
        self.jumps: list[tuple[int, bc.Label]] = []
        self.labels: dict[bc.Label, int] = {}
        self.tries: dict[bc.TryBegin, list[int]] = {}
        self.cells: list[int] = []
        self.frees: list[int] = []

    def code_object(self, stacksize: int) -> types.CodeType:
        code = self.code
        if code.docstring is not UNSET:
            self.add_const(code.docstring)
        for name in code.argnames:
            self.add_varname(name)
        self.convert()
        self.place_cells()
        starts = self.resolve_jumps()
        return types.CodeType(
            code.argcount, code.posonlyargcount, code.kwonlyargcount, len(self.varnames),
            stacksize, int(code.flags), self.assemble(), tuple(self.consts),
            tuple(self.names), tuple(self.varnames), code.filename, code.name,
            code.qualname, code.first_lineno, self.line_table(),
            self.exception_table(starts), tuple(code.freevars), tuple(code.cellvars),
        )

    # -- tables --------------------------------------------------------------

    def add_const(self, value: Any) -> int:
        key = const_key(value)
        index = self.const_index.get(key)
        if index is None:
            index = self.const_index[key] = len(self.consts)
            self.consts.append(value)
        return index

    def add_name(self, name: Any) -> int:
        return _index_of(self.names, self.name_index, name)

    def add_varname(self, name: Any) -> int:
        return _index_of(self.varnames, self.varname_index, name)

    # -- instructions --------------------------------------------------------

    def convert(self) -> None:
        """Fill the per-instruction lists from the abstract instructions."""
        location = InstrLocation(self.code.first_lineno, None, None, None)
        ops, args, units, caches, locations = (
            self.ops, self.args, self.units, self.caches, self.locations
        )
        opened = False  # Bytecode's iteration refuses a TryBegin inside another
        for item in self.items:
            kind = type(item)
            if kind is bc.Instr:
                op = item.opcode
                if op == CACHE_OPCODE or op == EXTENDEDARG_OPCODE or op > 255:
                    raise _Declined
                at = item.location
                if at is not None and at is not UNSET:
                    location = at
                arg = self.oparg(op, item.arg)
                ops.append(op)
                args.append(arg)
                units.append(_units(arg))
                caches.append(_CACHES[op])
                locations.append(location)
            elif kind is bc.Label:
                self.labels[item] = len(ops)
            elif kind is bc.SetLineno:
                location = InstrLocation(item.lineno, None, None, None)
            elif kind is bc.TryBegin and item not in self.tries and not opened:
                self.tries[item] = [len(ops), -1]
                opened = True
            elif kind is bc.TryEnd and item.entry in self.tries:
                self.tries[item.entry][1] = len(ops) - 1
                opened = False
            else:
                raise _Declined

    def oparg(self, op: int, arg: Any) -> Any:
        """The integer argument of one instruction (a jump's is set later)."""
        if type(arg) is bc.Label:
            self.jumps.append((len(self.ops), arg))
            return 0
        if op in HAS_CONST:
            return self.add_const(arg)
        if op in HAS_LOCAL:
            if op in DUAL_ARG_OPCODES:
                raise _Declined
            if isinstance(arg, (bc.CellVar, bc.FreeVar)) and _PY313:
                return self.cell_or_free(arg)
            return self.add_varname(arg)
        if op in HAS_NAME:
            return self.name_arg(op, arg)
        if op in HAS_FREE:
            return self.cell_or_free(arg)
        if op in HAS_COMPARE:
            return _compare_arg(arg)
        if op in INTRINSIC:
            if not isinstance(arg, (Intrinsic1Op, Intrinsic2Op)):
                raise _Declined
            return arg.value
        if not isinstance(arg, int):
            raise _Declined
        return arg

    def name_arg(self, op: int, arg: Any) -> int:
        if op in BITFLAG_OPCODES:
            if not (isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[0], bool)):
                raise _Declined
            return int(arg[0]) + (self.add_name(arg[1]) << 1)
        if op in BITFLAG2_OPCODES:
            if not (isinstance(arg, tuple) and len(arg) == 3):
                raise _Declined
            return int(arg[0]) + 2 * int(arg[1]) + (self.add_name(arg[2]) << 2)
        return self.add_name(arg)

    def cell_or_free(self, arg: Any) -> int:
        """The cell's or free variable's index among its kind; ``place_cells`` moves it."""
        kind = type(arg)
        names = self.code.cellvars if kind is bc.CellVar else self.code.freevars
        if kind not in (bc.CellVar, bc.FreeVar) or arg.name not in names:
            raise _Declined
        (self.cells if kind is bc.CellVar else self.frees).append(len(self.ops))
        return names.index(arg.name)

    def place_cells(self) -> None:
        """Cells and free variables live after the locals (a cell that is also an
        argument shares the argument's slot), as the package numbers them."""
        cellvars = self.code.cellvars
        slots: dict[int, int] = {}
        unshared = 0
        for i, name in enumerate(cellvars):
            if name in self.varname_index:
                slots[i] = self.varname_index[name]
            else:
                slots[i] = len(self.varnames) + unshared
                unshared += 1
        for index in self.cells:
            self.set_arg(index, slots[self.args[index]])
        free_offset = len(self.varnames) + unshared
        for index in self.frees:
            self.set_arg(index, self.args[index] + free_offset)

    def set_arg(self, index: int, arg: int) -> None:
        self.args[index] = arg
        self.units[index] = _units(arg)

    # -- offsets -------------------------------------------------------------

    def offsets(self) -> list[int]:
        """Each instruction's first code unit (its EXTENDED_ARGs'), and the end."""
        starts = [0]
        offset = 0
        for units, caches in zip(self.units, self.caches):
            offset += units + caches
            starts.append(offset)
        return starts

    def resolve_jumps(self) -> list[int]:
        """Set each jump's argument, growing EXTENDED_ARGs until the sizes settle."""
        for _ in range(_JUMP_PASSES):
            starts = self.offsets()
            changed = False
            for index, label in self.jumps:
                if label not in self.labels:
                    raise _Declined
                target = starts[self.labels[label]]
                op = self.ops[index]
                after = starts[index] + self.caches[index] + self.units[index]
                if op in HAS_FORWARD_RELATIVE_JUMP:
                    target -= after
                elif op in HAS_BACKWARD_RELATIVE_JUMP:
                    target = after - target
                if not 0 <= target <= _MAX_ARG:
                    raise _Declined
                self.args[index] = target
                units = _units(target)
                if units != self.units[index]:
                    self.units[index] = units
                    changed = True
            if not changed:
                return starts
        raise _Declined

    # -- bytes ---------------------------------------------------------------

    def assemble(self) -> bytes:
        out = bytearray()
        for op, arg, caches in zip(self.ops, self.args, self.caches):
            if arg is UNSET:
                out += bytes((op, 0))
            elif arg <= 0xFF:
                out += bytes((op, arg))
            else:
                out += _extended(op, arg)
            if caches:
                out += _CACHE_PAIR * caches
        return bytes(out)

    def line_table(self) -> bytes:
        """Runs of equal locations, each as the package packs it (a location without
        a line is never merged, not even with the CACHEs of its own instruction)."""
        runs: list[list[Any]] = []
        last: InstrLocation | None = None
        for units, caches, location in zip(self.units, self.caches, self.locations):
            if location.lineno is None:
                runs.append([units, location])
                runs.extend([1, location] for _ in range(caches))
                last = None
            elif last is not None and (location is last or location == last):
                runs[-1][0] += units + caches
            else:
                runs.append([units + caches, location])
                last = location
        buf = bytearray()
        lineno = self.code.first_lineno
        for size, location in runs:
            lineno = _push_location(buf, size, lineno, location)
        return bytes(buf)

    def exception_table(self, starts: list[int]) -> bytes:
        table = bytearray()
        for entry, (first, last) in self.tries.items():
            if last < first or first >= len(self.ops) or entry.target not in self.labels:
                raise _Declined
            depth = self.depths.get(entry, entry.stack_depth)
            if not isinstance(depth, int) or depth is UNSET:
                raise _Declined
            start = starts[first] + self.units[first] - 1
            stop = starts[last + 1] - 1
            depth = (depth << 1) + entry.push_lasti
            table += _varint(start, True)
            table += _varint(stop - start + 1)
            table += _varint(starts[self.labels[entry.target]])
            table += _varint(depth)
        return bytes(table)


def _index_of(names: list[str], index: dict[str, int], name: Any) -> int:
    """``name``'s place in ``names``, appended if new (``index`` maps the names to it)."""
    if not isinstance(name, str):
        raise _Declined
    found = index.get(name)
    if found is None:
        found = index[name] = len(names)
        names.append(name)
    return found


def _units(arg: Any) -> int:
    """Code units an argument takes: one, plus one EXTENDED_ARG per byte above the first."""
    if arg is UNSET:
        return 1
    units = 1
    while arg > 0xFF:
        units += 1
        arg >>= 8
    return units


def _extended(op: int, arg: int) -> bytes:
    pairs = [op, arg & 0xFF]
    while arg > 0xFF:
        arg >>= 8
        pairs[:0] = [EXTENDEDARG_OPCODE, arg & 0xFF]
    return bytes(pairs)


def _compare_arg(arg: Any) -> int:
    """COMPARE_OP's argument: 3.12 keeps a cache mask in the low 4 bits, 3.13 the mask
    in the low 4 and a to-bool flag in the 5th."""
    if not isinstance(arg, Compare):
        raise _Declined
    if _PY313:
        return arg._get_mask() + ((arg.value & 0b1111) << 5) + (arg.value & 16)
    if compat.PY_VERSION >= (3, 12):
        return arg._get_mask() + (arg.value << 4)
    return arg.value


# -- the line table (CPython's Objects/locations.md) ---------------------------

def _push_location(buf: bytearray, size: int, lineno: int, location: InstrLocation) -> int:
    """Entries for ``size`` code units at ``location`` (8 at most per entry); the
    line the next entry's delta counts from."""
    while True:
        _pack_location(buf, min(size, 8), lineno, location)
        if location.lineno is not None:
            lineno = location.lineno
        size -= 8
        if size < 1:
            return lineno


def _pack_location(buf: bytearray, size: int, lineno: int, location: InstrLocation) -> None:
    line, end_line = location.lineno, location.end_lineno
    col, end_col = location.col_offset, location.end_col_offset
    if line is None:
        buf.append(_header(15, size))
    elif col is None:
        if end_line is not None and end_line != line:
            raise _Declined
        buf.append(_header(13, size))
        buf += _svarint(line - lineno)
    elif end_col is None:
        raise _Declined
    elif end_line == line and line == lineno and col < 72 and end_col - col <= 15:
        buf += bytes((_header(col // 8, size), ((col % 8) << 4) + (end_col - col)))
    elif end_line == line and line - lineno in (1, 2) and col < 256 and end_col < 256:
        buf += bytes((_header(10 + line - lineno, size), col, end_col))
    else:
        if end_line is None:
            raise _Declined
        buf.append(_header(14, size))
        buf += _svarint(line - lineno)
        buf += _location_varint(end_line - line)
        buf += _location_varint(col + 1)
        buf += _location_varint(end_col + 1)


def _header(code: int, size: int) -> int:
    return (1 << 7) + (code << 3) + (size - 1)


def _location_varint(value: int) -> bytearray:
    encoded = bytearray()
    while True:
        encoded.append(value & 0x3F)
        value >>= 6
        if not value:
            return encoded
        encoded[-1] |= 0x40


def _svarint(value: int) -> bytearray:
    return _location_varint(((-value) << 1) | 1 if value < 0 else value << 1)


def _varint(value: int, begins_entry: bool = False) -> bytes:
    """The exception table's 6-bit varint, most significant group first."""
    groups: list[int] = []
    while value:
        groups.append(value & 63 | (64 if groups else 0))
        value >>= 6
    groups = groups or [0]
    if begins_entry:
        groups[-1] |= 128
    return bytes(reversed(groups))
