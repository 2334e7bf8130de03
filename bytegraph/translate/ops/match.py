"""Structural pattern matching: the tests a ``match`` statement's cases compile to.

Each test reads only what the trace knows (a value's Python type, a
container's length or keys, attributes), pushes a constant, and the case is
then chosen by an ordinary conditional jump. Capture and literal patterns
need nothing here (STORE_FAST, COMPARE_OP); sequence patterns unpack with
UNPACK_SEQUENCE/UNPACK_EX.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from bytegraph.exc import Unsupported
from bytegraph.translate.registry import handler
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.builtin import BuiltinVariable
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import DictVariable, TupleVariable

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# CPython's type flags that mark what sequence and mapping patterns accept.
TPFLAGS_SEQUENCE = 1 << 5
TPFLAGS_MAPPING = 1 << 6
# Classes whose single positional sub-pattern matches the subject itself: ``int(n)``.
_SELF_MATCHING = frozenset({
    bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple,
})


def _has_flag(value: VariableTracker, flag: int) -> bool:
    return bool(value.python_type().__flags__ & flag)


@handler("GET_LEN")
def GET_LEN(tx: Tx, inst: Instruction) -> None:
    """(subject -- subject len(subject))"""
    tx.push(BuiltinVariable(builtins.len).call_function(tx, [tx.stack[-1]], {}))


@handler("MATCH_SEQUENCE")
def MATCH_SEQUENCE(tx: Tx, inst: Instruction) -> None:
    """(subject -- subject is_sequence)"""
    tx.push(ConstantVariable(_has_flag(tx.stack[-1], TPFLAGS_SEQUENCE)))


@handler("MATCH_MAPPING")
def MATCH_MAPPING(tx: Tx, inst: Instruction) -> None:
    """(subject -- subject is_mapping)"""
    tx.push(ConstantVariable(_has_flag(tx.stack[-1], TPFLAGS_MAPPING)))


@handler("MATCH_KEYS")
def MATCH_KEYS(tx: Tx, inst: Instruction) -> None:
    """(subject keys -- subject keys values_or_None)"""
    keys = tx.stack[-1].as_python_constant()
    subject = tx.stack[-2]
    if not isinstance(subject, DictVariable):
        raise Unsupported("match_pattern", f"mapping pattern on {subject}")
    if len(set(keys)) != len(keys):
        raise Unsupported("match_pattern", "mapping pattern repeats a key (raises)")
    items = subject.items_now(tx)
    if all(k in items for k in keys):
        tx.push(TupleVariable(tuple(items[k] for k in keys)))
    else:
        tx.push(ConstantVariable(None))


@handler("MATCH_CLASS")
def MATCH_CLASS(tx: Tx, inst: Instruction) -> None:
    """(subject cls keyword_names -- attributes_or_None); ``count`` positional sub-patterns."""
    names = tx.pop().as_python_constant()
    cls_vt = tx.pop()
    subject = tx.pop()
    cls = cls_vt.as_python_constant()
    if not isinstance(cls, type):
        raise Unsupported("match_pattern", f"class pattern on {cls!r} (TypeError in eager)")
    matched = BuiltinVariable(builtins.isinstance).call_function(tx, [subject, cls_vt], {})
    if not matched.as_python_constant():
        tx.push(ConstantVariable(None))
        return
    tx.push(_match_attributes(tx, subject, cls, inst.arg, names))


def _match_attributes(
    tx: Tx, subject: VariableTracker, cls: type, count: int, names: tuple[str, ...]
) -> VariableTracker:
    values: list[VariableTracker] = []
    positional: tuple[str, ...] = ()
    if count:
        match_args = getattr(cls, "__match_args__", None)
        if match_args is None and count == 1 and cls in _SELF_MATCHING:
            values.append(subject)
        elif type(match_args) is tuple and len(match_args) >= count:
            positional = match_args[:count]
        else:
            why = f"{cls.__name__}() accepts no {count} positional sub-patterns (raises)"
            raise Unsupported("match_pattern", why)
    all_names = positional + names
    if len(set(all_names)) != len(all_names):
        raise Unsupported("match_pattern", "class pattern names an attribute twice (raises)")
    for name in all_names:
        values.append(subject.var_getattr(tx, name))  # a missing one is unsupported, never guessed
    return TupleVariable(tuple(values))
