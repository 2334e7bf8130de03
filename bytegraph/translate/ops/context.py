"""With-blocks, and the global state they switch.

``with cm as v: body`` compiles (3.11) to::

    BEFORE_WITH            (cm -- exit enter_result)
    STORE_FAST v / POP_TOP
    body
    LOAD_CONST None x3; PRECALL 2; CALL 2; POP_TOP   # exit(None, None, None)

plus an exception-table handler (PUSH_EXC_INFO, WITH_EXCEPT_START, ...)
that runs only when an exception propagates out of the body. A raise traced
in the body (``ops/exceptions.py``) reaches that handler and stops at
WITH_EXCEPT_START, still unsupported (``__exit__`` may suppress it), so the
code runs in Python. The normal exit is an ordinary CALL of the ``__exit__``
VT that BEFORE_WITH left on the stack.

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
    "runs only when an exception propagates out of a with-block; calling __exit__ with "
    "it (which may suppress it) is not traced yet: the code runs in Python",
)
unsupported_opcode("BEFORE_ASYNC_WITH", "async with: coroutines are not traced")

# Raising and catching: translate/ops/exceptions.py.
unsupported_opcode("CHECK_EG_MATCH", "except*: exception groups are not traced")
unsupported_opcode("PREP_RERAISE_STAR", "except*: exception groups are not traced")
