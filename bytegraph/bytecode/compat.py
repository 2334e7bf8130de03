"""Facts about the running CPython's bytecode, in one place.

Handlers never test ``sys.version_info``; they ask this module (or register
with version bounds, ``translate/registry.py``). A new Python version is an
addition here and in handler registrations, not a rewrite.

What changed between the supported versions, as far as bytegraph cares:

- 3.12 dropped ``PRECALL`` and ``LOAD_METHOD`` (``LOAD_ATTR``'s low oparg
  bit asks for the method form), inlined comprehensions (PEP 709:
  ``LOAD_FAST_AND_CLEAR``), split ``END_FOR``/``END_SEND`` off ``FOR_ITER``
  and ``SEND`` (both now leave their iterator for them), and moved rare
  operations into ``CALL_INTRINSIC_1/2``.
- 3.13 pushes a call's NULL *after* the callable, passes keyword names on
  the stack (``CALL_KW``), sets function attributes one by one
  (``SET_FUNCTION_ATTRIBUTE``), converts to bool explicitly (``TO_BOOL``),
  splits ``FORMAT_VALUE`` and fuses pairs of fast-local loads and stores.
"""

from __future__ import annotations

import sys

PY_VERSION: tuple[int, int] = sys.version_info[:2]
SUPPORTED_VERSIONS: tuple[tuple[int, int], ...] = ((3, 11), (3, 12), (3, 13))

# 3.11 splits a call into PRECALL + CALL; 3.12 dropped PRECALL.
HAS_PRECALL = PY_VERSION == (3, 11)
# 3.11/3.12 push the NULL before the callable; 3.13 pushes it after.
NULL_BEFORE_CALLABLE = PY_VERSION < (3, 13)
# 3.12+: LOAD_ATTR's low oparg bit is 3.11's LOAD_METHOD.
LOAD_ATTR_METHOD_BIT = PY_VERSION >= (3, 12)
# Low oparg bits that flag something other than the name index, which ``dis`` shifts off
# for ``argval``: LOAD_GLOBAL's push-NULL bit, 3.12+ LOAD_ATTR's method bit, and
# LOAD_SUPER_ATTR's (3.12+) method and two-argument bits.
NAME_OPARG_FLAG_BITS: dict[str, int] = {
    "LOAD_GLOBAL": 1, "LOAD_ATTR": 1 if LOAD_ATTR_METHOD_BIT else 0, "LOAD_SUPER_ATTR": 2,
}
# 3.11/3.12 name a call's keywords with KW_NAMES; 3.13 pushes them and calls CALL_KW.
HAS_KW_NAMES = PY_VERSION < (3, 13)
# An exhausted FOR_ITER pops its iterator and jumps past its target: 3.12 names END_FOR
# as the target and skips it, 3.13 skips END_FOR and the POP_TOP after it. The decoder
# resolves FOR_ITER's target to where it really lands (``instructions.py``).
FOR_ITER_TARGET_SKIP = {(3, 11): 0, (3, 12): 1}.get(PY_VERSION, 2)
# END_FOR (run only if reached other than from FOR_ITER) pops the iterator and the value on
# 3.12; 3.13's pops the value, and the POP_TOP after it the iterator.
END_FOR_POPS = 2 if PY_VERSION == (3, 12) else 1
# 3.12+: SEND keeps the receiver when it returns; END_SEND drops it.
SEND_KEEPS_RECEIVER = PY_VERSION >= (3, 12)
# 3.13: MAKE_FUNCTION takes only the code; SET_FUNCTION_ATTRIBUTE adds the rest.
MAKE_FUNCTION_HAS_FLAGS = PY_VERSION < (3, 13)
# 3.13: POP_JUMP_IF_TRUE/FALSE take an exact bool, made by TO_BOOL or by a COMPARE_OP
# whose oparg has this bit (a tensor there would not be tested for truth at all).
COMPARE_OP_TO_BOOL_BIT = 16 if PY_VERSION >= (3, 13) else 0
# COMPARE_OP's oparg holds its ``dis.cmp_op`` index above this many bits: 3.12 keeps a
# specialization mask in the low four, 3.13 that and the to-bool bit in the low five.
COMPARE_OP_ARG_SHIFT = {(3, 11): 0, (3, 12): 4}.get(PY_VERSION, 5)
# 3.11/3.12 LOAD_CLOSURE pushes a cell; 3.13 loads it with LOAD_FAST.
HAS_LOAD_CLOSURE = PY_VERSION < (3, 13)


def check_supported() -> None:
    """Raise a one-line error if this interpreter's bytecode is not supported."""
    if PY_VERSION not in SUPPORTED_VERSIONS:
        wanted = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_VERSIONS)
        raise RuntimeError(
            f"bytegraph supports CPython {wanted}; this is "
            f"{PY_VERSION[0]}.{PY_VERSION[1]}: run it under a supported interpreter"
        )
