"""Mappings: dict, OrderedDict and defaultdict, and their views.

Keys are constants, or objects keyed by identity (``object_keys.py``).

A ``DictVariable`` is a handle like a list: its current items (key -> VT, in
insertion order) live in SideEffects. ``d.keys()``, ``d.values()`` and
``d.items()`` are live views of those items, as in CPython.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import OrderedDict, defaultdict
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import (
    NEW_VALUE,
    TupleVariable,
    _is_none,
    _refuse_if_mutated,
    equal_now,
    method_of,
    python_constant,
    store_contents,
)
from bytegraph.variables.method_arguments import check_method_arguments
from bytegraph.variables.object_keys import (
    ObjectKey,
    has_object_keys,
    key_variable,
    load_key,
    refuse_user_hashing,
    table_key,
)

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DictVariable(VariableTracker):
    """A dict, OrderedDict or defaultdict, in insertion order.

    ``default_factory`` is a defaultdict's factory (None for the others). Keys are
    constants or ``ObjectKey``s; only a dict from the frame holds keys hashed by user
    code (a new one would hash them again when rebuilt).
    """

    items: dict[Any, VariableTracker]
    dict_type: type = dict
    default_factory: VariableTracker | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source is None:
            refuse_user_hashing(self.items)

    def python_type(self) -> type:
        return self.dict_type

    def items_now(self, tx: InstructionTranslatorBase) -> dict[Any, VariableTracker]:
        return tx.output.side_effects.contents(self, self.items)

    def as_python_constant(self) -> Any:
        _refuse_if_mutated(self)
        _refuse_object_keys(self.items)
        values = {k: v.as_python_constant() for k, v in self.items.items()}
        if self.dict_type is defaultdict:
            factory = self.default_factory
            return defaultdict(factory.as_python_constant() if factory else None, values)
        return self.dict_type(values)

    def python_constant_now(self, tx: InstructionTranslatorBase) -> Any:
        items = self.items_now(tx).items()
        return self.rebuild(tx, {key: value.python_constant_now(tx) for key, value in items})

    def rebuild(self, tx: InstructionTranslatorBase, values: dict[Any, Any]) -> Any:
        _refuse_object_keys(values)
        if self.dict_type is defaultdict:
            factory = self.default_factory
            return defaultdict(python_constant(tx, factory) if factory else None, values)
        return self.dict_type(values)

    def new_like(self, items: dict[Any, VariableTracker]) -> DictVariable:
        """A new dict of the same type (and factory) created during tracing."""
        return DictVariable(items, self.dict_type, self.default_factory, mutation_type=NEW_VALUE)

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.items_now(tx))

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        if name == "default_factory" and self.dict_type is defaultdict:
            return self.default_factory or ConstantVariable(None)
        return method_of(self, name)

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        return [key_variable(k) for k in self.items_now(tx)]

    def getitem(self, tx: InstructionTranslatorBase, index: VariableTracker) -> VariableTracker:
        return self.call_method(tx, "__getitem__", [index], {})

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        items = self.items_now(tx)
        if name not in _HASHING_NOTHING:
            refuse_user_hashing(items)
        if name == "__getitem__" and len(args) == 1 and key_of(tx, args[0]) not in items:
            return self._missing(tx, args[0])
        if name == "__missing__" and self.dict_type is defaultdict and len(args) == 1:
            return self._missing(tx, args[0])
        if name == "fromkeys":  # a classmethod, read through an instance
            from bytegraph.variables.builtin import BuiltinVariable

            return BuiltinVariable(self.dict_type.fromkeys).call_function(tx, args, kwargs)
        check_method_arguments(self.dict_type, name, args, kwargs)
        read = _DICT_READS.get(name)
        if read is not None:
            return read(tx, self, items, *args, **kwargs)
        mutate = _DICT_MUTATIONS.get(name)
        if mutate is None or (name in _ORDERED_ONLY and self.dict_type is not OrderedDict):
            raise Unsupported("unsupported_method", f"{self.dict_type.__name__}.{name}")
        new_items = dict(items)
        result = mutate(tx, new_items, *args, **kwargs)
        store_contents(tx, self, new_items)
        return ConstantVariable(None) if result is None else result

    def _missing(self, tx: InstructionTranslatorBase, key: VariableTracker) -> VariableTracker:
        """``d[key]`` for an absent key: a defaultdict makes and stores a default."""
        factory = self.default_factory
        if factory is None or _is_none(factory):
            from bytegraph.translate.ops.exceptions import raise_builtin

            raise_builtin(tx, KeyError, key)
        value = factory.call_function(tx, [], {})
        self.call_method(tx, "__setitem__", [key, value], {})
        return value

    def replay_contents(self, codegen: PyCodegen, items: dict[Any, VariableTracker]) -> None:
        """``source.clear(); source.update({...})``"""
        for method, arg in (("clear", None), ("update", items)):
            codegen(self)
            codegen.append(assemble.load_method(method))
            if arg is not None:
                self._build_plain(codegen, arg)
            codegen.append(*codegen.call_instrs(0 if arg is None else 1), bc.Instr("POP_TOP"))

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        items = codegen.side_effects.contents(self, self.items)
        if self.dict_type is dict:
            self._build_plain(codegen, items)
        elif self.dict_type is OrderedDict:
            codegen.call_const(OrderedDict, [DictVariable(items)])
        elif self.dict_type is defaultdict:
            factory = self.default_factory or ConstantVariable(None)
            codegen.call_const(defaultdict, [factory, DictVariable(items)])
        else:
            raise Unsupported("unrebuildable_value", f"rebuilding a {self.dict_type.__name__}")

    @staticmethod
    def _build_plain(codegen: PyCodegen, items: dict[Any, VariableTracker]) -> None:
        for key, value in items.items():
            load_key(codegen, key)
            codegen(value)
        codegen.append(bc.Instr("BUILD_MAP", len(items)))


# What reads a dict without hashing anything: allowed on a dict whose keys hash in user code.
_HASHING_NOTHING = frozenset({"__len__", "keys", "values", "items"})


def key_of(tx: InstructionTranslatorBase, vt: VariableTracker) -> Any:
    """How the table holds ``vt``: a constant, or an object's key."""
    return table_key(tx, vt, lambda: dict_key(vt.as_python_constant()))


