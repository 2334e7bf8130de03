"""User-defined classes and their instances, modelled by Python's own lookup rules.

``UserDefinedClassVariable`` is a user class (user_classes.py says which:
class statements over ``object``, or over dict/OrderedDict, under a metaclass
that leaves creation and lookups to ``type``). ``UserDefinedObjectVariable``
is an instance of one: either an object from the frame (it has a source; its
type is guarded by TYPE_MATCH) or one created during the trace (no source,
``AttributeMutationNew``; ``object.__new__`` semantics, ``__init__`` inlined).
Instances of dict subclasses are ``UserDictObjectVariable`` (user_dicts.py).

Attribute reads follow ``object.__getattribute__``: a data descriptor on the
type (a property's getter is inlined), else the instance's attribute (a store
pending in SideEffects, else the real ``__dict__`` entry, read through an
AttrSource and so guarded by value), else the class attribute (functions bind
to a ``UserMethodVariable``, classmethods to the class, staticmethods stay
plain), else an inlined ``__getattr__``. A lookup that relies on a name being
absent from the instance guards the instance's ``__dict__`` keys. A class
that defines ``__getattribute__`` has it inlined instead (custom_attrs.py),
and ``obj.__dict__`` is a read-only view (instance_dict.py).

Stores and deletes are recorded in SideEffects and replayed after the graph;
an object created in the trace is rebuilt only if it escapes:
``object.__new__(cls)`` then ``object.__setattr__`` for each attribute. A
custom ``__setattr__`` is inlined on an object made in the trace. What
cannot be replayed or modelled exactly (a custom ``__new__``, ``__setattr__``
on an existing object, stores through a metaclass's ``__setattr__``, slots
without ``__dict__``) is unsupported, never guessed. ``super()``,
``object.__setattr__`` and the attribute builtins are in object_builtins.py.
"""

from __future__ import annotations

import dataclasses
import keyword
import sys
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource, GetItemSource, Source
from bytegraph.side_effects import DELETED
from bytegraph.variables.base import AttributeMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.custom_attrs import GenericAttrSource, TypeSource, custom_getattr
from bytegraph.variables.function_modes import FunctionModeSwitchVariable
from bytegraph.variables.functions import (
    BaseFunctionVariable,
    MarkedFunctionVariable,
    UserFunctionVariable,
)
from bytegraph.variables.instance_dict import InstanceDictVariable
from bytegraph.variables.lru_cache import LruCacheFunctionVariable, is_lru_cache_wrapper
from bytegraph.variables.objects import ClassVariable
from bytegraph.variables.user_classes import (  # noqa: F401  (re-exported for importers)
    MAPPING_BASES,
    has_custom_getattribute,
    is_data_descriptor,
    is_plain_class,
    is_plain_metaclass,
    is_user_class,
    mapping_base,
)

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx



class MissingAttribute(Unsupported):
    """``obj.name`` raises AttributeError in eager; ``hasattr``/``getattr`` catch it.

    ``guarded``: the guards already hold the absence, so the trace may raise the
    AttributeError itself (``translate/ops/exceptions.py``).
    """

    def __init__(self, owner: str, name: str, guarded: bool = True) -> None:
        super().__init__("unsupported_value", f"{owner} has no attribute {name!r} (AttributeError)")
        self.guarded = guarded


def _has_instance_dict(cls: type) -> bool:
    return cls.__dictoffset__ != 0


def _is_module_class(cls: type) -> bool:
    nn = sys.modules.get("torch.nn")
    return nn is not None and issubclass(cls, nn.Module)


def _mro_source(cls_source: Source, index: int) -> Source:
    return cls_source if index == 0 else GetItemSource(AttrSource(cls_source, "__mro__"), index)


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """Where a class-level lookup ended: a pending store, or a real class-dict entry."""

    pending: VariableTracker | None = None
    raw: Any = None
    owner: type | None = None
    source: Source | None = None  # ``Cls.__mro__[i].__dict__[name]``


