"""Generators of inlined generator functions, run lazily like CPython runs them.

Calling a generator function (a ``def`` with ``yield``, or a generator
expression) creates its inlined frame but runs nothing. Each ``next`` resumes
that frame until its next YIELD_VALUE (the item) or its RETURN_VALUE (the
end), exactly when the consumer asks. Running the body to completion up
front would reorder it against the consumer: a generator that reads state
the loop body changes, or a loop that stops early, would give eager's
answer only by luck.

The generator protocol follows CPython 3.11's ``genobject.c``:

1. ``resume`` runs the frame: a sent value lands as the result of the paused
   ``yield``; a thrown exception is raised at the paused ``yield`` (or first
   into the sub-generator a paused ``yield from`` delegates to, see
   ``_throw``). It answers the item yielded, or ``Returned`` once the frame
   returned.
2. While the frame runs it has its own exception being handled (CPython's
   ``gi_exc_state``), stacked over its caller's on the root translator's
   ``running_generators`` and taken off when it yields or returns
   (``translate/ops/exceptions.py``).
3. An exception leaving the frame finishes the generator. A StopIteration is
   turned into ``RuntimeError("generator raised StopIteration")`` (PEP 479).
   It is marked as passed on by the iterator protocol
   (``ops/exceptions.pass_from_iterator``): ``next()``, the generator's own
   methods, FOR_ITER and SEND let the consumer catch it; anything else
   between (``list(gen)``, which may hold half-done state) leaves it a graph
   break.
4. ``next`` and ``send`` of a finished generator raise StopIteration (with
   the return value, the first time); ``close`` throws GeneratorExit and
   expects it (or a return) back.

The paused frame is an InliningInstructionTranslator, which is mutable by
nature; ``SuspendedFrame`` is the one object that holds it, and a trace that
is thrown away (an Unsupported, a restart to plan a graph break) throws it
away too. A generator that leaves the trace (returned, stored, or live
across a graph break, which also covers a break inside its own body) is
made again by the same call if it has not started: it has run nothing, so
a new generator over the same argument objects is the same. A started one
paused at a plain yield is rebuilt paused there (``paused_generators.py``).
Other started ones cannot be rebuilt (paused in ``yield from``, or a frame
with cells), and neither can one left paused inside a with/try block
(``refuse_abandoned_generators``): CPython closes it when it is collected.
Either breaks the frame where its root first resumed the generator, so it is
made there, not started, and runs in Python from that point.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bytegraph.bytecode import compat
from bytegraph.exc import Unsupported
from bytegraph.translate.ops.exceptions import (
    mark_thrown,
    pass_from_iterator,
    raise_from_iterator,
    root_translator,
)
from bytegraph.variables.base import BoundMethodVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.exceptions import ExceptionInstanceVariable, ObservedRaise
from bytegraph.variables.iterators import IteratorVariable
from bytegraph.variables.paused_generators import children, paused_at, reconstruct_paused

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.translate.translator import (
        InliningInstructionTranslator,
        InstructionTranslatorBase,
    )

    Tx = InstructionTranslatorBase

MAX_YIELDS = 10_000

# (function, positional arguments, keyword items) of a generator function's call
GeneratorCall = tuple[VariableTracker, tuple[VariableTracker, ...], tuple[tuple[str, Any], ...]]
_PEP_479 = "generator raised StopIteration"
_METHODS = ("__next__", "send", "throw", "close", "__iter__")

class SuspendedFrame:
    """A generator's inlined frame, paused before its first instruction or at a yield."""

    def __init__(self, translator: InliningInstructionTranslator) -> None:
        self.translator = translator
        self.started = False
        self.running = False
        self.yields = 0
        self.first_resume: tuple[int, int] | None = None  # the root's (step, index)
        translator.handled_exception = ConstantVariable(None)  # its own gi_exc_state
        translator.output.generator_frames.append(self)

    @property
    def finished(self) -> bool:
        return self.translator.instruction_pointer is None

    def finish(self) -> None:
        self.started = True
        self.translator.instruction_pointer = None

    def paused(self) -> bool:
        return self.started and not self.finished

    def paused_in_handler_scope(self) -> bool:
        """Paused at a yield that a with/try covers: closing it would run code."""
        if not self.paused():
            return False
        child = self.translator
        return child.decoded.runs_code_on_error(child.instruction_pointer - 1)

    def delegate(self) -> VariableTracker | None:
        """The iterator a paused ``yield from`` delegates to (CPython's ``_PyGen_yf``)."""
        if not self.paused():
            return None
        child = self.translator
        after = child.instructions[child.instruction_pointer]
        # RESUME's low two bits say where the frame resumes (1: after a yield, 2: after a
        # yield from); 3.13 sets bit 2 inside an except block.
        if after.opname != "RESUME" or after.arg & 3 < 2:
            return None
        return child.stack[-1]

    def send_instruction(self) -> Any:
        """The SEND of the ``yield from`` this frame is paused in."""
        send = self.translator.instructions[self.translator.instruction_pointer - 2]
        if send.opname != "SEND":
            raise Unsupported("opcode_unsupported", "a yield from not compiled as SEND")
        return send


