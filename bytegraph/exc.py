"""The error hierarchy; the graph-break catalogue lives in catalogue.py.

``BytegraphError`` is the root. ``Unsupported`` marks something the translator
cannot put into a graph; it is a graph break, or under ``fullgraph=True`` an
error for the user. ``UserError`` is the user's own mistake, found while
tracing and raised at compile time. ``InternalError`` is a bytegraph bug and
is never turned into a silent fallback.
"""

from __future__ import annotations

import dataclasses

from bytegraph.catalogue import CATALOGUE, BreakEntry, lookup


class BytegraphError(Exception):
    """Root of every error bytegraph raises on purpose."""


class InternalError(BytegraphError):
    """A bytegraph bug: an invariant of the translator did not hold."""


class UserError(BytegraphError, RuntimeError):
    """The program is wrong in a way the trace can tell before it runs (torch.cond's
    branches returning different structures): raised to the user, never a graph break.

    Raised only where eager raises too, and only where no handler of the user's code
    (a ``try``, a with-block) could see eager's error: there it is a break instead.
    A RuntimeError, as torch.compile's errors for the same mistakes are.
    """


BreakKind = BreakEntry  # the catalogue's entry type, by its former name
BREAK_KINDS: dict[str, BreakEntry] = CATALOGUE  # by its former name


@dataclasses.dataclass(frozen=True)
class UserFrame:
    """One frame of user code: where a break happened, or a caller that inlined it."""

    filename: str
    lineno: int | None
    name: str
    source_line: str

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno} in {self.name}"
        return f"{where}\n    {self.source_line}" if self.source_line else where


class Unsupported(BytegraphError):
    """The translator cannot put something into a graph.

    ``entry`` names an entry of the catalogue (bytegraph/catalogue.py);
    ``kind`` is that entry's broad family (``unsupported_call``,
    ``data_dependent``...); ``detail`` says what exactly. ``frames`` is filled
    in by the translator: the user's frame where it happened first, then each
    caller that inlined it, so the message points at user code.
    """

    def __init__(self, entry: str, detail: str, frames: tuple[UserFrame, ...] = ()) -> None:
        try:
            self.entry: BreakEntry = lookup(entry)
        except KeyError:
            raise InternalError(f"unknown graph-break entry {entry!r}") from None
        self.kind = self.entry.family
        self.detail = detail
        self.frames = frames
        self.step: int | None = None  # the root translator's step where it was raised
        self.index: int | None = None  # and the index of its instruction there
        super().__init__(self._message())

    @property
    def hint(self) -> str:
        return self.entry.hint

    @property
    def location(self) -> str:
        return "\n  inlined from ".join(str(f) for f in self.frames)

    def _message(self) -> str:
        text = f"{self.detail} ({self.entry.explanation})"
        if self.frames:
            text += f"\n  at {self.location}"
        return text + f"\n  hint: {self.hint}\n  [{self.entry.id} {self.entry.name}]"

    def with_frames(self, frames: tuple[UserFrame, ...]) -> Unsupported:
        if self.frames:
            return self
        located = Unsupported(self.entry.name, self.detail, frames)
        located.__cause__ = self.__cause__
        located.step = self.step
        located.index = self.index
        return located
