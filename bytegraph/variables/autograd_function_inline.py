"""``Fn.apply`` where autograd records nothing: the forward inlined into the graph.

Eager's ``Function.apply`` connects its outputs to the graph of autograd only
when grad mode is on and some tensor argument requires grad. Otherwise
(under ``no_grad``, or when no tensor argument requires grad) it runs
``forward`` (and ``setup_context``) with grad disabled, never runs
``backward``, and hands the outputs back through its C++ ``_wrap_outputs``:

1. the forward runs with grad disabled: bytegraph records
   ``_set_grad_enabled(False)`` around it (grad_modes' switch), so an op on a
   free variable that requires grad does not require grad, as in eager;
2. a returned tensor that is one of the tensor arguments comes back as a new
   alias of it: ``x.view_as(x)`` made without grad when ``x`` does not require
   grad, ``x.detach()`` when it does (eager's two cases for an output it does
   not differentiate); this holds whether or not the forward marked it
   non-differentiable;
3. any other returned tensor comes back as it is, unless it requires grad and
   is not a view (eager then detaches it in place: refused); non-tensor items
   (ints, None, bools) come back as they are, in a new plain tuple.

"No tensor argument requires grad" is read from the examples of the frame's
own graph only: inside a body (``torch.func.grad``'s, say) an example that
does not require grad may still be differentiated by the op around the body,
so there the op node is recorded as before, unless every tensor argument is of
a dtype nothing differentiates (integers, bools: torch's ModIndex indexing a
table by a position inside a vmapped mask_mod; the op node has no vmap rule).

torch.compile inlines the forward in the same two cases; the backward is not
traced at all, so a backward bytegraph cannot trace costs nothing here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import AttributeMutationNew, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import BaseSequenceVariable, TupleVariable
from bytegraph.variables.ctx import set_grad_mode
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


def records_nothing(tx: Tx, args: list[VariableTracker]) -> bool:
    """Whether eager's ``apply`` leaves autograd out: grad off, or no tensor argument
    requiring grad. The second is read only in the frame's own graph: inside a body (a
    torch.func transform's above all) an input's example does not say whether the op
    around the body differentiates it."""
    if not torch.is_grad_enabled():
        return True
    if tx.output.tracer.parent is not None:
        return all(_never_differentiated(tx, a) for a in args)
    return not any(isinstance(a, TensorVariable) and a.example.requires_grad for a in args)


def _never_differentiated(tx: Tx, vt: VariableTracker) -> bool:
    """A constant, or tensors of a dtype no transform differentiates (integers, bools:
    ModIndex's ``ids[q_idx]`` in a vmapped mask), alone or in a tuple or list."""
    if isinstance(vt, TensorVariable):
        return not (vt.example.dtype.is_floating_point or vt.example.dtype.is_complex)
    if isinstance(vt, BaseSequenceVariable):
        return all(_never_differentiated(tx, item) for item in vt.items_now(tx))
    return vt.is_python_constant()


def apply_inline(
    tx: Tx, cls: type, forward: VariableTracker, setup: VariableTracker | None,
    args: list[VariableTracker],
) -> VariableTracker:
    """``cls.apply(*args)`` as eager runs it when autograd records nothing."""
    from bytegraph.variables.autograd_function import CtxVariable

    ctx = CtxVariable(cls, tuple(False for _ in args),
                      mutation_type=tx.output.side_effects.new_mutation(AttributeMutationNew))
    grad_enabled = torch.is_grad_enabled()
    set_grad_mode(tx, False)
    try:
        if setup is None:
            result = forward.call_function(tx, [ctx, *args], {})
        else:
            result = forward.call_function(tx, args, {})
            setup.call_function(tx, [ctx, TupleVariable(tuple(args)), result], {})
        return _as_eager_returns(tx, result, args, cls.__qualname__)
    finally:
        set_grad_mode(tx, grad_enabled)


def _as_eager_returns(
    tx: Tx, result: VariableTracker, args: list[VariableTracker], name: str
) -> VariableTracker:
    if isinstance(result, TupleVariable) and result.tuple_type is tuple:
        items = tuple(_as_eager_item(tx, i, args, name) for i in result.items_now(tx))
        return TupleVariable(items)
    if isinstance(result, (TensorVariable, ConstantVariable)):
        return _as_eager_item(tx, result, args, name)
    raise Unsupported("higher_order_call", f"{name}.forward returned {result}: traced, a "
                      "forward returns a tensor, a constant or a plain tuple of them")


def _as_eager_item(
    tx: Tx, item: VariableTracker, args: list[VariableTracker], name: str
) -> VariableTracker:
    if isinstance(item, ConstantVariable):
        return item
    if not isinstance(item, TensorVariable):
        raise Unsupported("higher_order_call", f"{name}.forward returned {item}: traced, a "
                          "forward returns tensors and constants")
    if any(isinstance(a, TensorVariable) and a.node is item.node for a in args):
        if item.example.requires_grad:
            return item.call_method(tx, "detach", [], {})
        return item.call_method(tx, "view_as", [item], {})
    if item.example.requires_grad and not item.example._is_view():
        raise Unsupported("higher_order_call", f"{name}.forward returned a tensor from "
                          "outside that requires grad: eager detaches it in place")
    return item
