"""A tensor's autograd attributes in the trace: ``x.grad`` and ``x.data``.

* ``x.grad`` of a tensor from the frame (an input, a parameter) is read from
  the real tensor through ``AttrSource(x, "grad")``: None is guarded as None,
  a tensor becomes a graph input with its own tensor guard, so an entry traced
  before the first backward is not used once the gradient exists (and the
  other way round). A tensor made in the trace has no gradient yet: None.
* ``x.grad = value`` (None, or a tensor of ``x``'s shape, dtype and device)
  on a tensor from the frame is a store replayed after the graph, as any
  attribute store; later reads in the trace see the value stored. The store
  goes to a ``TensorAttributesVariable`` standing for the tensor's attribute
  dict (tensors themselves are immutable values in the trace). Other values,
  a tensor made in the trace, ``del x.grad``: a break (eager may raise).
* ``x.data`` is ``torch._C._autograd._get_data_attr(x)`` in the graph (a tensor
  sharing ``x``'s memory, detached, as torch.compile records it); ``x.data = v``
  is only understood when ``v`` is that same tensor (``p.data -= lr * g`` stores
  back what the in-place op returned): a no-op. Any other store breaks.

* ``t.requires_grad_(flag)`` (or ``t.requires_grad = flag``) on a tensor made in the
  trace while grad mode is off (``torch.zeros_like(q).requires_grad_()`` in MRA's
  attention, run for inference) is that call in the graph: the tensor is a leaf and no op
  under no_grad records autograd history, so only the flag itself changes, on the
  tensor the graph returns as on the one eager makes.

What stays a break, with its reason: ``requires_grad_()`` / ``requires_grad =`` on a
tensor from the frame, on a view, or under grad mode (ops after it would build autograd
history inside the graph), and ``backward()`` (Python runs it between two graphs, as
torch.compile does). Under grad mode, an op on a leaf made in the graph that requires
grad (``torch.zeros(3, requires_grad=True)``) breaks too (``refuse_made_leaf``):
AOTAutograd returns such a leaf as a new tensor, so the history the op builds would
lead to no tensor the program holds (no gradient would reach it). The leaf itself
comes out of the graph with its flag (``keep_leaf_flags``), and Python runs the op.
"""

from __future__ import annotations

import dataclasses
import operator
import weakref
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.side_effects import DELETED
from bytegraph.variables.base import AttributeMutationExisting, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import BaseSequenceVariable

if TYPE_CHECKING:
    from bytegraph.side_effects import SideEffects
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.tensor import TensorVariable

# Per trace (its SideEffects): the attribute dict VT of each tensor from the frame, and
# the real tensor of each graph input's node (with how many inputs are indexed).
_SLOTS: weakref.WeakKeyDictionary[SideEffects, dict[int, TensorAttributesVariable]] = (
    weakref.WeakKeyDictionary()
)
_EXAMPLES: weakref.WeakKeyDictionary[SideEffects, tuple[int, dict[Any, torch.Tensor]]] = (
    weakref.WeakKeyDictionary()
)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TensorAttributesVariable(VariableTracker):
    """The settable attributes of a tensor from the frame (same source as the tensor):
    the target of the stores SideEffects replays."""

    tensor: Any = dataclasses.field(metadata={"no_vts": True})

    def python_type(self) -> type:
        return self.tensor.python_type()


def _slot(tx: Tx, t: TensorVariable) -> TensorAttributesVariable:
    slots = _SLOTS.setdefault(tx.output.side_effects, {})
    slot = slots.get(id(t))
    if slot is None:
        slot = slots[id(t)] = TensorAttributesVariable(
            t, source=t.source, mutation_type=AttributeMutationExisting(0)
        )
    return slot


def _real_tensor(tx: Tx, t: TensorVariable) -> torch.Tensor | None:
    """The real tensor a frame tensor's VT stands for (its graph input's example)."""
    inputs = tx.output.inputs
    seen, examples = _EXAMPLES.get(tx.output.side_effects, (0, {}))
    for graph_input in inputs[seen:]:  # indexed once: a training loop reads every p.grad
        examples[graph_input.node] = graph_input.example
    _EXAMPLES[tx.output.side_effects] = (len(inputs), examples)
    return examples.get(t.node)


def read_grad(tx: Tx, t: TensorVariable) -> VariableTracker:
    """``t.grad``: the value stored in this trace, else the real gradient (guarded)."""
    from bytegraph.guards.sources import AttrSource
    from bytegraph.variables.builder import wrap

    if t.source is None:
        return ConstantVariable(None)  # made in the trace: no backward has reached it
    pending = tx.output.side_effects.load_attr(_slot(tx, t), "grad")
    if pending is not None:
        return ConstantVariable(None) if pending is DELETED else pending
    real = _real_tensor(tx, t)
    if real is None:
        raise Unsupported("tensor_attribute", f"Tensor attribute 'grad' of {t}")
    return wrap(tx, real.grad, AttrSource(t.source, "grad"))


def read_data(tx: Tx, t: TensorVariable) -> VariableTracker:
    """``t.data``: a detached tensor sharing ``t``'s memory, in the graph."""
    from bytegraph.variables.tensor import tensor_op

    return tensor_op(tx, "call_function", torch._C._autograd._get_data_attr, [t], {})