def lookup_class_attr(
    tx: Tx, cls: type, cls_source: Source | None, name: str, start: int = 0
) -> Found | None:
    """``name`` along ``cls``'s MRO (from ``start``), seeing class-level stores of the trace.

    Memoized per trace (an nn.Module call looks up ``forward``, ``__getattr__`` and
    each member name along its class's MRO): the log empties the memo whenever what a
    lookup finds could change (the classes' real dicts do not change while tracing),
    and a hit makes the log reads the lookup made again
    (a call recorded for reuse, translate/fragments.py, compares them).
    """
    side_effects = tx.output.side_effects
    key = (cls, cls_source, name, start)
    memo = side_effects.class_lookups.get(key)
    if memo is None:
        reads, side_effects.reads = side_effects.reads, []
        try:
            found = _lookup_class_attr(tx, cls, cls_source, name, start)
        finally:
            made, side_effects.reads = side_effects.reads, reads
            if reads is not None:
                reads.extend(made)
        side_effects.class_lookups[key] = found, tuple(made)
        return found
    found, made = memo
    if side_effects.reads is not None:
        side_effects.reads.extend(made)
    return found


def _lookup_class_attr(
    tx: Tx, cls: type, cls_source: Source | None, name: str, start: int
) -> Found | None:
    side_effects = tx.output.side_effects
    for index, klass in enumerate(cls.__mro__[start:], start):
        klass_vt = side_effects.existing(klass)
        if klass_vt is not None:
            pending = side_effects.load_attr(klass_vt, name)
            if pending is DELETED:
                continue
            if pending is not None:
                return Found(pending=pending, owner=klass)
        if name in klass.__dict__:
            if cls_source is not None:
                base: Source | None = _mro_source(cls_source, index)
            else:
                base = _klass_source(tx, cls, None, index)
            source = None if base is None else GetItemSource(AttrSource(base, "__dict__"), name)
            return Found(raw=klass.__dict__[name], owner=klass, source=source)
    return None


def _klass_source(tx: Tx, cls: type, cls_source: Source | None, index: int) -> Source | None:
    """Where ``cls.__mro__[index]`` is read from. A class made by the trace has no
    source; its bases are reached through their own (made_classes.py)."""
    if cls_source is not None:
        return _mro_source(cls_source, index)
    made = tx.output.side_effects.existing(cls)
    mro_source = getattr(made, "mro_source", None)
    return None if mro_source is None else mro_source(cls.__mro__[index])


# object's methods that bound to an instance stand for themselves (object_copies.py
# checks that a custom __getattribute__ answers them so); calling one is a break.
OBJECT_REDUCE_METHODS = frozenset({"__reduce_ex__", "__reduce__", "__getstate__"})


def guard_class_lacks(
    tx: Tx, cls: type, cls_source: Source | None, name: str, mro_end: int | None = None
) -> None:
    """The trace relies on no class of ``cls``'s MRO (up to ``mro_end``) defining
    ``name``: guard each dict.

    (A class attribute added later, ``Cls.a = 1``, must fail the guard: ``hasattr``
    and ``getattr(obj, name, default)`` would answer differently.)
    """
    side_effects = tx.output.side_effects
    for index, klass in enumerate(cls.__mro__[:mro_end]):
        klass_vt = side_effects.existing(klass)
        if klass_vt is not None and side_effects.load_attr(klass_vt, name) is DELETED:
            continue  # deleted by the trace itself
        base = _klass_source(tx, cls, cls_source, index)
        if base is None:  # a class made by the trace itself: nothing outside can change it
            continue
        tx.output.add_guard(GuardKind.KEY_ABSENT, AttrSource(base, "__dict__"), name)


