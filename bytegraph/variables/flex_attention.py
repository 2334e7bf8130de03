"""``torch.nn.attention.flex_attention.flex_attention``: the score_mod traced, the call one node.

``flex_attention(q, k, v, score_mod=fn, block_mask=mask, scale=s,
enable_gqa=g)`` computes attention whose scores ``fn(score, b, h, q_idx,
kv_idx)`` rewrites element by element (torch vmaps it over the score grid).
bytegraph records it as one node:

1. ``score_mod`` is traced (``higher_order.speculate``) on five 0-d examples
   (the score in the query's dtype; batch, head and the two positions as
   int32), as torch traces it, ``bias[h]`` an ``aten.index`` as under torch's
   TransformGetItemToIndex mode; tensors it closes over (a bias table) are
   lifted into the body's inputs, its *buffers*.
2. The node calls ``apply_flex_attention`` of this module with the body's
   GraphModule, the query, key and value, and the buffers: it calls torch's
   ``flex_attention`` with a score_mod that runs the body on the buffers. Eager
   runs torch's own path (as the user's call does); AOTAutograd and Inductor
   trace through it to torch's ``flex_attention`` higher-order op.
3. ``block_mask`` is None or a BlockMask read from the frame: guarded by
   identity and bound into the node's target (a mask made anew for each call
   recompiles each call, up to the recompile limit). A BlockMask made in the
   compiled function (``create_block_mask`` inlined) passes its tensors and
   its traced mask_mod to the node instead (``flex_block_masks.py``).

Everything else is a break with the reason: ``return_lse``, ``return_aux``,
``kernel_options``, a score_mod the trace cannot follow or returning another
dtype than the score's.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.flex_block_masks import (
    MaskLayout,
    is_made_block_mask,
    read_made_mask,
    with_made_mask,
)
from bytegraph.variables.higher_order import (
    bind_with_defaults,
    call_op,
    fresh_example,
    install,
    speculate,
)
from bytegraph.variables.tensor import TensorVariable, getitem_as_index

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

WHAT = "flex_attention"
_NAMES = ("query", "key", "value", "score_mod", "block_mask", "scale", "enable_gqa",
          "return_lse", "kernel_options", "return_aux")
_DEFAULTS = {"score_mod": None, "block_mask": None, "scale": None, "enable_gqa": False,
             "return_lse": False, "kernel_options": None, "return_aux": None}


def apply_flex_attention(score_graph: Any, scale: Any, enable_gqa: bool,
                         query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         *buffers: torch.Tensor, block_mask: Any = None
                         ) -> tuple[torch.Tensor]:
    """torch's flex_attention with the traced score_mod run on its buffers."""
    from torch.nn.attention.flex_attention import flex_attention

    def score_mod(score: Any, b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        (new_score,) = score_graph(score, b, h, q_idx, kv_idx, *buffers)  # a body's tuple
        return new_score

    return (flex_attention(query, key, value, score_mod=None if score_graph is None else
                           score_mod, block_mask=block_mask, scale=scale,
                           enable_gqa=enable_gqa),)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FlexAttentionVariable(PythonValueVariable):
    """``flex_attention``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        bound = bind_with_defaults(WHAT, _NAMES, _DEFAULTS, args, kwargs,
                                   positional=len(_NAMES) - 1)
        q, k, v = bound["query"], bound["key"], bound["value"]
        if not all(isinstance(t, TensorVariable) for t in (q, k, v)):
            raise Unsupported("higher_order_call", f"{WHAT} of query, key and value other than "
                              "tensors")
        options = {n: _constant(bound[n], n) for n in ("scale", "enable_gqa", "return_lse",
                                                       "kernel_options", "return_aux")}
        if options["return_lse"] or options["return_aux"] is not None or (
            options["kernel_options"] is not None
        ):
            raise Unsupported("higher_order_call", f"{WHAT} with return_lse, return_aux or "
                              "kernel_options")
        made = read_made_mask(tx, bound["block_mask"], q) if is_made_block_mask(
            bound["block_mask"]) else None
        block_mask = None if made is not None else _block_mask(tx, bound["block_mask"])
        graph, buffers, grad = None, [], any(t.example.requires_grad for t in (q, k, v))
        if not _is_none(bound["score_mod"]):
            body = _trace_score_mod(tx, bound["score_mod"], q)
            graph, buffers = install(tx, "flex_score_mod", body), body.lifted()
            grad = grad or body.outputs[0].example.requires_grad  # a buffer requiring grad
        like = [_Output(q, v, grad and torch.is_grad_enabled())]
        target = apply_flex_attention if block_mask is None else _with_block_mask(block_mask)
        mask_args: list[Any] = []
        if made is not None:  # a mask made in the trace: its tensors are arguments
            target = with_made_mask(MaskLayout(tuple(n for n, _ in made.tensors),
                                               made.constants, len(buffers)))
            mask_args = [install(tx, "flex_mask_mod", made.mask_mod),
                         *(t.node for _, t in made.tensors), *made.mask_mod.lifted()]
        (out,) = call_op(
            tx, target,
            (graph, options["scale"], bool(options["enable_gqa"]), q.node, k.node, v.node,
             *buffers, *mask_args), {}, like,
        )
        return out


def _is_none(vt: VariableTracker) -> bool:
    return isinstance(vt, ConstantVariable) and vt.value is None


def _constant(vt: VariableTracker, name: str) -> Any:
    if not vt.is_python_constant():
        raise Unsupported("higher_order_call", f"{WHAT}'s {name} is not a constant")
    return vt.as_python_constant()


def _with_block_mask(block_mask: Any) -> Any:
    """``apply_flex_attention`` bound to one BlockMask (a graph's constant: fx prints
    no BlockMask as an argument)."""

    def apply_flex_attention_masked(*args: Any) -> tuple[torch.Tensor]:
        return apply_flex_attention(*args, block_mask=block_mask)

    return apply_flex_attention_masked


def _block_mask(tx: Tx, vt: VariableTracker) -> Any:
    from torch.nn.attention.flex_attention import BlockMask

    from bytegraph.guards.guard import GuardKind

    if _is_none(vt):
        return None
    value = getattr(vt, "value", None)
    if isinstance(value, BlockMask) and vt.source is not None:
        tx.output.add_guard(GuardKind.ID_MATCH, vt.source, value)  # baked into the graph
        return value
    raise Unsupported("higher_order_call", f"{WHAT} with a block mask made in the compiled "
                      "function (create_block_mask runs in Python)")


def _trace_score_mod(tx: Tx, fn: VariableTracker, q: TensorVariable) -> Any:
    def scalar(dtype: torch.dtype) -> torch.Tensor:
        return fresh_example(tx.output, torch.empty((), dtype=dtype, device=q.example.device))

    examples = [scalar(q.example.dtype)] + [scalar(torch.int32) for _ in range(4)]
    inputs = [(q, e) for e in examples]  # the query's node only names the placeholders
    token = getitem_as_index.set(True)  # as torch runs a score_mod
    try:
        body = speculate(tx, f"{WHAT}'s score_mod", inputs,
                         lambda body_args: fn.call_function(tx, list(body_args), {}))
    finally:
        getitem_as_index.reset(token)
    if len(body.outputs) != 1 or body.outputs[0].example.dtype != q.example.dtype or (
        body.outputs[0].example.dim() != 0
    ):
        raise Unsupported("higher_order_call", f"{WHAT}'s score_mod must return one score "
                          "of the query's dtype")
    return body


class _Output:
    """What ``call_op`` copies: the attention's result, shaped (B, Hq, L, Ev)."""

    def __init__(self, q: TensorVariable, v: TensorVariable, requires_grad: bool) -> None:
        shape = (*q.example.shape[:-1], v.example.shape[-1])
        self.example = q.example.detach().new_empty(shape)
        self.example.requires_grad_(requires_grad)
        self.device = q.device


def _flex_module() -> Any:
    import torch.nn.attention.flex_attention  # noqa: F401

    return sys.modules["torch.nn.attention.flex_attention"]


REGISTRY: dict[int, type[VariableTracker]] = {
    id(_flex_module().flex_attention): FlexAttentionVariable,
}
