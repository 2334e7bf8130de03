"""Classes and arbitrary Python objects the translator does not model further."""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase


def _bind_method(fn: VariableTracker, obj: VariableTracker) -> VariableTracker:
    """``types.MethodType(fn, obj)`` of a Python function: calls pass ``obj`` first."""
    from bytegraph.variables.functions import BaseFunctionVariable
    from bytegraph.variables.user_defined import UserMethodVariable

    if not isinstance(fn, BaseFunctionVariable):
        raise Unsupported("opaque_object_call", f"types.MethodType of {fn}")
    return UserMethodVariable(fn, obj)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class WeakRefVariable(VariableTracker):
    """A ``weakref.ref`` from the frame: calling it reads its referent through the
    source ``ref()``, guarded like any value (an alias of an object seen another way
    is guarded the same object, so ``ref() is weight`` holds on later calls)."""

    ref: Any = None

    def python_type(self) -> type:
        return type(self.ref)

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        from bytegraph.guards.guard import GuardKind
        from bytegraph.guards.sources import CallResultSource
        from bytegraph.variables.builder import wrap

        if args or kwargs or self.source is None:
            raise Unsupported("call_raises_type_error", "a weak reference called with arguments")
        source = CallResultSource(self.source)
        referent = self.ref()
        if referent is None:
            tx.output.add_guard(GuardKind.CONSTANT_MATCH, source, None)
            return ConstantVariable(None)
        return wrap(tx, referent, source)

    def __repr__(self) -> str:
        return "WeakRefVariable()"


_NAMES = ("__name__", "__qualname__", "__module__")
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ClassVariable(PythonValueVariable):
    """A class object, compared by identity (``type(x) is torch.Tensor``)."""

    rebuilt_as_constant = True

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if self.value is functools.partial and args:
            from bytegraph.variables.functions import PartialVariable

            return PartialVariable(args[0], tuple(args[1:]), dict(kwargs))
        if self.value is types.MethodType and len(args) == 2 and not kwargs:
            return _bind_method(args[0], args[1])
        raise Unsupported("object_creation", f"instantiating {self.value.__qualname__}")

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        """The names of a builtin class (``type(e).__name__``): fixed, as no Python code
        can assign to a static type's attributes."""
        cls = self.value
        if name in _NAMES and isinstance(cls, type) and not cls.__flags__ & _HEAP_TYPE:
            return ConstantVariable(getattr(cls, name))
        from bytegraph.variables.tensor_methods import tensor_method

        method = tensor_method(cls, name)
        if method is not None:  # torch.Tensor.sum: called with the tensor first
            return method
        from bytegraph.variables.function_modes import tensor_dunder

        dunder = tensor_dunder(cls, name)  # torch.Tensor.__getitem__, which modes compare
        if dunder is not None:
            return dunder
        return super().var_getattr(tx, name)

    def __repr__(self) -> str:
        return f"ClassVariable({self.value.__qualname__})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ObjectVariable(VariableTracker):
    """An object passed through the trace untouched (returned or compared only)."""

    value: Any

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        # A function of torch's that is not traced (the builder guards its identity), as
        # an argument a callee keeps: checkpoint's context_fn partial, say.
        if self.source is not None and isinstance(self.value, types.FunctionType):
            return self.value
        return super().as_python_constant()

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        raise Unsupported(
            "unknown_attribute", f"attribute {name!r} of a {type(self.value).__name__} object"
        )

    def call_function(
        self,
        tx: InstructionTranslatorBase,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        raise refuse_call(self.value)

    def __repr__(self) -> str:
        return f"ObjectVariable({type(self.value).__name__})"


_C_CALLABLES = (
    types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
    types.MethodWrapperType, types.ClassMethodDescriptorType,
)


def refuse_call(value: Any) -> Unsupported:
    """The break for a call of ``value``, which the trace can neither follow nor model."""
    what = f"call of {describe_callable(value)}"
    if isinstance(value, _C_CALLABLES):
        return Unsupported("c_function_call", what)
    if isinstance(value, types.FunctionType):  # only torch's own functions get here
        if (getattr(value, "__module__", None) or "").startswith("torch.distributed"):
            return Unsupported("collective_call", what)
        return Unsupported("torch_internal_call", what)
    return Unsupported("opaque_object_call", what)


def describe_callable(value: Any) -> str:
    """``builtins.print``, ``time.sleep``, ``mymodule.Helper.method``: what a break names."""
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if name is None:
        return f"a {type(value).__name__} object"
    module = getattr(value, "__module__", None)
    if module is None and getattr(value, "__self__", None) is not None:
        module = getattr(type(value.__self__), "__module__", None)
    return f"{module}.{name}" if module else name
