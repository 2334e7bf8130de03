"""super(), object's own slots, the builtins that reach attributes, dataclasses.replace.

These are the callables whose meaning on a user-defined object is attribute
lookup, attribute assignment or construction, so they are modelled on
``UserDefinedObjectVariable``/``UserDefinedClassVariable`` rather than folded:

* ``super()`` (zero-argument: the ``__class__`` cell and the first argument,
  as CPython finds them) and ``super(cls, obj)``: lookups start after ``cls``
  in ``type(obj).__mro__``;
* ``object.__setattr__``/``__delattr__``/``__init__``/``__new__`` (frozen
  dataclasses' ``__init__`` stores through ``object.__setattr__``) and
  ``object.__getattribute__``, the generic lookup a custom
  ``__getattribute__`` calls (custom_attrs.py);
* ``setattr``, ``delattr``, ``getattr``, ``hasattr``, ``type`` and ``len`` on
  objects, ``hasattr`` on tensors, and ``object()``;
* ``dataclasses.replace``, which builds a new instance through ``__init__``.
"""

from __future__ import annotations

import dataclasses
import types
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource
from bytegraph.translate.ops.exceptions import getattr_raising
from bytegraph.variables.base import AttributeMutationNew, VariableTracker
from bytegraph.variables.builtin import BuiltinVariable
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.custom_attrs import tensor_hasattr
from bytegraph.variables.exceptions import ExceptionInstanceVariable
from bytegraph.variables.tensor import TensorVariable
from bytegraph.variables.user_defined import (
    MissingAttribute,
    UserDefinedClassVariable,
    UserDefinedObjectVariable,
    UserMethodVariable,
    function_vt,
    is_data_descriptor,
    lookup_class_attr,
)
from bytegraph.variables.user_exceptions import super_getattr

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


# -- super() -----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SuperVariable(VariableTracker):
    """``super(cls, obj)``: lookups start after ``cls`` in ``type(obj).__mro__``."""

    cls: type
    obj: VariableTracker

    def python_type(self) -> type:
        return super

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        obj = self.obj
        if isinstance(obj, ExceptionInstanceVariable):
            return super_getattr(tx, self.cls, obj, name)
        if isinstance(obj, UserDefinedClassVariable):
            return self._class_getattr(tx, obj, name)
        if not isinstance(obj, UserDefinedObjectVariable):
            raise Unsupported("unmodelled_value", f"super() of {obj}")
        mro = obj.cls.__mro__
        if self.cls not in mro:
            raise Unsupported(
                "operation_raises", "super(type, obj): obj is not an instance of type"
            )
        found = lookup_class_attr(tx, obj.cls, obj.class_source(tx), name, mro.index(self.cls) + 1)
        if found is None:
            raise MissingAttribute("'super' object", name)
        if found.owner is object:
            return ObjectSlotVariable(name, obj)
        if found.pending is None and is_data_descriptor(found.raw):
            return obj.get_descriptor(tx, found, name)
        return obj.bind(tx, found, name)


    def _class_getattr(
        self, tx: Tx, cls_vt: UserDefinedClassVariable, name: str
    ) -> VariableTracker:
        """``super(K, cls).name`` (``super()`` in a classmethod): bound as the class
        attribute would be, to ``cls``: a classmethod to it, a staticmethod or a plain
        function as is."""
        cls = cls_vt.value
        mro = cls.__mro__
        if self.cls not in mro:
            raise Unsupported(
                "operation_raises", "super(type, cls): cls is not a subclass of type"
            )
        found = lookup_class_attr(tx, cls, cls_vt._source(tx), name, mro.index(self.cls) + 1)
        if found is None:
            raise MissingAttribute("'super' object", name)
        if found.pending is not None:
            return found.pending
        raw = found.raw
        if found.owner is object and name == "__init_subclass__":
            return _ObjectInitSubclassVariable()
        if isinstance(raw, (staticmethod, classmethod)):
            fn = function_vt(tx, raw.__func__, AttrSource(found.source, "__func__"))
            return fn if isinstance(raw, staticmethod) else UserMethodVariable(fn, cls_vt)
        if isinstance(raw, types.FunctionType):
            return function_vt(tx, raw, found.source)
        raise Unsupported(
            "descriptor_access", f"super().{name} of class {cls.__qualname__}: a {type(raw)}"
        )


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class _ObjectInitSubclassVariable(VariableTracker):
    """``object.__init_subclass__`` reached by super(): takes nothing, does nothing."""

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if args or kwargs:
            raise Unsupported(
                "call_raises_type_error", "object.__init_subclass__() takes no arguments"
            )
        return ConstantVariable(None)


