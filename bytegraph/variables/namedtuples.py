"""Named tuples: their classes, construction, and the methods of their instances.

An instance is a ``TupleVariable`` whose ``tuple_type`` is the class; fields
read by name are its items. The class (``collections.namedtuple`` or
``typing.NamedTuple``) is a ``NamedTupleClassVariable``: calling it binds the
arguments as its generated ``__new__`` would. Methods a user class adds
(``def norm(self)``, properties) are inlined like any user function.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import BoundMethodVariable, VariableTracker
from bytegraph.variables.constant import is_constant_value
from bytegraph.variables.containers import NEW_VALUE, TupleVariable
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.objects import ClassVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import InstructionTranslatorBase

_GENERATED = frozenset({"_make", "_replace", "_asdict", "__new__", "__repr__",
                        "__getnewargs__", "_fields", "_field_defaults"})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class NamedTupleClassVariable(ClassVariable):
    """A named tuple class: calling it builds an instance from field values."""

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        items = tuple(bind_fields(self.value, args, kwargs))
        # An instance with a __dict__ has an identity that matters (``n.extra = 5`` in
        # Python after a break): generated code builds it once, as it does mutables.
        mutation = NEW_VALUE if self.value.__dictoffset__ else None
        return TupleVariable(items, tuple_type=self.value, mutation_type=mutation)

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        if name == "_make":
            return BoundMethodVariable(self, name)
        return class_attribute(self.value, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "_make" and len(args) == 1 and not kwargs:
            items = tuple(args[0].unpack_sequence(tx))
            if len(items) != len(self.value._fields):
                raise Unsupported("call_raises_type_error", "_make with a wrong count (raises)")
            return TupleVariable(items, tuple_type=self.value)
        raise Unsupported("unsupported_method", f"{self.value.__name__}.{name}")

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.source is not None:
            self.source.reconstruct(codegen)
            return
        codegen.load_const(self.value)

    def __repr__(self) -> str:
        return f"NamedTupleClassVariable({self.value.__qualname__})"


def bind_fields(
    cls: type, args: list[VariableTracker], kwargs: dict[str, Any]
) -> list[VariableTracker]:
    """The field values of ``cls(*args, **kwargs)``, defaults filled in."""
    from bytegraph.variables.builder import wrap_constant_result

    try:
        bound = inspect.signature(cls.__new__).bind(cls, *args, **kwargs)
    except TypeError as e:
        raise Unsupported(
            "call_raises_type_error", f"{cls.__name__}(): {e} (raises in eager)"
        ) from None
    values = []
    for name in cls._fields:
        if name in bound.arguments:
            values.append(bound.arguments[name])
            continue
        default = cls._field_defaults[name]
        if not is_constant_value(default):
            raise Unsupported("not_a_constant", f"{cls.__name__}.{name} default {default!r}")
        values.append(wrap_constant_result(default))
    return values


def class_attribute(cls: type, name: str) -> VariableTracker:
    """A class-level attribute of a named tuple class: constants and functions."""
    from bytegraph.variables.builder import wrap_constant_result
    from bytegraph.variables.functions import UserFunctionVariable

    try:
        value = inspect.getattr_static(cls, name)
    except AttributeError:
        raise Unsupported("operation_raises", f"{cls.__name__} has no {name!r}") from None
    if isinstance(value, staticmethod):
        value = value.__func__
    if isinstance(value, types.FunctionType):
        return UserFunctionVariable(value)
    return wrap_constant_result(getattr(cls, name))


def _user_definition(cls: type, name: str) -> Any:
    """``name`` as the user's class body defines it, or None (tuple's and generated)."""
    for klass in cls.__mro__:
        if klass is tuple or klass is object:
            return None
        if name in vars(klass):
            if name in _GENERATED and "_make" in vars(klass):
                return None
            return vars(klass)[name]
    return None


def namedtuple_attribute(
    tx: InstructionTranslatorBase, instance: TupleVariable, name: str
) -> VariableTracker:
    """``instance.name`` for a name that is not a field."""
    from bytegraph.variables.containers import method_of
    from bytegraph.variables.functions import PartialVariable, UserFunctionVariable

    cls = instance.tuple_type
    if name in ("_replace", "_asdict", "_make"):
        return BoundMethodVariable(instance, name)
    if name in ("_fields", "_field_defaults"):
        return class_attribute(cls, name)
    definition = _user_definition(cls, name)
    if definition is None:
        return method_of(instance, name)
    if isinstance(definition, property) and definition.fget is not None:
        return UserFunctionVariable(definition.fget).call_function(tx, [instance], {})
    if isinstance(definition, types.FunctionType):
        return PartialVariable(UserFunctionVariable(definition), (instance,), {})
    if isinstance(definition, staticmethod):
        return UserFunctionVariable(definition.__func__)
    if isinstance(definition, classmethod):
        return PartialVariable(UserFunctionVariable(definition.__func__),
                               (NamedTupleClassVariable(cls),), {})
    return class_attribute(cls, name)


def namedtuple_method(
    tx: InstructionTranslatorBase,
    instance: TupleVariable,
    name: str,
    args: list[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> VariableTracker | None:
    """The generated methods of a named tuple instance; None for any other name."""
    cls = instance.tuple_type
    if name == "_replace" and not args:
        unknown = set(kwargs) - set(cls._fields)
        if unknown:
            raise Unsupported(
                "call_raises_type_error", f"_replace of unknown fields {unknown} (raises)"
            )
        items = tuple(kwargs.get(f, item) for f, item in zip(cls._fields, instance.items))
        return TupleVariable(items, tuple_type=cls)
    if name == "_asdict" and not args and not kwargs:
        return DictVariable(dict(zip(cls._fields, instance.items)), mutation_type=NEW_VALUE)
    if name == "_make":
        return NamedTupleClassVariable(cls).call_method(tx, name, args, kwargs)
    return None
