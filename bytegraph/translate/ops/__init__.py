"""Opcode handlers, one family per module; importing this registers them all."""

from bytegraph.translate.ops import (  # noqa: F401
    arith,
    build,
    calls,
    context,
    control,
    exceptions,
    functions,
    intrinsics,
    iter,
    match,
    names,
    stack,
    stores,
)
