"""Guards on classes made one per instance: their shape and their identities, not the class.

``torch.nn.utils.parametrize`` (``weight_norm``, ``orthogonal``...) swaps each
parametrized module's class for a new subclass made just for it::

    type(f"Parametrized{cls.__name__}", (cls,), {"__getstate__": ..., ...})

plus a ``property`` per parametrized tensor. Guarding such a class by identity
(``type(self.conv) is ParametrizedConv1d``) fails for every other instance, so
a function shared by the layers of a model (a method, or the resume function
after a break in it) recompiles once per layer, up to the recompile limit,
then runs as Python: EnCodec and WavTokenizer's convolution layers.

What a trace relies on in such a class is what a lookup finds there: the
class's own names and the kinds of their values, and the classes after it in
the MRO. Everything read from those entries (a property's getter, its code and
closure, a method of the base class) is guarded through its own source
(``x.__class__.__dict__['weight'].fget.__code__ is ...``). So a guard whose
expected value is such a class (``type(x) is C``, ``x.__class__ is C``)
becomes, in ``guards/build.py``:

1. ``<shape of C>(read)``: the class read now has ``C``'s metaclass, ``C``'s
   MRO after itself (by identity), ``C``'s own names in order, a value of the
   same type under each, and functions (also a property's getter, setter and
   deleter) of the same code;
2. the identities among every such class the trace met: reads of one class
   are the same object, reads of different ones are different objects. A trace
   that decided ``isinstance(a, type(b))`` or ``type(a) is type(b)`` therefore
   decides it again the same way.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Sequence
from typing import Any

from bytegraph.guards.guard import Guard, GuardKind

_MADE_BY = "torch.nn.utils.parametrize"
# copyreg's cache of a class's slot names, set on the class by the first copy.deepcopy of
# an instance: no lookup of the trace ends there (one read would be guarded by source).
_CACHES = frozenset({"__slotnames__"})


def is_made_per_instance(cls: Any) -> bool:
    """Whether ``cls`` is a class ``torch.nn.utils.parametrize`` made for one module."""
    if not isinstance(cls, type) or cls.__module__ != _MADE_BY or len(cls.__bases__) != 1:
        return False
    own = cls.__dict__
    return cls.__name__ == f"Parametrized{cls.__bases__[0].__name__}" and "__getstate__" in own


def per_instance_class(guard: Guard) -> type | None:
    """The class a type or identity guard expects, if it is made per instance."""
    if guard.kind in (GuardKind.TYPE_MATCH, GuardKind.ID_MATCH):
        if is_made_per_instance(guard.expected):
            return guard.expected
    return None


def _value_shape(value: Any) -> tuple[Any, ...]:
    """What must match in the value under one name of the class."""
    if isinstance(value, types.FunctionType):
        return (types.FunctionType, value.__code__)
    if isinstance(value, property):
        parts = (value.fget, value.fset, value.fdel)
        return (type(value), *(getattr(f, "__code__", f) for f in parts))
    if value is None or type(value) in (str, int, bool):
        return (type(value), value)
    return (type(value),)


def _entries(cls: type) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    return tuple(
        (name, _value_shape(value)) for name, value in cls.__dict__.items() if name not in _CACHES
    )


@dataclasses.dataclass(frozen=True, eq=False)
class ClassShape:
    """The shape of one class made per instance; calling it on a class tells a match."""

    name: str
    metaclass: type
    rest_of_mro: tuple[type, ...]
    entries: tuple[tuple[str, tuple[Any, ...]], ...]

    @staticmethod
    def of(cls: type) -> ClassShape:
        return ClassShape(cls.__qualname__, type(cls), cls.__mro__[1:], _entries(cls))

    def __call__(self, cls: Any) -> bool:
        if type(cls) is not self.metaclass or len(cls.__mro__) != len(self.rest_of_mro) + 1:
            return False
        if any(a is not b for a, b in zip(cls.__mro__[1:], self.rest_of_mro)):
            return False
        return _entries(cls) == self.entries

    def __repr__(self) -> str:
        return f"shaped_like_{self.name}"


def shape_checks(
    guards: Sequence[Guard], ref: Callable[[Any], str], const: Callable[[Any], str]
) -> list[str]:
    """The guard expressions for every type or identity guard on a class made per
    instance: each class read has its class's shape, reads of one class are one
    object, reads of different classes are different objects."""
    reads: dict[int, tuple[type, list[Guard]]] = {}
    for guard in guards:
        cls = guard.expected
        reads.setdefault(id(cls), (cls, []))[1].append(guard)

    def read(guard: Guard) -> str:
        return f"type({ref(guard.source)})" if guard.kind is GuardKind.TYPE_MATCH else (
            ref(guard.source)
        )

    parts: list[str] = []
    for cls, group in reads.values():
        parts.append(f"{const(ClassShape.of(cls))}({read(group[0])})")
        parts.extend(f"{read(other)} is {read(group[0])}" for other in group[1:])
    if len(reads) > 1:
        firsts = ", ".join(f"id({read(group[0])})" for _, group in reads.values())
        parts.append(f"len({{{firsts}}}) == {len(reads)}")
    return parts