def release_generator_frames(output: Any) -> None:
    """The trace is over: its generators' paused frames let go of their translators.

    A frame's translator leads to its caller's and to the OutputGraph, which holds the
    frame: a cycle, through which the trace's frame values (the caller's real objects,
    a generator among them) would live until the cyclic collector runs, where eager
    frees them, and closes such a generator, when the call returns.
    """
    for frame in output.generator_frames:
        frame.translator.parent = None
        frame.translator.symbolic_locals.clear()
        frame.translator.stack.clear()
    output.generator_frames.clear()


def refuse_abandoned_generators(output: Any) -> None:
    """Unsupported if a generator of this trace is left paused inside a with/try block.

    It names the root frame's step that first resumed the generator, so the frame
    breaks there: the generator, not started yet at that point, is made again and
    runs in Python, and the tensor work before and after it is still captured.
    """
    for frame in output.generator_frames:
        if frame.paused_in_handler_scope():
            name = frame.translator.code.co_qualname
            refused = Unsupported(
                "generator_protocol",
                f"generator {name} left paused inside a with/try block: closing it when it "
                "is collected runs its exit code at a time the trace cannot know",
            )
            refused.step, refused.index = frame.first_resume or (None, None)
            raise refused


@dataclasses.dataclass(frozen=True)
class Returned:
    """The generator's frame returned ``value`` (None if it had finished before)."""

    value: VariableTracker


def _is_none(vt: VariableTracker) -> bool:
    return vt.is_python_constant() and vt.as_python_constant() is None


def _call(function: Any, args: tuple, keywords: dict[str, Any]) -> Any:
    return function(*args, **keywords)


def _root_position(tx: Tx) -> tuple[int, int | None] | None:
    """The root translator's current step and instruction index (where a break goes);
    None where the root is no frame being compiled (then the whole frame runs as Python)."""
    from bytegraph.translate.ops.exceptions import root_translator

    root = root_translator(tx)
    steps, inst = getattr(root, "steps", None), getattr(root, "current_inst", None)
    if steps is None or inst is None:
        return None
    return steps - 1, inst.index


