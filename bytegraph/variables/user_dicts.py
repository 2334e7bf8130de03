"""Instances of user subclasses of dict and OrderedDict: a mapping with attributes.

Hugging Face's ``ModelOutput`` is the pattern: an OrderedDict subclass that
is also a dataclass, whose ``__setattr__``/``__setitem__`` keep fields and
items in step, whose ``__getitem__`` takes a key or an index. One
``UserDictObjectVariable`` models both halves of such an object:

* its attributes as any user object has them (``UserDefinedObjectVariable``:
  pending stores over the real ``__dict__``);
* its mapping contents as a ``DictVariable`` (``mapping``) of the builtin
  base class: the methods the subclass inherits from ``dict``/``OrderedDict``
  (``super().__setitem__``, ``keys``, ``items``, ``get``, ``len``, iteration)
  act on it, and the methods the subclass defines in Python are inlined.

An object from the frame has its keys guarded (read with the builtin base's
own ``keys``, never an override) and its values read as
``dict.__getitem__(obj, key)``. Changing its contents would need a replay
that bypasses the subclass's overrides (SideEffects replays through
``clear``/``update``, which ModelOutput forbids): a graph break. Its
attributes are stored as any user object's (a custom ``__setattr__`` on an
existing object is a break). An object created in the trace is rebuilt, if
it escapes, without running any of its class's code:
``base.__new__(cls)``, ``base.__setitem__`` for each item, then
``object.__setattr__`` for each attribute — the state eager mode built.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bytecode as bc

from bytegraph.bytecode import assemble
from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import ChildSource, Source, const_expr, source_record
from bytegraph.side_effects import DELETED
from bytegraph.variables.base import BoundMethodVariable, ValueMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable, is_constant_value
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.user_defined import (
    MAPPING_BASES,
    Found,
    UserDefinedObjectVariable,
    mapping_base,
)

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

def _base_expr(base: type) -> str:
    return "dict" if base is dict else "__import__('collections').OrderedDict"


@source_record
class MappingKeysSource(ChildSource):
    """``tuple(Base.keys(obj))``: the keys in order, whatever the subclass overrides."""

    mapping_type: type

    def _expr(self) -> str:
        return f"tuple({_base_expr(self.mapping_type)}.keys({self.base.expr()}))"

    def bound_expr(self, const: Callable[[Any], str], base: str) -> str:
        return f"tuple({const(self.mapping_type)}.keys({base}))"

    def reconstruct(self, codegen: PyCodegen) -> None:
        raise Unsupported("mapping_contents", "loading the keys of a mapping (guards only)")


@source_record
class MappingItemSource(ChildSource):
    """``dict.__getitem__(obj, key)``: an item, bypassing any ``__getitem__`` override."""

    key: Any

    def _expr(self) -> str:
        return f"dict.__getitem__({self.base.expr()}, {const_expr(self.key)})"

    def bound_expr(self, const: Callable[[Any], str], base: str) -> str:
        return f"dict.__getitem__({base}, {const_expr(self.key)})"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.load_callable(dict.__getitem__)
        codegen.load_source(self.base)
        codegen.load_const(self.key)
        codegen.append(*assemble.call(2))


# The builtin base's methods that act on the contents alone, as they would on a
# plain mapping (not copy, fromkeys or the | operators: they build new objects).
_CONTENT_METHODS = frozenset({
    "__getitem__", "get", "__contains__", "__len__", "keys", "values", "items",
    "__setitem__", "__delitem__", "pop", "popitem", "update", "setdefault", "clear",
    "move_to_end",
})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ObjectMappingVariable(DictVariable):
    """The mapping half of a dict-subclass object; rebuilt, it is that object.

    (``d.keys()`` escaping the trace must be a view of the object itself.)
    ``owner`` is a one-item box, filled once the object's VT exists.
    """

    owner: list = dataclasses.field(default_factory=list)

    def reconstruct(self, codegen: PyCodegen) -> None:
        if not self.owner:
            raise Unsupported("mapping_contents", "the mapping of an unknown object")
        codegen(self.owner[0])


def _object(
    value: Any, cls: type, cls_vt: Any, mapping: ObjectMappingVariable, **fields: Any
) -> UserDictObjectVariable:
    obj = UserDictObjectVariable(value, cls, cls_vt, mapping=mapping, **fields)
    mapping.owner.append(obj)
    return obj


def wrap_user_mapping(
    tx: Tx, value: Any, source: Source, mutation_type: Any
) -> UserDictObjectVariable | None:
    """The VT of a dict-subclass instance from the frame (None if its keys are not constants)."""
    from bytegraph.variables.builder import wrap

    base = mapping_base(type(value))
    keys = tuple(base.keys(value))
    if not all(is_constant_value(k) for k in keys):
        return None
    tx.output.add_guard(GuardKind.TYPE_MATCH, source, type(value))
    tx.output.add_guard(GuardKind.CONSTANT_MATCH, MappingKeysSource(source, base), keys)
    items = {k: wrap(tx, dict.__getitem__(value, k), MappingItemSource(source, k)) for k in keys}
    # No mutation type: the contents of an object from the frame are read-only here.
    mapping = ObjectMappingVariable(items, base)
    return _object(value, type(value), None, mapping, source=source, mutation_type=mutation_type)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class UserDictObjectVariable(UserDefinedObjectVariable):
    """A dict/OrderedDict subclass instance: attributes as a user object, items in ``mapping``."""

    mapping: ObjectMappingVariable | None = None

    @staticmethod
    def new(tx: Tx, cls: type, cls_vt: VariableTracker, mutation: Any) -> UserDictObjectVariable:
        """``base.__new__(cls)``: an empty instance created by the trace."""
        contents = tx.output.side_effects.new_mutation(ValueMutationNew)
        items = ObjectMappingVariable({}, mapping_base(cls), mutation_type=contents)
        return _object(None, cls, cls_vt, items, mutation_type=mutation)

    # -- what the builtin base does -------------------------------------------
    def bind(self, tx: Tx, found: Found, name: str) -> VariableTracker:
        if found.pending is None and found.owner in MAPPING_BASES and callable(found.raw):
            return self.base_method(tx, name)
        return super().bind(tx, found, name)

    def base_method(self, tx: Tx, name: str) -> VariableTracker:
        """``Base.name`` bound to this object: it acts on the mapping contents."""
        if name == "__init__":  # dict.__init__(self, *args, **kwargs) is an update
            name = "update"
        elif name == "__getitem__" and self.lookup(tx, "__missing__") is not None:
            from bytegraph.variables.collections import MissingGetItemVariable

            return MissingGetItemVariable(owner=self)
        elif name not in _CONTENT_METHODS:
            raise Unsupported("unsupported_method", f"{name} of a {self.cls.__qualname__}")
        return BoundMethodVariable(self.mapping, name)

    def _inherits(self, name: str) -> bool:
        return getattr(self.cls, name) is getattr(mapping_base(self.cls), name)

    def unpack_sequence(self, tx: Tx) -> list[VariableTracker]:
        if self._inherits("__iter__"):
            return self.mapping.unpack_sequence(tx)
        return super().unpack_sequence(tx)

    def length(self, tx: Tx) -> int:
        if self._inherits("__len__"):
            return len(self.mapping.items_now(tx))
        return super().length(tx)

    def truth(self, tx: Tx) -> bool:
        if self._inherits("__len__") and self.lookup(tx, "__bool__") is None:
            return bool(self.mapping.items_now(tx))
        return super().truth(tx)

    # -- rebuilding ---------------------------------------------------------
    def reconstruct(self, codegen: PyCodegen) -> None:
        """``base.__new__(cls)``, ``base.__setitem__`` per item, ``object.__setattr__``
        per attribute."""
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        rebuilding = codegen.side_effects.rebuilding
        temp = rebuilding.get(id(self))
        if temp is not None:  # a cycle back to an object being rebuilt
            codegen.append(bc.Instr("LOAD_FAST", temp))
            return
        base = mapping_base(self.cls)
        temp = rebuilding[id(self)] = f"___obj{id(self)}"
        codegen.call_const(base.__new__, [self.cls_vt])
        codegen.append(bc.Instr("COPY", 1), bc.Instr("STORE_FAST", temp))
        try:
            items = codegen.side_effects.contents(self.mapping, self.mapping.items)
            for key, value in items.items():
                self._emit_call(codegen, base.__setitem__, temp, [ConstantVariable(key), value])
            for name, value in codegen.side_effects.pending_attrs(self).items():
                if value is not DELETED:
                    args = [ConstantVariable(name), value]
                    self._emit_call(codegen, object.__setattr__, temp, args)
        finally:
            del rebuilding[id(self)]

    @staticmethod
    def _emit_call(codegen: PyCodegen, fn: Any, temp: str, args: list[VariableTracker]) -> None:
        codegen.load_callable(fn)
        codegen.append(bc.Instr("LOAD_FAST", temp))
        for arg in args:
            codegen(arg)
        codegen.append(*assemble.call(1 + len(args)), bc.Instr("POP_TOP"))
