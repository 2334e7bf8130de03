"""``isinstance`` and ``issubclass`` against classes whose metaclass hooks them.

A metaclass may define ``__instancecheck__`` or ``__subclasscheck__``
(``class Duck(metaclass=QuackMeta)`` answering "anything with ``quack``");
CPython then calls the hook instead of walking the MRO, and the answer (and
whatever the hook does on the way) is the hook's. The trace follows CPython's
``PyObject_IsInstance`` / ``PyObject_IsSubclass`` step by step:

1. ``isinstance`` only: an object of exactly that class is an instance, no hook
   called.
2. A class whose type is exactly ``type`` is answered from the MRO
   (``issubclass`` of the same class is True first).
3. A tuple is checked item by item (nested tuples too), stopping at the first
   True.
4. Otherwise the metaclass's hook is inlined like any user method,
   ``hook(cls, obj)``, and the result's truth is the answer (its ``__bool__``
   traced and checked as usual).

A legacy tensor type (``torch.FloatTensor``) answers from the tensor's dtype,
device and layout, as its C hook does. Hooks of ``type``, ``abc.ABCMeta``
(registered virtual subclasses), typing's and torch's own metaclasses keep the
answer the VT's Python type gives
(``builtin_handlers.isinstance_of``); only checks that involve a hook written
elsewhere come here. A hook that is no Python function, or a class that the
generated code cannot reach (no source), is a graph break.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import python_constant

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# Metaclasses from these modules answer from the MRO or abc's registry: their
# hooks keep the python_type answer.
_TRUSTED_MODULES = ("abc", "_py_abc", "typing", "torch")


def user_hook(cls: Any, name: str) -> Any:
    """The hook ``name`` of ``cls``'s metaclass if a user wrote it, else None."""
    meta = type(cls)
    if meta is type or not isinstance(cls, type):
        return None
    for klass in meta.__mro__:
        if name in vars(klass):
            hook = vars(klass)[name]
            module = getattr(hook, "__module__", None) or klass.__module__
            if klass is type or module.split(".")[0] in _TRUSTED_MODULES:
                return None
            return hook
    return None


def _any_hook(classes: Any, name: str) -> bool:
    if isinstance(classes, tuple):
        return any(_any_hook(c, name) for c in classes)
    if name == "__instancecheck__" and type(classes) is _LEGACY_TENSOR_TYPE:
        return True
    return user_hook(classes, name) is not None


# torch.FloatTensor, torch.cuda.LongTensor...: no tensor's class, yet a tensor of that
# dtype on that kind of device is an instance (C's Tensor_instancecheck), which
# the MRO cannot tell.
_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)


def _legacy_tensor_instance(value: VariableTracker, cls: Any) -> bool:
    from bytegraph.variables.tensor import TensorVariable

    if not isinstance(value, TensorVariable):
        return False
    device_type = "cuda" if cls.is_cuda else "cpu"
    sparse = value.example.layout is torch.sparse_coo
    return value.dtype == cls.dtype and value.device.type == device_type and sparse == cls.is_sparse


def _call_hook(
    tx: Tx, cls_vt: VariableTracker, name: str, arg: VariableTracker
) -> bool:
    """``type(cls).name(cls, arg)`` inlined; its result's truth."""
    from bytegraph.variables.user_defined import function_vt

    cls = python_constant(tx, cls_vt)
    hook = user_hook(cls, name)
    if not isinstance(hook, types.FunctionType):
        raise Unsupported("opaque_object_call", f"{type(cls).__qualname__}.{name} is no function")
    if cls_vt.source is None:
        raise Unsupported("class_without_source", f"{name} of a class with no source")
    source = AttrSource(AttrSource(cls_vt.source, "__class__"), name)
    result = function_vt(tx, hook, source).call_function(tx, [cls_vt, arg], {})
    return result.truth(tx)


def _items(tx: Tx, classes_vt: VariableTracker) -> list[VariableTracker]:
    return list(classes_vt.unpack_sequence(tx))


def _is_instance(tx: Tx, value: VariableTracker, cls_vt: VariableTracker) -> bool:
    cls = python_constant(tx, cls_vt)
    kind = value.python_type()
    if kind is cls:
        return True
    if isinstance(cls, tuple):
        return any(_is_instance(tx, value, item) for item in _items(tx, cls_vt))
    if type(cls) is _LEGACY_TENSOR_TYPE:
        return _legacy_tensor_instance(value, cls)
    if user_hook(cls, "__instancecheck__") is None:
        return issubclass(kind, cls)
    return _call_hook(tx, cls_vt, "__instancecheck__", value)


def _is_subclass(tx: Tx, derived: VariableTracker, cls_vt: VariableTracker) -> bool:
    cls = python_constant(tx, cls_vt)
    if isinstance(cls, tuple):
        return any(_is_subclass(tx, derived, item) for item in _items(tx, cls_vt))
    if user_hook(cls, "__subclasscheck__") is None:
        return issubclass(python_constant(tx, derived), cls)
    return _call_hook(tx, cls_vt, "__subclasscheck__", derived)


def hooked_isinstance(
    tx: Tx, value: VariableTracker, classes_vt: VariableTracker
) -> VariableTracker | None:
    """``isinstance(value, classes)`` where a user's ``__instancecheck__`` is involved;
    None where none is (the caller answers from the Python type)."""
    if not _any_hook(python_constant(tx, classes_vt), "__instancecheck__"):
        return None
    return ConstantVariable(_is_instance(tx, value, classes_vt))


def hooked_issubclass(
    tx: Tx, derived: VariableTracker, classes_vt: VariableTracker
) -> VariableTracker | None:
    """``issubclass(derived, classes)`` where a user's ``__subclasscheck__`` is involved."""
    if not _any_hook(python_constant(tx, classes_vt), "__subclasscheck__"):
        return None
    return ConstantVariable(_is_subclass(tx, derived, classes_vt))
