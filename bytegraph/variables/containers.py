"""Sequences (tuples, lists, torch.Size) and what every container shares.

Mappings are in ``dicts.py``, sets in ``sets.py``, iterators in
``iterators.py``. Items are VTs. Tuples are immutable values. Lists, dicts,
sets and iterators are handles: their current contents live in SideEffects (read with
``items_now(tx)``), so a mutation never rewrites a VT. A container that came
from the frame keeps its source, so returning it hands back the very same
object, and its mutations are replayed onto it after the graph.

``python_constant(tx, vt)`` is the value of a VT made of constants, read
with every container's *current* contents; code without a translator at
hand calls ``vt.as_python_constant()``, which refuses a container once it
has been mutated (its VT only knows the initial items).
"""

from __future__ import annotations

import dataclasses
import operator
import weakref
from collections import OrderedDict, defaultdict
from typing import TYPE_CHECKING, Any

import bytecode as bc
import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import BoundMethodVariable, ValueMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.method_arguments import check_method_arguments

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase

NEW_VALUE = ValueMutationNew(1)
DICT_TYPES = (dict, OrderedDict, defaultdict)

# Containers whose contents changed in some trace: their initial items are stale.
_MUTATED: weakref.WeakSet[VariableTracker] = weakref.WeakSet()


def store_contents(tx: InstructionTranslatorBase, vt: VariableTracker, contents: Any) -> None:
    """Record ``vt``'s new contents (every container mutation goes through here)."""
    tx.output.side_effects.set_contents(vt, contents)
    _MUTATED.add(vt)


def _refuse_if_mutated(vt: VariableTracker) -> None:
    if vt in _MUTATED:
        raise Unsupported("unrebuildable_value", f"{vt} was mutated: read it with the translator")


def _is_none(vt: VariableTracker) -> bool:
    return vt.is_python_constant() and vt.as_python_constant() is None


def method_of(container: VariableTracker, name: str) -> VariableTracker:
    if not callable(getattr(container.python_type(), name, None)):
        raise Unsupported(
            "unknown_attribute", f"attribute {name!r} of a {container.python_type().__name__}"
        )
    return BoundMethodVariable(container, name)


def python_constant(tx: InstructionTranslatorBase, vt: VariableTracker) -> Any:
    """The Python value of a VT made of constants, containers read as they are now."""
    return vt.python_constant_now(tx)


def is_python_constant_now(tx: InstructionTranslatorBase, vt: VariableTracker) -> bool:
    try:
        python_constant(tx, vt)
    except Unsupported:
        return False
    return True


def equal_now(tx: InstructionTranslatorBase, a: VariableTracker, b: VariableTracker) -> bool:
    """``a == b`` as ``in``, ``index`` and sequence comparison see it (identity first).

    Raises Unsupported when the answer needs a value unknown at trace time.
    """
    from bytegraph.variables.dicts import DictVariable
    from bytegraph.variables.tensor import TensorVariable

    if a is b:
        return True
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        raise Unsupported("data_dependent_branch", "comparing a tensor by value")
    sequences = (BaseSequenceVariable, DictVariable)
    if isinstance(a, sequences) or isinstance(b, sequences):
        from bytegraph.variables.builtin import compare

        result = compare(tx, operator.eq, a, b)
        if result is not None:
            return result.truth(tx)
    if is_python_constant_now(tx, a) and is_python_constant_now(tx, b):
        return bool(python_constant(tx, a) == python_constant(tx, b))
    raise Unsupported("unmodelled_value", f"comparing {a} and {b}")


def same_value(tx: InstructionTranslatorBase, a: VariableTracker, b: VariableTracker) -> bool:
    """Kept for callers of the old name: see ``equal_now``."""
    return equal_now(tx, a, b)


