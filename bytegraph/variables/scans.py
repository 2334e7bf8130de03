"""``torch._higher_order_ops.associative_scan.associative_scan``: the combine function
traced once into a body, the scan one node.

``associative_scan(combine_fn, xs, dim, reverse=False, combine_mode="pointwise")``
is Python in torch: it flattens ``xs`` (a tensor or a tuple/list tree of them),
moves ``dim`` to the front, flips for ``reverse``, and then either

* ``combine_mode="generic"``: runs ``generic_associative_scan`` (log-depth
  slices, ``cat`` and interleaving) with ``torch.vmap(combine_fn)`` as the
  operator, batched along the scan dimension; or
* ``combine_mode="pointwise"``: binds ``torch.ops.higher_order.associative_scan``
  (compiled by Inductor for CUDA/XPU; on CPU eager raises a ValueError).

The generic mode is captured: ``combine_fn`` is traced (``higher_order.speculate``)
on two pytrees of examples shaped like one slice of ``xs``, its outputs must
have the structure, shapes and dtypes of the slice, and the graph gets one node
calling ``apply_associative_scan`` of this module, which does what torch's
wrapper does with the body's GraphModule (``torch.vmap`` of it, the free
variables as unbatched extra arguments). Eager runs it as the user's call runs;
AOTAutograd and Inductor trace through it into aten ops, backward included (the
HOP form, ``torch.ops.higher_order.associative_scan``, is not what eager runs in
this mode, Inductor cannot lower it on CPU, and its autograd refuses lifted
free variables). A symbolic scan length is left symbolic: eager runs any length,
and AOTAutograd guards on the lengths torch's scan branches on. Everything else
is a break with the reason, and Python runs the call: the pointwise mode
(eager's ValueError on CPU; on CUDA eager compiles the HOP itself), a 1-d xs
(torch's generic mode raises), a scan of length 0 or 1 (eager raises, or
returns views of ``xs``), leaves of different scan lengths, a combine function
returning another structure (eager's own error, or its result).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.containers import (
    NEW_VALUE,
    ListVariable,
    SizeVariable,
    TupleVariable,
)
from bytegraph.variables.higher_order import (
    Body,
    bind_with_defaults,
    call_op,
    input_example,
    install,
    refuse_aliasing,
    speculate,
)
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

WHAT = "associative_scan"


# -- what the graph calls -------------------------------------------------------------------------
def apply_associative_scan(body: Any, n_leaves: int, dim: int, reverse: bool, *args: Any) -> tuple:
    """torch's generic-mode ``associative_scan`` on the flat leaves ``args[:n_leaves]``,
    the body's free variables after them."""
    from torch._higher_order_ops.associative_scan import generic_associative_scan

    leaves = [torch.movedim(x, dim, 0) for x in args[:n_leaves]]
    free = tuple(args[n_leaves:])
    if reverse:
        leaves = [torch.flip(x, [0]) for x in leaves]
    batched = torch.vmap(body, in_dims=(0,) * (2 * n_leaves) + (None,) * len(free), out_dims=0)
    out = generic_associative_scan(batched, leaves, additional_inputs=free)
    if reverse:
        out = [x.flip([0]) for x in out]
    return tuple(torch.movedim(x, 0, dim) for x in out)


# -- xs as a tree ---------------------------------------------------------------------------------
Rebuild = Callable[[Sequence[VariableTracker]], VariableTracker]


def flatten_xs(tx: Tx, vt: VariableTracker, leaves: list[TensorVariable]) -> tuple[Rebuild, tuple]:
    """The tensors of ``xs`` (appended to ``leaves``), a function rebuilding the tree
    from others, and its picture in ``higher_order.flatten_result``'s terms."""
    if isinstance(vt, TensorVariable):
        index = len(leaves)
        leaves.append(vt)
        return (lambda new: new[index]), ("tensor", vt.dtype, vt.device)
    if isinstance(vt, (ListVariable, TupleVariable)) and not isinstance(vt, SizeVariable):
        is_tuple = isinstance(vt, TupleVariable)
        if is_tuple and vt.tuple_type is not tuple:
            raise Unsupported("higher_order_call", f"{WHAT}'s xs holds a {vt.tuple_type.__name__}")
        parts = [flatten_xs(tx, item, leaves) for item in vt.items_now(tx)]
        builders = [p[0] for p in parts]
        picture = tuple(p[1] for p in parts)
        if is_tuple:
            return (lambda new: TupleVariable(tuple(b(new) for b in builders))), (tuple, picture)
        return (lambda new: ListVariable(tuple(b(new) for b in builders),
                                         mutation_type=NEW_VALUE)), ("list", picture)
    raise Unsupported(
        "higher_order_call", f"{WHAT}'s xs must be a tensor, or tuples and lists of them: {vt}"
    )


# -- associative_scan -----------------------------------------------------------------------------
_NAMES = ("combine_fn", "xs", "dim", "reverse", "combine_mode")
_DEFAULTS: dict[str, Any] = {"reverse": False, "combine_mode": "pointwise"}


