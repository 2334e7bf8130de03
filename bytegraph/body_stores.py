"""Attribute stores a higher-order body makes on outside objects and undoes itself.

A body (checkpoint, cond, map...) may only mutate what it created: the op
cannot replay a change to the world, and runs the body more than once (a
checkpoint's recompute). One pattern is harmless: a store the body undoes
before it ends, such as a context variable set around a call and reset in a
``finally`` (``token = var.set(x); try: ... finally: var.reset(token)``, as
the ``kernels`` package does around every layer call of transformers' models).
Eager leaves the object as it found it, every time the body runs.

1. ``ScopeStores.note`` records, on the first store of ``obj.name`` in the
   body, what the side-effect log held for it before (a pending value, or
   nothing: the real attribute). The store itself goes into the log as
   usual, so reads inside the body see it.
2. When the body's trace ends, ``restored`` checks each noted attribute: its
   last value must be what was there before (the same VT; an identical
   constant; the value read from that very attribute; the tracked VT of the
   object the attribute holds; deleted where the object has no such
   attribute). What the check relies on about the real object is guarded.
3. The log is put back as it was before the body: nothing is replayed.

An attribute left changed is the usual ``side_effect_in_higher_order_body``
break. Container contents and globals are not covered: they stay refused at
the store.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource, GetItemSource

if TYPE_CHECKING:
    from bytegraph.side_effects import SideEffects
    from bytegraph.variables.base import VariableTracker

ABSENT = object()
"""No pending store in the log: the real attribute (or none) is what was there."""

_IDENTICAL_TYPES = (bool, int, str, bytes, type(None))


@dataclasses.dataclass
class ScopeStores:
    """The outside attributes one body stored: (object VT, name) -> the log's value before."""

    before: dict[tuple[int, str], tuple[VariableTracker, str, Any]] = dataclasses.field(
        default_factory=dict
    )

    def note(self, vt: VariableTracker, name: str, pending: Any) -> None:
        """``vt.name`` is stored in the body; ``pending`` is the log's value (or ABSENT)."""
        self.before.setdefault((id(vt), name), (vt, name, pending))


def unrestored(
    side_effects: SideEffects, stores: ScopeStores, add_guard: Any
) -> tuple[VariableTracker, str] | None:
    """The first noted attribute whose last value differs from its value before the body
    (the object's VT and the name), or None when the body undid every store."""
    for vt, name, before in stores.before.values():
        after = side_effects.load_attr(vt, name)
        if not _restored(side_effects, vt, name, before, after, add_guard):
            return vt, name
    return None


def _restored(
    side_effects: SideEffects, vt: Any, name: str, before: Any, after: Any, add_guard: Any
) -> bool:
    from bytegraph.side_effects import DELETED

    if before is not ABSENT:
        return after is before or _identical_constants(before, after)
    real = getattr(vt, "value", None)
    if vt.source is None or real is None or not hasattr(real, "__dict__"):
        return False
    attrs = vars(real)
    if after is DELETED:
        if name in attrs:
            return False
        add_guard(GuardKind.KEY_ABSENT, AttrSource(vt.source, "__dict__"), name)
        return True
    if name not in attrs:
        return False
    if getattr(after, "source", None) == AttrSource(vt.source, name):
        return True  # read from this very attribute before the body stored into it
    item = GetItemSource(AttrSource(vt.source, "__dict__"), name)
    value = attrs[name]
    if _is_constant(after) and _identical(after.value, value):
        add_guard(GuardKind.CONSTANT_MATCH, item, value)
        return True
    if side_effects.existing(value) is after:
        add_guard(GuardKind.ID_MATCH, item, value)
        return True
    return False


def _is_constant(vt: Any) -> bool:
    from bytegraph.variables.constant import ConstantVariable

    return type(vt) is ConstantVariable


def _identical_constants(a: Any, b: Any) -> bool:
    return _is_constant(a) and _is_constant(b) and _identical(a.value, b.value)


def _identical(a: Any, b: Any) -> bool:
    """The same value for any reader: not 0.0 and -0.0, not 1 and True."""
    return a is b or (type(a) is type(b) and type(a) in _IDENTICAL_TYPES and a == b)