def zero_arg_super(tx: Tx) -> SuperVariable:
    """``super()`` in a method: the ``__class__`` cell and the first argument."""
    cell = tx.cells.get("__class__")
    code = tx.code
    if cell is None or not (code.co_argcount or code.co_flags & 0x04):
        raise Unsupported(
            "call_raises_type_error", "super() outside a method (RuntimeError in eager)"
        )
    first = code.co_varnames[0]
    if first in tx.cells:
        obj = tx.cells[first].load(tx)
    else:
        obj = tx.symbolic_locals.get(first) or tx.realize_local(first)
    return SuperVariable(cell.load(tx).as_python_constant(), obj)


# -- object's own slots, and the builtins that reach attributes -----------------------------

_OBJECT_SLOTS = frozenset({"__init__", "__setattr__", "__delattr__", "__new__", "__getattribute__"})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ObjectSlotVariable(VariableTracker):
    """``object.__setattr__`` and friends, unbound or bound to an object by super()."""

    name: str
    obj: VariableTracker | None = None

    def python_type(self) -> type:
        return type(getattr(object, self.name))

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if self.obj is not None:
            args = [self.obj, *args]
        if kwargs or not args:
            raise Unsupported("dataclass_call", f"object.{self.name} with these arguments")
        target, rest = args[0], args[1:]
        if self.name == "__new__":
            if rest or not isinstance(target, UserDefinedClassVariable):
                raise Unsupported("dataclass_call", f"object.__new__({target})")
            return target.new_instance(tx)
        if not isinstance(target, UserDefinedObjectVariable):
            raise Unsupported("dataclass_call", f"object.{self.name} on {target}")
        if self.name == "__init__" and not rest:
            return ConstantVariable(None)
        if self.name == "__getattribute__" and len(rest) == 1:
            return target.generic_getattr(tx, _name_arg(rest[0]), fallback=False)
        if self.name == "__setattr__" and len(rest) == 2:
            target.store_raw(tx, rest[0].as_python_constant(), rest[1])
            return ConstantVariable(None)
        if (
            self.name == "__delattr__"
            and len(rest) == 1
            and target.cls.__delattr__ is object.__delattr__
        ):
            target.var_delattr(tx, rest[0].as_python_constant())
            return ConstantVariable(None)
        raise Unsupported("dataclass_call", f"object.{self.name} with {len(rest)} arguments")

    def __repr__(self) -> str:
        return f"ObjectSlotVariable({self.name})"


