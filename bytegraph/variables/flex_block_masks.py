"""A BlockMask made in the trace, handed to ``flex_attention``: its tensors are the node's inputs.

``create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN)`` is torch's Python over
tensor ops, inlined (``variables/torch.py`` lists its module among the
helpers): the mask_mod vmapped over the grid, the blocks counted and sorted,
and ``BlockMask.from_kv_blocks`` building the object, modelled like an
instance of a user class (``user_defined.py``) whose attributes are
TensorVariables, constants and the mask_mod's VT. A mask read from the frame
is a different case (``flex_attention.py``: guarded by identity, baked into
the node). For a mask made here, ``flex_attention`` records one node:

1. The mask's attributes are read by the names torch flattens it by
   (``BlockMask._TENSOR_ATTRS``, ``_CONTEXT_ATTRS``): each tensor attribute
   becomes an argument of the node, each other one (lengths, block size,
   None, a bool) a constant of the node's target, ``MaskLayout``.
2. The mask_mod is traced as a body (``higher_order.speculate``) on four
   int32 0-d examples (batch, head, query and key positions), ``x[h]`` an
   ``aten.index`` as torch runs it; tensors it closes over are lifted into
   the body's inputs and passed after the mask's tensors.
3. At run time ``apply_flex_attention_made_mask`` rebuilds an equal
   BlockMask around the tensors it receives, with a mask_mod that runs the
   traced body, and calls ``apply_flex_attention``. Eager runs torch's own
   flex_attention; AOTAutograd and Inductor trace through it to torch's
   higher-order op with the mask's tensors as graph values.

A mask attribute of another kind, or a mask_mod the trace cannot follow or
that returns anything but one bool, is a break at the call (the mask is then
rebuilt for the Python call as any object made in the trace).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import VariableTracker
from bytegraph.variables.tensor import TensorVariable, getitem_as_index

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.higher_order import Body

WHAT = "flex_attention"


@dataclasses.dataclass(frozen=True)
class MaskLayout:
    """How the node's trailing arguments rebuild the BlockMask: the names of its tensor
    attributes (in argument order), its other attributes, and the mask_mod's body."""

    tensor_names: tuple[str, ...]
    constants: tuple[tuple[str, Any], ...]
    score_buffers: int  # the score_mod's buffers come first, then the mask's arguments


@dataclasses.dataclass(frozen=True, eq=False)
class MadeMask:
    """A made BlockMask, read for the node: its tensors, other attributes and mask_mod body."""

    tensors: tuple[tuple[str, TensorVariable], ...]
    constants: tuple[tuple[str, Any], ...]
    mask_mod: Body


def is_made_block_mask(vt: VariableTracker) -> bool:
    """An instance of BlockMask made in the trace (no real object behind it)."""
    from torch.nn.attention.flex_attention import BlockMask

    from bytegraph.variables.user_defined import UserDefinedObjectVariable

    return isinstance(vt, UserDefinedObjectVariable) and vt.cls is BlockMask and (
        vt.value is None
    )


def read_made_mask(tx: Tx, vt: VariableTracker, q: TensorVariable) -> MadeMask:
    """The attributes of a BlockMask made in the trace, and its mask_mod traced."""
    from torch.nn.attention.flex_attention import BlockMask

    tensors, constants = [], []
    for name in (*BlockMask._TENSOR_ATTRS, *BlockMask._CONTEXT_ATTRS):
        if name == "mask_mod":
            continue
        value = vt.var_getattr(tx, name)
        if isinstance(value, TensorVariable):
            tensors.append((name, value))
        elif value.is_python_constant() and _plain_constant(value.as_python_constant()):
            constants.append((name, value.as_python_constant()))
        else:
            raise Unsupported("higher_order_call", f"{WHAT} with a BlockMask whose {name} "
                              f"is {value}")
    body = _trace_mask_mod(tx, vt.var_getattr(tx, "mask_mod"), q)
    return MadeMask(tuple(tensors), tuple(constants), body)


def _plain_constant(value: Any) -> bool:
    if isinstance(value, tuple):
        return all(_plain_constant(v) for v in value)
    return value is None or type(value) in (bool, int)


def _trace_mask_mod(tx: Tx, fn: VariableTracker, q: TensorVariable) -> Body:
    from bytegraph.variables.higher_order import fresh_example, speculate

    def position() -> torch.Tensor:
        return fresh_example(tx.output, torch.empty((), dtype=torch.int32,
                                                    device=q.example.device))

    inputs = [(q, position()) for _ in range(4)]  # the query's node only names them
    token = getitem_as_index.set(True)  # as torch runs a mask_mod
    try:
        body = speculate(tx, f"{WHAT}'s mask_mod", inputs,
                         lambda body_args: fn.call_function(tx, list(body_args), {}))
    finally:
        getitem_as_index.reset(token)
    outputs = body.outputs
    if len(outputs) != 1 or outputs[0].example.dtype is not torch.bool or (
        outputs[0].example.dim() != 0
    ):
        raise Unsupported("higher_order_call", f"{WHAT}'s mask_mod must return one bool")
    return body


def with_made_mask(layout: MaskLayout) -> Any:
    """The node's target for a made mask: ``apply_flex_attention_made_mask`` bound to
    ``layout`` (a graph's constant: fx prints no layout as an argument)."""

    def apply_flex_attention_made_mask(*args: Any) -> tuple[torch.Tensor]:
        return _apply(layout, *args)

    return apply_flex_attention_made_mask


def _apply(layout: MaskLayout, score_graph: Any, scale: Any, enable_gqa: bool,
           query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *rest: Any
           ) -> tuple[torch.Tensor]:
    """Rebuild the BlockMask around the tensors the graph passes, then call torch's
    flex_attention through ``apply_flex_attention``."""
    from torch.nn.attention.flex_attention import BlockMask

    from bytegraph.variables.flex_attention import apply_flex_attention

    score_buffers, rest = rest[:layout.score_buffers], rest[layout.score_buffers:]
    mask_graph, *rest = rest
    count = len(layout.tensor_names)
    tensors, mask_buffers = rest[:count], rest[count:]

    def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        (keep,) = mask_graph(b, h, q_idx, kv_idx, *mask_buffers)  # a body's tuple
        return keep

    attributes = dict(zip(layout.tensor_names, tensors)) | dict(layout.constants)
    block_mask = object.__new__(BlockMask)
    for name in (*BlockMask._TENSOR_ATTRS, *BlockMask._CONTEXT_ATTRS):
        setattr(block_mask, name, attributes.get(name))
    block_mask.mask_mod = mask_mod
    return apply_flex_attention(score_graph, scale, enable_gqa, query, key, value,
                                *score_buffers, block_mask=block_mask)
