"""Instructions that only move stack entries or do nothing at trace time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.bytecode import compat
from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.base import NULL

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("NOP")
@handler("RESUME")
@handler("CACHE")
@handler("EXTENDED_ARG")  # dis already folded it into the next instruction's arg
@handler("PRECALL", max_ver=(3, 11))  # the call itself happens at CALL
def NOP(tx: Tx, inst: Instruction) -> None:
    """( -- )"""


@handler("POP_TOP")
def POP_TOP(tx: Tx, inst: Instruction) -> None:
    """(value -- )"""
    tx.pop()


@handler("END_FOR", min_ver=(3, 12))
def END_FOR(tx: Tx, inst: Instruction) -> None:
    """(iterator value -- ) on 3.12, (value -- ) on 3.13: where an exhausted loop goes."""
    tx.popn(compat.END_FOR_POPS)


@handler("PUSH_NULL")
def PUSH_NULL(tx: Tx, inst: Instruction) -> None:
    """( -- NULL)"""
    tx.push(NULL)


@handler("COPY")
def COPY(tx: Tx, inst: Instruction) -> None:
    """(a ... -- a ... a): push the i-th item from the top."""
    tx.push(tx.stack[-inst.arg])


@handler("SWAP")
def SWAP(tx: Tx, inst: Instruction) -> None:
    """(a ... b -- b ... a)"""
    stack, i = tx.stack, inst.arg
    stack[-i], stack[-1] = stack[-1], stack[-i]


unsupported_opcode(
    "PRINT_EXPR", "emitted only for the interactive interpreter's statements", max_ver=(3, 11)
)
_INTERNAL = "internal to the interpreter, never in a function's code"
for _opname in ("INTERPRETER_EXIT", "RESERVED"):
    unsupported_opcode(_opname, _INTERNAL, min_ver=(3, 12))
for _opname in ("ENTER_EXECUTOR", "EXIT_INIT_CHECK"):
    unsupported_opcode(_opname, _INTERNAL, min_ver=(3, 13))