def _running_generators(tx: Tx) -> list[Any]:
    return root_translator(tx).running_generators


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class GeneratorVariable(IteratorVariable):
    """A generator object; ``items`` is unused (always empty)."""

    frame: Any = None  # SuspendedFrame
    call: GeneratorCall | None = None  # the call that made it, to make it again

    def python_type(self) -> type:
        return types.GeneratorType

    def reconstruct(self, codegen: PyCodegen) -> None:
        """The same call again, if the frame has not started: it has run nothing yet, so
        a new generator over the same argument objects is the same generator."""
        if self.frame.started and self.call is not None and paused_at(self.frame) is None:
            reconstruct_paused(codegen, self.frame, self.call[0])
            return
        if self.frame.started or self.call is None:
            refused = Unsupported(
                "unrebuildable_value",
                f"{self} started in the trace crosses into Python (a paused frame cannot be "
                "rebuilt)",
            )
            # Break where the root frame first resumed it: made there, not started, it is
            # made again in Python and runs there, with the tensor work around it captured.
            refused.step, refused.index = self.frame.first_resume or (None, None)
            raise refused
        from bytegraph.variables.containers import TupleVariable
        from bytegraph.variables.dicts import DictVariable

        function, args, keywords = self.call
        parts = [function, TupleVariable(args), DictVariable(dict(keywords))]
        codegen.call_const(_call, parts)

    def children(self) -> list[VariableTracker]:
        """A started generator's paused frame values: it is rebuilt from them."""
        return children(self.frame) if self.frame.started and self.call is not None else []

    def next_item(self, tx: Tx) -> VariableTracker | None:
        result = self.resume(tx)
        return None if isinstance(result, Returned) else result

    # -- running the frame -----------------------------------------------------------

    def resume(
        self,
        tx: Tx,
        sent: VariableTracker | None = None,
        thrown: ExceptionInstanceVariable | None = None,
    ) -> VariableTracker | Returned:
        """Run the frame to its next yield (the item) or its return (``Returned``)."""
        frame = self.frame
        if frame.running:
            raise_from_iterator(tx, ValueError, ConstantVariable("generator already executing"))
        if thrown is not None:
            if not frame.paused():  # raised as it is, or before the first instruction
                mark_thrown(tx, thrown)
                leaves = ObservedRaise(thrown)
                if frame.finished:  # CPython does not enter the frame
                    raise pass_from_iterator(leaves)
                frame.finish()
                raise self._leave(tx, leaves)
            return self._throw(tx, thrown)
        if frame.finished:
            return Returned(ConstantVariable(None))
        if frame.started:
            return self._run(tx, lambda: frame.translator.push(sent or ConstantVariable(None)))
        if sent is not None and not _is_none(sent):
            message = "can't send non-None value to a just-started generator"
            raise_from_iterator(tx, TypeError, ConstantVariable(message))
        frame.started = True
        frame.first_resume = _root_position(tx)
        return self._run(tx, lambda: None)

    def _run(self, tx: Tx, start: Callable[[], None]) -> VariableTracker | Returned:
        """``start()`` (push the sent value, or raise in the frame), then step to a yield."""
        frame = self.frame
        child = frame.translator
        child.parent = tx  # the resumer is the frame below it now (CPython's f_back)
        running = _running_generators(tx)
        running.append(child)
        frame.running = True
        try:
            try:
                start()
            except ObservedRaise as error:
                error.__traceback__ = None  # no frame cycle (see translator.step)
                child.handle_raise(error)
            return self._step(child)
        except ObservedRaise as error:
            error.__traceback__ = None  # no frame cycle (see translator.step)
            frame.finish()
            left = error
        except Unsupported as e:
            raise e.with_frames(child.frames()) from e.__cause__
        finally:
            running.pop()
            frame.running = False
        raise self._leave(tx, left)

    def _step(self, child: InliningInstructionTranslator) -> VariableTracker | Returned:
        frame = self.frame
        while child.step():
            if child.yielded:
                frame.yields += 1
                if frame.yields > MAX_YIELDS:
                    raise Unsupported(
                        "size_limit", f"generator yielded more than {MAX_YIELDS} values"
                    )
                return child.yielded.pop()
        return Returned(child.return_value or ConstantVariable(None))

    def _leave(self, tx: Tx, error: ObservedRaise) -> ObservedRaise:
        """What the consumer sees of an exception leaving the frame (PEP 479 applied)."""
        from bytegraph.translate.ops.exceptions import (
            new_exception,
            pass_from_iterator,
            raise_new,
        )

        exc = error.exc
        if not issubclass(exc.exc_type, StopIteration):
            return pass_from_iterator(error)
        converted = new_exception(tx, RuntimeError, ConstantVariable(_PEP_479))
        converted.var_setattr(tx, "__cause__", exc)
        try:
            raise_new(tx, converted)
        except ObservedRaise as raised:
            tx.output.side_effects.store_attr(converted, "__context__", exc)
            return pass_from_iterator(raised)
        raise AssertionError("raise_new returned")

    def _raise_in_frame(self, exc: ExceptionInstanceVariable, index: int) -> Callable[[], None]:
        """A start for ``_run``: raise ``exc`` in the frame at instruction ``index``."""
        from bytegraph.translate.ops.exceptions import raise_in_generator

        child = self.frame.translator

        def start() -> None:
            child.current_inst = child.instructions[index]
            raise_in_generator(child, exc)

        return start

    def _throw(self, tx: Tx, exc: ExceptionInstanceVariable) -> VariableTracker | Returned:
        """``throw`` into a paused frame: first into the sub-generator it delegates to."""
        frame = self.frame
        child = frame.translator
        at_yield = child.instruction_pointer - 1
        receiver = frame.delegate()
        if receiver is None:
            return self._run(tx, self._raise_in_frame(exc, at_yield))
        if issubclass(exc.exc_type, GeneratorExit):
            try:
                close_iterator(tx, receiver)
            except ObservedRaise as error:
                error.__traceback__ = None  # no frame cycle (see translator.step)
                return self._run(tx, self._raise_in_frame(error.exc, at_yield))
            return self._run(tx, self._raise_in_frame(exc, at_yield))
        if not isinstance(receiver, GeneratorVariable):
            if hasattr(receiver.python_type(), "throw"):
                raise Unsupported("generator_protocol", f"throw() delegated to {receiver}")
            return self._run(tx, self._raise_in_frame(exc, at_yield))
        return self._throw_into_delegate(tx, receiver, exc)

    def _throw_into_delegate(
        self, tx: Tx, receiver: GeneratorVariable, exc: ExceptionInstanceVariable
    ) -> VariableTracker | Returned:
        """What the sub-generator answers: its item is ours; its return value is the
        ``yield from``'s result; its exception is raised at the end of our SEND loop."""
        frame = self.frame
        child = frame.translator
        send = frame.send_instruction()
        frame.running = True
        try:
            result = receiver.resume(tx, thrown=exc)
        except ObservedRaise as error:
            error.__traceback__ = None  # no frame cycle (see translator.step)
            raised: ExceptionInstanceVariable | None = error.exc
        else:
            raised = None
        finally:
            frame.running = False
        if raised is None and not isinstance(result, Returned):
            return result
        if not compat.SEND_KEEPS_RECEIVER:  # 3.12+: END_SEND, at the target, drops it
            child.pop()  # the sub-generator
        if raised is not None:
            return self._run(tx, self._raise_in_frame(raised, send.target - 1))

        def continue_after_yield_from() -> None:
            child.push(result.value)
            child.jump(send.target)

        return self._run(tx, continue_after_yield_from)

    def close(self, tx: Tx) -> VariableTracker:
        """``gen.close()``: GeneratorExit thrown in; a return or GeneratorExit back is None."""
        from bytegraph.translate.ops.exceptions import new_exception, raise_from_iterator

        frame = self.frame
        if frame.running:
            raise_from_iterator(tx, ValueError, ConstantVariable("generator already executing"))
        if not frame.paused():
            frame.finish()
            return ConstantVariable(None)
        exc = new_exception(tx, GeneratorExit)
        receiver = frame.delegate()
        at_yield = frame.translator.instruction_pointer - 1
        start = self._raise_in_frame(exc, at_yield)
        if receiver is not None:
            try:
                close_iterator(tx, receiver)
            except ObservedRaise as error:
                error.__traceback__ = None  # no frame cycle (see translator.step)
                start = self._raise_in_frame(error.exc, at_yield)
        try:
            result = self._run(tx, start)
        except ObservedRaise as error:
            error.__traceback__ = None  # no frame cycle (see translator.step)
            if issubclass(error.exc.exc_type, GeneratorExit):
                return ConstantVariable(None)
            raise
        if isinstance(result, Returned):
            return ConstantVariable(None)
        raise_from_iterator(tx, RuntimeError, ConstantVariable("generator ignored GeneratorExit"))

    # -- the protocol as the program calls it ------------------------------------------

    def call_next(self, tx: Tx, default: VariableTracker | None = None) -> VariableTracker:
        """``next(gen[, default])``: the item, else StopIteration carrying the return value."""
        return self._item_or_stop(tx, self.resume(tx), default)

    def _item_or_stop(
        self, tx: Tx, result: VariableTracker | Returned, default: VariableTracker | None = None
    ) -> VariableTracker:
        from bytegraph.translate.ops.exceptions import raise_from_iterator

        if not isinstance(result, Returned):
            return result
        if default is not None:
            return default
        value = {"value": result.value}
        if _is_none(result.value):
            raise_from_iterator(tx, StopIteration, attrs=value)
        raise_from_iterator(tx, StopIteration, result.value, attrs=value)

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in _METHODS:
            return BoundMethodVariable(self, name)
        raise Unsupported("unknown_attribute", f"generator attribute {name!r}")

    def call_method(
        self,
        tx: Tx,
        name: str,
        args: list[VariableTracker],
        kwargs: dict[str, VariableTracker],
    ) -> VariableTracker:
        if kwargs:
            raise Unsupported("generator_protocol", f"generator.{name} with keywords")
        if name == "__iter__" and not args:
            return self
        if name == "__next__" and not args:
            return self.call_next(tx)
        if name == "send" and len(args) == 1:
            return self._item_or_stop(tx, self.resume(tx, sent=args[0]))
        if name == "throw" and 1 <= len(args) <= 3:
            return self._item_or_stop(tx, self.resume(tx, thrown=thrown_exception(tx, *args)))
        if name == "close" and not args:
            return self.close(tx)
        raise Unsupported("generator_protocol", f"generator.{name} with {len(args)} arguments")

    def __repr__(self) -> str:
        return f"GeneratorVariable({self.frame.translator.code.co_qualname})"