def function_vt(tx: Tx, fn: Any, source: Source | None) -> VariableTracker:
    """The VT of a function found on a class, guarded by identity.

    Methods of torch's own classes (``nn.Linear.forward``) are inlined like
    any user function: their class was accepted as plain Python.
    """
    from bytegraph.variables.builder import wrap

    if not isinstance(fn, types.FunctionType):
        raise Unsupported(
            "opaque_object_call", f"calling {type(fn).__name__} {fn!r} found on a class"
        )
    if source is None:
        raise Unsupported(
            "class_without_source", f"method {fn.__qualname__} of a class with no source"
        )

    vt = wrap(tx, fn, source)
    if isinstance(vt, (UserFunctionVariable, MarkedFunctionVariable,
                       FunctionModeSwitchVariable)) or (
        not fn.__module__.startswith("torch")
    ):  # a marked one stays marked, torch's too (a class torch.compiler.disable wrapped)
        return vt
    return UserFunctionVariable(fn, source=source)


# -- bound methods -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class UserMethodVariable(VariableTracker):
    """``obj.method``: a function VT bound to the VT of its ``self`` (or class)."""

    fn: VariableTracker
    obj: VariableTracker

    def python_type(self) -> type:
        return types.MethodType

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        return self.fn.call_function(tx, [self.obj, *args], kwargs)

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name == "__func__":
            return self.fn
        if name == "__self__":
            return self.obj
        return self.fn.var_getattr(tx, name)

    def children(self) -> list[VariableTracker]:
        return [self.fn, self.obj]

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.call_const(types.MethodType, [self.fn, self.obj])

    def __repr__(self) -> str:
        return f"UserMethodVariable({self.fn!r} of {self.obj!r})"


