"""Building and unpacking containers: tuples, lists, dicts, slices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.exc import Unsupported
from bytegraph.translate.registry import handler
from bytegraph.variables.base import ValueMutationNew
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import DictVariable, ListVariable, TupleVariable

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

NEW_VALUE = ValueMutationNew(1)


@handler("BUILD_TUPLE")
def BUILD_TUPLE(tx: Tx, inst: Instruction) -> None:
    """(items*n -- tuple)"""
    tx.push(TupleVariable(tuple(tx.popn(inst.arg))))


@handler("BUILD_LIST")
def BUILD_LIST(tx: Tx, inst: Instruction) -> None:
    """(items*n -- list)"""
    tx.push(ListVariable(tuple(tx.popn(inst.arg)), mutation_type=NEW_VALUE))


@handler("BUILD_MAP")
def BUILD_MAP(tx: Tx, inst: Instruction) -> None:
    """(key value pairs*n -- dict)"""
    flat = tx.popn(2 * inst.arg)
    items = {flat[i].as_python_constant(): flat[i + 1] for i in range(0, len(flat), 2)}
    tx.push(DictVariable(items, mutation_type=NEW_VALUE))


@handler("BUILD_CONST_KEY_MAP")
def BUILD_CONST_KEY_MAP(tx: Tx, inst: Instruction) -> None:
    """(values*n keys_tuple -- dict)"""
    keys = tx.pop().as_python_constant()
    values = tx.popn(inst.arg)
    tx.push(DictVariable(dict(zip(keys, values)), mutation_type=NEW_VALUE))


@handler("BUILD_SLICE")
def BUILD_SLICE(tx: Tx, inst: Instruction) -> None:
    """(start stop [step] -- slice)"""
    parts = tx.popn(inst.arg)
    if not all(p.is_python_constant() for p in parts):
        raise Unsupported("unsupported_value", "slice bounds that are not constants")
    tx.push(ConstantVariable(slice(*(p.as_python_constant() for p in parts))))


@handler("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(tx: Tx, inst: Instruction) -> None:
    """(seq -- items*n in reverse order)"""
    items = tx.pop().unpack_sequence(tx)
    if len(items) != inst.arg:
        raise Unsupported(
            "unsupported_value", f"unpacking {len(items)} values into {inst.arg} (raises in eager)"
        )
    tx.stack.extend(reversed(items))


@handler("LIST_APPEND")
def LIST_APPEND(tx: Tx, inst: Instruction) -> None:
    """(list ... value -- list ...): a list comprehension's append."""
    value = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "append", [value], {})


@handler("MAP_ADD")
def MAP_ADD(tx: Tx, inst: Instruction) -> None:
    """(dict ... key value -- dict ...): a dict comprehension's store."""
    value = tx.pop()
    key = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "__setitem__", [key, value], {})


@handler("LIST_EXTEND")
def LIST_EXTEND(tx: Tx, inst: Instruction) -> None:
    """(list ... iterable -- list ...): ``[*a, *b]`` and star-args."""
    iterable = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "extend", [iterable], {})


@handler("LIST_TO_TUPLE")
def LIST_TO_TUPLE(tx: Tx, inst: Instruction) -> None:
    """(list -- tuple)"""
    tx.push(TupleVariable(tuple(tx.pop().unpack_sequence(tx))))


@handler("DICT_UPDATE")
def DICT_UPDATE(tx: Tx, inst: Instruction) -> None:
    """(dict ... mapping -- dict ...): ``{**a, **b}``."""
    mapping = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "update", [mapping], {})


@handler("DICT_MERGE")
def DICT_MERGE(tx: Tx, inst: Instruction) -> None:
    """(dict ... mapping -- dict ...): ``f(**a, **b)``; a repeated key raises in eager."""
    mapping = tx.pop()
    target = tx.stack[-inst.arg]
    if not isinstance(mapping, DictVariable):
        raise Unsupported("unsupported_value", f"** of a {mapping}")
    if set(mapping.items_now(tx)) & set(target.items_now(tx)):
        raise Unsupported("unsupported_call", "repeated keyword argument (TypeError in eager)")
    target.call_method(tx, "update", [mapping], {})
