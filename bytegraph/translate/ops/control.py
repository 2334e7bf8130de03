"""Jumps and returns: branches are decided at trace time on known values."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from bytegraph.translate.ops.exceptions import vet_truth
from bytegraph.translate.registry import handler
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.builder import wrap_constant_result
from bytegraph.variables.builtin import BuiltinVariable
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.exceptions import ObservedRaise

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("RETURN_VALUE")
def RETURN_VALUE(tx: Tx, inst: Instruction) -> None:
    """(value -- ): ends the frame."""
    tx.return_value = tx.pop()
    tx.instruction_pointer = None


@handler("RETURN_CONST", min_ver=(3, 12))
def RETURN_CONST(tx: Tx, inst: Instruction) -> None:
    """( -- ): ``return`` of a constant."""
    tx.return_value = wrap_constant_result(inst.argval)
    tx.instruction_pointer = None


@handler("JUMP_FORWARD")
@handler("JUMP_BACKWARD")
@handler("JUMP_BACKWARD_NO_INTERRUPT")
def JUMP(tx: Tx, inst: Instruction) -> None:
    """( -- )"""
    tx.jump(inst.target)


def _is_none(tx: Tx, value: VariableTracker) -> bool:
    none = ConstantVariable(None)
    return BuiltinVariable(operator.is_).call_function(tx, [value, none], {}).truth(tx)


def _pop_jump(test):
    def pop_jump(tx: Tx, inst: Instruction) -> None:
        """(cond -- ): jump if the test holds."""
        if test(tx, tx.pop()):
            tx.jump(inst.target)

    return pop_jump


def _truth(tx: Tx, value: VariableTracker) -> bool:
    try:
        return value.truth(tx)
    except ObservedRaise as error:
        vet_truth(tx, error)
        raise


_if_true = _pop_jump(_truth)
_if_false = _pop_jump(lambda tx, v: not _truth(tx, v))
_if_none = _pop_jump(_is_none)
_if_not_none = _pop_jump(lambda tx, v: not _is_none(tx, v))

handler("POP_JUMP_IF_TRUE", min_ver=(3, 12))(_if_true)
handler("POP_JUMP_IF_FALSE", min_ver=(3, 12))(_if_false)
handler("POP_JUMP_IF_NONE", min_ver=(3, 12))(_if_none)
handler("POP_JUMP_IF_NOT_NONE", min_ver=(3, 12))(_if_not_none)
for _direction in ("FORWARD", "BACKWARD"):
    handler(f"POP_JUMP_{_direction}_IF_TRUE", max_ver=(3, 11))(_if_true)
    handler(f"POP_JUMP_{_direction}_IF_FALSE", max_ver=(3, 11))(_if_false)
    handler(f"POP_JUMP_{_direction}_IF_NONE", max_ver=(3, 11))(_if_none)
    handler(f"POP_JUMP_{_direction}_IF_NOT_NONE", max_ver=(3, 11))(_if_not_none)


def _jump_or_pop(jump_when: bool):
    def jump_or_pop(tx: Tx, inst: Instruction) -> None:
        """(cond -- cond) if jumping, else (cond -- )"""
        if _truth(tx, tx.stack[-1]) is jump_when:
            tx.jump(inst.target)
        else:
            tx.pop()

    return jump_or_pop


JUMP_IF_TRUE_OR_POP = handler("JUMP_IF_TRUE_OR_POP", max_ver=(3, 11))(_jump_or_pop(True))
JUMP_IF_FALSE_OR_POP = handler("JUMP_IF_FALSE_OR_POP", max_ver=(3, 11))(_jump_or_pop(False))
