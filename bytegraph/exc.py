"""The error hierarchy and the catalogue of graph-break kinds.

``BytegraphError`` is the root. ``Unsupported`` marks something the translator
cannot put into a graph; it is a graph break, or under ``fullgraph=True`` an
error for the user. ``InternalError`` is a bytegraph bug and is never turned
into a silent fallback.
"""

from __future__ import annotations

import dataclasses


class BytegraphError(Exception):
    """Root of every error bytegraph raises on purpose."""


class InternalError(BytegraphError):
    """A bytegraph bug: an invariant of the translator did not hold."""


@dataclasses.dataclass(frozen=True)
class BreakKind:
    """One entry of the graph-break catalogue: what happened and what to do."""

    name: str
    explanation: str
    hint: str


BREAK_KINDS: dict[str, BreakKind] = {
    kind.name: kind
    for kind in (
        BreakKind(
            "unsupported_opcode",
            "the translator has no handler for this bytecode instruction",
            "move the construct out of the compiled function or report it",
        ),
        BreakKind(
            "unsupported_call",
            "a call into code that is neither traceable Python nor a known torch or builtin",
            "wrap the callee with bytegraph.allow_in_graph if it only does tensor work",
        ),
        BreakKind(
            "data_dependent",
            "Python control flow, a Python value or an output size depends on a tensor's "
            "contents",
            "keep the decision in tensor form (torch.where); for Tensor.item() and ops such "
            "as nonzero, the switch the message names (bytegraph.config.capture_scalar_outputs"
            ", capture_dynamic_output_shape_ops) keeps them in the graph; or accept the break",
        ),
        BreakKind(
            "unsupported_value",
            "an operation on a value the translator does not model",
            "pass the value as a tensor or constant, or accept the break",
        ),
        BreakKind(
            "operator_failed",
            "running the operation on metadata-only tensors failed",
            "check the operation in eager mode; it may fail there too",
        ),
        BreakKind(
            "side_effect",
            "a mutation that cannot be replayed faithfully after the graph",
            "move the mutation out of the compiled region",
        ),
        BreakKind(
            "inline_limit",
            "user function calls nest deeper than config.inline_depth_limit",
            "raise bytegraph.config.inline_depth_limit or restructure the recursion",
        ),
        BreakKind(
            "explicit",
            "bytegraph.graph_break() was called",
            "remove the call to keep one graph",
        ),
    )
}


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

    ``kind`` names an entry of ``BREAK_KINDS``; ``detail`` says what exactly.
    ``frames`` is filled in by the translator: the user's frame where it
    happened first, then each caller that inlined it, so the message points
    at user code.
    """

    def __init__(self, kind: str, detail: str, frames: tuple[UserFrame, ...] = ()) -> None:
        if kind not in BREAK_KINDS:
            raise InternalError(f"unknown graph-break kind {kind!r}")
        self.kind = kind
        self.detail = detail
        self.frames = frames
        self.step: int | None = None  # the root translator's step where it was raised
        self.index: int | None = None  # and the index of its instruction there
        super().__init__(self._message())

    @property
    def hint(self) -> str:
        return BREAK_KINDS[self.kind].hint

    @property
    def location(self) -> str:
        return "\n  inlined from ".join(str(f) for f in self.frames)

    def _message(self) -> str:
        text = f"{self.detail} ({BREAK_KINDS[self.kind].explanation})"
        if self.frames:
            text += f"\n  at {self.location}"
        return text + f"\n  hint: {self.hint}"

    def with_frames(self, frames: tuple[UserFrame, ...]) -> Unsupported:
        if self.frames:
            return self
        located = Unsupported(self.kind, self.detail, frames)
        located.__cause__ = self.__cause__
        located.step = self.step
        located.index = self.index
        return located
