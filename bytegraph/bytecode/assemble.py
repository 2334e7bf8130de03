"""Assemble new code objects with the ``bytecode`` package.

``assemble(template, body)`` makes a code object that keeps the template's
signature, names, free variables and flags, with ``body`` (a list of
``bytecode.Instr`` and ``bytecode.Label``) as its instructions. The package
computes the stack depth, line table and exception table.
"""

from __future__ import annotations

import types
from collections.abc import Sequence

import bytecode as bc

from bytegraph.bytecode import compat

_GENERATOR_FLAGS = (
    bc.CompilerFlags.GENERATOR | bc.CompilerFlags.COROUTINE | bc.CompilerFlags.ASYNC_GENERATOR
)


def assemble(
    template: types.CodeType,
    body: Sequence[bc.Instr | bc.Label],
    *,
    name: str | None = None,
) -> types.CodeType:
    """A code object with ``template``'s signature and closure running ``body``."""
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
    code.flags = bc.CompilerFlags(template.co_flags) & ~_GENERATOR_FLAGS
    if hasattr(code, "qualname"):
        code.qualname = name or template.co_qualname
    code.extend(prologue(template))
    code.extend(body)
    return code.to_code()


def prologue(template: types.CodeType) -> list[bc.Instr]:
    """The instructions every 3.11+ function starts with."""
    instrs = []
    if template.co_freevars:
        instrs.append(bc.Instr("COPY_FREE_VARS", len(template.co_freevars)))
    instrs.append(bc.Instr("RESUME", 0))
    return instrs


def roundtrip(code: types.CodeType) -> types.CodeType:
    """Decode and reassemble ``code`` unchanged: the layer's self-check."""
    return bc.Bytecode.from_code(code).to_code()


def call(nargs: int) -> list[bc.Instr]:
    """Call the callable below ``nargs`` arguments (NULL already pushed)."""
    if compat.HAS_PRECALL:
        return [bc.Instr("PRECALL", nargs), bc.Instr("CALL", nargs)]
    return [bc.Instr("CALL", nargs)]


def push_null() -> list[bc.Instr]:
    return [bc.Instr("PUSH_NULL")]
