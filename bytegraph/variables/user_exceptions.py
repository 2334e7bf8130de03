"""User-defined exception classes: class statements over builtin exceptions, traced.

``class NotFound(KeyError): code = 404`` with its own ``__init__``,
``__str__`` or methods is modelled by CPython's own rules:

1. ``NotFound(*args, **kwargs)`` (``UserExceptionClassVariable.call_function``)
   is ``type.__call__``: ``BaseException.__new__`` stores the positional
   arguments as ``args`` (the instance's ``args`` field, what ``__new__``
   got), then the class's ``__init__`` runs: a Python one is inlined on the
   new ``ExceptionInstanceVariable``; a builtin one (BaseException's) takes
   no keywords and stores ``args`` again.
2. ``super().__init__(msg)`` or ``Exception.__init__(self, msg)`` reaching
   BaseException's ``__init__`` (``BaseExceptionInitVariable``) resets
   ``args`` to ``(msg,)``: a store of ``args`` in SideEffects, like
   ``e.args = (...)``.
3. Attribute reads on the instance (``instance_getattr``) follow
   ``object.__getattribute__``: ``args`` and BaseException's slots and the
   instance's own attributes (exceptions.py), then the class attribute along
   the MRO, read through the class's source, so guarded as any user class
   attribute: functions bind to the instance, a property's getter is
   inlined, plain values are read through the class VT. What only a
   builtin base defines (``with_traceback``, ``add_note``) is unsupported.
4. ``str(e)``/``repr(e)`` (``exception_text``) inline the class's
   ``__str__``/``__repr__``; without one, BaseException's text of a copy
   made with ``NotFound.__new__(NotFound)`` and the current ``args`` (no
   user code runs), with guards that no Python class of the MRO defines it.
5. Rebuilt after the trace (exceptions.py), an instance of a class with a
   Python ``__init__`` is ``NotFound.__new__(NotFound, *ctor_args)`` then
   ``object.__setattr__`` of ``args`` and each attribute: ``__init__`` does
   not run twice.

The classes modelled (``is_user_exception_class``) have ``type`` as
metaclass, only class statements and builtin exception classes in their
MRO, no base whose constructor or text does more than store ``args``
(OSError, StopIteration...), no ``__slots__``, and no dunder besides
``__init__``, ``__str__`` and ``__repr__``: ``__new__``, ``__getattr__``,
``__setattr__``, ``__eq__``, ``__del__``... leave the class to Python.
"""

from __future__ import annotations

import dataclasses
import types
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource, Source
from bytegraph.variables.base import (
    AttributeMutationExisting,
    AttributeMutationNew,
    VariableTracker,
)
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.exceptions import ExceptionInstanceVariable
from bytegraph.variables.raising import (
    _PLAIN_CLASS_DICT,
    _SPECIAL_BASES,
    ExceptionClassVariable,
    is_builtin_exception_class,
)
from bytegraph.variables.user_defined import (
    Found,
    MissingAttribute,
    UserDefinedClassVariable,
    UserMethodVariable,
    _mro_source,
    function_vt,
    is_data_descriptor,
    lookup_class_attr,
)

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_HEAPTYPE = 1 << 9
_EXISTING_CLASS = AttributeMutationExisting(0)
_ALLOWED_DUNDERS = _PLAIN_CLASS_DICT | {"__init__", "__str__", "__repr__", "__annotations__"}


def _is_heap(klass: type) -> bool:
    return bool(klass.__flags__ & _HEAPTYPE)


def is_user_exception_class(value: Any) -> bool:
    """A class statement over builtin exceptions whose behaviour is modelled here."""
    if not (isinstance(value, type) and issubclass(value, BaseException)):
        return False
    if is_builtin_exception_class(value) or type(value) is not type:
        return False
    if issubclass(value, _SPECIAL_BASES):
        return False
    for klass in value.__mro__:
        if klass is object or is_builtin_exception_class(klass):
            continue
        if not _is_heap(klass) or type(klass) is not type:
            return False
        names = vars(klass)
        if "__slots__" in names or any(
            n.startswith("__") and n.endswith("__") and n not in _ALLOWED_DUNDERS for n in names
        ):
            return False
    return True