# -- classes -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class UserDefinedClassVariable(ClassVariable):
    """A plain Python class: attributes, class-level stores, instantiation."""

    def _source(self, tx: Tx) -> Source:
        """A source reaching the class: its own, or that of the VT tracking it."""
        if self.source is not None:
            return self.source
        tracked = tx.output.side_effects.existing(self.value)
        if tracked is not None and tracked.source is not None:
            return tracked.source
        raise Unsupported(
            "class_without_source", f"attribute of class {self.value.__qualname__} with no source"
        )

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        from bytegraph.variables.builder import wrap

        cls = self.value
        source = self._source(tx)
        found = lookup_class_attr(tx, cls, source, name)
        if found is None:
            if name in type(cls).__dict__ and hasattr(cls, name):  # __name__, __mro__...
                return wrap(tx, getattr(cls, name), AttrSource(source, name))
            guard_class_lacks(tx, cls, source, name)
            plain_meta = type(cls) is type  # a metaclass's own attributes are not guarded
            raise MissingAttribute(f"class {cls.__qualname__}", name, guarded=plain_meta)
        if found.pending is not None:
            return found.pending
        raw = found.raw
        if isinstance(raw, staticmethod):
            return function_vt(tx, raw.__func__, AttrSource(found.source, "__func__"))
        if isinstance(raw, classmethod):
            fn = function_vt(tx, raw.__func__, AttrSource(found.source, "__func__"))
            return UserMethodVariable(fn, self)
        if isinstance(raw, types.FunctionType):
            return function_vt(tx, raw, found.source)
        if is_lru_cache_wrapper(raw):
            return LruCacheFunctionVariable(raw, source=found.source)
        if hasattr(type(raw), "__get__"):
            raise Unsupported(
                "descriptor_access", f"descriptor {name!r} read through class {cls.__qualname__}"
            )
        return wrap(tx, raw, AttrSource(source, name))

    def _check_class_store(self, name: str, action: str) -> None:
        """Stores replay as STORE_ATTR/DELETE_ATTR: only where the metaclass adds nothing."""
        meta = type(self.value)
        if (
            name in meta.__dict__
            or (name.startswith("__") and name.endswith("__"))
            or meta.__setattr__ is not type.__setattr__
            or meta.__delattr__ is not type.__delattr__
        ):
            detail = f"{action} {name!r} of class {self.value.__qualname__}"
            raise Unsupported("custom_setattr", detail)

    def var_setattr(self, tx: Tx, name: str, value: VariableTracker) -> None:
        self._check_class_store(name, "setting")
        tracked = tx.output.side_effects.existing(self.value) or self
        tx.output.side_effects.store_attr(tracked, name, value)

    def var_delattr(self, tx: Tx, name: str) -> None:
        cls = self.value
        found = lookup_class_attr(tx, cls, self._source(tx), name)
        if found is None or found.owner is not cls:  # only the class's own attributes
            raise MissingAttribute(f"class {cls.__qualname__}", name)
        self._check_class_store(name, "deleting")
        tx.output.side_effects.delete_attr(tx.output.side_effects.existing(cls) or self, name)

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        import torch

        from bytegraph.variables.made_modules import is_constructible_module

        cls = self.value
        if issubclass(cls, torch.nn.Module) and not is_constructible_module(cls):
            raise Unsupported(
                "object_creation", f"constructing the nn.Module {cls.__qualname__} in the trace"
            )
        default_new = dict.__new__ if mapping_base(cls) else object.__new__
        if type(cls).__call__ is not type.__call__ or cls.__new__ is not default_new:
            raise Unsupported(
                "object_creation", f"{cls.__qualname__} customises instance creation"
            )
        obj = self.new_instance(tx)
        init = lookup_class_attr(tx, cls, self._source(tx), "__init__")
        if init is not None and init.owner is object:
            if args or kwargs:
                raise Unsupported(
                    "call_raises_type_error", f"{cls.__qualname__}() takes no arguments (TypeError)"
                )
            return obj
        result = obj.bind(tx, init, "__init__").call_function(tx, args, kwargs)
        if not (result.is_python_constant() and result.as_python_constant() is None):
            raise Unsupported(
                "call_raises_type_error", "__init__ returned a value (TypeError in eager)"
            )
        return obj

    def new_instance(self, tx: Tx) -> UserDefinedObjectVariable:
        """``object.__new__(cls)``: an empty instance created by the trace."""
        if not _has_instance_dict(self.value):
            raise Unsupported(
                "object_creation", f"instances of {self.value.__qualname__} have no __dict__"
            )
        mutation = tx.output.side_effects.new_mutation(AttributeMutationNew)
        if _is_module_class(self.value):  # the "made here" nn.Module
            from bytegraph.variables.made_modules import MadeModuleVariable

            return MadeModuleVariable(None, self.value, self, mutation_type=mutation)
        if mapping_base(self.value) is not None:
            from bytegraph.variables.user_dicts import UserDictObjectVariable

            return UserDictObjectVariable.new(tx, self.value, self, mutation)
        return UserDefinedObjectVariable(None, self.value, self, mutation_type=mutation)

    def __repr__(self) -> str:
        return f"UserDefinedClassVariable({self.value.__qualname__})"


