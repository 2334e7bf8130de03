"""``torch._higher_order_ops.scan.scan``: the combine function traced once, the loop one node.

``scan(combine_fn, init, xs, dim=0, reverse=False)`` carries a state through
the slices of ``xs``: ``carry, y = combine_fn(carry, x)`` for each slice,
returning the last carry and the ``y``s stacked. bytegraph records one node:

1. ``init`` and ``xs`` are pytrees of tensors (``higher_order.tensor_tree``),
   flattened to leaves; the scan runs along dim 0, forwards.
2. ``combine_fn`` is traced (``higher_order.speculate``) on the carry leaves
   (init's metadata) and one slice of each xs leaf, rebuilt into their
   structures; it must return ``(next_carry, y)`` with ``next_carry`` shaped
   like ``init`` (same structure, shapes and dtypes). A carry that comes
   back requiring grad when its input did not is traced again requiring
   grad, as autograd sees it from the second step on.
3. The node calls ``apply_scan`` of this module with the body's GraphModule,
   the leaves and the body's free variables: a Python loop over the slices
   (the scan length is static) that stacks the ``y``s. Eager runs it as
   torch's scan computes; AOTAutograd and Inductor trace through it into
   aten ops, backward included. (The op form,
   ``torch.ops.higher_order.scan``, fails in torch 2.13 under AOTAutograd
   with gradients, "scan might be aliasing", and under Inductor without a
   shape environment; torch.compile's own aot_eager fails alike.)

Anything else is a break with the reason, and the call runs in Python: a
``dim`` other than the first or ``reverse=True``, an empty ``xs`` (eager
returns ``init`` as is), leaves of other or symbolic scan lengths, a
combine_fn returning another carry or one tensor twice.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import BaseSequenceVariable, TupleVariable
from bytegraph.variables.higher_order import (
    Body,
    call_op,
    flatten_result,
    input_example,
    install,
    refuse_aliasing,
    speculate,
    tensor_tree,
)
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

WHAT = "scan"
_NAMES = ("combine_fn", "init", "xs", "dim", "reverse")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class ScanVariable(PythonValueVariable):
    """``torch._higher_order_ops.scan.scan``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        fn, init, xs, dim, reverse = _bind(args, kwargs)
        init_tree, xs_tree = tensor_tree(tx, init, "scan's init"), tensor_tree(tx, xs, "scan's xs")
        carries, scanned = list(init_tree.leaves), list(xs_tree.leaves)
        if not carries or not scanned:
            raise Unsupported("higher_order_call", "scan with an empty init or xs")
        if dim.as_python_constant() not in (0, -scanned[0].example.dim()) or (
            reverse.as_python_constant() is not False
        ):
            raise Unsupported("higher_order_call", "scan along a dim other than the first, or "
                              "reversed (captured: dim=0, reverse=False)")
        lengths = {x.example.shape[0] if x.example.dim() else 0 for x in scanned}
        if len(lengths) != 1 or any(type(n) is not int or n == 0 for n in lengths):
            raise Unsupported("higher_order_call", "scan over xs of different, empty or "
                              "symbolic lengths")
        body, n_carry = _trace(tx, fn, init_tree, xs_tree)
        (length,) = lengths
        like = list(body.outputs[:n_carry]) + [_Stacked(t, length) for t in body.outputs[n_carry:]]
        outputs = call_op(
            tx, apply_scan,
            (install(tx, "scan_combine", body), n_carry, len(scanned),
             *(t.node for t in carries), *(x.node for x in scanned), *body.lifted()), {}, like,
        )
        result = body.rebuild(outputs)
        assert isinstance(result, BaseSequenceVariable)
        return TupleVariable(tuple(result.items_now(tx)))


