"""SymIntVariable: a size the trace does not fix (a dynamic dimension, or math on one).

It holds the ``torch.SymInt`` of the trace's ShapeEnv (``graph/shapes.py``) and
the fx node that computes it in the graph (``x.size(0)``, ``x.size(0) * 2``).
Arithmetic on it records nodes and stays symbolic, so ``x.view(b, -1)`` or
``torch.arange(x.size(1))`` build size-generic graphs. What needs a Python
value decides it through the ShapeEnv, which records the decision as a guard:

* a comparison or ``bool()`` (``if x.size(0) > 2``) is a guard on the relation;
* a constant (``range(n)``, a dict key, a ``print``) specialises: a guard
  that the size equals the value seen, so that entry serves that size only.

Values the data decides (``config.capture_scalar_outputs``: ``t.item()``;
``config.capture_dynamic_output_shape_ops``: the size of ``x.nonzero()``) are
*unbacked* symbols: the ShapeEnv knows no value for them, so nothing can be
decided about them at trace time. They flow on as SymIntVariable,
SymFloatVariable (``t.item()`` of a float tensor) or SymBoolVariable (a
comparison of one) into arithmetic and tensor ops; what needs their Python
value (a branch, ``range``, a constant) is a ``data_dependent`` graph break
there, where the real value is known.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from bytegraph.exc import Unsupported
from bytegraph.graph.shapes import is_symbolic
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

# Marks the fx nodes of size arithmetic: a graph of nothing else does no tensor work.
SIZE_MATH = "bytegraph_size_math"
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
        return decide(self.python_type(), self.value)

    def truth(self, tx: Tx) -> bool:
        return decide(bool, self.value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value})"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SymFloatVariable(SymIntVariable):
    """A float the data decides (``t.item()`` of a float tensor): an unbacked SymFloat."""

    def python_type(self) -> type:
        return float


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class SymBoolVariable(SymIntVariable):
    """A comparison of a value the data decides (``t.item() > 0``): an unbacked SymBool."""

    def python_type(self) -> type:
        return bool


def decide(kind: type, value: Any) -> Any:
    """``kind(value)`` of a symbolic value: a guard in the ShapeEnv for a backed one, a
    ``data_dependent`` break for one only the data decides (an unbacked symbol)."""
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    try:
        return kind(value)
    except GuardOnDataDependentSymNode as e:
        raise Unsupported(
            "unbacked_value_needed",
            f"Python needs the value of {value}, which only the tensor's data decides "
            "(Tensor.item(), or the size of nonzero/x[mask]...)",
        ) from e


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
    if isinstance(value, (torch.SymFloat, torch.SymBool)) and _unbacked(value):
        cls = SymFloatVariable if isinstance(value, torch.SymFloat) else SymBoolVariable
        return cls(node, value)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ConstantVariable(_concrete(value))
    return ConstantVariable(value)


def _unbacked(value: Any) -> bool:
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return bool(free_unbacked_symbols(value))


def _concrete(value: Any) -> Any:
    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value  # a relation the ShapeEnv decided without a guard
    if isinstance(value, torch.SymBool):
        return decide(bool, value)
    if isinstance(value, torch.SymFloat):
        return decide(float, value)
    return decide(int, value)


def size_item(
    tx: Tx, tensor_node: torch.fx.Node, dim: int, value: Any, method: str = "size"
) -> VariableTracker:
    """``x.size(dim)`` (or ``x.stride(dim)``): a node only when the value is symbolic."""
    if not is_symbolic(value):
        return ConstantVariable(int(value))
    node = tx.output.create_node("call_method", method, (tensor_node, dim), {})
    node.meta[SIZE_MATH] = True
    return SymIntVariable(node, value)


def binary_op(tx: Tx, op: Any, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    """``left op right`` with at least one SymIntVariable operand."""
    args = [_operand(v) for v in (left, right)]
    values = [a[1] for a in args]
    if op not in ARITHMETIC and op not in COMPARISONS:
        raise Unsupported("symbolic_size_op", f"{op.__name__} of a symbolic size")
    try:
        result = op(*values)
    except Exception as e:  # noqa: BLE001  (ZeroDivisionError...: decide it in Python)
        raise Unsupported("symbolic_size_op", f"{op.__name__} of a symbolic size: {e}") from e
    if not _unbacked(result):
        if op in COMPARISONS:
            return ConstantVariable(_concrete(result))  # a guard on the relation
        if op is operator.truediv:  # a float: decide it (rare in shape code)
            return ConstantVariable(_concrete(result))
    # Arithmetic stays symbolic; so does anything about a value the data decides.
    node = tx.output.create_node("call_function", op, tuple(a[0] for a in args), {})
    node.meta[SIZE_MATH] = True
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
    if kwargs or not any(isinstance(a, SymIntVariable) for a in args):
        return None
    from bytegraph.variables.tensor import TensorVariable

    if any(isinstance(a, TensorVariable) for a in args):
        return None
    fn = _IN_PLACE.get(fn, fn)
    if len(args) == 2 and (fn in ARITHMETIC or fn in COMPARISONS):
        return binary_op(tx, fn, args[0], args[1])
    if fn in _SYM_EXTREMES and len(args) == 2 and all(_is_int(a) for a in args):
        # max(n - window + 1, 0) stays symbolic: deciding it would fix n (a KV cache's
        # length) to the value seen. Equal ints are identical: which one wins is moot.
        operands = [_operand(a) for a in args]
        pick = _SYM_EXTREMES[fn]
        node = tx.output.create_node("call_function", pick, tuple(o[0] for o in operands), {})
        node.meta[SIZE_MATH] = True
        return symbolic_or_constant(tx, node, pick(*(o[1] for o in operands)))
    (arg,) = args if len(args) == 1 else (None,)
    if isinstance(arg, SymIntVariable):
        if fn is operator.neg:
            node = tx.output.create_node("call_function", operator.neg, (arg.node,), {})
            node.meta[SIZE_MATH] = True
            return symbolic_or_constant(tx, node, -arg.value)
        if fn is arg.python_type() or (fn in (operator.index, operator.pos) and (
            type(arg) is SymIntVariable
        )):
            return arg
        if fn in (bool, operator.truth):
            return ConstantVariable(decide(bool, arg.value))
        if fn is operator.not_:
            return ConstantVariable(not decide(bool, arg.value))
    return None


_SYM_EXTREMES = {max: torch.sym_max, min: torch.sym_min}


def _is_int(vt: VariableTracker) -> bool:
    if isinstance(vt, SymIntVariable):
        return type(vt) is SymIntVariable
    return vt.is_python_constant() and type(vt.as_python_constant()) is int


def _operand(vt: VariableTracker) -> tuple[Any, Any]:
    if isinstance(vt, SymIntVariable):
        return vt.node, vt.value
    if vt.is_python_constant():
        value = vt.as_python_constant()
        if isinstance(value, (int, float, bool)):
            return value, value
    raise Unsupported("symbolic_size_op", f"{vt} in arithmetic with a symbolic size")
