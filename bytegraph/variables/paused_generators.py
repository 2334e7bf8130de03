"""Started generators that leave the trace: rebuilt paused where the trace left them.

A generator the trace started (``gen = g(t); next(gen)``) and then returns,
stores or keeps live across a graph break is handed to Python paused at the
yield it stopped at, and the rest of its body runs when the consumer asks,
as in eager: nothing of it runs early.

1. ``paused_at`` accepts a frame paused at a yield (a plain one, or the one
   inside ``yield from``) that no with/try covers, with no cells of its own
   (its closure's cells are the function's), made by a call whose function can
   be loaded again.
2. The generator function's code is entered at that very YIELD_VALUE
   (``resume.build_generator_code``): a generator function taking the paused
   frame's stack, a value to yield on top of it, and its locals. Its
   instructions and exception table are the original's (the PEP 479 wrapper
   and yield from's CLEANUP_THROW of 3.12+ included).
3. The generated code calls ``rebuild_paused``, which makes that generator
   and starts it: it runs the prologue and the YIELD_VALUE, nothing of the
   user's code, and is then paused where the original was. The caller's
   ``next``/``send``/``throw``/``close`` reach the original instructions as
   they would have reached the original frame (a ``yield from`` delegates
   them to its sub-generator, rebuilt the same way when the trace started it).

What differs from the original generator object is only ``gi_code`` (the
entered code; ``__name__`` and ``__qualname__`` are the original's).
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
    if frame.paused_in_handler_scope():
        return "it is paused inside a with/try block"
    if child.code.co_cellvars:
        return "its frame has cells of its own"
    return None


def _spec(frame: Any) -> tuple[ResumeSpec, list[VariableTracker], list[VariableTracker]]:
    """The entered code's key (at the YIELD_VALUE, a value to yield on the stack), and the
    stack below that value and the locals."""
    child = frame.translator
    stack = list(child.stack)
    names = tuple(sorted(child.symbolic_locals))
    spec = ResumeSpec(
        child.code, child.instruction_pointer - 1,
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
    """At run time: the generator, started and paused at the original's yield."""
    rest = types.FunctionType(
        code, function.__globals__, function.__name__, None, function.__closure__
    )
    gen = rest(*stack, None, *local_values)
    gen.__qualname__ = function.__qualname__
    next(gen)  # the prologue and the YIELD_VALUE: none of the user's code
    return gen