def has_python_init(cls: type) -> bool:
    """``cls.__init__`` is a Python function (rebuilding must not run it again)."""
    return any(_is_heap(k) and "__init__" in vars(k) for k in cls.__mro__)


def _guard_heap_lacks(tx: Tx, cls: type, cls_source: Source, name: str) -> None:
    """The trace relies on no Python class of ``cls``'s MRO defining ``name`` (the
    builtin bases cannot change)."""
    for index, klass in enumerate(cls.__mro__):
        if _is_heap(klass):
            mapping = AttrSource(_mro_source(cls_source, index), "__dict__")
            tx.output.add_guard(GuardKind.KEY_ABSENT, mapping, name)


# -- the class ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class UserExceptionClassVariable(ExceptionClassVariable):
    """A user exception class: instantiated as CPython does, attributes read as a user
    class's are (guarded through its source)."""

    def class_source(self) -> Source:
        if self.source is None:
            raise Unsupported(
                "class_without_source", f"exception class {self.value.__qualname__} with no source"
            )
        return self.source

    def as_user_class(self) -> UserDefinedClassVariable:
        return UserDefinedClassVariable(
            self.value, source=self.class_source(), mutation_type=_EXISTING_CLASS
        )

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        """A user class's attribute (guarded); BaseException's ``__init__``; a
        classmethod bound to this class VT."""
        found = lookup_class_attr(tx, self.value, self.class_source(), name)
        if found is not None and found.pending is None:
            if name == "__init__" and not _is_heap(found.owner):
                return base_init(tx, self, found, None)
            if isinstance(found.raw, classmethod):
                fn = function_vt(tx, found.raw.__func__, AttrSource(found.source, "__func__"))
                return UserMethodVariable(fn, self)
        return self.as_user_class().var_getattr(tx, name)

    def var_setattr(self, tx: Tx, name: str, value: VariableTracker) -> None:
        if name.startswith("__"):
            raise Unsupported("custom_setattr", f"setting {name!r} of {self.value.__qualname__}")
        self.as_user_class().var_setattr(tx, name, value)

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        """``type.__call__``: ``BaseException.__new__`` keeps the positional arguments
        as ``args``, then ``__init__`` runs (inlined when it is a Python function)."""
        cls = self.value
        mutation = tx.output.side_effects.new_mutation(AttributeMutationNew)
        exc = ExceptionInstanceVariable(cls, tuple(args), cls_vt=self, mutation_type=mutation)
        init = lookup_class_attr(tx, cls, self.class_source(), "__init__")
        if init is None:
            raise Unsupported("exception_construction", f"{cls.__qualname__} has no __init__")
        if init.pending is None and not _is_heap(init.owner):
            base_init(tx, self, init, exc).call_function(tx, list(args), dict(kwargs))
            return exc
        result = bind(tx, exc, init, "__init__").call_function(tx, list(args), dict(kwargs))
        if not (result.is_python_constant() and result.as_python_constant() is None):
            raise Unsupported(
                "call_raises_type_error", "__init__ returned a value (TypeError in eager)"
            )
        return exc

    def __repr__(self) -> str:
        return f"UserExceptionClassVariable({self.value.__qualname__})"


# -- BaseException's own methods, reached through a class or super() --------------------------


