"""Argument checks for the methods of builtin containers modelled in Python.

``ListVariable``, ``DictVariable`` and ``SetVariable`` model ``list.append``,
``dict.update``, ``set.union``... with Python helpers whose parameters are
not CPython's (they take the translator and the contents first, and often
accept keywords CPython refuses). A call with arguments the real method
rejects must raise the real method's TypeError, with its message, so
``check_method_arguments`` runs first and makes such a call a graph break:
the real method then runs in Python and raises exactly what eager raises.

The real signature comes from ``inspect.signature`` where CPython provides
one (``list.insert``: ``(self, index, object, /)``); the methods without one
(``dict.update``, ``set.union``...) have their positional bounds here.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from bytegraph.exc import Unsupported

# (fewest, most positional arguments, keywords accepted) of methods without a signature.
_NO_KEYWORDS = False
_BOUNDS: dict[str, tuple[int, float, bool]] = {
    "__getitem__": (1, 1, _NO_KEYWORDS),
    "__contains__": (1, 1, _NO_KEYWORDS),
    "clear": (0, 0, _NO_KEYWORDS),
    "copy": (0, 0, _NO_KEYWORDS),
    "items": (0, 0, _NO_KEYWORDS),
    "keys": (0, 0, _NO_KEYWORDS),
    "values": (0, 0, _NO_KEYWORDS),
    "pop": (0, 0, _NO_KEYWORDS),  # set.pop; dict.pop is below
    "update": (0, math.inf, _NO_KEYWORDS),  # set.update; dict.update is below
    "add": (1, 1, _NO_KEYWORDS),
    "discard": (1, 1, _NO_KEYWORDS),
    "remove": (1, 1, _NO_KEYWORDS),
    "isdisjoint": (1, 1, _NO_KEYWORDS),
    "issubset": (1, 1, _NO_KEYWORDS),
    "issuperset": (1, 1, _NO_KEYWORDS),
    "symmetric_difference": (1, 1, _NO_KEYWORDS),
    "symmetric_difference_update": (1, 1, _NO_KEYWORDS),
    "union": (0, math.inf, _NO_KEYWORDS),
    "intersection": (0, math.inf, _NO_KEYWORDS),
    "difference": (0, math.inf, _NO_KEYWORDS),
    "intersection_update": (0, math.inf, _NO_KEYWORDS),
    "difference_update": (0, math.inf, _NO_KEYWORDS),
}
_DICT_BOUNDS: dict[str, tuple[int, float, bool]] = {
    "pop": (1, 2, _NO_KEYWORDS),
    "update": (0, 1, True),
}
_SIGNATURES: dict[tuple[type, str], inspect.Signature | None] = {}
# A call without keywords needs only a count where the signature allows it
# (``positional_bounds``): Signature.bind costs 15 us a call.
_POSITIONAL_BOUNDS: dict[tuple[type, str], tuple[int, float] | None] = {}


def check_method_arguments(
    cls: type, name: str, args: list[Any], kwargs: dict[str, Any]
) -> None:
    """Unsupported unless ``cls.name(self, *args, **kwargs)`` binds as CPython binds it."""
    signature = _signature(cls, name)
    if signature is not None:
        bounds = None if kwargs else _POSITIONAL_BOUNDS[cls, name]
        if bounds is not None:  # self is the first positional parameter
            if not bounds[0] <= len(args) + 1 <= bounds[1]:
                _refuse(cls, name, f"{len(args)} arguments")
            return
        try:
            signature.bind(None, *args, **kwargs)
        except TypeError as e:
            _refuse(cls, name, str(e))
        return
    bounds = _bounds(cls, name)
    if bounds is None:
        return  # not a method of the builtin type: the caller refuses it by name
    fewest, most, keywords = bounds
    if not fewest <= len(args) <= most or (kwargs and not keywords):
        _refuse(cls, name, f"{len(args)} arguments, keywords {sorted(kwargs)}")


def _signature(cls: type, name: str) -> inspect.Signature | None:
    key = (cls, name)
    if key not in _SIGNATURES:
        method = getattr(cls, name, None)
        try:
            _SIGNATURES[key] = inspect.signature(method) if callable(method) else None
        except (TypeError, ValueError):
            _SIGNATURES[key] = None
        _POSITIONAL_BOUNDS[key] = positional_bounds(_SIGNATURES[key])
    return _SIGNATURES[key]


def positional_bounds(signature: inspect.Signature | None) -> tuple[int, float] | None:
    """How many positional arguments a call without keywords may pass; None where a count
    does not decide it (a keyword-only parameter without a default, or no signature)."""
    if signature is None:
        return None
    kind = inspect.Parameter
    low, high = 0, 0.0
    for parameter in signature.parameters.values():
        if parameter.kind in (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD):
            high += 1
            low += parameter.default is kind.empty
        elif parameter.kind is kind.VAR_POSITIONAL:
            high = math.inf
        elif parameter.kind is kind.KEYWORD_ONLY and parameter.default is kind.empty:
            return None
    return low, high


def _bounds(cls: type, name: str) -> tuple[int, float, bool] | None:
    if issubclass(cls, dict) and name in _DICT_BOUNDS:
        return _DICT_BOUNDS[name]
    return _BOUNDS.get(name)


def _refuse(cls: type, name: str, detail: str) -> None:
    raise Unsupported(
        "call_raises_type_error", f"{cls.__name__}.{name}() with these arguments: {detail} "
        "(TypeError in eager)",
    )
