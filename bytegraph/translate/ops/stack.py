"""Instructions that only move stack entries or do nothing at trace time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.base import NULL

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("NOP")
@handler("RESUME")
@handler("CACHE")
@handler("EXTENDED_ARG")  # dis already folded it into the next instruction's arg
@handler("PRECALL")  # 3.11: the call itself happens at CALL
def NOP(tx: Tx, inst: Instruction) -> None:
    """( -- )"""


@handler("POP_TOP")
def POP_TOP(tx: Tx, inst: Instruction) -> None:
    """(value -- )"""
    tx.pop()


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


unsupported_opcode("PRINT_EXPR", "emitted only for the interactive interpreter's statements")
