"""Assemble new code objects with the ``bytecode`` package.

``assemble(template, body)`` makes a code object that keeps the template's
signature, names, free variables and flags, with ``body`` (a list of
``bytecode.Instr`` and ``bytecode.Label``) as its instructions. ``encode``
computes the stack depth, line table and exception table as the package
would, faster.
"""

from __future__ import annotations

import types
from collections.abc import Sequence

import bytecode as bc

from bytegraph.bytecode import compat, encode
from bytegraph.bytecode.depth import GENERATOR_FLAGS


def assemble(
    template: types.CodeType,
    body: Sequence[bc.Instr | bc.Label],
    *,
    name: str | None = None,
) -> types.CodeType:
    """A code object with ``template``'s signature and closure running ``body``."""
    return encode.to_code(bytecode_for(template, body, name=name))


def bytecode_for(
    template: types.CodeType,
    body: Sequence[bc.Instr | bc.Label],
    *,
    name: str | None = None,
) -> bc.Bytecode:
    """The ``bytecode.Bytecode`` that ``assemble`` encodes."""
    code = bc.Bytecode()
    code.name = name or template.co_name
    code.filename = template.co_filename
    code.first_lineno = template.co_firstlineno
    code.argcount = template.co_argcount
    code.posonlyargcount = template.co_posonlyargcount
    code.kwonlyargcount = template.co_kwonlyargcount
    nargs = template.co_argcount + template.co_kwonlyargcount
    nargs += bool(template.co_flags & 0x04) + bool(template.co_flags & 0x08)
    code.argnames = list(template.co_varnames[:nargs])
    code.freevars = list(template.co_freevars)
    code.flags = bc.CompilerFlags(template.co_flags) & ~GENERATOR_FLAGS
    if hasattr(code, "qualname"):
        code.qualname = name or template.co_qualname
    code.extend(prologue(template))
    code.extend(body)
    return code


def prologue(template: types.CodeType, generator: bool = False) -> list[bc.Instr]:
    """The instructions every 3.11+ function starts with (a generator function's make
    the generator object first, and return it to the caller)."""
    instrs = []
    if template.co_freevars:
        instrs.append(bc.Instr("COPY_FREE_VARS", len(template.co_freevars)))
    if generator:
        instrs += [bc.Instr("RETURN_GENERATOR"), bc.Instr("POP_TOP")]
    instrs.append(bc.Instr("RESUME", 0))
    return instrs


def roundtrip(code: types.CodeType) -> types.CodeType:
    """Decode and reassemble ``code`` unchanged: the layer's self-check."""
    return encode.to_code(bc.Bytecode.from_code(code))


def call(nargs: int) -> list[bc.Instr]:
    """Call the callable below ``nargs`` arguments (its NULL slot already pushed)."""
    if compat.HAS_PRECALL:
        return [bc.Instr("PRECALL", nargs), bc.Instr("CALL", nargs)]
    return [bc.Instr("CALL", nargs)]


def with_null(load: Sequence[bc.Instr]) -> list[bc.Instr]:
    """``load`` (which pushes one callable) and the NULL slot a plain call needs,
    below the callable before 3.13 and above it from 3.13 on."""
    if compat.NULL_BEFORE_CALLABLE:
        return [bc.Instr("PUSH_NULL"), *load]
    return [*load, bc.Instr("PUSH_NULL")]


def push_null() -> list[bc.Instr]:
    """The NULL slot alone, where a caller emits the callable's load itself: call
    before the load when ``compat.NULL_BEFORE_CALLABLE``, else after it."""
    return [bc.Instr("PUSH_NULL")]


def discard_null() -> list[bc.Instr]:
    """Drop a NULL from the top of the stack (POP_TOP cannot): a call of a no-op eats it."""
    noop = bc.Instr("LOAD_CONST", _noop)
    if compat.NULL_BEFORE_CALLABLE:
        return [noop, *call(0), bc.Instr("POP_TOP")]
    return [noop, bc.Instr("SWAP", 2), *call(0), bc.Instr("POP_TOP")]


def _noop() -> None:
    """Called only to consume a NULL stack slot."""


def load_attr(name: str) -> bc.Instr:
    """``obj -- obj.name``"""
    return bc.Instr("LOAD_ATTR", (False, name) if compat.LOAD_ATTR_METHOD_BIT else name)


def load_method(name: str) -> bc.Instr:
    """``obj -- method self`` or ``obj -- NULL attr`` (3.13: ``attr NULL``): ready for a call."""
    if compat.LOAD_ATTR_METHOD_BIT:
        return bc.Instr("LOAD_ATTR", (True, name))
    return bc.Instr("LOAD_METHOD", name)


def make_function(flags: int) -> list[bc.Instr]:
    """A function from the code object on top and, below it, the parts ``flags`` names
    (MAKE_FUNCTION's flags: 0x01 defaults, 0x02 kwdefaults, 0x04 annotations, 0x08
    closure, pushed in that order)."""
    if compat.MAKE_FUNCTION_HAS_FLAGS:
        return [bc.Instr("MAKE_FUNCTION", flags)]
    # 3.13: each part, from the one right below the function down, is set on it in turn.
    parts = [bc.Instr("SET_FUNCTION_ATTRIBUTE", f) for f in (0x08, 0x04, 0x02, 0x01) if flags & f]
    return [bc.Instr("MAKE_FUNCTION"), *parts]


def load_cell(var: bc.CellVar | bc.FreeVar) -> bc.Instr:
    """Push the cell object of ``var`` itself (3.13 has no LOAD_CLOSURE: LOAD_FAST does it)."""
    return bc.Instr("LOAD_CLOSURE" if compat.HAS_LOAD_CLOSURE else "LOAD_FAST", var)