def base_init(
    tx: Tx, cls_vt: VariableTracker | None, found: Found, obj: VariableTracker | None
) -> VariableTracker:
    """BaseException's ``__init__`` found on a builtin base (guarding that no Python
    class before it defines one)."""
    owner = found.owner
    if issubclass(owner, _SPECIAL_BASES) or not is_builtin_exception_class(owner):
        raise Unsupported("exception_construction", f"{owner.__name__}.__init__")
    if isinstance(cls_vt, UserExceptionClassVariable):
        _guard_heap_lacks(tx, cls_vt.value, cls_vt.class_source(), "__init__")
    return BaseExceptionInitVariable(owner, obj)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BaseExceptionInitVariable(VariableTracker):
    """``Exception.__init__`` (BaseException's): ``self.args = args``; bound by super()."""

    owner: type
    obj: VariableTracker | None = None

    def python_type(self) -> type:
        return types.WrapperDescriptorType if self.obj is None else types.MethodWrapperType

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        from bytegraph.variables.containers import TupleVariable

        args = list(args) if self.obj is None else [self.obj, *args]
        if kwargs:
            raise Unsupported("exception_construction", f"{self.owner.__name__}() with keywords")
        if not args or not isinstance(args[0], ExceptionInstanceVariable):
            raise Unsupported("exception_construction", f"{self.owner.__name__}.__init__ of {args}")
        target = args[0]
        if not issubclass(target.exc_type, self.owner):
            raise Unsupported("exception_construction", "BaseException.__init__ of another type")
        tx.output.side_effects.store_attr(target, "args", TupleVariable(tuple(args[1:])))
        return ConstantVariable(None)

    def __repr__(self) -> str:
        return f"BaseExceptionInitVariable({self.owner.__name__})"


def builtin_text(tx: Tx, exc: ExceptionInstanceVariable, name: str) -> VariableTracker:
    """``__str__``/``__repr__`` of the first builtin class of the MRO defining it, run on
    a copy with the current args (a user override on the copy is never called). A
    builtin class's copy is made by its constructor (exceptions.py): its own text."""
    copy = exc.constant_copy(tx)
    if exc.cls_vt is None:
        return ConstantVariable(str(copy) if name == "__str__" else repr(copy))
    owner = next(k for k in exc.exc_type.__mro__ if not _is_heap(k) and name in vars(k))
    return ConstantVariable(vars(owner)[name](copy))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class BaseExceptionTextVariable(VariableTracker):
    """A builtin base's ``__str__``/``__repr__`` bound by ``super()`` in a user override."""

    name: str
    obj: ExceptionInstanceVariable

    def python_type(self) -> type:
        return types.MethodWrapperType

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if args or kwargs:
            raise Unsupported("call_raises_type_error", f"{self.name} with arguments")
        return builtin_text(tx, self.obj, self.name)


def super_getattr(
    tx: Tx, start: type, obj: ExceptionInstanceVariable, name: str
) -> VariableTracker:
    """``super(start, obj).name`` of an exception: lookups after ``start`` in the MRO."""
    cls = obj.exc_type
    if start not in cls.__mro__:
        raise Unsupported("operation_raises", "super(type, obj): obj is not an instance of type")
    cls_vt = obj.class_vt()
    source = _source_of(cls_vt)
    found = lookup_class_attr(tx, cls, source, name, cls.__mro__.index(start) + 1)
    if found is None:
        raise MissingAttribute("'super' object", name, guarded=False)
    if found.pending is None and not _is_heap(found.owner):
        if name == "__init__":
            return base_init(tx, None, found, obj)
        if name in ("__str__", "__repr__"):
            return BaseExceptionTextVariable(name, obj)
        raise Unsupported("unknown_attribute", f"super().{name} of {cls.__qualname__}")
    return bind(tx, obj, found, name)


# -- instances --------------------------------------------------------------------------------


def _source_of(cls_vt: VariableTracker) -> Source | None:
    if isinstance(cls_vt, UserExceptionClassVariable):
        return cls_vt.class_source()
    return cls_vt.source


