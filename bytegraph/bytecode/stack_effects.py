"""How many values an instruction pops and pushes (CPython 3.11-3.13), by opname.

One table for every analysis that walks the stack: which code a graph break
runs in Python and what crosses it (``translate/regions.py``), and which
value a call site calls (``translate/routing.py``). Each entry maps the
instruction's argument to ``(pops, pushes)``; what a reader needs beyond
counts (which pushed slot is a NULL, which slot an instruction peeks at) is
that reader's own table, built on this one.
"""

from __future__ import annotations

import dis
from collections.abc import Callable

from bytegraph.bytecode import compat

StackEffect = Callable[[int], tuple[int, int]]

STACK_EFFECTS: dict[str, StackEffect] = {
    "POP_TOP": lambda a: (1, 0),
    # 3.12+: the low bit is 3.11's LOAD_METHOD (a NULL or a receiver besides the value).
    "LOAD_ATTR": lambda a: (1, 1 + (a & 1)) if compat.LOAD_ATTR_METHOD_BIT else (1, 1),
    "LOAD_METHOD": lambda a: (1, 2),
    "LOAD_GLOBAL": lambda a: (0, 1 + (a & 1)),  # and a NULL below it, with the low bit
    "LOAD_DEREF": lambda a: (0, 1),
    "LOAD_BUILD_CLASS": lambda a: (0, 1),
    "LOAD_ASSERTION_ERROR": lambda a: (0, 1),
    "STORE_FAST": lambda a: (1, 0),
    "STORE_NAME": lambda a: (1, 0),
    "STORE_GLOBAL": lambda a: (1, 0),
    "STORE_DEREF": lambda a: (1, 0),
    "STORE_ATTR": lambda a: (2, 0),
    "STORE_SUBSCR": lambda a: (3, 0),
    "DELETE_ATTR": lambda a: (1, 0),
    "DELETE_SUBSCR": lambda a: (2, 0),
    "DELETE_GLOBAL": lambda a: (0, 0),
    "UNARY_POSITIVE": lambda a: (1, 1),
    "UNARY_NEGATIVE": lambda a: (1, 1),
    "UNARY_NOT": lambda a: (1, 1),
    "UNARY_INVERT": lambda a: (1, 1),
    "GET_ITER": lambda a: (1, 1),
    "LIST_TO_TUPLE": lambda a: (1, 1),
    "BINARY_OP": lambda a: (2, 1),
    "BINARY_SUBSCR": lambda a: (2, 1),
    "COMPARE_OP": lambda a: (2, 1),
    "IS_OP": lambda a: (2, 1),
    "CONTAINS_OP": lambda a: (2, 1),
    "BUILD_TUPLE": lambda a: (a, 1),
    "BUILD_LIST": lambda a: (a, 1),
    "BUILD_SET": lambda a: (a, 1),
    "BUILD_STRING": lambda a: (a, 1),
    "BUILD_SLICE": lambda a: (a, 1),
    "BUILD_MAP": lambda a: (2 * a, 1),
    "BUILD_CONST_KEY_MAP": lambda a: (a + 1, 1),
    "FORMAT_VALUE": lambda a: (1 + ((a & 0x04) == 0x04), 1),
    "UNPACK_SEQUENCE": lambda a: (1, a),
    "UNPACK_EX": lambda a: (1, (a & 0xFF) + (a >> 8) + 1),
    "MAKE_FUNCTION": lambda a: (1 + bin(a & 0x0F).count("1"), 1),
    "IMPORT_NAME": lambda a: (2, 1),
    "CALL": lambda a: (a + 2, 1),
    "CALL_FUNCTION_EX": lambda a: (3 + (a & 1), 1),
    "RETURN_VALUE": lambda a: (1, 0),
    "IMPORT_STAR": lambda a: (1, 0),
    "BEFORE_WITH": lambda a: (1, 2),
    "PUSH_EXC_INFO": lambda a: (1, 2),
    "POP_EXCEPT": lambda a: (1, 0),
    "MATCH_MAPPING": lambda a: (1, 2),
    "MATCH_SEQUENCE": lambda a: (1, 2),
    "MATCH_KEYS": lambda a: (2, 3),
    "MATCH_CLASS": lambda a: (3, 1),
}
# What 3.12 and 3.13 added (an opname absent from the running interpreter is never looked up).
STACK_EFFECTS.update({
    "LOAD_SUPER_ATTR": lambda a: (3, 1 + (a & 1)),
    "LOAD_FAST_CHECK": lambda a: (0, 1),
    "LOAD_FAST_AND_CLEAR": lambda a: (0, 1),
    "LOAD_FAST_LOAD_FAST": lambda a: (0, 2),
    "STORE_FAST_LOAD_FAST": lambda a: (1, 1),
    "STORE_FAST_STORE_FAST": lambda a: (2, 0),
    "RETURN_CONST": lambda a: (0, 0),
    "BINARY_SLICE": lambda a: (3, 1),
    "STORE_SLICE": lambda a: (4, 0),
    "END_FOR": lambda a: (compat.END_FOR_POPS, 0),
    "END_SEND": lambda a: (2, 1),
    "CALL_INTRINSIC_1": lambda a: (1, 1),
    "CALL_INTRINSIC_2": lambda a: (2, 1),
    "CALL_KW": lambda a: (a + 3, 1),
    "TO_BOOL": lambda a: (1, 1),
    "CONVERT_VALUE": lambda a: (1, 1),
    "FORMAT_SIMPLE": lambda a: (1, 1),
    "FORMAT_WITH_SPEC": lambda a: (2, 1),
    "SET_FUNCTION_ATTRIBUTE": lambda a: (2, 1),
})
if not compat.MAKE_FUNCTION_HAS_FLAGS:
    STACK_EFFECTS["MAKE_FUNCTION"] = lambda a: (1, 1)

