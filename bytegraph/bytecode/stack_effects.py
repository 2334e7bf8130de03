"""How many values an instruction pops and pushes (CPython 3.11), by opname.

One table for every analysis that walks the stack: which code a graph break
runs in Python and what crosses it (``translate/regions.py``), and which
value a call site calls (``translate/routing.py``). Each entry maps the
instruction's argument to ``(pops, pushes)``; what a reader needs beyond
counts (which pushed slot is a NULL, which slot an instruction peeks at) is
that reader's own table, built on this one.
"""

from __future__ import annotations

from collections.abc import Callable

StackEffect = Callable[[int], tuple[int, int]]

STACK_EFFECTS: dict[str, StackEffect] = {
    "POP_TOP": lambda a: (1, 0),
    "LOAD_ATTR": lambda a: (1, 1),
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