def _name_arg(value: VariableTracker) -> str:
    name = value.as_python_constant()
    if not isinstance(name, str):
        raise Unsupported("operation_raises", f"attribute name {name!r} (TypeError in eager)")
    return name


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ObjectBuiltinVariable(BuiltinVariable):
    """Builtins whose meaning on objects is attribute access or construction.

    ``super``, ``object``, ``setattr``, ``delattr``, ``getattr``, ``hasattr``,
    ``type`` and ``len`` on user-defined objects; everything else as
    BuiltinVariable does it.
    """

    def call_builtin(self, tx: Tx, args, kwargs) -> VariableTracker:
        fn = self.fn
        if fn is super and not kwargs and len(args) in (0, 2):
            if not args:
                return zero_arg_super(tx)
            return SuperVariable(args[0].as_python_constant(), args[1])
        if fn is object and not args and not kwargs:
            return UserDefinedObjectVariable(
                None,
                object,
                self,
                mutation_type=tx.output.side_effects.new_mutation(AttributeMutationNew),
            )
        handled = self._on_object(tx, args) if not kwargs else None
        if handled is not None:
            return handled
        if fn in (super, object, setattr, delattr):
            raise Unsupported("builtin_arguments", f"{fn.__name__}() with these arguments")
        return super().call_builtin(tx, args, kwargs)

    def _on_object(self, tx: Tx, args: list[VariableTracker]) -> VariableTracker | None:
        fn = self.fn
        if not args:
            return None
        obj = args[0]
        if fn is setattr and len(args) == 3:
            setter = getattr(obj, "var_setattr", None)
            if setter is None:
                raise Unsupported("attribute_mutation", f"setattr on {obj}")
            setter(tx, _name_arg(args[1]), args[2])
            return ConstantVariable(None)
        if fn is delattr and len(args) == 2:
            deleter = getattr(obj, "var_delattr", None)
            if deleter is None:
                raise Unsupported("attribute_mutation", f"delattr on {obj}")
            deleter(tx, _name_arg(args[1]))
            return ConstantVariable(None)
        if fn is hasattr and len(args) == 2 and isinstance(obj, TensorVariable):
            return ConstantVariable(tensor_hasattr(tx, obj, _name_arg(args[1])))
        if not isinstance(
            obj, (UserDefinedObjectVariable, UserDefinedClassVariable, ExceptionInstanceVariable)
        ):
            return None
        if fn is hasattr and len(args) == 2:
            try:
                obj.var_getattr(tx, _name_arg(args[1]))
            except MissingAttribute:
                return ConstantVariable(False)
            return ConstantVariable(True)
        if fn is getattr and len(args) == 2:
            return getattr_raising(tx, obj, _name_arg(args[1]))
        if fn is getattr and len(args) == 3:
            try:
                return obj.var_getattr(tx, _name_arg(args[1]))
            except MissingAttribute:
                return args[2]
        if fn is type and len(args) == 1 and isinstance(obj, UserDefinedObjectVariable):
            return obj.class_vt(tx)
        if fn is len and len(args) == 1 and isinstance(obj, UserDefinedObjectVariable):
            return ConstantVariable(obj.length(tx))
        return None

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if self.fn is object and name in _OBJECT_SLOTS:
            return ObjectSlotVariable(name)
        raise Unsupported("unknown_attribute", f"attribute {name!r} of {self.fn.__name__}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
        else:
            codegen.load_const(self.fn)


OBJECT_BUILTINS = (super, object, setattr, delattr, getattr, hasattr, type, len)
OBJECT_BUILTIN_IDS = frozenset(map(id, OBJECT_BUILTINS))  # an identity test, no __eq__


# -- dataclasses ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class DataclassReplaceVariable(VariableTracker):
    """``dataclasses.replace(obj, **changes)``: a new instance through ``__init__``."""

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return dataclasses.replace

    def call_function(self, tx: Tx, args, kwargs) -> VariableTracker:
        if len(args) != 1 or not isinstance(args[0], UserDefinedObjectVariable):
            raise Unsupported(
                "dataclass_call", "dataclasses.replace of a non-dataclass (TypeError)"
            )
        obj = args[0]
        fields = getattr(obj.cls, "__dataclass_fields__", None)
        if fields is None:
            raise Unsupported(
                "dataclass_call", "dataclasses.replace of a non-dataclass (TypeError)"
            )
        changes = dict(kwargs)
        for field in fields.values():
            kind = field._field_type  # noqa: SLF001  (ClassVar and InitVar are only marked here)
            if kind is dataclasses._FIELD_CLASSVAR:  # noqa: SLF001
                continue
            if not field.init:
                if field.name in changes:
                    raise Unsupported(
                        "dataclass_call", f"replace() of init=False field {field.name!r}"
                    )
                continue
            if field.name not in changes:
                if kind is dataclasses._FIELD_INITVAR:  # noqa: SLF001
                    raise Unsupported(
                        "dataclass_call", f"replace() without InitVar {field.name!r}"
                    )
                changes[field.name] = obj.var_getattr(tx, field.name)
        return obj.class_vt(tx).call_function(tx, [], changes)
