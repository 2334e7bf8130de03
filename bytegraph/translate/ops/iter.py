"""Iteration: GET_ITER and FOR_ITER over iterables known at trace time.

Loops unroll: each FOR_ITER step takes the next known item, so the graph
holds the loop body once per iteration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.base import ValueMutationNew, VariableTracker
from bytegraph.variables.containers import IteratorVariable

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

NEW_VALUE = ValueMutationNew(1)


def make_iterator(tx: Tx, iterable: VariableTracker) -> IteratorVariable:
    """``iter(iterable)``: an iterator is its own iterator."""
    if isinstance(iterable, IteratorVariable):
        return iterable
    return IteratorVariable(tuple(iterable.unpack_sequence(tx)), mutation_type=NEW_VALUE)


@handler("GET_ITER")
@handler("GET_YIELD_FROM_ITER")  # a generator is its own iterator, as is every iterator here
def GET_ITER(tx: Tx, inst: Instruction) -> None:
    """(iterable -- iterator)"""
    tx.push(make_iterator(tx, tx.pop()))


@handler("FOR_ITER")
def FOR_ITER(tx: Tx, inst: Instruction) -> None:
    """(iterator -- iterator item), or pop the iterator and jump past the loop."""
    iterator = tx.stack[-1]
    if not isinstance(iterator, IteratorVariable):
        iterator = tx.stack[-1] = make_iterator(tx, iterator)
    item = iterator.next_item(tx)
    if item is None:
        tx.pop()
        tx.jump(inst.target)
    else:
        tx.push(item)


for _opname in ("GET_AITER", "GET_ANEXT", "END_ASYNC_FOR"):
    unsupported_opcode(_opname, "async for: coroutines are not traced")