def _index(vt: VariableTracker, what: str = "index") -> int:
    value = vt.as_python_constant()
    if not isinstance(value, int):
        raise Unsupported("not_a_constant", f"{what} {value!r} is not an int")
    return value


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BaseSequenceVariable(VariableTracker):
    items: tuple[VariableTracker, ...]

    def items_now(self, tx: InstructionTranslatorBase) -> tuple[VariableTracker, ...]:
        return self.items

    def as_python_constant(self) -> Any:
        _refuse_if_mutated(self)
        return self.rebuild([item.as_python_constant() for item in self.items])

    def python_constant_now(self, tx: InstructionTranslatorBase) -> Any:
        return self.rebuild([item.python_constant_now(tx) for item in self.items_now(tx)])

    def rebuild(self, values: list[Any]) -> Any:
        """A real value of this VT's type holding ``values``."""
        return self.python_type()(values)

    def unpack_sequence(self, tx: InstructionTranslatorBase) -> list[VariableTracker]:
        return list(self.items_now(tx))

    def truth(self, tx: InstructionTranslatorBase) -> bool:
        return bool(self.items_now(tx))

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        return method_of(self, name)

    def getitem(self, tx: InstructionTranslatorBase, index: VariableTracker) -> VariableTracker:
        items = self.items_now(tx)
        key = index.as_python_constant()
        try:
            if isinstance(key, slice):
                return self.with_items(tuple(items[key]))
            return items[_index(index)]
        except (IndexError, TypeError, ValueError) as e:  # a float bound, a zero step...
            kind = self.python_type()
            if isinstance(e, IndexError) and type(key) is int and kind in (list, tuple):
                from bytegraph.translate.ops.exceptions import raise_builtin

                message = f"{kind.__name__} index out of range"
                raise_builtin(tx, IndexError, ConstantVariable(message))
            raise Unsupported("operation_raises", f"item {key!r} raises in eager: {e}") from None

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
        check_method_arguments(self.python_type(), name, args, kwargs)
        items = self.items_now(tx)
        if name == "index" and 1 <= len(args) <= 3 and not kwargs:
            bounds = [_index(a) for a in args[1:]]  # index(value, start=0, stop=len)
            window = slice(*bounds) if len(bounds) == 2 else slice(*bounds[:1], None)
            for i in range(len(items))[window]:
                if equal_now(tx, items[i], args[0]):
                    return ConstantVariable(i)
            kind = self.python_type()
            if kind not in (list, tuple):
                raise Unsupported("operation_raises", "index: value not present (raises in eager)")
            from bytegraph.translate.ops.exceptions import raise_as_eager

            # An empty one raises the same ValueError: the message names only the value.
            raise_as_eager(tx, f"{kind.__name__}.index", kind.index, kind(),
                           python_constant(tx, args[0]))
        if name == "count" and len(args) == 1:
            return ConstantVariable(sum(equal_now(tx, i, args[0]) for i in items))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "__len__" and not args:
            return ConstantVariable(len(items))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(any(equal_now(tx, i, args[0]) for i in items))
        raise Unsupported("unsupported_method", f"{self.python_type().__name__}.{name}")

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

    def rebuild(self, values: list[Any]) -> Any:
        if self.tuple_type is tuple:
            return tuple(values)
        if not issubclass(self.tuple_type, tuple):  # a dict view holding a snapshot
            raise Unsupported("not_a_constant", f"{self.tuple_type.__name__} as a constant")
        if hasattr(self.tuple_type, "_fields"):
            return self.tuple_type(*values)
        return self.tuple_type(values)

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        return TupleVariable(items)

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        fields = getattr(self.tuple_type, "_fields", None) or _structseq_fields(self.tuple_type)
        if name in fields:
            return self.items[fields.index(name)]
        if is_namedtuple_class(self.tuple_type):
            from bytegraph.variables.namedtuples import namedtuple_attribute

            return namedtuple_attribute(tx, self, name)
        return method_of(self, name)

    def call_method(self, tx, name, args, kwargs):
        if is_namedtuple_class(self.tuple_type):
            from bytegraph.variables.namedtuples import namedtuple_method

            result = namedtuple_method(tx, self, name, args, kwargs)
            if result is not None:
                return result
        return super().call_method(tx, name, args, kwargs)

    def _build(self, codegen: PyCodegen, items: tuple[VariableTracker, ...]) -> None:
        if self.tuple_type is tuple:
            for item in items:
                codegen(item)
            codegen.append(bc.Instr("BUILD_TUPLE", len(items)))
            return
        if not issubclass(self.tuple_type, tuple):
            raise Unsupported("unrebuildable_value", f"rebuilding a {self.tuple_type.__name__}")
        if hasattr(self.tuple_type, "_fields"):  # a named tuple takes its fields positionally
            codegen.call_const(self.tuple_type, list(items))
            return
        codegen.call_const(self.tuple_type, [TupleVariable(items)])