def bind(tx: Tx, exc: ExceptionInstanceVariable, found: Found, name: str) -> VariableTracker:
    """A class attribute of a Python class as read through the instance ``exc``."""
    from bytegraph.variables.functions import BaseFunctionVariable

    if found.pending is not None:
        pending = found.pending
        is_fn = isinstance(pending, BaseFunctionVariable)
        return UserMethodVariable(pending, exc) if is_fn else pending
    raw = found.raw
    if isinstance(raw, types.FunctionType):
        return UserMethodVariable(function_vt(tx, raw, found.source), exc)
    if isinstance(raw, staticmethod):
        return function_vt(tx, raw.__func__, AttrSource(found.source, "__func__"))
    if isinstance(raw, classmethod):
        fn = function_vt(tx, raw.__func__, AttrSource(found.source, "__func__"))
        return UserMethodVariable(fn, exc.class_vt())
    if isinstance(raw, property) and raw.fget is not None:
        getter = function_vt(tx, raw.fget, AttrSource(found.source, "fget"))
        return getter.call_function(tx, [exc], {})
    if hasattr(type(raw), "__get__"):
        raise Unsupported("descriptor_access", f"descriptor {name!r} of {found.owner.__qualname__}")
    return exc.class_vt().var_getattr(tx, name)


def instance_getattr(tx: Tx, exc: ExceptionInstanceVariable, name: str) -> VariableTracker:
    """``exc.name`` past ``args``, the slots and the instance's own attributes: the class
    attribute along the MRO; MissingAttribute (guarded) where there is none."""
    cls = exc.exc_type
    cls_vt = exc.class_vt()
    if not isinstance(cls_vt, UserExceptionClassVariable):  # a builtin class: static
        if hasattr(cls, name):
            raise Unsupported("unknown_attribute", f"attribute {name!r} of {cls.__name__}")
        raise MissingAttribute(f"a {cls.__name__} object", name)
    source = cls_vt.class_source()
    found = lookup_class_attr(tx, cls, source, name)
    if found is None:
        _guard_heap_lacks(tx, cls, source, name)
        raise MissingAttribute(f"a {cls.__qualname__} object", name)
    if found.pending is None and not _is_heap(found.owner):
        raise Unsupported("unknown_attribute", f"attribute {name!r} of {cls.__qualname__}")
    return bind(tx, exc, found, name)


def check_instance_store(tx: Tx, exc: ExceptionInstanceVariable, name: str) -> None:
    """``exc.name = value`` stores in the instance's ``__dict__``: not where a class
    defines a descriptor or a builtin base the attribute."""
    cls_vt = exc.class_vt()
    if not isinstance(cls_vt, UserExceptionClassVariable):
        if hasattr(exc.exc_type, name):
            raise Unsupported(
                "attribute_mutation", f"setting {name!r} of a {exc.exc_type.__name__}"
            )
        return
    found = lookup_class_attr(tx, exc.exc_type, cls_vt.class_source(), name)
    if found is None:
        return
    if found.pending is None and (not _is_heap(found.owner) or is_data_descriptor(found.raw)):
        raise Unsupported(
            "attribute_mutation", f"setting {name!r} of a {exc.exc_type.__qualname__}"
        )


def exception_text(tx: Tx, exc: ExceptionInstanceVariable, fn: Any) -> VariableTracker:
    """``str(exc)``/``repr(exc)``: a Python override inlined, else BaseException's text."""
    name = "__str__" if fn is str else "__repr__"
    cls_vt = exc.class_vt()
    if isinstance(cls_vt, UserExceptionClassVariable):
        source = cls_vt.class_source()
        found = lookup_class_attr(tx, exc.exc_type, source, name)
        if found is not None and (found.pending is not None or _is_heap(found.owner)):
            text = bind(tx, exc, found, name).call_function(tx, [], {})
            if not (text.is_python_constant() and type(text.as_python_constant()) is str):
                raise Unsupported("unmodelled_value", f"{name} returned {text}")
            return text
        _guard_heap_lacks(tx, exc.exc_type, source, name)
    return builtin_text(tx, exc, name)
