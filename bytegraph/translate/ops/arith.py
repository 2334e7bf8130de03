"""Operators: BINARY_OP through one NB_* table, unary ops, comparisons, subscripts.

Each opcode becomes a call of the matching ``operator`` function through
BuiltinVariable, which puts tensor work in the graph and folds constants.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from bytegraph.bytecode import compat
from bytegraph.translate.ops.build import build_slice
from bytegraph.translate.ops.exceptions import vet_operator, vet_subscript
from bytegraph.translate.registry import handler
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.builtin import BuiltinVariable
from bytegraph.variables.exceptions import ObservedRaise
from bytegraph.variables.user_arithmetic import user_operator

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# Indexed by BINARY_OP's oparg (CPython's NB_* order; the in-place ones follow at 13).
BINARY_OPERATORS = (
    operator.add, operator.and_, operator.floordiv, operator.lshift, operator.matmul,
    operator.mul, operator.mod, operator.or_, operator.pow, operator.rshift,
    operator.sub, operator.truediv, operator.xor,
    operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift, operator.imatmul,
    operator.imul, operator.imod, operator.ior, operator.ipow, operator.irshift,
    operator.isub, operator.itruediv, operator.ixor,
)

COMPARE_OPERATORS = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq,
    "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}


def apply_operator(tx: Tx, fn: object, *args: VariableTracker) -> VariableTracker:
    user = user_operator(tx, fn, args)  # a user class's own __add__, __radd__, __neg__...
    if user is not None:
        return user
    return BuiltinVariable(fn).call_function(tx, list(args), {})


def _operate(tx: Tx, fn: object, *args: VariableTracker) -> VariableTracker:
    """An operator opcode's operation: what the operator itself raises (``1 / 0``)
    is the opcode's raise, as in CPython."""
    try:
        return apply_operator(tx, fn, *args)
    except ObservedRaise as error:
        vet_operator(tx, error)
        raise


@handler("BINARY_OP")
def BINARY_OP(tx: Tx, inst: Instruction) -> None:
    """(a b -- a op b)"""
    b = tx.pop()
    a = tx.pop()
    tx.push(_operate(tx, BINARY_OPERATORS[inst.arg], a, b))


def _unary(fn: object):
    def unary(tx: Tx, inst: Instruction) -> None:
        """(a -- op a)"""
        tx.push(_operate(tx, fn, tx.pop()))

    return unary


UNARY_POSITIVE = handler("UNARY_POSITIVE", max_ver=(3, 11))(_unary(operator.pos))
UNARY_NEGATIVE = handler("UNARY_NEGATIVE")(_unary(operator.neg))
UNARY_INVERT = handler("UNARY_INVERT")(_unary(operator.invert))
UNARY_NOT = handler("UNARY_NOT")(_unary(operator.not_))


@handler("COMPARE_OP")
def COMPARE_OP(tx: Tx, inst: Instruction) -> None:
    """(a b -- a cmp b); 3.13: then ``bool()`` of it, where the oparg asks."""
    b = tx.pop()
    a = tx.pop()
    result = _operate(tx, COMPARE_OPERATORS[inst.argval], a, b)
    if inst.arg & compat.COMPARE_OP_TO_BOOL_BIT:
        result = _operate(tx, bool, result)
    tx.push(result)


@handler("IS_OP")
def IS_OP(tx: Tx, inst: Instruction) -> None:
    """(a b -- a is b); oparg 1 means ``is not``."""
    b = tx.pop()
    a = tx.pop()
    tx.push(apply_operator(tx, operator.is_not if inst.arg else operator.is_, a, b))


@handler("CONTAINS_OP")
def CONTAINS_OP(tx: Tx, inst: Instruction) -> None:
    """(item container -- item in container); oparg 1 means ``not in``."""
    container = tx.pop()
    item = tx.pop()
    result = _operate(tx, operator.contains, container, item)
    tx.push(apply_operator(tx, operator.not_, result) if inst.arg else result)


@handler("TO_BOOL", min_ver=(3, 13))
def TO_BOOL(tx: Tx, inst: Instruction) -> None:
    """(value -- bool(value)): 3.13's conditional jumps and ``not`` take exact bools."""
    tx.push(_operate(tx, bool, tx.pop()))


@handler("BINARY_SUBSCR")
def BINARY_SUBSCR(tx: Tx, inst: Instruction) -> None:
    """(container index -- container[index])"""
    index = tx.pop()
    _subscript(tx, tx.pop(), index)


@handler("BINARY_SLICE", min_ver=(3, 12))
def BINARY_SLICE(tx: Tx, inst: Instruction) -> None:
    """(container start stop -- container[start:stop])"""
    stop, start = tx.pop(), tx.pop()
    _subscript(tx, tx.pop(), build_slice([start, stop]))


def _subscript(tx: Tx, container: VariableTracker, index: VariableTracker) -> None:
    try:
        result = apply_operator(tx, operator.getitem, container, index)
    except ObservedRaise as error:
        vet_subscript(tx, error, container)
        raise
    tx.push(result)