def _refuse_object_keys(items: dict) -> None:
    if has_object_keys(items):
        raise Unsupported("not_a_constant", "a dict whose keys are objects is no constant")


def dict_key(key: Any) -> Any:
    """``key`` if it can key a dict at trace time (hashable), else Unsupported."""
    try:
        hash(key)
    except TypeError:
        raise Unsupported("operation_raises", f"unhashable dict key {key!r}") from None
    return key


def _dict_get(tx, d, items, key: VariableTracker, default: VariableTracker | None = None):
    return items.get(key_of(tx, key), default if default is not None else ConstantVariable(None))


_DICT_READS: dict[str, Any] = {
    "__getitem__": lambda tx, d, items, key: items[key_of(tx, key)],
    "get": _dict_get,
    "__contains__": lambda tx, d, items, k: ConstantVariable(key_of(tx, k) in items),
    "__len__": lambda tx, d, items: ConstantVariable(len(items)),
    "keys": lambda tx, d, items: DictViewVariable(d, "keys"),
    "values": lambda tx, d, items: DictViewVariable(d, "values"),
    "items": lambda tx, d, items: DictViewVariable(d, "items"),
    "copy": lambda tx, d, items: d.new_like(dict(items)),
}


def _dict_pop(tx, items: dict, key: VariableTracker, default: VariableTracker | None = None):
    k = key_of(tx, key)
    if k in items:
        return items.pop(k)
    if default is None:
        _raise_missing(tx, "dict.pop", dict.pop, key, k)
    return default


def _raise_missing(tx, what: str, method: Any, key: VariableTracker, k: Any) -> None:
    """The KeyError eager raises for a missing key (an object's: ``KeyError(obj)``)."""
    from bytegraph.translate.ops.exceptions import raise_as_eager, raise_builtin

    if isinstance(k, ObjectKey):
        raise_builtin(tx, KeyError, key)
    raise_as_eager(tx, what, method, {}, k)


def _dict_update(tx, items: dict, other: VariableTracker | None = None, **kwargs) -> None:
    if other is not None:
        if _has_keys(other):
            items.update(mapping_items(tx, other))
        else:
            for pair in other.unpack_sequence(tx):
                kv = pair.unpack_sequence(tx)
                if len(kv) != 2:
                    raise Unsupported("operation_raises", "dict update element is not a pair")
                items[key_of(tx, kv[0])] = kv[1]
    items.update(kwargs)


def _has_keys(value: VariableTracker) -> bool:
    """Whether ``dict.update`` takes ``value`` as a mapping (it has ``keys``), not as pairs."""
    if isinstance(value, DictVariable):
        return True
    try:
        return hasattr(value.python_type(), "keys")
    except NotImplementedError:
        return False


