"""With-blocks, and the global state they switch.

``with cm as v: body`` compiles (3.11) to::

    BEFORE_WITH            (cm -- exit enter_result)
    STORE_FAST v / POP_TOP
    body
    LOAD_CONST None x3; PRECALL 2; CALL 2; POP_TOP   # exit(None, None, None)

plus an exception-table handler (PUSH_EXC_INFO, WITH_EXCEPT_START, ...)
that runs only when an exception propagates out of the body. The tracer never
propagates one: whatever would raise is unsupported, and the frame runs in
Python. So the normal exit is an ordinary CALL of the ``__exit__`` VT that
BEFORE_WITH left on the stack, and the handler's opcodes are never reached.

A context manager VT models ``__enter__`` and ``__exit__`` through
``var_getattr``/``call_method`` (grad mode: ``variables/ctx.py``); any other
object fails there, unsupported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bytegraph.translate.registry import handler, unsupported_opcode

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


unsupported_opcode(
    "WITH_EXCEPT_START",
    "runs only when an exception propagates out of a with-block; the tracer never "
    "propagates one (what would raise runs in Python)",
)
unsupported_opcode("BEFORE_ASYNC_WITH", "async with: coroutines are not traced")

# Exceptions. A ``try`` costs nothing until something raises (3.11 keeps
# handlers in the exception table), and the tracer never raises: whatever
# would raise is unsupported, and the frame runs in Python, where it raises.
_EXCEPTION_PATH = "runs only while an exception propagates; the tracer never propagates one"
for _opname in (
    "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH", "CHECK_EG_MATCH", "PREP_RERAISE_STAR",
    "RERAISE",
):
    unsupported_opcode(_opname, _EXCEPTION_PATH)
unsupported_opcode("RAISE_VARARGS", "the program raises: the frame runs in Python, which raises")
unsupported_opcode(
    "LOAD_ASSERTION_ERROR", "an assert failed: the frame runs in Python, which raises"
)
