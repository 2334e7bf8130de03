"""Generators of inlined generator functions, run lazily like CPython runs them.

Calling a generator function (a ``def`` with ``yield``, or a generator
expression) creates its inlined frame but runs nothing. Each ``next`` resumes
that frame until its next YIELD_VALUE (the item) or its RETURN_VALUE (the
end), exactly when the consumer asks. Running the body to completion up
front would reorder it against the consumer: a generator that reads state
the loop body changes, or a loop that stops early, would give eager's
answer only by luck.

The paused frame is an InliningInstructionTranslator, which is mutable by
nature; ``SuspendedFrame`` is the one object that holds it, and a trace that
is thrown away (an Unsupported, a restart to plan a graph break) throws it
away too. A generator that escapes the trace unconsumed is unsupported.
"""

from __future__ import annotations

import dataclasses
import types
import weakref
from typing import TYPE_CHECKING, Any

from bytegraph.exc import Unsupported
from bytegraph.variables.base import BoundMethodVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import IteratorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import (
        InliningInstructionTranslator,
        InstructionTranslatorBase,
    )

MAX_YIELDS = 10_000

# The generator frames of each trace, by its OutputGraph.
_frames: weakref.WeakKeyDictionary[Any, list[SuspendedFrame]] = weakref.WeakKeyDictionary()


class SuspendedFrame:
    """A generator's inlined frame, paused before its first instruction or at a yield."""

    def __init__(self, translator: InliningInstructionTranslator) -> None:
        self.translator = translator
        self.started = False
        self.yields = 0
        _frames.setdefault(translator.output, []).append(self)

    @property
    def finished(self) -> bool:
        return self.translator.instruction_pointer is None

    def paused_in_handler_scope(self) -> bool:
        """Paused at a yield that a with/try covers: closing it would run code."""
        if not self.started or self.finished:
            return False
        child = self.translator
        return child.decoded.handler_for(child.instruction_pointer - 1) is not None


def refuse_abandoned_generators(output: Any) -> None:
    """Unsupported if a generator of this trace is left paused inside a with/try block."""
    for frame in _frames.get(output, ()):
        if frame.paused_in_handler_scope():
            name = frame.translator.code.co_qualname
            raise Unsupported(
                "unsupported_call",
                f"generator {name} left paused inside a with/try block: closing it when it "
                "is collected runs its exit code at a time the trace cannot know",
            )


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GeneratorVariable(IteratorVariable):
    """A generator object; ``items`` is unused (always empty)."""

    frame: Any = None  # SuspendedFrame

    def python_type(self) -> type:
        return types.GeneratorType

    def next_item(self, tx: InstructionTranslatorBase) -> VariableTracker | None:
        return self.resume(ConstantVariable(None))

    def resume(self, sent: VariableTracker) -> VariableTracker | None:
        """Run the frame to its next yield: the item, or None once it returned."""
        frame = self.frame
        child = frame.translator
        if frame.finished:
            return None
        if frame.started:
            child.push(sent)  # the value of the paused ``yield`` expression
        elif not (sent.is_python_constant() and sent.as_python_constant() is None):
            raise Unsupported("unsupported_call", "send() of a value to a just-started generator")
        frame.started = True
        try:
            while child.step():
                if child.yielded:
                    frame.yields += 1
                    if frame.yields > MAX_YIELDS:
                        raise Unsupported(
                            "unsupported_call", f"generator yielded more than {MAX_YIELDS} values"
                        )
                    return child.yielded.pop()
        except Unsupported as e:
            raise e.with_frames(child.frames()) from e.__cause__
        return None

    def return_value(self) -> VariableTracker:
        """What ``yield from`` evaluates to once the generator is exhausted."""
        value = self.frame.translator.return_value
        return value if value is not None else ConstantVariable(None)

    def var_getattr(self, tx: InstructionTranslatorBase, name: str) -> VariableTracker:
        if name in ("__next__", "send", "__iter__"):
            return BoundMethodVariable(self, name)
        raise Unsupported("unsupported_value", f"generator attribute {name!r}")

    def call_method(
        self,
        tx: InstructionTranslatorBase,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if name == "__iter__" and not args and not kwargs:
            return self
        if name in ("__next__", "send") and not kwargs and len(args) == (name == "send"):
            item = self.resume(args[0] if args else ConstantVariable(None))
            if item is None:
                raise Unsupported("unsupported_value", "next() of an exhausted generator (raises)")
            return item
        raise Unsupported("unsupported_call", f"generator.{name}")

    def __repr__(self) -> str:
        return f"GeneratorVariable({self.frame.translator.code.co_qualname})"
