"""``copy.copy`` and ``copy.deepcopy`` of the values a trace models, built directly.

The copy module keys deepcopy's memo by ``id()``, which the trace cannot fold
for an int, a str or an object made in the trace (object_ids.py), and it
reaches ``object.__reduce_ex__``, a C method; inlined, it breaks on the first
element (a Hugging Face config copied in ``get_text_config`` inside
``forward``, a dict of options copied before it is edited). The copies are
built here instead, with the semantics of CPython's copy module for:

* atomic values (``copy._deepcopy_atomic``'s types, dtypes, enum members):
  the value itself;
* tuples, lists and dicts of exactly those types: a new container whose
  items are copied (deep) or shared (shallow); a tuple whose items all copy
  to themselves is itself, as in eager;
* instances of plain classes: every class of the MRO a Python class without
  ``__slots__``; ``__new__``, ``__reduce__``, ``__reduce_ex__`` and
  ``__getstate__`` object's; no ``__setstate__``, ``__getnewargs(_ex)__``,
  ``__getattr__``, ``__copy__``/``__deepcopy__``; the class not in
  ``copyreg.dispatch_table``. The copy is ``object.__new__(cls)`` with its
  ``__dict__`` updated from the (copied) state, as ``copy._reconstruct``
  does; a custom ``__getattribute__`` is called for the names eager reads
  through it (``__deepcopy__``, ``__reduce_ex__``, ``__getstate__``, then
  ``__setstate__`` and ``__dict__`` on the copy).

deepcopy's memo is kept by VT (a mutable object has one VT; aliases share it),
so an object reached twice is copied once, and an object that reaches itself
gets its copy back. Anything else (tensors, sets, containers that contain
themselves, classes with their own copy protocol) runs the copy module's own
code, as before.
"""

from __future__ import annotations

import copy
import copyreg
import dataclasses
import enum
import types
import weakref
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import NEW_VALUE, ListVariable, TupleVariable
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.enums import EnumMemberVariable
from bytegraph.variables.instance_dict import InstanceDictVariable
from bytegraph.variables.user_defined import (
    UserDefinedObjectVariable,
    guard_class_lacks,
    lookup_class_attr,
)

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# copy._deepcopy_atomic's types (copy.copy returns these as they are too).
_ATOMIC_TYPES = frozenset({
    type(None), int, float, bool, complex, bytes, str, types.CodeType, type, range,
    types.BuiltinFunctionType, types.EllipsisType, types.NotImplementedType,
    types.FunctionType, weakref.ref, property, torch.dtype,  # a dtype reduces to its name
})
# What object.__reduce_ex__ and copy._reconstruct look up on the class; found on
# object (or nowhere) for the plain path to hold.
_OBJECT_OWNED = ("__new__", "__reduce__", "__reduce_ex__", "__getstate__")
_ABSENT = ("__setstate__", "__getnewargs__", "__getnewargs_ex__", "__getattr__")
_HEAPTYPE = 1 << 9


class _NotModelled(Exception):
    """The value is outside what this module copies: run the copy module's code."""


def is_copy_function(value: Any) -> bool:
    return value is copy.copy or value is copy.deepcopy


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CopyFunctionVariable(VariableTracker):
    """``copy.copy`` or ``copy.deepcopy`` itself."""

    fn: Any

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        from bytegraph.variables.functions import UserFunctionVariable

        if len(args) == 1 and not kwargs:
            copier = _Copier(tx, deep=self.fn is copy.deepcopy)
            try:
                copier.check(args[0])
            except _NotModelled:
                pass
            else:
                return copier.copy(args[0])
        return UserFunctionVariable(self.fn, source=self.source).call_function(tx, args, kwargs)

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
        else:
            codegen.load_const(self.fn)

    def __repr__(self) -> str:
        return f"CopyFunctionVariable({self.fn.__name__})"


