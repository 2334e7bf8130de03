"""Opcode handler registry and the 256-slot dispatch table built from it.

Handlers are plain functions named exactly after their opcode and registered
with the CPython versions they apply to::

    @handler("LOAD_FAST")
    def LOAD_FAST(tx, inst): ...

``build_dispatch_table(cls)`` maps every opcode of the running interpreter to
a class override (a method named after the opcode), else the registered
handler, else a function raising ``Unsupported`` that names the opcode.
"""

from __future__ import annotations

import dis
from collections.abc import Callable
from typing import Any

from bytegraph.bytecode import compat
from bytegraph.exc import Unsupported

Handler = Callable[[Any, Any], None]

_registered: dict[str, Handler] = {}

# Opcodes of the running CPython that deliberately have no handler, with the reason.
UNSUPPORTED: dict[str, str] = {}


def handler(
    opname: str,
    *,
    min_ver: tuple[int, int] = (3, 11),
    max_ver: tuple[int, int] | None = None,
) -> Callable[[Handler], Handler]:
    """Register ``fn`` as the handler of ``opname`` on versions min_ver..max_ver."""

    def register(fn: Handler) -> Handler:
        if _in_range(min_ver, max_ver):
            if opname in _registered:
                raise RuntimeError(f"two handlers for {opname}")
            _registered[opname] = fn
        return fn

    return register


def unsupported_opcode(
    opname: str,
    reason: str,
    *,
    min_ver: tuple[int, int] = (3, 11),
    max_ver: tuple[int, int] | None = None,
) -> None:
    """Declare that ``opname`` (on versions min_ver..max_ver) is deliberately not traced."""
    if _in_range(min_ver, max_ver):
        UNSUPPORTED[opname] = reason


def _in_range(min_ver: tuple[int, int], max_ver: tuple[int, int] | None) -> bool:
    version = compat.PY_VERSION
    return min_ver <= version and (max_ver is None or version <= max_ver)


def registered_handlers() -> dict[str, Handler]:
    return dict(_registered)


def _missing(opname: str) -> Handler:
    reason = UNSUPPORTED.get(opname, "no handler")

    def missing(tx: Any, inst: Any) -> None:
        raise Unsupported("opcode_unsupported", f"opcode {opname} ({reason})")

    missing.__name__ = f"missing_{opname}"
    return missing


def build_dispatch_table(cls: type) -> list[Handler]:
    table: list[Handler] = [_missing(f"<{i}>") for i in range(256)]
    for opname, opcode in dis.opmap.items():
        if opcode >= 256:  # 3.12+ lists pseudo-instructions of the compiler, never executed
            continue
        override = getattr(cls, opname, None)
        table[opcode] = override or _registered.get(opname) or _missing(opname)
    return table