def store_attribute(tx: Tx, t: TensorVariable, name: str, value: VariableTracker) -> None:
    """``t.name = value`` for the attributes modelled here; a break otherwise."""
    if name == "grad":
        _store_grad(tx, t, value)
        return
    if name == "data" and _is_own_data(t, value):
        return
    if name == "requires_grad":
        set_requires_grad(tx, t, value)
        return
    raise Unsupported(
        "attribute_mutation",
        f"setting Tensor.{name} (changes the tensor's {'memory' if name == 'data' else 'state'} "
        "outside the graph)",
    )


def _is_own_data(t: TensorVariable, value: VariableTracker) -> bool:
    """``value`` is ``t.data`` as read in this trace, possibly changed in place, with
    ``t``'s own sizes and strides (``d.t_()`` would make the store change ``t``)."""
    example = getattr(value, "example", None)
    if not isinstance(example, torch.Tensor) or _layout(example) != _layout(t.example):
        return False
    node = getattr(value, "node", None)
    while node is not None and node.target is not torch._C._autograd._get_data_attr:
        in_place = node.target in _IN_PLACE_OPERATORS or (
            node.op == "call_method" and str(node.target).endswith("_")
        )
        if not in_place or not node.args:
            return False
        node = node.args[0]  # an in-place op returns its first operand
    return node is not None and node.args[0] is t.node


def _layout(t: torch.Tensor) -> tuple:
    return (t.shape, t.stride(), t.storage_offset(), t.dtype)


_IN_PLACE_OPERATORS = frozenset({
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor,
    operator.ilshift, operator.irshift, operator.imatmul,
})


def _store_grad(tx: Tx, t: TensorVariable, value: VariableTracker) -> None:
    from bytegraph.variables.tensor import TensorVariable

    if t.source is None:
        raise Unsupported("attribute_mutation", "setting .grad of a tensor made in the trace")
    if isinstance(value, ConstantVariable) and value.value is None:
        stored: VariableTracker = ConstantVariable(None)
    elif isinstance(value, TensorVariable) and _grad_fits(t, value):
        stored = value
    else:
        raise Unsupported(
            "attribute_mutation",
            f"setting .grad to {value} (eager raises unless it is None or a tensor of the "
            "same shape, dtype and device)",
        )
    tx.output.side_effects.store_attr(_slot(tx, t), "grad", stored)


def _grad_fits(t: TensorVariable, grad: TensorVariable) -> bool:
    a, b = t.example, grad.example
    return (
        a.shape == b.shape and a.dtype == b.dtype and t.device == grad.device
        and a.layout == b.layout and grad is not t
    )


def set_requires_grad(tx: Tx, t: TensorVariable, flag: VariableTracker) -> VariableTracker:
    """``t.requires_grad_(flag)``: a node of the graph for a tensor made in the trace under
    no_grad, ``t`` itself where nothing changes; a break otherwise."""
    from bytegraph.variables.tensor import refuse_method, tensor_op

    wanted = flag.as_python_constant() if flag.is_python_constant() else None
    if type(wanted) is not bool:
        raise refuse_method("requires_grad_")
    example = t.example
    if example.requires_grad == wanted:
        return t
    if not _made_by_an_op(t) or not example.is_leaf or example._base is not None or (
        torch.is_grad_enabled()
    ):
        raise refuse_method("requires_grad_")
    return tensor_op(tx, "call_method", "requires_grad_", [t, ConstantVariable(wanted)], {})


def keep_leaf_flags(compiled: Any, outputs: list[TensorVariable]) -> Any:
    """``compiled`` (a backend's callable), setting ``requires_grad`` again on the outputs
    that are leaves made in the graph and requiring grad (``requires_grad_()`` or a factory
    with ``requires_grad=True`` under no_grad): AOTAutograd returns them without the flag.
    The graph itself needs none of it, since no op under no_grad records history."""
    examples = [getattr(t, "example", None) for t in outputs]
    # A view is never such a leaf, and its flags are not read: for a view of one of
    # several outputs (unbind) whose base was then written in place, reading them raises.
    flagged = [
        i for i, e in enumerate(examples)
        if isinstance(e, torch.Tensor) and e._base is None and e.requires_grad and e.is_leaf
    ]
    if not flagged:
        return compiled

    def run(*args: Any) -> Any:
        results = compiled(*args)
        for i in flagged:
            results[i].requires_grad_()
        return results

    return run


def refuse_made_leaf(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> None:
    """Under grad mode, break before an op on a leaf made in the graph that requires grad."""
    if not torch.is_grad_enabled():
        return
    from bytegraph.variables.tensor import TensorVariable

    for value in (*args, *kwargs.values()):
        items = value.items if isinstance(value, BaseSequenceVariable) else (value,)
        for item in items:
            # _made_by_an_op first: ``is_leaf`` of a view written in place (an input's
            # ``x[0] = w``) rebuilds its grad_fn, which changes what the meta kernel of
            # the next in-place op on it accepts.
            if not isinstance(item, TensorVariable) or not _made_by_an_op(item):
                continue
            example = item.example
            if example.requires_grad and example.is_leaf:
                raise Unsupported(
                    "tensor_method_unsupported",
                    "an op on a tensor made in the graph with requires_grad=True while grad "
                    "mode is on (its autograd history must reach the very tensor Python holds)",
                )


def _made_by_an_op(t: TensorVariable) -> bool:
    """Made in the graph by an op: not from the frame, nor a body's input (a placeholder
    of a higher-order op's subgraph, which has no source either)."""
    return t.source is None and t.node.op in ("call_function", "call_method")
