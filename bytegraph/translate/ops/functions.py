"""Functions and closures: MAKE_FUNCTION, cells, and generator bodies (yield, yield from)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from bytegraph.bytecode import compat
from bytegraph.exc import Unsupported
from bytegraph.side_effects import DELETED
from bytegraph.translate.ops.exceptions import vet_iteration
from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.base import AttributeMutationNew
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import IteratorVariable
from bytegraph.variables.exceptions import ExceptionInstanceVariable, ObservedRaise
from bytegraph.variables.functions import NestedFunctionVariable, new_cell
from bytegraph.variables.generators import GeneratorVariable, Returned

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.base import VariableTracker

NEW_FUNCTION = AttributeMutationNew(1)


@handler("MAKE_FUNCTION")
def MAKE_FUNCTION(tx: Tx, inst: Instruction) -> None:
    """([defaults] [kwdefaults] [annotations] [closure] code -- function);
    3.13: (code -- function), and SET_FUNCTION_ATTRIBUTE adds each of the others."""
    code = tx.pop().as_python_constant()
    flags = inst.arg if compat.MAKE_FUNCTION_HAS_FLAGS else 0
    closure = tx.pop().unpack_sequence(tx) if flags & 0x08 else ()
    if flags & 0x04:
        tx.pop()  # annotations do not change what the function computes
    kwdefaults = tx.pop() if flags & 0x02 else None
    defaults = tx.pop() if flags & 0x01 else None
    # An identity: rebuilt once however often it is loaded (a closure over the same cells).
    tx.push(NestedFunctionVariable(
        code, tx.f_globals, code.co_qualname, defaults, kwdefaults, tuple(closure),
        mutation_type=NEW_FUNCTION,
    ))


@handler("SET_FUNCTION_ATTRIBUTE", min_ver=(3, 13))
def SET_FUNCTION_ATTRIBUTE(tx: Tx, inst: Instruction) -> None:
    """(value function -- function): one of MAKE_FUNCTION's flags, set on the new function."""
    function = tx.pop()
    value = tx.pop()
    if inst.arg == 0x08:
        function = dataclasses.replace(function, closure=tuple(value.unpack_sequence(tx)))
    elif inst.arg == 0x02:
        function = dataclasses.replace(function, kwdefaults_dict=value)
    elif inst.arg == 0x01:
        function = dataclasses.replace(function, defaults_tuple=value)
    # 0x04, annotations: they do not change what the function computes
    tx.push(function)


@handler("MAKE_CELL")
def MAKE_CELL(tx: Tx, inst: Instruction) -> None:
    """( -- ): turns local ``name`` into a fresh cell holding its current value."""
    name = inst.argval
    initial = tx.symbolic_locals.get(name)
    if initial is None and name in tx.frame_values:
        initial = tx.realize_local(name)
    tx.cells[name] = new_cell(initial, tx)


@handler("COPY_FREE_VARS")
def COPY_FREE_VARS(tx: Tx, inst: Instruction) -> None:
    """( -- ): the translator set up the free variables' cells already."""


@handler("LOAD_CLOSURE", max_ver=(3, 12))  # 3.13 loads a cell with LOAD_FAST
def LOAD_CLOSURE(tx: Tx, inst: Instruction) -> None:
    """( -- cell)"""
    tx.push(tx.cells[inst.argval])


@handler("LOAD_DEREF")
def LOAD_DEREF(tx: Tx, inst: Instruction) -> None:
    """( -- cell contents)"""
    tx.push(tx.cells[inst.argval].load(tx))


@handler("STORE_DEREF")
def STORE_DEREF(tx: Tx, inst: Instruction) -> None:
    """(value -- ): a write to a cell, replayed if the cell outlives the trace."""
    tx.cells[inst.argval].store(tx, tx.pop())


@handler("DELETE_DEREF")
def DELETE_DEREF(tx: Tx, inst: Instruction) -> None:
    """( -- ): an empty cell raises NameError in eager; ``load`` breaks the graph there."""
    cell = tx.cells[inst.argval]
    cell.load(tx)
    tx.output.side_effects.store_attr(cell, "cell_contents", DELETED)