class _Copier:
    """One ``copy``/``deepcopy`` call: ``check`` (no effect on the trace), then ``copy``."""

    def __init__(self, tx: Tx, deep: bool) -> None:
        self.tx = tx
        self.deep = deep
        self.memo: dict[VariableTracker, VariableTracker] = {}

    # -- what is modelled (reads only) ------------------------------------------------------
    def check(self, vt: VariableTracker, open_containers: frozenset[int] = frozenset()) -> None:
        if _is_atomic(vt, self.deep):
            return
        if type(vt) is TupleVariable:
            children = vt.items
        elif type(vt) is ListVariable:
            children = vt.items_now(self.tx)
        elif _is_plain_dict(vt):
            items = _dict_items(self.tx, vt)
            if not all(type(k) in _ATOMIC_TYPES for k in items):
                raise _NotModelled
            children = tuple(items.values())
        elif type(vt) is UserDefinedObjectVariable and _plain_class(vt.cls, self.deep):
            if not self.deep:
                return
            if id(vt) in open_containers:
                return  # its copy exists before its state is copied (copy._reconstruct)
            children = tuple(InstanceDictVariable(vt).current(self.tx).values())
        else:
            raise _NotModelled
        if not self.deep:
            return
        if id(vt) in open_containers:  # a list or dict that contains itself
            raise _NotModelled
        inner = open_containers | {id(vt)}
        for child in children:
            self.check(child, inner)

    # -- building the copy ------------------------------------------------------------------
    def copy(self, vt: VariableTracker) -> VariableTracker:
        if _is_atomic(vt, self.deep):
            return vt
        if vt in self.memo:
            return self.memo[vt]
        if type(vt) is TupleVariable:
            items = tuple(self.element(item) for item in vt.items)
            if all(a is b for a, b in zip(items, vt.items)):
                return vt
            return TupleVariable(items)
        if type(vt) is ListVariable:
            result: VariableTracker = ListVariable(
                tuple(self.element(item) for item in vt.items_now(self.tx)),
                mutation_type=NEW_VALUE,
            )
        elif _is_plain_dict(vt):
            result = DictVariable(
                {k: self.element(v) for k, v in _dict_items(self.tx, vt).items()},
                dict, mutation_type=NEW_VALUE,
            )
        else:
            return self.copy_object(vt)
        self.memo[vt] = result
        return result

    def element(self, vt: VariableTracker) -> VariableTracker:
        return self.copy(vt) if self.deep else vt

    def copy_object(self, obj: UserDefinedObjectVariable) -> VariableTracker:
        """``copy._reconstruct(obj, memo, copyreg.__newobj__, (cls,), state)``."""
        _guard_plain_class(self.tx, obj, self.deep)
        if obj.custom_getattribute:
            if self.deep:
                self._expect_missing(obj, "__deepcopy__")
            self._expect_object_method(obj, "__reduce_ex__")
            self._expect_object_method(obj, "__getstate__")
        state = InstanceDictVariable(obj).current(self.tx)
        new = obj.class_vt(self.tx).new_instance(self.tx)
        self.memo[obj] = new
        if not state:  # object.__getstate__ gives None: nothing more is looked up
            return new
        copied = {name: self.element(value) for name, value in state.items()}
        if new.custom_getattribute:
            self._expect_missing(new, "__setstate__")
            new.var_getattr(self.tx, "__dict__")
        for name, value in copied.items():
            new.store_raw(self.tx, name, value)
        return new

    def _lookup(self, obj: UserDefinedObjectVariable, name: str) -> VariableTracker:
        """``getattr(obj, name, None)`` as the trace runs it (a custom __getattribute__ too)."""
        from bytegraph.variables.object_builtins import ObjectBuiltinVariable

        return ObjectBuiltinVariable(getattr).call_function(
            self.tx, [obj, ConstantVariable(name), ConstantVariable(None)], {}
        )

    def _expect_missing(self, obj: UserDefinedObjectVariable, name: str) -> None:
        found = self._lookup(obj, name)
        if not (isinstance(found, ConstantVariable) and found.value is None):
            raise Unsupported(
                "object_copy", f"{obj.cls.__qualname__}.__getattribute__ answers {name!r}"
            )

    def _expect_object_method(self, obj: UserDefinedObjectVariable, name: str) -> None:
        from bytegraph.variables.object_builtins import ObjectSlotVariable

        found = self._lookup(obj, name)
        if not (isinstance(found, ObjectSlotVariable) and found.name == name
                and found.obj is obj):
            raise Unsupported(
                "object_copy",
                f"{obj.cls.__qualname__}.__getattribute__ answers {name!r} with its own",
            )


def _is_atomic(vt: VariableTracker, deep: bool) -> bool:
    """Whether the copy module returns ``vt``'s value itself."""
    if isinstance(vt, ConstantVariable):
        return _atomic_value(vt.value)
    if isinstance(vt, EnumMemberVariable):
        own = "__deepcopy__" if deep else "__copy__"
        return getattr(type(vt.value), own, None) is getattr(enum.Enum, own)
    if isinstance(vt, (UserDefinedObjectVariable, DictVariable, ListVariable, TupleVariable)):
        return False
    try:
        kind = vt.python_type()
    except Unsupported:
        return False
    # Symbolic ints, functions and classes (``issubclass(cls, type)`` in deepcopy) are
    # their own copies.
    return kind in _ATOMIC_TYPES or issubclass(kind, type)


def _atomic_value(value: Any) -> bool:
    if type(value) is tuple:  # a tuple whose items all copy to themselves is itself
        return all(_atomic_value(item) for item in value)
    return type(value) in _ATOMIC_TYPES


def _is_plain_dict(vt: VariableTracker) -> bool:
    """A dict of exactly that type: a DictVariable, or an object's ``__dict__``."""
    return (type(vt) is DictVariable and vt.dict_type is dict) or type(vt) is InstanceDictVariable


def _dict_items(tx: Tx, vt: VariableTracker) -> dict[Any, VariableTracker]:
    return vt.current(tx) if isinstance(vt, InstanceDictVariable) else vt.items_now(tx)


def _plain_class(cls: type, deep: bool) -> bool:
    """Whether instances of ``cls`` copy by ``object.__reduce_ex__`` and a ``__dict__`` update."""
    if cls in copyreg.dispatch_table or cls.__itemsize__:
        return False
    for klass in cls.__mro__[:-1]:
        if not klass.__flags__ & _HEAPTYPE or "__slots__" in klass.__dict__:
            return False
    own = "__deepcopy__" if deep else "__copy__"
    for name in (*_ABSENT, own):
        if any(name in klass.__dict__ for klass in cls.__mro__):
            return False
    if type(cls) is not type and hasattr(type(cls), "__copy__"):
        return False  # copy.copy reads __copy__ off the class, so off its metaclass too
    return all(
        not any(name in klass.__dict__ for klass in cls.__mro__[:-1]) for name in _OBJECT_OWNED
    )


def _guard_plain_class(tx: Tx, obj: UserDefinedObjectVariable, deep: bool) -> None:
    """The class facts ``_plain_class`` read hold on later calls: guard the class dicts."""
    cls, source = obj.cls, obj.class_source(tx)
    for name in (*_ABSENT, "__deepcopy__" if deep else "__copy__"):
        guard_class_lacks(tx, cls, source, name)
    for name in _OBJECT_OWNED:
        found = lookup_class_attr(tx, cls, source, name)
        if found is None or found.owner is not object:
            raise Unsupported("object_copy", f"{cls.__qualname__} defines {name}")
        guard_class_lacks(tx, cls, source, name, mro_end=-1)
