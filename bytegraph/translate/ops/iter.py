"""Iteration: GET_ITER and FOR_ITER over iterables known at trace time.

Loops unroll: each FOR_ITER step takes the next item, so the graph holds the
loop body once per iteration (a repeated iteration is copied rather than traced
again where loop_fragments.py can prove the copy the same). Iterators are lazy
(``containers.iterate``): a loop over a list sees the appends its body makes, as
in CPython. An
exception a generator raises passes through FOR_ITER to the loop's handlers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.translate import loop_fragments
from bytegraph.translate.ops.exceptions import vet_iteration
from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.containers import IteratorVariable, iterate
from bytegraph.variables.exceptions import ObservedRaise

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("GET_ITER")
@handler("GET_YIELD_FROM_ITER")  # a generator is its own iterator, as is every iterator here
def GET_ITER(tx: Tx, inst: Instruction) -> None:
    """(iterable -- iterator)"""
    tx.push(iterate(tx, tx.pop()))


@handler("FOR_ITER")
def FOR_ITER(tx: Tx, inst: Instruction) -> None:
    """(iterator -- iterator item), or pop the iterator and jump past the loop."""
    iterator = tx.stack[-1]
    if not isinstance(iterator, IteratorVariable):
        iterator = tx.stack[-1] = iterate(tx, iterator)
    arrival = loop_fragments.arrive(tx, inst, iterator)
    try:
        item = iterator.next_item(tx)
    except ObservedRaise as error:  # what a generator raised passes through the loop
        vet_iteration(tx, error, stop_iteration=False)
        raise
    if item is None:  # the target is where CPython lands (past END_FOR on 3.12+)
        tx.pop()
        tx.jump(inst.target)
    elif not loop_fragments.enter(tx, arrival, iterator, item):  # else: a copied iteration
        tx.push(item)


for _opname in ("GET_AITER", "GET_ANEXT", "END_ASYNC_FOR"):
    unsupported_opcode(_opname, "async for: coroutines are not traced")
