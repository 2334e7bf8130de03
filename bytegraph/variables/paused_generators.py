"""Started generators that leave the trace: rebuilt paused where the trace left them.

A generator the trace started (``gen = g(t); next(gen)``) and then returns,
stores or keeps live across a graph break is handed to Python paused at the
yield it stopped at, and the rest of its body runs when the consumer asks,
as in eager: nothing of it runs early.

1. ``paused_at`` accepts a frame paused at a plain ``yield`` that no
   with/try covers (closing it runs no code), not inside ``yield from``
   (a throw() would go to the sub-generator first), with no cells of its
   own, made by a call whose function can be loaded again.
2. The rest of the body is the generator function's code entered after that
   yield (``resume.build_generator_code``): a generator function taking the
   paused frame's stack (the sent value on top, as the yield leaves it) and
   locals. Its instructions and exception table are the original's, so the
   PEP 479 wrapper of 3.12+ covers it.
3. The generated code calls ``rebuild_paused``, which makes ``paused``, a
   generator that is started at once and waits at a bare ``yield``: the
   caller's first ``next``/``send`` value goes into the entered code as the
   yield's result, and from then on ``yield from`` passes every
   ``send``/``throw``/``close`` to it. A ``throw``/``close`` before that
   raises at the bare yield and leaves the generator, as it would leave the
   original frame, which no handler covers there.

What differs from the original generator object is only introspection:
``gi_code``/``gi_frame`` are the wrapper's (``__name__`` and ``__qualname__``
are the original's), and tracebacks show two more frames.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from bytegraph.translate.resume import ResumeSpec, build_generator_code
from bytegraph.variables.base import NullVariable, VariableTracker

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen

_CODES: dict[ResumeSpec, types.CodeType] = {}


def paused_at(frame: Any) -> str | None:
    """Why ``frame`` (a SuspendedFrame) cannot be rebuilt paused; None if it can."""
    child = frame.translator
    if not frame.paused() or frame.running:
        return "it is not paused at a yield"
    if child.instructions[child.instruction_pointer - 1].opname != "YIELD_VALUE":
        return "it is not paused at a yield"
    if frame.delegate() is not None:
        return "it is paused inside yield from"
    if frame.paused_in_handler_scope():
        return "it is paused inside a with/try block"
    if child.code.co_cellvars or child.code.co_freevars:
        return "its frame has cells"
    return None


def _spec(frame: Any) -> tuple[ResumeSpec, list[VariableTracker], list[VariableTracker]]:
    """The entered code's key, and the stack (the sent value's slot left out) and locals."""
    child = frame.translator
    stack = list(child.stack)
    names = tuple(sorted(child.symbolic_locals))
    spec = ResumeSpec(
        child.code, child.instruction_pointer,
        tuple(isinstance(v, NullVariable) for v in stack) + (False,), names,
    )
    values = [v for v in stack if not isinstance(v, NullVariable)]
    return spec, values, [child.symbolic_locals[name] for name in names]


def children(frame: Any) -> list[VariableTracker]:
    """The values a rebuilt frame receives (their tensors become graph outputs)."""
    if paused_at(frame) is not None:
        return []
    _, stack, local_values = _spec(frame)
    return stack + local_values


def reconstruct_paused(
    codegen: PyCodegen, frame: Any, function: VariableTracker
) -> None:
    """Leave the rebuilt, paused generator on the stack (``paused_at`` said it can be)."""
    from bytegraph.variables.containers import TupleVariable

    spec, stack, local_values = _spec(frame)
    code = _CODES.get(spec)
    if code is None:
        code = _CODES[spec] = build_generator_code(spec)
    parts = [function, TupleVariable(tuple(stack)), TupleVariable(tuple(local_values))]
    codegen.call_const(functools.partial(rebuild_paused, code), parts)


def rebuild_paused(
    code: types.CodeType, function: types.FunctionType, stack: tuple, local_values: tuple
) -> Generator[Any, Any, Any]:
    """At run time: the paused generator, started and waiting for its first value."""
    rest = types.FunctionType(code, function.__globals__, function.__name__)
    gen = paused([(rest, stack, local_values)])
    gen.__name__, gen.__qualname__ = function.__name__, function.__qualname__
    next(gen)
    return gen


def paused(box: list[tuple[Any, tuple, tuple]]) -> Generator[Any, Any, Any]:
    """Wait for the first value sent, then be the rest of the original body."""
    sent = yield
    rest, stack, local_values = box.pop()
    inner = rest(*stack, sent, *local_values)
    del rest, stack, local_values, sent  # held by ``inner`` alone, as the frame held them
    return (yield from inner)
