"""Exceptions that leave a compiled frame, and exceptions the trace raised, rebuilt.

When an exception raised in the trace is caught by no handler of the frame
being compiled, the trace ends there as it would at a return: the graph
holds everything before the raise, and the transformed code calls it, then
rebuilds the exception object (type, args, attributes, ``__cause__``,
``__context__``, ``__suppress_context__``), replays the side effects and
raises it (``emit_raise``). The raise carries the line of the user's
instruction it left from, so the traceback's entry for the frame names the
user's line, as in eager; entries for the inlined callees it passed
through have no real frame to point at and are not made.

CPython's raise sets ``__context__`` to the exception being handled at that
moment. In eager that is the one the traced code was handling, if any,
which the trace knows; when the transformed code raises, it is whatever the
frame's caller is handling. So the raise goes through ``raise_escaping``,
which raises the object, puts back the ``__context__`` the trace gave it
when the trace knew it, and re-raises with a bare ``raise`` (which touches
neither the context nor, with the traceback cleared, the traceback): the
user sees one traceback entry, for the compiled frame, at the user's line.

Any other object raised in the trace that must be rebuilt (a caught
exception returned, or the ``__context__`` of the one escaping) had a
traceback in eager. ``with_traceback_at`` gives the rebuilt object one entry
for the compiled frame at the line where the trace raised it.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import bytecode as bc

from bytegraph.bytecode import assemble

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.variables.exceptions import ExceptionInstanceVariable

ESCAPING = "___escaping"


def raise_escaping(exc: BaseException, keep_context: bool) -> NoReturn:
    """Raise ``exc`` from the compiled frame; ``keep_context``: its ``__context__``
    was set by the trace, not by this raise."""
    context = exc.__context__
    try:
        raise exc
    except BaseException:
        if keep_context:
            exc.__context__ = context
        exc.__traceback__ = None  # the bare raise then adds no entry for this helper
        raise


def with_traceback_at(exc: BaseException, lineno: int) -> BaseException:
    """``exc`` with a traceback of one entry: the calling frame at ``lineno``."""
    frame = sys._getframe(1)
    return exc.with_traceback(types.TracebackType(None, frame, -1, lineno))


def emit_raise(
    exc: ExceptionInstanceVariable, lineno: int | None, keep_context: bool
) -> Callable[[PyCodegen], None]:
    """Tail of a frame an exception left: rebuild it, replay side effects, raise it."""

    def emit(codegen: PyCodegen) -> None:
        codegen(exc)
        # Rebuild before replaying: a mutation must not change what was read.
        codegen.append(bc.Instr("STORE_FAST", ESCAPING))
        codegen.side_effects.replay_all(codegen)
        codegen.load_callable(raise_escaping)
        codegen.append(bc.Instr("LOAD_FAST", ESCAPING))
        codegen.load_const(keep_context)
        _clear_temporaries(codegen)
        codegen.append(*(_at_line(i, lineno) for i in assemble.call(2)))
        codegen.append(bc.Instr("RETURN_VALUE"))  # never reached; the stack needs an end

    return emit


def _clear_temporaries(codegen: PyCodegen) -> None:
    """Set the generated code's own locals to None (the exception is on the stack): the
    traceback holds this frame, so a local holding the exception, or an object built
    with it, would make a cycle that keeps the frame's objects alive after the caller
    handled the exception, where eager frees them at once (a generator's finally)."""
    names = {
        i.arg for i in codegen.instructions
        if isinstance(i, bc.Instr) and i.name == "STORE_FAST" and i.arg.startswith("___")
    }
    for name in sorted(names):
        codegen.append(bc.Instr("LOAD_CONST", None), bc.Instr("STORE_FAST", name))


def _at_line(instr: bc.Instr, lineno: int | None) -> bc.Instr:
    if lineno is not None:
        instr.lineno = lineno
    return instr