def jump_effect(opcode: int, arg: int | None) -> int:
    """The stack effect of taking an instruction's jump. An exhausted FOR_ITER pops its
    iterator on every version: the decoded target lies past 3.12+'s END_FOR."""
    if opcode == dis.opmap["FOR_ITER"]:
        return -1
    return dis.stack_effect(opcode, arg, jump=True)


def loads_method(opname: str, arg: int | None) -> bool:
    """Whether the instruction pushes a method and its receiver, or a NULL and a bound
    method (3.13: the bound method, then a NULL): which one, only Python knows."""
    if opname == "LOAD_METHOD":
        return True
    return (
        compat.LOAD_ATTR_METHOD_BIT and opname in ("LOAD_ATTR", "LOAD_SUPER_ATTR")
        and bool((arg or 0) & 1)
    )


# Instructions after which the frame does not go on to the next one.
FRAME_EXITS = frozenset({"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})


def locals_read(opname: str, argval: object) -> tuple[str, ...]:
    """The fast locals an instruction reads (3.13 fuses two loads into one)."""
    if opname in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST",
                  "LOAD_CLOSURE"):
        return (argval,)  # type: ignore[return-value]
    if opname == "LOAD_FAST_LOAD_FAST":
        return tuple(argval)  # type: ignore[arg-type]
    if opname == "STORE_FAST_LOAD_FAST":
        return (argval[1],)  # type: ignore[index]
    return ()


def locals_written(opname: str, argval: object) -> tuple[str, ...]:
    """The fast locals an instruction stores into or deletes."""
    if opname in ("STORE_FAST", "DELETE_FAST"):
        return (argval,)  # type: ignore[return-value]
    if opname == "STORE_FAST_STORE_FAST":
        return tuple(argval)  # type: ignore[arg-type]
    if opname == "STORE_FAST_LOAD_FAST":
        return (argval[0],)  # type: ignore[index]
    return ()
