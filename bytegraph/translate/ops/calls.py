"""Calls: CALL with KW_NAMES (3.11, 3.12) or CALL_KW (3.13), and CALL_FUNCTION_EX.

3.11's PRECALL is a no-op in ops/stack.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.bytecode import compat
from bytegraph.exc import Unsupported
from bytegraph.translate.ops.exceptions import vet_call
from bytegraph.translate.registry import handler
from bytegraph.variables.base import NullVariable, VariableTracker
from bytegraph.variables.dicts import mapping_items
from bytegraph.variables.exceptions import ObservedRaise

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("KW_NAMES", max_ver=(3, 12))
def KW_NAMES(tx: Tx, inst: Instruction) -> None:
    """( -- ): names the trailing arguments of the next CALL as keywords."""
    tx.kw_names = tx.code.co_consts[inst.arg]


@handler("CALL")
def CALL(tx: Tx, inst: Instruction) -> None:
    """(NULL callable args*n -- result) or (method self args*n -- result);
    3.13: (callable NULL args*n -- result) or (method self args*n -- result)."""
    kw_names, tx.kw_names = tx.kw_names, ()
    _call_from_stack(tx, inst.arg, kw_names)


@handler("CALL_KW", min_ver=(3, 13))
def CALL_KW(tx: Tx, inst: Instruction) -> None:
    """(callable self_or_null args*n names -- result): the last len(names) are keywords."""
    names = tx.pop()
    _call_from_stack(tx, inst.arg, tuple(names.as_python_constant()))


def _call_from_stack(tx: Tx, nargs: int, kw_names: tuple[str, ...]) -> None:
    args = tx.popn(nargs)
    upper = tx.pop()
    lower = tx.pop()
    null_slot, other = (lower, upper) if compat.NULL_BEFORE_CALLABLE else (upper, lower)
    if isinstance(null_slot, NullVariable):
        fn = other
    else:  # a method and its receiver, in CPython's order
        fn, args = lower, [upper, *args]
    split = len(args) - len(kw_names)
    kwargs = dict(zip(kw_names, args[split:]))
    tx.push(_call(tx, fn, args[:split], kwargs))


def _call(
    tx: Tx, fn: VariableTracker, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
) -> VariableTracker:
    """``fn(*args, **kwargs)``; what a user function raises may be caught by ``tx``."""
    try:
        return fn.call_function(tx, args, kwargs)
    except ObservedRaise as error:
        vet_call(tx, error, fn)
        raise


@handler("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(tx: Tx, inst: Instruction) -> None:
    """(NULL callable args_tuple [kwargs_dict] -- result): ``f(*args, **kwargs)``;
    3.13: (callable NULL args_tuple [kwargs_dict] -- result)."""
    kwargs_vt = tx.pop() if inst.arg & 0x01 else None
    args_vt = tx.pop()
    fn, null = tx.pop(), tx.pop()
    if not compat.NULL_BEFORE_CALLABLE:
        fn, null = null, fn
    if not isinstance(null, NullVariable):  # 3.11 keeps a NULL slot below the callable
        raise Unsupported("opcode_unsupported", "CALL_FUNCTION_EX without its NULL")
    kwargs: dict[str, VariableTracker] = {}
    if kwargs_vt is not None:
        kwargs = dict(mapping_items(tx, kwargs_vt))
        if not all(isinstance(name, str) for name in kwargs):
            raise Unsupported(
                "call_raises_type_error", "keywords must be strings (TypeError in eager)"
            )
    tx.push(_call(tx, fn, args_vt.unpack_sequence(tx), kwargs))