def thrown_exception(
    tx: Tx,
    kind: VariableTracker,
    value: VariableTracker | None = None,
    traceback: VariableTracker | None = None,
) -> ExceptionInstanceVariable:
    """``throw(kind[, value[, traceback]])``'s exception, as CPython normalizes it."""
    from bytegraph.variables.exceptions import TracebackVariable

    exc = _normalized(tx, kind, value)
    if traceback is not None and not _is_none(traceback):
        if not (isinstance(traceback, TracebackVariable) and traceback.exc is exc):
            raise Unsupported("generator_protocol", "throw() with another exception's traceback")
    return exc


def _normalized(
    tx: Tx, kind: VariableTracker, value: VariableTracker | None
) -> ExceptionInstanceVariable:
    """An instance as it is; a class with no value (or None) called; a class with its
    instance that instance. Anything else (a value to call the class with) is refused."""
    if isinstance(kind, ExceptionInstanceVariable):
        if value is not None and not _is_none(value):
            raise Unsupported("call_raises_type_error", "throw(instance, value) (TypeError)")
        return kind
    made = kind.call_function(tx, [], {}) if value is None or _is_none(value) else value
    cls = kind.as_python_constant() if kind.is_python_constant() else None
    if not (
        isinstance(made, ExceptionInstanceVariable)
        and isinstance(cls, type)
        and issubclass(made.exc_type, cls)
    ):
        raise Unsupported("generator_protocol", f"throw({kind}, {value}): not an instance of it")
    return made


def close_iterator(tx: Tx, receiver: VariableTracker) -> None:
    """Close the iterator a ``yield from`` delegates to, as CPython's ``gen_close_iter``."""
    if isinstance(receiver, GeneratorVariable):
        receiver.close(tx)
    elif hasattr(receiver.python_type(), "close"):
        raise Unsupported("generator_protocol", f"close() delegated to {receiver}")
