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


# -- a BlockMask made in the compiled function (variables/flex_block_masks.py) ---------------
def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def made_causal(q, k, v):
    mask = create_block_mask(_causal, None, None, 16, 16, device="cpu")
    return flex_attention(q, k, v, block_mask=mask)


def made_document_mask(q, k, v, ids):
    def same_document(b, h, q_idx, kv_idx):  # closes over a tensor: a mask_mod buffer
        return (ids[q_idx] == ids[kv_idx]) & (q_idx >= kv_idx)

    mask = create_block_mask(same_document, 1, 2, 16, 16, device="cpu", BLOCK_SIZE=8)
    return flex_attention(q, k, v, block_mask=mask,
                          score_mod=lambda score, b, h, q_idx, kv_idx: score + (q_idx - kv_idx))


DOCUMENTS = torch.tensor([0] * 5 + [1] * 7 + [2] * 4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", [made_causal, made_document_mask], ids=lambda f: f.__name__)
def test_block_mask_made_in_the_trace(backend: str, program) -> None:
    # No gradients: torch 2.13's flex_attention has no backward on CPU, eager's included.
    args = qkv() + ((DOCUMENTS,) if program is made_document_mask else ())
    if backend == "inductor":
        _xfail_where_inductor_itself_differs(program, args)
    counting = check(program, args, backend)
    assert any(getattr(t, "__name__", "") == "apply_flex_attention_made_mask"
               for t in counting.targets())
    argsorts = [n for g in counting.graphs for n in g.graph.nodes if n.target is torch.argsort]
    assert argsorts and all(n.meta["custom"] == {"fallback_to_eager": True} for n in argsorts)


def _xfail_where_inductor_itself_differs(program, args: tuple) -> None:
    """On some CPUs (seen on an AVX2-only AMD EPYC) Inductor's CPU flex_attention kernel
    gives another result than eager for the document mask, under torch.compile as well
    (its wrong values even vary with what was compiled before). There the comparison
    with eager is an expected failure; everywhere else the test runs in full."""
    torch._dynamo.reset()
    theirs = torch.compile(program, backend="inductor", fullgraph=True)(*args)
    if not torch.allclose(theirs, program(*args), atol=1e-5, rtol=1e-4):
        pytest.xfail("Inductor's flex_attention kernel differs from eager on this CPU "
                     "(torch.compile's result too)")


def made_and_returned(q, k, v):
    mask = create_block_mask(_causal, None, None, 16, 16, device="cpu")
    return flex_attention(q, k, v, block_mask=mask), mask


def test_block_mask_made_in_the_trace_and_returned() -> None:
    q, k, v = qkv()
    expected, expected_mask = made_and_returned(q, k, v)
    out, mask = bytegraph.compile(made_and_returned, backend="eager", fullgraph=True)(q, k, v)
    torch.testing.assert_close(out, expected)
    assert type(mask) is type(expected_mask) and mask.mask_mod is _causal
    for name in (*expected_mask._TENSOR_ATTRS, *expected_mask._CONTEXT_ATTRS):
        if isinstance(getattr(expected_mask, name), torch.Tensor):
            torch.testing.assert_close(getattr(mask, name), getattr(expected_mask, name))
        elif name != "mask_mod":
            assert getattr(mask, name) == getattr(expected_mask, name), name
