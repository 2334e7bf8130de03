"""``flex_attention`` (variables/flex_attention.py): score_mod traced, the call one node.

Outputs and gradients equal eager's under each backend with ``fullgraph=True``;
a score_mod indexing a bias table by head (``bias[h]``, torch's aten.index); a
BlockMask from the frame is guarded by identity (another mask: another
graph, never the old mask's result).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import bytegraph
from bytegraph.variables.flex_attention import apply_flex_attention
from tests.test_higher_order import BACKENDS, Counting, check

warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")


def qkv(grad: bool = False) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(1, 2, 16, 8, requires_grad=grad) for _ in range(3))


def biased(q, k, v, bias):
    def score_mod(score, b, h, q_idx, kv_idx):
        return score + bias[h] * (q_idx - kv_idx)

    return flex_attention(q, k, v, score_mod=score_mod, scale=0.5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_score_mod_with_a_bias_table(backend: str) -> None:
    # No gradients: torch 2.13's flex_attention has no backward on CPU, eager's included.
    counting = check(biased, (*qkv(), torch.randn(2)), backend)
    assert apply_flex_attention in counting.targets()


def masked(q, k, v, mask):
    return flex_attention(q, k, v, block_mask=mask)


def _mask(window: int):
    return create_block_mask(lambda b, h, q_idx, kv_idx: q_idx - kv_idx <= window,
                             None, None, 16, 16, device="cpu")


def test_block_mask_from_the_frame_is_guarded_by_identity() -> None:
    counting = Counting("eager")
    compiled = bytegraph.compile(masked, backend=counting, fullgraph=True)
    q, k, v = qkv()
    for window in (0, 8):
        mask = _mask(window)
        torch.testing.assert_close(compiled(q, k, v, mask), masked(q, k, v, mask))
    assert len(counting.graphs) == 2