def is_namedtuple_class(value: Any) -> bool:
    """A class made by ``collections.namedtuple`` or ``typing.NamedTuple`` (or a subclass
    adding methods), whose instances are built by the generated ``__new__``."""
    if not isinstance(value, type) or not issubclass(value, tuple) or value is tuple:
        return False
    maker = next(c for c in value.__mro__ if "__new__" in vars(c))
    made = "_make" in vars(maker) and "_fields" in vars(maker)
    return made and value.__init__ is object.__init__


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

    def rebuild(self, values: list[Any]) -> Any:
        return list(values)

    def with_items(self, items: tuple[VariableTracker, ...]) -> BaseSequenceVariable:
        return ListVariable(items, mutation_type=NEW_VALUE)

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        check_method_arguments(list, name, args, kwargs)
        if name in ("extend", "__iadd__") and _extends_lazily(args[0]):
            self._extend_lazily(tx, args[0])
            return ConstantVariable(None)
        mutate = _LIST_MUTATIONS.get(name)
        if mutate is None:
            if name == "copy" and not args:
                return self.with_items(self.items_now(tx))
            return super().call_method(tx, name, args, kwargs)
        items = list(self.items_now(tx))
        result = mutate(tx, items, *args, **kwargs)
        store_contents(tx, self, tuple(items))
        return ConstantVariable(None) if result is None else result

    def _extend_lazily(self, tx: InstructionTranslatorBase, iterable: VariableTracker) -> None:
        """``list.extend(iterator)``: CPython appends each item as it is produced, so the
        iterator (a generator reading this list, say) sees the items appended so far."""
        from bytegraph.variables.iterators import iterate

        iterator = iterate(tx, iterable)
        for _ in range(_MAX_LAZY_EXTEND):
            item = iterator.next_item(tx)
            if item is None:
                return
            store_contents(tx, self, (*self.items_now(tx), item))
        raise Unsupported("size_limit", f"extending a list by over {_MAX_LAZY_EXTEND} items")

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


# An iterator over the list it extends never ends (MemoryError in eager): give up.
_MAX_LAZY_EXTEND = 10_000


def _extends_lazily(iterable: VariableTracker) -> bool:
    """CPython's ``list.extend`` snapshots a list, a tuple or the list itself, and
    iterates anything else item by item (only an iterator can observe the difference)."""
    from bytegraph.variables.iterators import IteratorVariable

    return isinstance(iterable, IteratorVariable)


def _list_pop(tx, items: list, index: VariableTracker | None = None) -> VariableTracker:
    from bytegraph.translate.ops.exceptions import raise_as_eager

    position = -1 if index is None else _index(index)
    if not -len(items) <= position < len(items):  # a list of as many Nones fails the same way
        raise_as_eager(tx, "list.pop", list.pop, [None] * len(items), position)
    return items.pop(position)


def _list_remove(tx, items: list, value: VariableTracker) -> None:
    for i, item in enumerate(items):
        if equal_now(tx, item, value):
            del items[i]
            return
    from bytegraph.translate.ops.exceptions import raise_as_eager

    raise_as_eager(tx, "list.remove", list.remove, [], None)  # the message names no value


