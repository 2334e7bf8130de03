"""Facts about the running CPython's bytecode, in one place.

Handlers never test ``sys.version_info``; they ask this module. A new Python
version is an addition here (and in handler registrations), not a rewrite.
"""

from __future__ import annotations

import sys

PY_VERSION: tuple[int, int] = sys.version_info[:2]
SUPPORTED_VERSIONS: tuple[tuple[int, int], ...] = ((3, 11),)

# 3.11 splits a call into PRECALL + CALL; 3.12 dropped PRECALL.
HAS_PRECALL = PY_VERSION == (3, 11)
# 3.11/3.12 push the NULL before the callable; 3.13 pushes it after.
NULL_BEFORE_CALLABLE = PY_VERSION < (3, 13)
# 3.11 LOAD_GLOBAL's low oparg bit asks for a NULL to be pushed first.
LOAD_GLOBAL_PUSHES_NULL_BIT = PY_VERSION >= (3, 11)


def check_supported() -> None:
    """Raise a one-line error if this interpreter's bytecode is not supported."""
    if PY_VERSION not in SUPPORTED_VERSIONS:
        wanted = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_VERSIONS)
        raise RuntimeError(
            f"bytegraph supports CPython {wanted}; this is "
            f"{PY_VERSION[0]}.{PY_VERSION[1]}: run it under a supported interpreter"
        )
