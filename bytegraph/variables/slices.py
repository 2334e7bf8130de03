"""Slices from the frame whose bounds are not all constants: guarded by their parts.

A slice of constants is a constant (guarded by value, ``builder.py``). One with a
tensor bound (``in_act[:, :n]`` where ``n`` is a 0-d tensor: VITS's WaveNet) is
made anew by every call; guarded by identity, it failed on every call, so the
function it was passed to (the resume function after the break that building it
caused) compiled again each time, up to the recompile limit. ``SliceVariable``
holds the three parts, each wrapped from its own source (``s.start``, ``s.stop``,
``s.step``): the guard is the slice's type and what its parts need. Whatever needs
the slice as a constant (an index of a tensor or a list) breaks, as before.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.guards.guard import GuardKind
from bytegraph.guards.sources import AttrSource, Source
from bytegraph.variables.base import VariableTracker

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_PARTS = ("start", "stop", "step")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SliceVariable(VariableTracker):
    """``slice(start, stop, step)`` from the frame, with a part that is no constant."""

    parts: tuple[VariableTracker, ...]

    def python_type(self) -> type:
        return slice

    def is_python_constant(self) -> bool:
        return all(p.is_python_constant() for p in self.parts)

    def as_python_constant(self) -> Any:
        if not self.is_python_constant():
            raise Unsupported("not_a_constant", f"{self} is not a Python constant")
        return slice(*(p.as_python_constant() for p in self.parts))

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in _PARTS:
            return self.parts[_PARTS.index(name)]
        return super().var_getattr(tx, name)

    def __repr__(self) -> str:
        return f"SliceVariable({', '.join(map(repr, self.parts))})"


def wrap_frame_slice(tx: Tx, value: slice, source: Source) -> VariableTracker:
    """A slice read from the frame whose parts are not all constants."""
    from bytegraph.variables.builder import wrap

    tx.output.add_guard(GuardKind.TYPE_MATCH, source, slice)
    parts = tuple(wrap(tx, getattr(value, name), AttrSource(source, name)) for name in _PARTS)
    return SliceVariable(parts, source=source)
