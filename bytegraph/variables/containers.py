"""Sequences, mappings, sets and iterators.

Items are VTs. Tuples are immutable values. Lists, dicts, sets and
iterators are handles: their current contents live in SideEffects (read
with ``items_now(tx)``), so a mutation never rewrites a VT. A container that
came from the frame keeps its source, so returning it hands back the very
same object, and its mutations are replayed onto it after the graph.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict as _OrderedDict
from typing import TYPE_CHECKING, Any

import bytecode as bc
import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import BoundMethodVariable, ValueMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase

NEW_VALUE = ValueMutationNew(1)


def method_of(container: VariableTracker, name: str) -> VariableTracker:
    if not callable(getattr(container.python_type(), name, None)):
        raise Unsupported(
            "unsupported_value", f"attribute {name!r} of a {container.python_type().__name__}"
        )
    return BoundMethodVariable(container, name)


def same_value(tx: InstructionTranslatorBase, a: VariableTracker, b: VariableTracker) -> bool:
    """``a == b`` for list.remove/index and ``in``: identity, else constant equality."""
    if a is b:
        return True
    if a.is_python_constant() and b.is_python_constant():
        return bool(a.as_python_constant() == b.as_python_constant())
    from bytegraph.variables.tensor import TensorVariable

    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        raise Unsupported("data_dependent", "comparing a tensor by value in a container")
    raise Unsupported("unsupported_value", f"comparing {a} and {b}")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BaseSequenceVariable(VariableTracker):
    items: tuple[VariableTracker, ...]

    def items_now(self, tx: InstructionTranslatorBase) -> tuple[VariableTracker, ...]:
        return self.items

    def as_python_constant(self) -> Any:
        return self.python_type()(item.as_python_constant() for item in self.items)

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        return list(self.items_now(tx))

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.items_now(tx))

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        return method_of(self, name)

    def getitem(self, tx: InstructionTranslatorBase, index: VariableTracker) -> VariableTracker:
        items = self.items_now(tx)
        key = index.as_python_constant()
        if isinstance(key, slice):
            return self.with_items(tuple(items[key]))
        if not isinstance(key, int):
            raise Unsupported("unsupported_value", f"{self.python_type().__name__} index {key!r}")
        try:
            return items[key]
        except IndexError:
            raise Unsupported("unsupported_value", "index out of range (raises in eager)") from None

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        """A new sequence of the same kind, created during tracing."""
        return dataclasses.replace(self, items=items, source=None, mutation_type=None)

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        items = self.items_now(tx)
        if name == "index" and len(args) == 1:
            for i, item in enumerate(items):
                if same_value(tx, item, args[0]):
                    return ConstantVariable(i)
            raise Unsupported("unsupported_value", "list.index: value not present (raises)")
        if name == "count" and len(args) == 1:
            return ConstantVariable(sum(same_value(tx, i, args[0]) for i in items))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__" and not args:
            return ConstantVariable(len(items))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(any(same_value(tx, i, args[0]) for i in items))
        raise Unsupported("unsupported_call", f"{self.python_type().__name__}.{name}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        self._build(codegen, codegen.side_effects.contents(self, self.items))

    def _build(self, codegen: PyCodegen, items: tuple[VariableTracker, ...]) -> None:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TupleVariable(BaseSequenceVariable):
    """A tuple, or a tuple subclass such as a named tuple or torch.return_types."""

    tuple_type: type = tuple

    def python_type(self) -> type:
        return self.tuple_type

    def as_python_constant(self) -> Any:
        values = tuple(item.as_python_constant() for item in self.items)
        if self.tuple_type is tuple:
            return values
        if not issubclass(self.tuple_type, tuple):
            raise Unsupported("unsupported_value", f"{self.tuple_type.__name__} as a constant")
        if hasattr(self.tuple_type, "_fields"):
            return self.tuple_type(*values)
        return self.tuple_type(values)

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        return TupleVariable(items)

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        fields = getattr(self.tuple_type, "_fields", None) or _structseq_fields(self.tuple_type)
        if name in fields:
            return self.items[fields.index(name)]
        return method_of(self, name)

    def _build(self, codegen: PyCodegen, items: tuple[VariableTracker, ...]) -> None:
        if self.tuple_type is tuple:
            for item in items:
                codegen(item)
            codegen.append(bc.Instr("BUILD_TUPLE", len(items)))
            return
        if not issubclass(self.tuple_type, tuple):
            raise Unsupported("unsupported_value", f"rebuilding a {self.tuple_type.__name__}")
        if hasattr(self.tuple_type, "_fields"):  # a named tuple takes its fields positionally
            codegen.call_const(self.tuple_type, list(items))
            return
        codegen.call_const(self.tuple_type, [TupleVariable(items)])


def _structseq_fields(tuple_type: type) -> tuple[str, ...]:
    count = getattr(tuple_type, "n_fields", 0)
    member = type(torch.return_types.max.values)
    names = [n for n in vars(tuple_type) if isinstance(vars(tuple_type)[n], member)]
    return tuple(names[:count])


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SizeVariable(TupleVariable):
    """``torch.Size``: a tuple of ints that folds at trace time."""

    tuple_type: type = torch.Size

    @staticmethod
    def of(size: torch.Size) -> SizeVariable:
        return SizeVariable(tuple(ConstantVariable(int(d)) for d in size))

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        return SizeVariable(items)

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if name == "numel" and not args:
            return ConstantVariable(self.as_python_constant().numel())
        return super().call_method(tx, name, args, kwargs)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ListVariable(BaseSequenceVariable):
    def python_type(self) -> type:
        return list

    def items_now(self, tx: InstructionTranslatorBase) -> tuple[VariableTracker, ...]:
        return tx.output.side_effects.contents(self, self.items)

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        return ListVariable(items, mutation_type=NEW_VALUE)

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        mutate = _LIST_MUTATIONS.get(name)
        if mutate is None:
            if name == "copy" and not args:
                return self.with_items(self.items_now(tx))
            return super().call_method(tx, name, args, kwargs)
        items = list(self.items_now(tx))
        result = mutate(tx, items, *args, **kwargs)
        tx.output.side_effects.set_contents(self, tuple(items))
        return ConstantVariable(None) if result is None else result

    def replay_contents(self, codegen: PyCodegen, items: tuple[VariableTracker, ...]) -> None:
        """``source[:] = [items]``"""
        self._build(codegen, items)
        codegen(self)
        codegen.load_const(slice(None))
        codegen.append(bc.Instr("STORE_SUBSCR"))

    def _build(self, codegen: PyCodegen, items: tuple[VariableTracker, ...]) -> None:
        for item in items:
            codegen(item)
        codegen.append(bc.Instr("BUILD_LIST", len(items)))


def _int(vt: VariableTracker) -> int:
    value = vt.as_python_constant()
    if not isinstance(value, int):
        raise Unsupported("unsupported_value", f"list index {value!r}")
    return value


def _list_pop(tx, items: list, index: VariableTracker | None = None) -> VariableTracker:
    if not items:
        raise Unsupported("unsupported_value", "pop from an empty list (raises in eager)")
    return items.pop(-1 if index is None else _int(index))


def _list_remove(tx, items: list, value: VariableTracker) -> None:
    for i, item in enumerate(items):
        if same_value(tx, item, value):
            del items[i]
            return
    raise Unsupported("unsupported_value", "list.remove: value not present (raises in eager)")


def _list_sort(tx, items: list, key: VariableTracker | None = None,
               reverse: VariableTracker | None = None) -> None:
    if key is not None or not all(i.is_python_constant() for i in items):
        raise Unsupported("unsupported_call", "list.sort with a key or non-constant items")
    flip = bool(reverse.as_python_constant()) if reverse is not None else False
    items.sort(key=lambda vt: vt.as_python_constant(), reverse=flip)


def _list_setitem(tx, items: list, index: VariableTracker, value: VariableTracker) -> None:
    key = index.as_python_constant()
    if isinstance(key, slice):
        items[key] = value.unpack_sequence(tx)
    else:
        items[_int(index)] = value


def _list_delitem(tx, items: list, index: VariableTracker) -> None:
    key = index.as_python_constant()
    del items[key if isinstance(key, slice) else _int(index)]


_LIST_MUTATIONS: dict[str, Any] = {
    "append": lambda tx, items, v: items.append(v),
    "extend": lambda tx, items, v: items.extend(v.unpack_sequence(tx)),
    "__iadd__": lambda tx, items, v: items.extend(v.unpack_sequence(tx)),
    "insert": lambda tx, items, i, v: items.insert(_int(i), v),
    "pop": _list_pop,
    "remove": _list_remove,
    "clear": lambda tx, items: items.clear(),
    "reverse": lambda tx, items: items.reverse(),
    "sort": _list_sort,
    "__setitem__": _list_setitem,
    "__delitem__": _list_delitem,
}


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DictVariable(VariableTracker):
    """A dict (or OrderedDict/defaultdict) with constant keys, in insertion order."""

    items: dict[Any, VariableTracker]
    dict_type: type = dict

    def python_type(self) -> type:
        return self.dict_type

    def items_now(self, tx: InstructionTranslatorBase) -> dict[Any, VariableTracker]:
        return tx.output.side_effects.contents(self, self.items)

    def as_python_constant(self) -> Any:
        return self.dict_type((k, v.as_python_constant()) for k, v in self.items.items())

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.items_now(tx))

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        return method_of(self, name)

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.items_now(tx)]

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
        read = _DICT_READS.get(name)
        if read is not None:
            return read(tx, self, items, *args, **kwargs)
        mutate = _DICT_MUTATIONS.get(name)
        if mutate is None:
            raise Unsupported("unsupported_call", f"{self.dict_type.__name__}.{name}")
        new_items = dict(items)
        result = mutate(tx, new_items, *args, **kwargs)
        tx.output.side_effects.set_contents(self, new_items)
        return ConstantVariable(None) if result is None else result

    def replay_contents(self, codegen: PyCodegen, items: dict[Any, VariableTracker]) -> None:
        """``source.clear(); source.update({...})``"""
        for method, arg in (("clear", None), ("update", items)):
            codegen(self)
            codegen.append(bc.Instr("LOAD_METHOD", method))
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
            return
        if self.dict_type is not _OrderedDict:
            raise Unsupported("unsupported_value", f"rebuilding a {self.dict_type.__name__}")
        codegen.call_const(self.dict_type, [DictVariable(items)])

    @staticmethod
    def _build_plain(codegen: PyCodegen, items: dict[Any, VariableTracker]) -> None:
        for key, value in items.items():
            codegen.load_const(key)
            codegen(value)
        codegen.append(bc.Instr("BUILD_MAP", len(items)))


def _key(vt: VariableTracker) -> Any:
    key = vt.as_python_constant()
    try:
        hash(key)
    except TypeError:
        raise Unsupported("unsupported_value", f"unhashable dict key {key!r}") from None
    return key


def _dict_getitem(tx, d, items, key: VariableTracker) -> VariableTracker:
    k = _key(key)
    if k in items:
        return items[k]
    raise Unsupported("unsupported_value", f"missing dict key {k!r} (raises in eager)")


def _dict_get(tx, d, items, key: VariableTracker, default: VariableTracker | None = None):
    return items.get(_key(key), default if default is not None else ConstantVariable(None))


def _view(view_type: type, values: list[VariableTracker]) -> VariableTracker:
    return TupleVariable(tuple(values), tuple_type=view_type)


_DICT_READS: dict[str, Any] = {
    "__getitem__": _dict_getitem,
    "get": _dict_get,
    "__contains__": lambda tx, d, items, k: ConstantVariable(_key(k) in items),
    "__len__": lambda tx, d, items: ConstantVariable(len(items)),
    "keys": lambda tx, d, items: _view(type({}.keys()), [ConstantVariable(k) for k in items]),
    "values": lambda tx, d, items: _view(type({}.values()), list(items.values())),
    "items": lambda tx, d, items: _view(
        type({}.items()), [TupleVariable((ConstantVariable(k), v)) for k, v in items.items()]
    ),
    "copy": lambda tx, d, items: DictVariable(dict(items), mutation_type=NEW_VALUE),
}


def _dict_pop(tx, items: dict, key: VariableTracker, default: VariableTracker | None = None):
    k = _key(key)
    if k in items:
        return items.pop(k)
    if default is None:
        raise Unsupported("unsupported_value", f"dict.pop of missing key {k!r} (raises in eager)")
    return default


def _dict_update(tx, items: dict, other: VariableTracker | None = None, **kwargs) -> None:
    if other is not None:
        if isinstance(other, DictVariable):
            items.update(other.items_now(tx))
        else:
            for pair in other.unpack_sequence(tx):
                k, v = pair.unpack_sequence(tx)
                items[_key(k)] = v
    items.update(kwargs)


def _dict_setdefault(tx, items: dict, key: VariableTracker, default: VariableTracker | None = None):
    return items.setdefault(_key(key), default if default is not None else ConstantVariable(None))


def _dict_popitem(tx, items: dict) -> VariableTracker:
    if not items:
        raise Unsupported("unsupported_value", "popitem of an empty dict (raises in eager)")
    k, v = items.popitem()
    return TupleVariable((ConstantVariable(k), v))


def _dict_delitem(tx, items: dict, key: VariableTracker) -> None:
    k = _key(key)
    if k not in items:
        raise Unsupported("unsupported_value", f"del of missing key {k!r} (raises in eager)")
    del items[k]


_DICT_MUTATIONS: dict[str, Any] = {
    "__setitem__": lambda tx, items, k, v: items.__setitem__(_key(k), v),
    "__delitem__": _dict_delitem,
    "pop": _dict_pop,
    "popitem": _dict_popitem,
    "update": _dict_update,
    "setdefault": _dict_setdefault,
    "clear": lambda tx, items: items.clear(),
}


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class IteratorVariable(VariableTracker):
    """An iterator over known items; its position lives in SideEffects."""

    items: tuple[VariableTracker, ...]

    def python_type(self) -> type:
        return type(iter(()))

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        """The next item, or None when exhausted (StopIteration)."""
        remaining = tx.output.side_effects.contents(self, self.items)
        if not remaining:
            return None
        tx.output.side_effects.set_contents(self, remaining[1:])
        return remaining[0]

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        remaining = tx.output.side_effects.contents(self, self.items)
        tx.output.side_effects.set_contents(self, ())
        return list(remaining)

    def reconstruct(self, codegen: PyCodegen) -> None:
        """``iter([remaining items])``"""
        remaining = codegen.side_effects.contents(self, self.items)
        codegen.call_const(iter, [ListVariable(remaining)])
