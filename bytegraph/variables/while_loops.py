"""``torch._higher_order_ops.while_loop``: condition and body traced once, the loop one node.

``while_loop(cond_fn, body_fn, carried_inputs)`` runs ``carried =
body_fn(*carried)`` while ``cond_fn(*carried)`` is true and returns the last
carried values (new tensors: a loop that never runs returns clones). The
number of iterations may depend on the data, so the loop cannot be unrolled;
bytegraph records one node, ``torch.ops.higher_order.while_loop(cond_graph,
body_graph, carried, free)``, the form torch.compile hands its backends,
which eager, AOTAutograd and Inductor run.

1. ``carried_inputs`` is a tuple or list of tensors; both functions are
   traced (``higher_order.speculate``) on their metadata.
2. ``cond_fn`` must return a one-element bool tensor of no dimensions (the
   op's own rule); ``body_fn`` a tuple of new tensors, one per carried input,
   each with the carried input's shape, strides, dtype and device, since the
   next iteration feeds it back in.
3. The tensors the two functions close over are passed once, in one order,
   after the carried ones.

Left to Python, with the reason: int carries (their result is an unknown
int), nested carried structures, a Python bool condition, a body changing a
carried value's metadata, and any input that requires grad while grad mode is
on (the op has no backward in torch 2.13).
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.containers import TupleVariable
from bytegraph.variables.higher_order import (
    Body,
    bind,
    call_op,
    input_example,
    install,
    refuse_aliasing,
    share_inputs,
    speculate,
    tensor_items,
)
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

WHAT = "while_loop"


def _refuse(why: str) -> Unsupported:
    return Unsupported("higher_order_call", f"{WHAT}: {why}")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class WhileLoopVariable(PythonValueVariable):
    """``torch._higher_order_ops.while_loop.while_loop``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        names = ("cond_fn", "body_fn", "carried_inputs")
        cond_fn, body_fn, carried = bind(WHAT, names, args, kwargs)
        items = tensor_items(tx, carried, f"{WHAT}'s carried_inputs")
        if not items:
            raise _refuse("no carried inputs")

        def traced(fn: VariableTracker) -> Any:
            return lambda body_args: fn.call_function(tx, list(body_args), {})

        inputs = [(t, input_example(tx.output, t.example)) for t in items]
        condition = speculate(tx, f"{WHAT}'s cond_fn", inputs, traced(cond_fn))
        body = speculate(tx, f"{WHAT}'s body_fn", inputs, traced(body_fn))
        _check_condition(condition)
        _return_bare(condition)
        _check_body(body, items)
        refuse_aliasing(body, WHAT)
        free = share_inputs([condition, body])
        if torch.is_grad_enabled() and (
            any(t.example.requires_grad for t in [*items, *body.outputs])
            or _may_require_grad(tx, free)
        ):
            raise _refuse("an input requires grad (the op has no backward)")
        outputs = call_op(
            tx, torch.ops.higher_order.while_loop,
            (install(tx, "while_cond", condition), install(tx, "while_body", body),
             tuple(t.node for t in items), tuple(free)), {},
            body.outputs,
        )
        return TupleVariable(tuple(outputs))


def _check_condition(condition: Body) -> None:
    if condition.structure[0] != "tensor":
        raise _refuse("cond_fn returns a Python value, not a bool tensor")
    (pred,) = condition.outputs
    if pred.example.dtype is not torch.bool or pred.example.dim() != 0:
        raise _refuse("cond_fn must return a bool tensor of no dimensions, not "
                      f"{pred.example.dtype} of shape {tuple(pred.example.shape)}")


def _return_bare(condition: Body) -> None:
    """The condition graph returns its bool tensor itself, not a one-element tuple: the
    form torch's eager kernel checks for and torch.compile gives its backends."""
    (output,) = [n for n in condition.tracer.graph.nodes if n.op == "output"]
    output.args = (output.args[0][0],)


def _check_body(body: Body, items: list[TensorVariable]) -> None:
    shape = body.structure
    if shape[0] is not tuple or len(shape[1]) != len(items) or any(
        part[0] != "tensor" for part in shape[1]
    ):
        raise _refuse(f"body_fn must return a tuple of {len(items)} tensors")
    nodes = [t.node for t in body.outputs]
    if len(set(nodes)) != len(nodes):
        raise _refuse("body_fn returns one tensor twice")
    for out, carried in zip(body.outputs, items):
        a, b = out.example, carried.example
        if (a.shape, a.stride(), a.dtype, a.device) != (b.shape, b.stride(), b.dtype, b.device):
            raise _refuse("body_fn changes a carried value's shape, strides, dtype or device")


def _may_require_grad(tx: Tx, free: list[torch.fx.Node]) -> bool:
    """Whether a tensor the functions close over may require grad. A condition that reads
    one returns a bool that does not, yet the op then runs its autograd form, whose
    outputs do. Known not to: computed in the root graph from inputs that do not, by ops
    that do not ask for grad; anything else may."""
    output = tx.output
    if free and output.tracer is not output.root_tracer:
        return True  # inside another body: its inputs' examples are not at hand
    examples = {graph_input.node: graph_input.example for graph_input in output.inputs}
    seen: set[torch.fx.Node] = set()
    pending = list(free)
    while pending:
        node = pending.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op == "placeholder":
            example = examples.get(node, _UNKNOWN)
            if example is _UNKNOWN or getattr(example, "requires_grad", False):
                return True
        elif node.op == "get_attr":
            if not isinstance(output.root_tracer.modules.get(node.target), torch.nn.Module):
                return True
        elif node.kwargs.get("requires_grad") or node.target in _ASKS_FOR_GRAD:
            return True
        pending.extend(node.all_input_nodes)
    return False


_UNKNOWN = object()
_ASKS_FOR_GRAD = ("requires_grad_", torch.Tensor.requires_grad_)


def _while_loop_module() -> Any:
    import torch._higher_order_ops  # noqa: F401  (loads the while_loop module)

    return sys.modules["torch._higher_order_ops.while_loop"]


REGISTRY: dict[int, type[VariableTracker]] = {
    id(_while_loop_module().while_loop): WhileLoopVariable,
}