# -- instances ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class UserDefinedObjectVariable(VariableTracker):
    """An instance of a plain class: ``value`` is the real object, or None if new."""

    value: Any
    cls: type
    cls_vt: VariableTracker | None = None  # the class VT of an object made in the trace

    def python_type(self) -> type:
        return self.cls

    @property
    def is_new(self) -> bool:
        return self.source is None

    @property
    def custom_getattribute(self) -> bool:
        return has_custom_getattribute(self.cls)

    def attr_source(self, name: str) -> Source:
        """Where the instance's own attribute ``name`` is read from, bypassing any
        custom ``__getattribute__`` (guards and generated code must not run it); a name
        that is no identifier (``getattr(obj, "1")``) is read that way too."""
        if self.custom_getattribute or not name.isidentifier() or keyword.iskeyword(name):
            return GenericAttrSource(self.source, name)
        return AttrSource(self.source, name)

    def class_vt(self, tx: Tx) -> VariableTracker:
        if self.cls_vt is not None:
            return self.cls_vt
        # The VT wrap gives for the class's source is the trace's for good: remembered by
        # the object's source (an nn.Module call looks its class up five times).
        source = self.source
        found = None if source is None else tx.output.class_vts.get(source)
        if found is None:
            from bytegraph.variables.builder import wrap

            if self.custom_getattribute:
                found = wrap(tx, self.cls, TypeSource(source))
            else:
                found = wrap(tx, self.cls, AttrSource(source, "__class__"))
            if source is not None:
                tx.output.class_vts[source] = found
        return found

    def class_source(self, tx: Tx) -> Source | None:
        cls_vt = self.class_vt(tx)
        if isinstance(cls_vt, UserDefinedClassVariable):
            return cls_vt._source(tx)
        return cls_vt.source

    def lookup(self, tx: Tx, name: str) -> Found | None:
        return lookup_class_attr(tx, self.cls, self.class_source(tx), name)

    def guard_instance_keys(self, tx: Tx) -> None:
        """The trace relies on a name being absent from the instance: guard its keys."""
        if self.is_new:
            return
        instance_dict = _instance_dict(self.value)
        if instance_dict is not None:
            source = self.attr_source("__dict__")
            tx.output.add_guard(
                GuardKind.DICT_KEYS, source, (type(instance_dict), tuple(instance_dict))
            )

    def guard_instance_lacks(self, tx: Tx, name: str) -> None:
        """The trace relies on ``name`` being absent from the instance: guard that one key.

        Cheaper on every call than all the keys (an nn.Module's ``__dict__`` has twenty,
        and a model hundreds of modules); the type check keeps ``in`` the dict's own.
        """
        if self.is_new:
            return
        instance_dict = _instance_dict(self.value)
        if instance_dict is not None:
            # one source per object and trace: an nn.Module call guards three names
            output = tx.output
            source = output.instance_dict_sources.get(self.source)
            if source is None:
                source = output.instance_dict_sources[self.source] = self.attr_source("__dict__")
            output.add_guard(GuardKind.TYPE_MATCH, source, type(instance_dict))
            output.add_guard(GuardKind.KEY_ABSENT, source, name)

    # -- reads ----------------------------------------------------------------
    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if self.custom_getattribute:
            found = self.lookup(tx, "__getattribute__")
            if found is not None and found.owner is not object:
                return custom_getattr(tx, self, found, name)
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx: Tx, name: str, fallback: bool = True) -> VariableTracker:
        """``object.__getattribute__(obj, name)``, then (if ``fallback``) ``__getattr__``."""
        if name == "__class__":
            return self.class_vt(tx)
        if name == "__dict__" and _has_instance_dict(self.cls):
            return InstanceDictVariable(self)
        if name == "__dict__":
            raise Unsupported(
                "unknown_attribute", f"attribute {name!r} of a {self.cls.__qualname__}"
            )
        found = self.lookup(tx, name)
        if found is not None and found.pending is None and is_data_descriptor(found.raw):
            return self.get_descriptor(tx, found, name)
        instance = self.instance_attr(tx, name)
        if instance is not None:
            return instance
        if found is not None:
            return self.bind(tx, found, name)
        if not fallback:
            raise MissingAttribute(f"a {self.cls.__qualname__} object", name, guarded=False)
        return self.getattr_fallback(tx, name)

    def instance_attr(self, tx: Tx, name: str) -> VariableTracker | None:
        """The instance's own attribute (pending, else real), or None if it has none."""
        pending = tx.output.side_effects.load_attr(self, name)
        if pending is DELETED:
            return None
        if pending is not None:
            return pending
        if not self.is_new:
            instance_dict = _instance_dict(self.value)
            if instance_dict is not None and name in instance_dict:
                from bytegraph.variables.builder import wrap

                return wrap(tx, instance_dict[name], self.attr_source(name))
            self.guard_instance_lacks(tx, name)
        return None

    def bind(self, tx: Tx, found: Found, name: str) -> VariableTracker:
        """A class attribute as read through this instance."""
        if found.pending is not None:
            pending = found.pending
            return (
                UserMethodVariable(pending, self)
                if isinstance(pending, BaseFunctionVariable)
                else pending
            )
        raw = found.raw
        if isinstance(raw, types.FunctionType):
            return UserMethodVariable(function_vt(tx, raw, found.source), self)
        if isinstance(raw, staticmethod):
            return function_vt(tx, raw.__func__, AttrSource(found.source, "__func__"))
        if isinstance(raw, classmethod):
            fn = function_vt(tx, raw.__func__, AttrSource(found.source, "__func__"))
            return UserMethodVariable(fn, self.class_vt(tx))
        if is_lru_cache_wrapper(raw):  # a cached method (``logger.warning_once``)
            return LruCacheFunctionVariable(raw, self)
        if is_data_descriptor(raw):
            return self.get_descriptor(tx, found, name)
        if found.owner is object and name in OBJECT_REDUCE_METHODS:
            from bytegraph.variables.object_builtins import ObjectSlotVariable

            return ObjectSlotVariable(name, self)  # what copy.copy/deepcopy look up
        if hasattr(type(raw), "__get__"):
            return self._call_get(tx, found, name)
        return self.class_vt(tx).var_getattr(tx, name)

    def get_descriptor(self, tx: Tx, found: Found, name: str) -> VariableTracker:
        from bytegraph.variables.builder import wrap

        raw = found.raw
        if isinstance(raw, property):
            if raw.fget is None:
                raise Unsupported(
                    "operation_raises", f"property {name!r} has no getter (AttributeError)"
                )
            return function_vt(tx, raw.fget, AttrSource(found.source, "fget")).call_function(
                tx, [self], {}
            )
        if isinstance(raw, types.MemberDescriptorType):  # a __slots__ entry
            pending = tx.output.side_effects.load_attr(self, name)
            if pending is not None and pending is not DELETED:
                return pending
            if self.is_new or pending is DELETED or not hasattr(self.value, name):
                # An empty slot of an object from the frame is not guarded.
                raise MissingAttribute(f"a {self.cls.__qualname__}", name, guarded=self.is_new)
            return wrap(tx, getattr(self.value, name), self.attr_source(name))
        return self._call_get(tx, found, name)

    def _call_get(self, tx: Tx, found: Found, name: str) -> VariableTracker:
        """A descriptor written in Python: inline ``type(d).__get__(d, obj, cls)``."""
        from bytegraph.variables.builder import wrap

        getter = type(found.raw).__get__
        if not isinstance(getter, types.FunctionType) or found.source is None:
            raise Unsupported(
                "descriptor_access", f"descriptor {name!r} of {self.cls.__qualname__}"
            )
        descriptor = wrap(tx, found.raw, found.source)
        getter_vt = function_vt(
            tx, getter, AttrSource(AttrSource(found.source, "__class__"), "__get__")
        )
        return getter_vt.call_function(tx, [descriptor, self, self.class_vt(tx)], {})

    def getattr_fallback(self, tx: Tx, name: str) -> VariableTracker:
        """Normal lookup failed: an inlined ``__getattr__``, else AttributeError."""
        found = self.lookup(tx, "__getattr__")
        if found is None:
            for missing in (name, "__getattr__"):
                guard_class_lacks(tx, self.cls, self.class_source(tx), missing)
            raise MissingAttribute(f"a {self.cls.__qualname__} object", name)
        return self.bind(tx, found, "__getattr__").call_function(tx, [ConstantVariable(name)], {})

    def has_attribute(self, tx: Tx, name: str) -> bool:
        try:
            self.var_getattr(tx, name)
        except MissingAttribute:
            return False
        return True

    # -- stores ---------------------------------------------------------------
    @property
    def raw_attribute_stores(self) -> bool:
        """Whether the replay stores with ``object.__setattr__``: with a custom
        ``__setattr__``, the trace inlined it and recorded the raw stores it made, and
        running it again at the replay would repeat its effects."""
        return self.cls.__setattr__ is not object.__setattr__

    def var_setattr(self, tx: Tx, name: str, value: VariableTracker) -> None:
        """``obj.name = value`` (STORE_ATTR, setattr): a custom ``__setattr__`` written in
        Python is inlined (a Hugging Face config's, which maps attribute names); the raw
        stores it makes are replayed as such (``raw_attribute_stores``)."""
        if self.cls.__setattr__ is not object.__setattr__:
            found = self.lookup(tx, "__setattr__")
            if found is None or not isinstance(found.raw, types.FunctionType):
                raise Unsupported("custom_setattr", f"{self.cls.__qualname__} defines __setattr__")
            self.bind(tx, found, "__setattr__").call_function(
                tx, [ConstantVariable(name), value], {}
            )
            return
        self.store_raw(tx, name, value)

    def store_raw(self, tx: Tx, name: str, value: VariableTracker) -> None:
        """``object.__setattr__(obj, name, value)``."""
        if not name.isidentifier():
            raise Unsupported("attribute_mutation", f"attribute name {name!r}")
        found = self.lookup(tx, name)
        if found is not None and found.pending is None and is_data_descriptor(found.raw):
            raw = found.raw
            if isinstance(raw, property) and raw.fset is not None:
                setter = function_vt(tx, raw.fset, AttrSource(found.source, "fset"))
                setter.call_function(tx, [self, value], {})
                return
            raise Unsupported(
                "custom_setattr", f"setting descriptor {name!r} of {self.cls.__qualname__}"
            )
        if not _has_instance_dict(self.cls):
            raise Unsupported(
                "custom_setattr", f"instances of {self.cls.__qualname__} have no __dict__"
            )
        tx.output.side_effects.store_attr(self, name, value)

    def var_delattr(self, tx: Tx, name: str) -> None:
        """``del obj.name`` (DELETE_ATTR, delattr)."""
        if self.cls.__delattr__ is not object.__delattr__ or not name.isidentifier():
            raise Unsupported(
                "attribute_mutation", f"deleting {name!r} of a {self.cls.__qualname__}"
            )
        found = self.lookup(tx, name)
        if found is not None and found.pending is None and is_data_descriptor(found.raw):
            raise Unsupported(
                "custom_setattr", f"deleting descriptor {name!r} of {self.cls.__qualname__}"
            )
        if self.instance_attr(tx, name) is None:
            raise MissingAttribute(f"a {self.cls.__qualname__} object", name)
        self.delete_instance_attr(tx, name)

    def delete_instance_attr(self, tx: Tx, name: str) -> None:
        """Record ``del obj.name`` of an attribute the object has now.

        One the trace itself stored on an object that did not have it before
        leaves nothing to replay (a DELETE_ATTR would raise AttributeError on
        the real object, which never got the store).
        """
        side_effects = tx.output.side_effects
        pending = side_effects.load_attr(self, name)
        if pending is not None and pending is not DELETED and not self.had_attr(tx, name):
            side_effects.forget_attr(self, name)
        else:
            side_effects.delete_attr(self, name)

    def had_attr(self, tx: Tx, name: str) -> bool:
        """Whether the real object had ``name`` in its ``__dict__`` before the trace (guarded)."""
        instance_dict = None if self.is_new else _instance_dict(self.value)
        if instance_dict is None:
            return False
        self.guard_instance_keys(tx)
        return name in instance_dict

    # -- protocols ------------------------------------------------------------
    def call_special(self, tx: Tx, name: str, args: list[VariableTracker]) -> VariableTracker:
        """``type(obj).name(obj, *args)``: special methods are looked up on the type."""
        found = self.lookup(tx, name)
        if found is None or found.owner is object:
            raise Unsupported("unsupported_method", f"{self.cls.__qualname__} has no {name}")
        return self.bind(tx, found, name).call_function(tx, args, {})

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        found = self.lookup(tx, "__call__")
        if found is None:
            raise Unsupported(
                "call_raises_type_error", f"a {self.cls.__qualname__} object is not callable"
            )
        return self.bind(tx, found, "__call__").call_function(tx, args, kwargs)

    def call_method(self, tx: Tx, name: str, args, kwargs) -> VariableTracker:
        if name.startswith("__") and name.endswith("__") and not kwargs:
            return self.call_special(tx, name, list(args))
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def getitem(self, tx: Tx, index: VariableTracker) -> VariableTracker:
        return self.call_special(tx, "__getitem__", [index])

    def contains(self, tx: Tx, item: VariableTracker) -> VariableTracker:
        """``item in obj``: ``__contains__``, else a scan of ``iter(obj)`` (which falls
        back to the sequence protocol, as CPython's does)."""
        from bytegraph.variables.containers import equal_now

        if self.lookup(tx, "__contains__") is not None:
            return ConstantVariable(self.call_special(tx, "__contains__", [item]).truth(tx))
        return ConstantVariable(any(equal_now(tx, v, item) for v in self.unpack_sequence(tx)))

    def length(self, tx: Tx) -> int:
        from bytegraph.variables.protocol_results import checked_len

        return checked_len(tx, self.cls, self.call_special(tx, "__len__", []))

    def unpack_sequence(self, tx: Tx) -> list[VariableTracker]:
        found = self.lookup(tx, "__iter__")
        if found is None or (found.pending is None and found.raw is Sequence.__iter__):
            return self._sequence_protocol(tx)
        from bytegraph.variables.protocol_results import checked_iterator

        iterator = checked_iterator(tx, self.cls, self.call_special(tx, "__iter__", []))
        if iterator is self or isinstance(iterator, UserDefinedObjectVariable):
            raise Unsupported("unknown_iteration", f"a {self.cls.__qualname__} iterating itself")
        return iterator.unpack_sequence(tx)

    def _sequence_protocol(self, tx: Tx) -> list[VariableTracker]:
        """``self[0], self[1], ...`` until IndexError: ``iter()`` of a class without
        ``__iter__``, and what ``collections.abc.Sequence.__iter__`` does."""
        from bytegraph.variables.raising import sequence_items

        found = self.lookup(tx, "__getitem__")
        if found is None or found.pending is not None or not isinstance(
            found.raw, types.FunctionType
        ):
            raise Unsupported("operation_raises", f"a {self.cls.__qualname__} is not iterable")
        return sequence_items(tx, function_vt(tx, found.raw, found.source), self)

    def truth(self, tx: Tx) -> bool:
        from bytegraph.variables.protocol_results import checked_bool

        if self.lookup(tx, "__bool__") is not None:
            return checked_bool(tx, self.cls, self.call_special(tx, "__bool__", []))
        if self.lookup(tx, "__len__") is not None:
            return self.length(tx) > 0
        return True

    # -- rebuilding -----------------------------------------------------------
    def reconstruct(self, codegen: PyCodegen) -> None:
        """``object.__new__(cls)``, then ``object.__setattr__`` for each attribute."""
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        if self.cls_vt is None:
            raise Unsupported("unrebuildable_value", f"rebuilding a {self.cls.__qualname__}")
        codegen.build_object(
            self,
            lambda: codegen.call_const(object.__new__, [self.cls_vt]),
            lambda: (
                (name, value)
                for name, value in codegen.side_effects.pending_attrs(self).items()
                if value is not DELETED
            ),
        )

    def __repr__(self) -> str:
        where = "new" if self.is_new else str(self.source)
        return f"{type(self).__name__}({self.cls.__qualname__}, {where})"


def _instance_dict(value: Any) -> dict[str, Any] | None:
    try:
        return object.__getattribute__(value, "__dict__")
    except AttributeError:
        return None