@handler("RETURN_GENERATOR")
def RETURN_GENERATOR(tx: Tx, inst: Instruction) -> None:
    """( -- None): a generator body runs eagerly; the POP_TOP after drops this."""
    _require_generator(tx)
    tx.push(ConstantVariable(None))


@handler("YIELD_VALUE")
def YIELD_VALUE(tx: Tx, inst: Instruction) -> None:
    """(value -- ): pauses the frame; resuming pushes the value sent in (None for next)."""
    _require_generator(tx)
    tx.yielded.append(tx.pop())


@handler("SEND")
def SEND(tx: Tx, inst: Instruction) -> None:
    """(receiver value -- receiver item), or (receiver value -- result) and jump when done.

    ``yield from``: each item of the receiver is yielded on, until it returns.
    """
    value = tx.pop()
    receiver = tx.stack[-1]
    if not isinstance(receiver, IteratorVariable):
        raise Unsupported("unmodelled_value", f"yield from {receiver}")
    try:
        item = _send(tx, receiver, value)
    except ObservedRaise as error:  # what the receiver raised is raised at this SEND
        vet_iteration(tx, error, stop_iteration=False)
        raise
    if not isinstance(item, Returned):
        tx.push(item)
        return
    if compat.SEND_KEEPS_RECEIVER:  # END_SEND, at the target, drops the receiver
        tx.push(item.value)
    else:
        tx.stack[-1] = item.value
    tx.jump(inst.target)


@handler("CLEANUP_THROW", min_ver=(3, 12))
def CLEANUP_THROW(tx: Tx, inst: Instruction) -> None:
    """(receiver last_sent exc -- None value): a ``throw()`` into ``yield from`` whose
    receiver returned (StopIteration) gives the return value; anything else re-raises."""
    exc = tx.pop()
    if not isinstance(exc, ExceptionInstanceVariable):
        raise Unsupported("exception_value", f"CLEANUP_THROW of {exc}")
    if not issubclass(exc.exc_type, StopIteration):
        raise ObservedRaise(exc, vetted=tx)
    tx.popn(2)
    tx.push(ConstantVariable(None))
    tx.push(exc.var_getattr(tx, "value"))


@handler("END_SEND", min_ver=(3, 12))
def END_SEND(tx: Tx, inst: Instruction) -> None:
    """(receiver value -- value)"""
    value = tx.pop()
    tx.pop()
    tx.push(value)


def _send(tx: Tx, receiver: IteratorVariable, value: VariableTracker) -> VariableTracker | Returned:
    """``receiver.send(value)``: the item, or ``Returned`` with the ``yield from``'s result."""
    if isinstance(receiver, GeneratorVariable):
        return receiver.resume(tx, sent=value)
    if not (value.is_python_constant() and value.as_python_constant() is None):
        raise Unsupported("generator_protocol", "send() of a value to an iterator (raises)")
    item = receiver.next_item(tx)
    return Returned(ConstantVariable(None)) if item is None else item


def _require_generator(tx: Tx) -> None:
    if not getattr(tx, "is_generator", False):
        raise Unsupported("generator_frame", "a generator frame compiled directly")


_CLASS_BODIES = "class bodies use it (translate/class_body.py traces them)"
unsupported_opcode("LOAD_CLASSDEREF", _CLASS_BODIES, max_ver=(3, 11))
unsupported_opcode("LOAD_FROM_DICT_OR_DEREF", _CLASS_BODIES, min_ver=(3, 12))
unsupported_opcode("GET_AWAITABLE", "await: coroutines are not traced")
unsupported_opcode("ASYNC_GEN_WRAP", "async generators are not traced", max_ver=(3, 11))


@handler("LOAD_BUILD_CLASS")
def LOAD_BUILD_CLASS(tx: Tx, inst: Instruction) -> None:
    """( -- __build_class__): a class statement's builder (variables/made_classes.py)."""
    from bytegraph.variables.made_classes import BuildClassVariable

    tx.push(BuildClassVariable())