def apply_scan(combine: Callable[..., Any], n_carry: int, n_xs: int, *flat: torch.Tensor
               ) -> tuple[torch.Tensor, ...]:
    """The scan at run time: ``combine(*carry, *slices, *free)`` for each slice along dim 0;
    the last carry leaves, then each y leaf stacked."""
    carry, xs, free = flat[:n_carry], flat[n_carry:n_carry + n_xs], flat[n_carry + n_xs:]
    ys: list[tuple[torch.Tensor, ...]] = []
    for i in range(xs[0].shape[0]):
        out = tuple(combine(*carry, *(x[i] for x in xs), *free))
        carry, y = out[:n_carry], out[n_carry:]
        ys.append(y)
    return (*carry, *(torch.stack([y[j] for y in ys]) for j in range(len(ys[0]))))


def _bind(args: list, kwargs: dict) -> list[VariableTracker]:
    bound = dict(zip(_NAMES, args))
    for name, value in kwargs.items():
        if name not in _NAMES or name in bound:
            raise Unsupported("higher_order_call", f"scan() got argument {name!r}")
        bound[name] = value
    bound.setdefault("dim", ConstantVariable(0))
    bound.setdefault("reverse", ConstantVariable(False))
    if len(args) > len(_NAMES) or len(bound) != len(_NAMES):
        raise Unsupported("higher_order_call", f"scan() takes {', '.join(_NAMES)}")
    return [bound[n] for n in _NAMES]


def _trace(tx: Tx, fn: VariableTracker, init_tree: Any, xs_tree: Any) -> tuple[Body, int]:
    """The combine body and its number of carry outputs."""
    carries, scanned = list(init_tree.leaves), list(xs_tree.leaves)
    n = len(carries)
    init_picture = flatten_result(tx, init_tree.rebuild_argument(0, dict(enumerate(carries))),
                                  [], WHAT)[1]

    def call(body_args: list[VariableTracker]) -> VariableTracker:
        carry = init_tree.rebuild_argument(0, dict(enumerate(body_args[:n])))
        x = xs_tree.rebuild_argument(0, dict(enumerate(body_args[n:])))
        result = fn.call_function(tx, [carry, x], {})
        items = result.items_now(tx) if isinstance(result, BaseSequenceVariable) else ()
        if len(items) != 2 or flatten_result(tx, items[0], [], WHAT)[1] != init_picture:
            raise Unsupported("higher_order_call", "scan's combine_fn must return "
                              f"(next_carry, y) with next_carry shaped like init: {result}")
        return result

    grads = [t.example.requires_grad for t in carries]
    while True:
        inputs = [(t, input_example(tx.output, t.example).requires_grad_(g))
                  for t, g in zip(carries, grads)]
        inputs += [(x, input_example(tx.output, x.example.select(0, 0))) for x in scanned]
        body = speculate(tx, WHAT, inputs, call)
        refuse_aliasing(body, WHAT)
        _check_carry(body, carries)
        now = [g or out.example.requires_grad for g, out in zip(grads, body.outputs)]
        if now == grads:
            return body, n
        grads = now


def _check_carry(body: Body, carries: list[TensorVariable]) -> None:
    nodes = [t.node for t in body.outputs]
    if len(set(nodes)) != len(nodes):
        raise Unsupported("higher_order_call", "scan's combine_fn returns one tensor twice")
    for out, init in zip(body.outputs, carries):
        if out.example.shape != init.example.shape or out.example.dtype != init.example.dtype:
            raise Unsupported("higher_order_call", "scan's next_carry has another shape or "
                              f"dtype than init ({tuple(out.example.shape)}, {out.example.dtype})")


class _Stacked:
    """A y of the body stacked along a new dim 0 (what ``call_op`` copies)."""

    def __init__(self, t: TensorVariable, length: int) -> None:
        self.example = t.example.detach().new_empty((length, *t.example.shape))
        self.example.requires_grad_(t.example.requires_grad)
        self.device = t.device


def _scan_module() -> Any:
    import torch._higher_order_ops  # noqa: F401  (loads the scan module)

    return sys.modules["torch._higher_order_ops.scan"]


REGISTRY: dict[int, type[VariableTracker]] = {id(_scan_module().scan): ScanVariable}