def mapping_items(
    tx: InstructionTranslatorBase, mapping: VariableTracker
) -> dict[Any, VariableTracker]:
    """What CPython's dict merge (``dict.update(m)``, ``{**m}``, ``f(**m)``) reads of a
    mapping: a dict's own storage, also that of a dict subclass that keeps dict's
    ``__iter__`` (a Counter); for any other mapping (an OrderedDict subclass such as
    transformers' ``ModelOutput``, a user mapping) ``m.keys()`` and then ``m[key]`` per
    key, through the class's own methods."""
    from bytegraph.variables.builtin import call
    from bytegraph.variables.user_dicts import UserDictObjectVariable

    if isinstance(mapping, DictVariable):
        refuse_user_hashing(mapping.items_now(tx))  # what it merges into hashes
        return mapping.items_now(tx)
    if isinstance(mapping, UserDictObjectVariable) and mapping.cls.__iter__ is dict.__iter__:
        return mapping.mapping.items_now(tx)
    if not _has_keys(mapping):
        raise Unsupported(
            "call_raises_type_error", f"{mapping} is not a mapping (TypeError in eager)"
        )
    keys = mapping.var_getattr(tx, "keys").call_function(tx, [], {})
    return {
        key_of(tx, key): call(tx, operator.getitem, mapping, key)
        for key in keys.unpack_sequence(tx)
    }


def _dict_setdefault(tx, items: dict, key: VariableTracker, default: VariableTracker | None = None):
    default = default if default is not None else ConstantVariable(None)
    return items.setdefault(key_of(tx, key), default)


def _dict_popitem(tx, items: dict, last: VariableTracker | None = None) -> VariableTracker:
    if not items:
        raise Unsupported("operation_raises", "popitem of an empty dict (raises in eager)")
    if last is not None and not last.as_python_constant():
        k = next(iter(items))
        v = items.pop(k)
    else:
        k, v = items.popitem()
    return TupleVariable((key_variable(k), v))


def _dict_delitem(tx, items: dict, key: VariableTracker) -> None:
    k = key_of(tx, key)
    if k not in items:
        _raise_missing(tx, "del", dict.__delitem__, key, k)
    del items[k]


def _dict_move_to_end(tx, items: dict, key: VariableTracker,
                      last: VariableTracker | None = None) -> None:
    k = key_of(tx, key)
    if k not in items:
        raise Unsupported("operation_raises", f"move_to_end of missing key {k!r} (raises)")
    value = items.pop(k)
    if last is None or last.as_python_constant():
        items[k] = value
    else:
        rest = dict(items)
        items.clear()
        items[k] = value
        items.update(rest)


_DICT_MUTATIONS: dict[str, Any] = {
    "__setitem__": lambda tx, items, k, v: items.__setitem__(key_of(tx, k), v),
    "__delitem__": _dict_delitem,
    "pop": _dict_pop,
    "popitem": _dict_popitem,
    "update": _dict_update,
    "__ior__": _dict_update,
    "setdefault": _dict_setdefault,
    "clear": lambda tx, items: items.clear(),
    "move_to_end": _dict_move_to_end,
}
_ORDERED_ONLY = frozenset({"move_to_end"})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DictViewVariable(VariableTracker):
    """``d.keys()``, ``d.values()``, ``d.items()``: live views of the dict's contents."""

    base: DictVariable
    kind: str

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        items = self.base.items_now(tx)
        if self.kind == "keys":
            return [key_variable(k) for k in items]
        if self.kind == "values":
            return list(items.values())
        return [TupleVariable((key_variable(k), v)) for k, v in items.items()]

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.base.items_now(tx))

    def python_constant_now(self, tx: InstructionTranslatorBase) -> Any:
        return getattr(self.base.python_constant_now(tx), self.kind)()

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        return method_of(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__" and not args:
            return ConstantVariable(len(self.base.items_now(tx)))
        if name == "__contains__" and len(args) == 1:
            if self.kind == "keys":
                items = self.base.items_now(tx)
                refuse_user_hashing(items)
                return ConstantVariable(key_of(tx, args[0]) in items)
            found = any(equal_now(tx, v, args[0]) for v in self.unpack_sequence(tx))
            return ConstantVariable(found)
        raise Unsupported("unsupported_method", f"{self.python_type().__name__}.{name}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``base.kind()``: a view of the rebuilt (or original) dict."""
        codegen(self.base)
        codegen.append(assemble.load_method(self.kind), *codegen.call_instrs(0))
