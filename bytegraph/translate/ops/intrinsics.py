"""CALL_INTRINSIC_1 and CALL_INTRINSIC_2 (3.12+): rare operations behind one opcode each.

3.12 folded several 3.11 opcodes into numbered intrinsics (``+x``,
``tuple(list)`` of a star-call, PEP 479's StopIteration check); each number
maps to the handler of what it does, or to a refusal with its reason.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING

from bytegraph.exc import Unsupported
from bytegraph.translate.ops.arith import apply_operator
from bytegraph.translate.ops.build import list_to_tuple
from bytegraph.translate.registry import handler

if TYPE_CHECKING:
    from bytegraph.bytecode.instructions import Instruction
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.base import VariableTracker

Intrinsic = Callable[["Tx", "VariableTracker"], "VariableTracker"]


def _stop_iteration_error(tx: Tx, exc: VariableTracker) -> VariableTracker:
    """PEP 479 in a generator's outermost handler. The generator model turns a
    StopIteration leaving the body into RuntimeError where the frame ends
    (``variables/generators.py``), so the exception passes on unchanged here."""
    return exc


# CPython's Include/internal/pycore_intrinsics.h numbering.
_UNARY: dict[int, tuple[str, Intrinsic | None]] = {
    1: ("INTRINSIC_PRINT", None),
    2: ("INTRINSIC_IMPORT_STAR", None),
    3: ("INTRINSIC_STOPITERATION_ERROR", _stop_iteration_error),
    4: ("INTRINSIC_ASYNC_GEN_WRAP", None),
    5: ("INTRINSIC_UNARY_POSITIVE", lambda tx, v: apply_operator(tx, operator.pos, v)),
    6: ("INTRINSIC_LIST_TO_TUPLE", list_to_tuple),
}
_REFUSED = {
    "INTRINSIC_PRINT": "the interactive interpreter's expression statements",
    "INTRINSIC_IMPORT_STAR": "from m import * is legal only in module bodies",
    "INTRINSIC_ASYNC_GEN_WRAP": "async generators are not traced",
}


@handler("CALL_INTRINSIC_1", min_ver=(3, 12))
def CALL_INTRINSIC_1(tx: Tx, inst: Instruction) -> None:
    """(value -- result)"""
    name, fn = _UNARY.get(inst.arg, (f"intrinsic {inst.arg}", None))
    if fn is None:
        reason = _REFUSED.get(name, "type parameter syntax (PEP 695) is not traced")
        raise Unsupported("opcode_unsupported", f"CALL_INTRINSIC_1 {name} ({reason})")
    tx.push(fn(tx, tx.pop()))


@handler("CALL_INTRINSIC_2", min_ver=(3, 12))
def CALL_INTRINSIC_2(tx: Tx, inst: Instruction) -> None:
    """(a b -- result): except* (PREP_RERAISE_STAR) and PEP 695's type parameters."""
    what = "except*: exception groups" if inst.arg == 1 else "type parameter syntax (PEP 695)"
    raise Unsupported("opcode_unsupported", f"CALL_INTRINSIC_2 {inst.arg} ({what} are not traced)")
