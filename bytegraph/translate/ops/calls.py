"""Calls: KW_NAMES and CALL (3.11's PRECALL is a no-op in ops/stack.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.translate.registry import handler
from bytegraph.variables.base import NullVariable

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
    tx.push(fn.call_function(tx, args[:split], kwargs))