def sort_items(
    tx: InstructionTranslatorBase,
    items: list[VariableTracker],
    key: VariableTracker | None,
    reverse: VariableTracker | None,
) -> list[VariableTracker]:
    """``sorted(items, key=key, reverse=reverse)``, comparing as CPython does (``<``).

    Keys that are constants sort directly; others (tuples holding tensors, say)
    compare item by item, so ``sorted(d.items())`` with distinct keys never
    looks at the values.
    """
    no_key = key is None or _is_none(key)
    keys = items if no_key else [key.call_function(tx, [i], {}) for i in items]
    flip = bool(reverse.as_python_constant()) if reverse is not None else False
    if all(is_python_constant_now(tx, k) for k in keys):
        values: list[Any] = [python_constant(tx, k) for k in keys]
    else:
        values = [TraceTimeKey(tx, k) for k in keys]
    try:
        order = sorted(range(len(items)), key=values.__getitem__, reverse=flip)
    except TypeError as e:
        raise Unsupported("operation_raises", f"sorting raised TypeError: {e}") from None
    return [items[i] for i in order]


class TraceTimeKey:
    """A sort key comparing two VTs with ``<`` at trace time (Unsupported if unknown)."""

    __slots__ = ("tx", "vt")

    def __init__(self, tx: InstructionTranslatorBase, vt: VariableTracker) -> None:
        self.tx, self.vt = tx, vt

    def __lt__(self, other: TraceTimeKey) -> bool:
        from bytegraph.variables.builtin import call

        return call(self.tx, operator.lt, self.vt, other.vt).truth(self.tx)

    def __gt__(self, other: TraceTimeKey) -> bool:
        from bytegraph.variables.builtin import call

        return call(self.tx, operator.gt, self.vt, other.vt).truth(self.tx)


def _list_sort(tx, items: list, key: VariableTracker | None = None,
               reverse: VariableTracker | None = None) -> None:
    items[:] = sort_items(tx, items, key, reverse)


def _list_setitem(tx, items: list, index: VariableTracker, value: VariableTracker) -> None:
    key = index.as_python_constant()
    try:
        if isinstance(key, slice):
            items[key] = value.unpack_sequence(tx)
        else:
            items[_index(index)] = value
    except (IndexError, ValueError) as e:
        raise Unsupported("operation_raises", f"list assignment raises {e}") from None


def _list_delitem(tx, items: list, index: VariableTracker) -> None:
    key = index.as_python_constant()
    position = key if isinstance(key, slice) else _index(index)
    if not isinstance(position, slice) and not -len(items) <= position < len(items):
        from bytegraph.translate.ops.exceptions import raise_as_eager

        raise_as_eager(tx, "del", list.__delitem__, [None] * len(items), position)
    del items[position]


def _list_imul(tx, items: list, count: VariableTracker) -> None:
    items *= _index(count, "repeat count")


def _list_insert(tx, items: list, index: VariableTracker, value: VariableTracker) -> None:
    items.insert(_index(index), value)


_LIST_MUTATIONS: dict[str, Any] = {
    "append": lambda tx, items, v: items.append(v),
    "extend": lambda tx, items, v: items.extend(v.unpack_sequence(tx)),
    "__iadd__": lambda tx, items, v: items.extend(v.unpack_sequence(tx)),
    "__imul__": _list_imul,
    "insert": _list_insert,
    "pop": _list_pop,
    "remove": _list_remove,
    "clear": lambda tx, items: items.clear(),
    "reverse": lambda tx, items: items.reverse(),
    "sort": _list_sort,
    "__setitem__": _list_setitem,
    "__delitem__": _list_delitem,
}


# DictVariable and the iterators live in dicts.py and iterators.py (which import
# this module); importing them from here still works, resolved on first use.
_MOVED = {
    "DictVariable": "dicts", "DictViewVariable": "dicts",
    "IteratorVariable": "iterators", "ListIteratorVariable": "iterators",
    "MapIteratorVariable": "iterators", "FilterIteratorVariable": "iterators",
    "ZipIteratorVariable": "iterators", "EnumerateIteratorVariable": "iterators",
    "iterate": "iterators",
}


def __getattr__(name: str) -> Any:
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"bytegraph.variables.{module}"), name)
