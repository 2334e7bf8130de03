"""Calls: KW_NAMES and CALL (3.11's PRECALL is a no-op in ops/stack.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.exc import Unsupported
from bytegraph.translate.ops.exceptions import vet_call
from bytegraph.translate.registry import handler
from bytegraph.variables.base import NullVariable, VariableTracker
from bytegraph.variables.containers import DictVariable
from bytegraph.variables.exceptions import ObservedRaise

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("KW_NAMES")
def KW_NAMES(tx: Tx, inst: Instruction) -> None:
    """( -- ): names the trailing arguments of the next CALL as keywords."""
    tx.kw_names = tx.code.co_consts[inst.arg]


@handler("CALL")
def CALL(tx: Tx, inst: Instruction) -> None:
    """(NULL|method callable|self args*n -- result)"""
    args = tx.popn(inst.arg)
    callable_or_self = tx.pop()
    null_or_method = tx.pop()
    if isinstance(null_or_method, NullVariable):
        fn = callable_or_self
    else:
        fn, args = null_or_method, [callable_or_self, *args]
    kw_names, tx.kw_names = tx.kw_names, ()
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
    """(NULL callable args_tuple [kwargs_dict] -- result): ``f(*args, **kwargs)``."""
    kwargs_vt = tx.pop() if inst.arg & 0x01 else None
    args_vt = tx.pop()
    fn = tx.pop()
    null = tx.pop()
    if not isinstance(null, NullVariable):  # 3.11 keeps a NULL slot below the callable
        raise Unsupported("opcode_unsupported", "CALL_FUNCTION_EX without its NULL")
    kwargs: dict[str, VariableTracker] = {}
    if kwargs_vt is not None:
        if not isinstance(kwargs_vt, DictVariable):
            raise Unsupported("unmodelled_value", f"** of a {kwargs_vt}")
        kwargs = dict(kwargs_vt.items_now(tx))
        if not all(isinstance(name, str) for name in kwargs):
            raise Unsupported(
                "call_raises_type_error", "keywords must be strings (TypeError in eager)"
            )
    tx.push(_call(tx, fn, args_vt.unpack_sequence(tx), kwargs))
