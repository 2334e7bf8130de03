"""With-blocks, and the global state they switch.

``with cm as v: body`` compiles (3.11) to::

    BEFORE_WITH            (cm -- exit enter_result)
    STORE_FAST v / POP_TOP
    body
    LOAD_CONST None x3; PRECALL 2; CALL 2; POP_TOP   # exit(None, None, None)

plus an exception-table handler that runs only when an exception propagates
out of the body::

    PUSH_EXC_INFO                  (exit lasti exc -- exit lasti prev exc)
    WITH_EXCEPT_START              (... -- ... exit(type(exc), exc, tb))
    POP_JUMP_IF_TRUE suppressed
    RERAISE 2                      # a false result: the exception goes on
    suppressed: POP_TOP; POP_EXCEPT; POP_TOP; POP_TOP

A raise traced in the body (``ops/exceptions.py``) reaches that handler, and
WITH_EXCEPT_START calls ``__exit__`` traced, like any call: a user class's
``__exit__`` (or contextlib's, inlined) decides whether it is suppressed.
The traceback argument is a ``TracebackVariable``: the trace has none to
give, but ``__exit__`` usually only passes it on or tests it against None.
What ``__exit__`` raises goes on from WITH_EXCEPT_START, as in CPython.
The normal exit is an ordinary CALL of the ``__exit__`` VT that BEFORE_WITH
left on the stack.

A context manager VT models ``__enter__`` and ``__exit__`` through
``var_getattr``/``call_method`` (grad mode: ``variables/ctx.py``); any other
object fails there, unsupported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.exc import Unsupported
from bytegraph.translate.ops.exceptions import vet_call
from bytegraph.translate.registry import handler, unsupported_opcode
from bytegraph.variables.builtin import BuiltinVariable
from bytegraph.variables.exceptions import (
    ExceptionInstanceVariable,
    ObservedRaise,
    TracebackVariable,
)

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@handler("BEFORE_WITH")
def BEFORE_WITH(tx: Tx, inst: Instruction) -> None:
    """(cm -- exit enter_result): looks both methods up first, as CPython does."""
    manager = tx.pop()
    enter = manager.var_getattr(tx, "__enter__")
    exit_method = manager.var_getattr(tx, "__exit__")
    tx.push(exit_method)
    tx.push(enter.call_function(tx, [], {}))


@handler("WITH_EXCEPT_START")
def WITH_EXCEPT_START(tx: Tx, inst: Instruction) -> None:
    """(exit lasti prev exc -- exit lasti prev exc result): ``exit(type(exc), exc, tb)``."""
    exc = tx.stack[-1]
    if not isinstance(exc, ExceptionInstanceVariable):
        raise Unsupported("exception_value", f"WITH_EXCEPT_START of {exc}")
    exit_method = tx.stack[-4]
    kind = BuiltinVariable(type).call_function(tx, [exc], {})
    try:
        result = exit_method.call_function(tx, [kind, exc, TracebackVariable(exc)], {})
    except ObservedRaise as error:
        vet_call(tx, error, exit_method)
        raise
    tx.push(result)


unsupported_opcode("BEFORE_ASYNC_WITH", "async with: coroutines are not traced")

# Raising and catching: translate/ops/exceptions.py.
unsupported_opcode("CHECK_EG_MATCH", "except*: exception groups are not traced")
unsupported_opcode(
    "PREP_RERAISE_STAR", "except*: exception groups are not traced", max_ver=(3, 11)
)
