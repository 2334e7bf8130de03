"""Opcode handlers, one family per module; importing this registers them all."""

from bytegraph.translate.ops import arith, build, calls, control, names, stack  # noqa: F401
