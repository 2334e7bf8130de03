"""SymIntVariable: a size the trace does not fix (a dynamic dimension, or math on one).

It holds the ``torch.SymInt`` of the trace's ShapeEnv (``graph/shapes.py``) and
the fx node that computes it in the graph (``x.size(0)``, ``x.size(0) * 2``).
Arithmetic on it records nodes and stays symbolic, so ``x.view(b, -1)`` or
``torch.arange(x.size(1))`` build size-generic graphs. What needs a Python
value decides it through the ShapeEnv, which records the decision as a guard:

* a comparison or ``bool()`` (``if x.size(0) > 2``) is a guard on the relation;
* a constant (``range(n)``, a dict key, a ``print``) specialises: a guard
  that the size equals the value seen, so that entry serves that size only.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# Binary operators that keep a size symbolic; comparisons are decided (a guard).
ARITHMETIC = frozenset({
    operator.add, operator.sub, operator.mul, operator.floordiv, operator.mod, operator.neg,
    operator.truediv, operator.pow,
})
COMPARISONS = frozenset({
    operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne,
})


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SymIntVariable(VariableTracker):
    node: torch.fx.Node
    value: torch.SymInt

    def python_type(self) -> type:
        return int

    def is_python_constant(self) -> bool:
        return True  # on demand: as_python_constant specialises

    def as_python_constant(self) -> Any:
        """Specialise: the value seen, guarded to stay the same."""
        return int(self.value)

    def truth(self, tx: Tx) -> bool:
        return bool(self.value)

    def __repr__(self) -> str:
        return f"SymIntVariable({self.value})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SymSliceVariable(VariableTracker):
    """``a:b:c`` with a symbolic bound: symbolic for tensor indexing, specialised (as
    a constant slice) anywhere else."""

    parts: tuple[VariableTracker, ...]

    def python_type(self) -> type:
        return slice

    def is_python_constant(self) -> bool:
        return True

    def as_python_constant(self) -> Any:
        return slice(*(p.as_python_constant() for p in self.parts))

    def lowered(self) -> tuple[slice, slice]:
        """(the slice of graph arguments, the slice of fake values)."""
        graph = [p.node if isinstance(p, SymIntVariable) else p.as_python_constant()
                 for p in self.parts]
        values = [p.value if isinstance(p, SymIntVariable) else p.as_python_constant()
                  for p in self.parts]
        return slice(*graph), slice(*values)

    def __repr__(self) -> str:
        return f"SymSliceVariable({self.parts})"


def symbolic_or_constant(tx: Tx, node: torch.fx.Node, value: Any) -> VariableTracker:
    """A SymIntVariable for a symbolic result, a constant for one the ShapeEnv fixed."""
    from bytegraph.graph.shapes import is_symbolic

    if isinstance(value, torch.SymInt) and is_symbolic(value):
        return SymIntVariable(node, value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ConstantVariable(_concrete(value))
    return ConstantVariable(value)


def _concrete(value: Any) -> Any:
    if isinstance(value, torch.SymBool):
        return bool(value)
    if isinstance(value, torch.SymFloat):
        return float(value)
    return int(value)


def size_item(tx: Tx, tensor_node: torch.fx.Node, dim: int, value: Any) -> VariableTracker:
    """``x.size(dim)``: a node only when the size is symbolic."""
    from bytegraph.graph.shapes import is_symbolic

    if not is_symbolic(value):
        return ConstantVariable(int(value))
    node = tx.output.create_node("call_method", "size", (tensor_node, dim), {})
    return SymIntVariable(node, value)


def binary_op(tx: Tx, op: Any, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    """``left op right`` with at least one SymIntVariable operand."""
    args = [_operand(v) for v in (left, right)]
    values = [a[1] for a in args]
    if op in COMPARISONS:
        return ConstantVariable(bool(op(*values)))  # a guard on the relation
    if op not in ARITHMETIC:
        raise Unsupported("unsupported_value", f"{op.__name__} of a symbolic size")
    try:
        result = op(*values)
    except Exception as e:  # noqa: BLE001  (ZeroDivisionError...: decide it in Python)
        raise Unsupported("unsupported_value", f"{op.__name__} of a symbolic size: {e}") from e
    if op is operator.truediv:  # a float: decide it (rare in shape code)
        return ConstantVariable(_concrete(result))
    node = tx.output.create_node("call_function", op, tuple(a[0] for a in args), {})
    return symbolic_or_constant(tx, node, result)


_IN_PLACE = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
    operator.itruediv: operator.truediv, operator.ipow: operator.pow,
}


def operation(
    tx: Tx, fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
) -> VariableTracker | None:
    """A builtin or operator applied to a symbolic size (and no tensor), or None to let
    the caller handle it (which specialises the size where it needs a value)."""
    from bytegraph.variables.tensor import TensorVariable

    if kwargs or not any(isinstance(a, SymIntVariable) for a in args):
        return None
    if any(isinstance(a, TensorVariable) for a in args):
        return None
    fn = _IN_PLACE.get(fn, fn)
    if len(args) == 2 and (fn in ARITHMETIC or fn in COMPARISONS):
        return binary_op(tx, fn, args[0], args[1])
    (arg,) = args if len(args) == 1 else (None,)
    if isinstance(arg, SymIntVariable):
        if fn is operator.neg:
            node = tx.output.create_node("call_function", operator.neg, (arg.node,), {})
            return symbolic_or_constant(tx, node, -arg.value)
        if fn in (int, operator.index, operator.pos):
            return arg
        if fn in (bool, operator.truth):
            return ConstantVariable(bool(arg.value))
        if fn is operator.not_:
            return ConstantVariable(not arg.value)
    return None


def _operand(vt: VariableTracker) -> tuple[Any, Any]:
    if isinstance(vt, SymIntVariable):
        return vt.node, vt.value
    if vt.is_python_constant():
        value = vt.as_python_constant()
        if isinstance(value, (int, float, bool)):
            return value, value
    raise Unsupported("unsupported_value", f"{vt} in arithmetic with a symbolic size")