def _constant(vt: VariableTracker, name: str) -> Any:
    try:
        return vt.as_python_constant()
    except Unsupported:
        raise Unsupported("higher_order_call", f"{WHAT}'s {name} is not a constant") from None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AssociativeScanVariable(PythonValueVariable):
    """``associative_scan(combine_fn, xs, dim, reverse=False, combine_mode="pointwise")``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        bound = bind_with_defaults(WHAT, _NAMES, _DEFAULTS, args, kwargs)
        combine_fn, xs = bound["combine_fn"], bound["xs"]
        dim, reverse, mode = (_constant(bound[n], n) for n in _NAMES[2:])
        if mode != "generic":
            raise Unsupported(
                "higher_order_call",
                f"{WHAT} with combine_mode={mode!r} (only 'generic' is captured: eager "
                "refuses 'pointwise' on CPU and compiles it itself on CUDA)",
            )
        if type(dim) is not int or type(reverse) is not bool:
            raise Unsupported("higher_order_call", f"{WHAT}'s dim or reverse of another type")
        leaves: list[TensorVariable] = []
        rebuild, picture = flatten_xs(tx, xs, leaves)
        if not leaves:
            raise Unsupported("higher_order_call", f"{WHAT} of no tensor")
        ndim = leaves[0].example.dim()
        if any(t.example.dim() < 2 for t in leaves):
            # torch's generic mode fails on slices of no dimension (an IndexError in eager).
            raise Unsupported("higher_order_call", f"{WHAT} in generic mode of a 0-d or 1-d xs")
        if not -ndim <= dim < ndim or any(t.example.dim() <= dim % ndim for t in leaves):
            raise Unsupported("higher_order_call", f"{WHAT}'s dim {dim} is out of range")
        dim = dim % ndim
        lengths = [t.example.shape[dim] for t in leaves]
        if any(not isinstance(n, (int, torch.SymInt)) or n != lengths[0] for n in lengths) or (
                lengths[0] < 2):
            raise Unsupported(
                "higher_order_call",
                f"{WHAT} over scan lengths {', '.join(map(str, lengths))} (captured: one "
                "static length of 2 or more; eager refuses 0 and returns views of xs for 1)",
            )
        body, grads = _trace_combine(tx, combine_fn, leaves, rebuild, picture, dim)
        graph = install(tx, "associative_scan_combine", body)
        free = body.lifted()
        like = [_Scanned(tx, t, dim, grad) for t, grad in zip(leaves, grads)]
        outputs = call_op(
            tx, apply_associative_scan,
            (graph, len(leaves), dim, reverse, *(t.node for t in leaves), *free), {}, like,
        )
        return rebuild(outputs)


def _trace_combine(
    tx: Tx, fn: VariableTracker, leaves: list[TensorVariable], rebuild: Rebuild, picture: tuple,
    dim: int,
) -> tuple[Body, list[bool]]:
    """``fn`` traced on two trees of slices; its outputs must be the slices' twins.
    Traced again with more inputs requiring grad until no output requires grad that
    its input does not (a leaf's scan depends on every leaf its combine reads, step
    after step); the body, and which leaves' scans require grad."""
    n = len(leaves)

    def call(body_args: list[VariableTracker]) -> VariableTracker:
        lhs, rhs = rebuild(body_args[:n]), rebuild(body_args[n:2 * n])
        return fn.call_function(tx, [lhs, rhs], {})

    grads = [t.example.requires_grad for t in leaves]
    while True:
        inputs = []
        for _side in range(2):
            for t, grad in zip(leaves, grads):
                example = input_example(tx.output, t.example.select(dim, 0))
                inputs.append((t, example.requires_grad_(grad)))
        body = speculate(tx, WHAT, inputs, call)
        _check_outputs(body, picture, [example for _, example in inputs[:n]])
        refuse_aliasing(body, WHAT)
        now = [a or b for a, b in zip(grads, _requires_grad(body))]
        if now == grads:
            return body, grads
        grads = now


def _requires_grad(body: Body) -> list[bool]:
    return [t.example.requires_grad for t in body.outputs]


def _check_outputs(body: Body, picture: tuple, slices: list[Any]) -> None:
    same = body.structure == picture and all(
        out.example.shape == s.shape and out.example.dtype == s.dtype
        for out, s in zip(body.outputs, slices)
    )
    if not same:
        raise Unsupported(
            "higher_order_call",
            f"{WHAT}'s combine_fn returns another structure, shape or dtype than one slice "
            f"of xs ({body.structure} for {picture})",
        )


class _Scanned:
    """The scan of leaf ``t`` (what ``call_op`` copies): its shape, laid out as torch's
    wrapper leaves it (made along dim 0, moved back to ``dim``)."""

    def __init__(self, tx: Tx, t: TensorVariable, dim: int, requires_grad: bool) -> None:
        shapes = tx.output.shapes
        mode = shapes.fake_mode if shapes is not None else contextlib.nullcontext()
        with mode:
            front = t.example.detach().movedim(dim, 0)
            self.example = t.example.new_empty(front.shape).movedim(0, dim)
        self.example.requires_grad_(requires_grad and torch.is_grad_enabled())
        self.device = t.device


def _scan_module() -> Any:
    import torch._higher_order_ops  # noqa: F401  (loads the associative_scan module)

    return sys.modules["torch._higher_order_ops.associative_scan"]


REGISTRY: dict[int, type[VariableTracker]] = {
    id(_scan_module().associative_scan): AssociativeScanVariable,
}
