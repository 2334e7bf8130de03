"""Which classes bytegraph models as user classes, decided from the class alone.

A user class is made by class statements over ``object`` (or over ``dict``/
``OrderedDict``: user_dicts.py), under ``type``, ``ABCMeta`` or a metaclass
that leaves instance creation and attribute reads to ``type``. Its
``__getattribute__`` is ``object``'s or a Python function (custom_attrs.py
inlines it). Everything else (C bases, TorchScript, metaclass tricks) is
handled elsewhere or not at all.
"""

from __future__ import annotations

import abc
import collections
import types
from typing import Any

import torch

from bytegraph.variables.function_modes import is_traced_mode_class
from bytegraph.variables.torch import is_torch_helper_class

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_PLAIN_METACLASSES = (type, abc.ABCMeta)


def is_plain_metaclass(meta: type) -> bool:
    """``type``, or a metaclass that leaves creating instances and reading attributes alone.

    A metaclass customising only ``__setattr__`` (Hugging Face's ModelOutput
    has one) or ``__init_subclass__``-style hooks changes nothing the trace
    models; one defining ``__call__``, ``__getattribute__``, ``__getattr__``
    or a data descriptor (which class attribute reads would find first) does.
    """
    if meta in _PLAIN_METACLASSES:
        return True
    if not issubclass(meta, type) or meta.__call__ is not type.__call__:
        return False
    if meta.__getattribute__ is not type.__getattribute__ or hasattr(meta, "__getattr__"):
        return False
    return not any(
        is_data_descriptor(raw)
        for klass in meta.__mro__
        if klass not in (type, object)
        for raw in vars(klass).values()
    )


def _heap_mro(cls: type) -> bool:
    return all(k is object or k.__flags__ & _HEAPTYPE for k in cls.__mro__)


MAPPING_BASES = (dict, collections.OrderedDict)


def mapping_base(cls: type) -> type | None:
    """``dict`` or ``OrderedDict`` if ``cls`` is a Python subclass of one, else None."""
    for klass in cls.__mro__:
        if not klass.__flags__ & _HEAPTYPE:  # the first class not made by a class statement
            return klass if klass in MAPPING_BASES and klass is not cls else None
    return None


def _modelled_mro(cls: type) -> bool:
    """Python classes over ``object``, or over dict/OrderedDict (user_dicts.py)."""
    return _heap_mro(cls) or (
        mapping_base(cls) is not None
        and cls.__new__ is dict.__new__
        and all(k in (object, dict, collections.OrderedDict) or k.__flags__ & _HEAPTYPE
                for k in cls.__mro__)
    )


def has_custom_getattribute(cls: type) -> bool:
    """A Python class in the MRO defines ``__getattribute__`` (builtins such as dict
    list the generic one in their own ``__dict__``)."""
    for klass in cls.__mro__:
        if "__getattribute__" in vars(klass):
            return bool(klass.__flags__ & _HEAPTYPE)
    return False


def is_plain_class(cls: Any) -> bool:
    """A class whose instances behave as ``object`` says: no C base, no metaclass tricks."""
    if not isinstance(cls, type) or not is_plain_metaclass(type(cls)):
        return False
    if has_custom_getattribute(cls):
        return False
    return _heap_mro(cls)


def is_user_class(cls: Any) -> bool:
    """Classes modelled here: plain, and not torch internals (nn.Modules excepted).

    A class whose ``__getattribute__`` is a Python function is modelled too:
    reads inline it (custom_attrs.py).
    """
    if not is_plain_class(cls):
        if not (isinstance(cls, type) and is_plain_metaclass(type(cls)) and _modelled_mro(cls)):
            return False
        getattribute = cls.__getattribute__
        if has_custom_getattribute(cls) and not isinstance(getattribute, types.FunctionType):
            return False

    return (
        not cls.__module__.startswith("torch") or issubclass(cls, torch.nn.Module)
        or is_traced_mode_class(cls)  # torch's own modes: transformers enters one
        or is_torch_helper_class(cls)  # BlockMask
    )


def is_data_descriptor(raw: Any) -> bool:
    kind = type(raw)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")
