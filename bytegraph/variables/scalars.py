"""Python scalars read from objects and globals, guarded only when their value matters.

``counter.count += 1`` reads an int, adds one and stores it back. Guarding the
int by value would recompile on every call. A ``SymbolicScalarVariable``
instead records *how* the value is computed (a source, or an operator applied
to other scalars). Arithmetic among such scalars and constants stays
symbolic, and storing, returning or passing one across a graph break
rebuilds the computation in the generated code, so none of those guard the
value. Any other use (a branch, a tensor op, a shape, an index) realises it:
every source it was computed from gets its value guard, and it behaves as a
constant from then on.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import TYPE_CHECKING, Any

from bytegraph.guards.guard import GuardKind
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen
    from bytegraph.graph.output_graph import OutputGraph

# Operators that keep a scalar symbolic: exact Python arithmetic on ints and floats.
SCALAR_OPERATORS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.neg, operator.pos, operator.abs,
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow,
})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SymbolicScalarVariable(VariableTracker):
    """An int or float whose value this trace has not relied on (yet)."""

    value: int | float
    output: OutputGraph
    op: Any = None  # None: read from ``source``; else ``op(*operands)``
    operands: tuple[VariableTracker, ...] = ()

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        """The value, after guarding every source it was computed from."""
        self.realize()
        return self.value

    def is_python_constant(self) -> bool:
        return True

    def truth(self, tx: Any) -> bool:
        return bool(self.as_python_constant())

    def realize(self) -> None:
        if self.op is None:
            self.output.add_guard(GuardKind.CONSTANT_MATCH, self.source, self.value)
        for operand in self.operands:
            operand.as_python_constant()

    def var_getattr(self, tx: Any, name: str) -> VariableTracker:
        return ConstantVariable(self.as_python_constant()).var_getattr(tx, name)

    def reconstruct(self, codegen: PyCodegen) -> None:
        if self.op is None:
            self.source.reconstruct(codegen)
        else:
            codegen.call_const(self.op, list(self.operands))

    def __repr__(self) -> str:
        how = self.source if self.op is None else getattr(self.op, "__name__", self.op)
        return f"SymbolicScalarVariable({self.value!r} from {how})"


def is_plain_number(vt: VariableTracker) -> bool:
    return isinstance(vt, ConstantVariable) and type(vt.value) in (int, float)


def symbolic_arithmetic(
    fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
) -> VariableTracker | None:
    """``fn(*args)`` kept symbolic, or None if this is not scalar arithmetic."""
    if fn not in SCALAR_OPERATORS or kwargs:
        return None
    if not any(isinstance(a, SymbolicScalarVariable) for a in args):
        return None
    if not all(isinstance(a, SymbolicScalarVariable) or is_plain_number(a) for a in args):
        return None
    try:
        value = fn(*(a.value for a in args))
    except Exception:  # e.g. ZeroDivisionError: let the ordinary path realise and raise
        return None
    output = next(a.output for a in args if isinstance(a, SymbolicScalarVariable))
    return SymbolicScalarVariable(value, output, fn, tuple(args))
