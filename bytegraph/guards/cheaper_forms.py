"""Cheaper expressions for the fast guard function, each deciding what the plain form decides.

The plain form of a guard (``GuardFunction.parts``, what reports print) reads
as the condition it states: ``w.device == torch.device('cpu')``,
``w.stride() == (16, 1)``, ``m.__class__ is Linear``. On a module with
hundreds of parameters such reads are the guard's cost (seven checks a tensor,
50-150 ns each from Python), so the fast form, which only has to reach the same
answer, uses the cheapest expression that reaches exactly the same answer:

- ``x.is_cpu`` for ``x.device == torch.device('cpu')``: a CPU tensor's device
  has no index, so the two agree on every tensor; ``device`` builds a new
  torch.device per read, ``is_cpu`` returns a bool.
- ``x.is_contiguous()`` for ``x.stride() == <the contiguous strides>`` where every
  size is at least 2 and the layout is checked strided beside it (an mkldnn tensor
  is "contiguous" whatever its shape; its strides read ``(1, 0...)``, so that layout
  check is made for 1-d contiguous tensors anyway, and only they take this form):
  torch's stored contiguity flag is that very comparison, except that it skips
  dimensions of size 1 and tensors with no elements, so without those the two
  agree. ``stride()`` builds a tuple through torch's argument parser.
- ``x.requires_grad`` for ``x.requires_grad is True`` (``not x.requires_grad`` for
  ``is False``), and so for ``is_leaf``: torch's getters of these flags return a bool,
  which is True exactly when it is truthy. The ``is`` costs compile() a node a tensor.
- nothing for ``x.__class__ is C`` once ``type(x) is C`` has passed, where ``C``
  takes ``__class__`` and ``__getattribute__`` from ``object``: ``x.__class__``
  is then ``type(x)``.
- ``m.__dict__['_forward_hooks']`` for ``m._forward_hooks`` once ``type(m) is C``
  has passed, for the attributes ``nn.Module.__init__`` sets, where the module
  class ``C`` defines none of them and takes ``__getattribute__`` from ``object``:
  the lookup then finds them in the instance dict, which the guard reads once
  per module anyway. nn.Module defines ``__getattr__``, so CPython does not
  specialise its attribute reads; a dict subscript it does.
- ``len({a, b, c}) == 3`` for ``len({id(a), id(b), id(c)}) == 3`` (the sources are
  different objects) where each one's exact type is checked and hashes and
  compares by identity (``object.__hash__``, ``object.__eq__``): no ``id`` call each.

The tensor forms apply to ``torch.Tensor`` and ``nn.Parameter`` only (a subclass
may redefine ``device`` or ``is_contiguous``), after the exact type check. Each
is equivalent, not merely implied, so the guard that fails in the fast form also
fails in the plain one, and ``first_failure`` names it.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import torch

from bytegraph.guards.guard import Guard, GuardKind, TensorSnapshot
from bytegraph.guards.sources import AttrSource, Source

_TORCH_OWN = (torch.Tensor, torch.nn.Parameter)  # attributes as torch defines them
_CPU = torch.device("cpu")
_UNCHECKED = object()
_Module = torch.nn.Module
# What nn.Module.__init__ stores in every module's instance dict: hook dicts, _parameters...
MODULE_OWN = frozenset(vars(_Module()))


def device_check(read: str, snap: TensorSnapshot) -> str | None:
    """``read.is_cpu`` where it decides what ``read.device == <cpu>`` decides, else None."""
    if snap.tensor_type in _TORCH_OWN and snap.device == _CPU:
        return f"{read}.is_cpu"
    return None


def flag_check(read: str, flag: str, value: bool, snap: TensorSnapshot) -> str | None:
    """``read.flag`` (or ``not read.flag``) where it decides what ``read.flag is value``
    decides, else None."""
    if snap.tensor_type not in _TORCH_OWN:
        return None
    return f"{read}.{flag}" if value else f"not {read}.{flag}"


def contiguity_check(read: str, snap: TensorSnapshot) -> str | None:
    """``read.is_contiguous()`` where, beside the shape check and a check that the layout
    is strided, it decides what ``read.stride() == snap.stride`` decides, else None."""
    if snap.tensor_type not in _TORCH_OWN or snap.dynamic or snap.dynamic_strides:
        return None
    if any(size < 2 for size in snap.shape) or snap.stride != contiguous_strides(snap.shape):
        return None
    return f"{read}.is_contiguous()"


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The row-major strides of ``shape``."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def implied_class_check(guard: Guard, checked_types: dict[Source, Any]) -> bool:
    """Whether ``guard`` is ``x.__class__ is C`` and ``type(x) is C`` is already checked."""
    source = guard.source
    if guard.kind is not GuardKind.ID_MATCH or not isinstance(source, AttrSource):
        return False
    cls = guard.expected
    if source.attr != "__class__" or checked_types.get(source.base, _UNCHECKED) is not cls:
        return False
    return isinstance(cls, type) and _plain_class_attribute(cls)


def reads_instance_dict(cls: Any, attr: str) -> bool:
    """Whether ``m.attr`` is ``m.__dict__[attr]`` (or raises) for every instance ``m`` of
    ``cls`` (None: a class not known)."""
    if not isinstance(cls, type) or attr not in MODULE_OWN or not issubclass(cls, _Module):
        return False
    instance_dict = _owner(cls, "__dict__")
    return (
        _owner(cls, attr) is None
        and _owner(cls, "__getattribute__") is object
        and instance_dict is not None
        and type(instance_dict.__dict__["__dict__"]) is types.GetSetDescriptorType
    )


def hashed_by_identity(classes: Iterable[Any]) -> bool:
    """Whether every one of ``classes`` (None: a class not known) hashes and compares its
    instances by identity: a set of them then holds each object once."""
    return all(
        isinstance(cls, type) and _owner(cls, "__hash__") is object
        and _owner(cls, "__eq__") is object
        for cls in classes
    )


def _plain_class_attribute(cls: type) -> bool:
    """Whether ``obj.__class__`` is ``type(obj)`` for every instance ``obj`` of ``cls``."""
    return all(
        _owner(cls, name) is object for name in ("__class__", "__getattribute__")
    )


def _owner(cls: type, name: str) -> type | None:
    """The class of ``cls``'s MRO whose own namespace defines ``name``."""
    for base in cls.__mro__:
        if name in base.__dict__:
            return base
    return None
