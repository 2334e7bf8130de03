"""Building and unpacking containers (tuples, lists, dicts, sets, slices) and strings."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.translate.ops.exceptions import raise_in_handler
from bytegraph.translate.registry import handler
from bytegraph.variables.base import ValueMutationNew
from bytegraph.variables.builtin import call
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import ListVariable, TupleVariable
from bytegraph.variables.dicts import DictVariable, key_of, mapping_items
from bytegraph.variables.sets import SetRecipe, SetVariable, _add_each, element
from bytegraph.variables.symbolic import SymIntVariable, SymSliceVariable

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.base import VariableTracker

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
    items = {key_of(tx, flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
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
    tx.push(build_slice(tx.popn(inst.arg)))


def build_slice(parts: list[VariableTracker]) -> VariableTracker:
    """``slice(*parts)``: a constant, or symbolic where a bound is a symbolic size."""
    if any(isinstance(p, SymIntVariable) for p in parts):
        return SymSliceVariable(tuple(parts))
    if not all(p.is_python_constant() for p in parts):
        raise Unsupported("not_a_constant", "slice bounds that are not constants")
    return ConstantVariable(slice(*(p.as_python_constant() for p in parts)))


@handler("BUILD_SET")
def BUILD_SET(tx: Tx, inst: Instruction) -> None:
    """(items*n -- set): an empty set, then each item added in order."""
    elements = tuple(element(tx, vt) for vt in tx.popn(inst.arg))
    tx.push(SetVariable.create(SetRecipe.new(_add_each, set, elements)))


@handler("SET_ADD")
def SET_ADD(tx: Tx, inst: Instruction) -> None:
    """(set ... value -- set ...): a set comprehension's add."""
    value = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "add", [value], {})


@handler("SET_UPDATE")
def SET_UPDATE(tx: Tx, inst: Instruction) -> None:
    """(set ... iterable -- set ...): ``{*a, *b}``."""
    iterable = tx.pop()
    tx.stack[-inst.arg].call_method(tx, "update", [iterable], {})


@handler("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(tx: Tx, inst: Instruction) -> None:
    """(seq -- items*n in reverse order)"""
    seq = tx.pop()
    items = seq.unpack_sequence(tx)
    if len(items) != inst.arg:
        _unpack_fails(tx, seq, len(items), inst.arg, None)
    tx.stack.extend(reversed(items))


@handler("UNPACK_EX")
def UNPACK_EX(tx: Tx, inst: Instruction) -> None:
    """(seq -- after*m list before*n): ``a, *rest, z = seq``; the first item on top."""
    before, after = inst.arg & 0xFF, inst.arg >> 8
    seq = tx.pop()
    items = seq.unpack_sequence(tx)
    if len(items) < before + after:
        _unpack_fails(tx, seq, len(items), before + after, before)
    split = len(items) - after
    tx.stack.extend(reversed(items[split:]))
    tx.push(ListVariable(tuple(items[before:split]), mutation_type=NEW_VALUE))
    tx.stack.extend(reversed(items[:before]))


def _unpack_fails(tx: Tx, seq: Any, count: int, targets: int, star: int | None) -> None:
    """Unpacking ``count`` values into ``targets`` names raises ValueError: CPython's own,
    from the same unpacking of as many Nones. Only where reading the values changed
    nothing (an iterator stops after one value too many in eager)."""
    from bytegraph.variables.containers import BaseSequenceVariable
    from bytegraph.variables.tensor import TensorVariable

    if not isinstance(seq, (BaseSequenceVariable, ConstantVariable, DictVariable, TensorVariable)):
        raise Unsupported("operation_raises", f"unpacking {count} values into {targets}")
    raise_in_handler(tx, "unpacking", _unpacker(targets, star), [None] * count)


@functools.cache
def _unpacker(targets: int, star: int | None) -> Callable[[list], None]:
    """``def unpack(seq): [_0, *_rest, _1] = seq`` for ``targets`` names, ``*`` at ``star``."""
    names = [f"_{i}" for i in range(targets)]
    if star is not None:
        names.insert(star, "*_rest")
    namespace: dict[str, Any] = {}
    exec(f"def unpack(seq):\n    [{', '.join(names)}] = seq\n", namespace)  # noqa: S102
    return namespace["unpack"]


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


@handler("LIST_TO_TUPLE", max_ver=(3, 11))  # CALL_INTRINSIC_1 on 3.12+ (ops/intrinsics.py)
def LIST_TO_TUPLE(tx: Tx, inst: Instruction) -> None:
    """(list -- tuple)"""
    tx.push(list_to_tuple(tx, tx.pop()))


def list_to_tuple(tx: Tx, value: VariableTracker) -> VariableTracker:
    return TupleVariable(tuple(value.unpack_sequence(tx)))


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
    items = mapping_items(tx, mapping)
    if set(items) & set(target.items_now(tx)):
        raise Unsupported(
            "call_raises_type_error", "repeated keyword argument (TypeError in eager)"
        )
    target.call_method(tx, "update", [DictVariable(items)], {})


_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}


@handler("FORMAT_VALUE", max_ver=(3, 12))
def FORMAT_VALUE(tx: Tx, inst: Instruction) -> None:
    """([value | value spec] -- str): one ``{value!r:spec}`` of an f-string."""
    spec = tx.pop() if inst.arg & 0x04 else ConstantVariable("")
    value = _convert(tx, tx.pop(), inst.arg & 0x03)
    tx.push(call(tx, format, value, spec))


def _convert(tx: Tx, value: VariableTracker, conversion: int) -> VariableTracker:
    """``!s``, ``!r``, ``!a`` of an f-string field (0: none)."""
    fn = _CONVERSIONS[conversion]
    return value if fn is None else call(tx, fn, value)


@handler("CONVERT_VALUE", min_ver=(3, 13))
def CONVERT_VALUE(tx: Tx, inst: Instruction) -> None:
    """(value -- str(value) | repr(value) | ascii(value))"""
    tx.push(_convert(tx, tx.pop(), inst.arg))


@handler("FORMAT_SIMPLE", min_ver=(3, 13))
def FORMAT_SIMPLE(tx: Tx, inst: Instruction) -> None:
    """(value -- format(value))"""
    tx.push(call(tx, format, tx.pop(), ConstantVariable("")))


@handler("FORMAT_WITH_SPEC", min_ver=(3, 13))
def FORMAT_WITH_SPEC(tx: Tx, inst: Instruction) -> None:
    """(value spec -- format(value, spec))"""
    spec = tx.pop()
    tx.push(call(tx, format, tx.pop(), spec))


@handler("BUILD_STRING")
def BUILD_STRING(tx: Tx, inst: Instruction) -> None:
    """(strings*n -- str): the pieces of an f-string joined."""
    pieces = tx.popn(inst.arg)
    tx.push(ConstantVariable("".join(p.as_python_constant() for p in pieces)))
