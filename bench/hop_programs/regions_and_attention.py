"""Repeated blocks and attention: torch.compiler.nested_compile_region and flex_attention.

Adapted from test/higher_order_ops/test_invoke_subgraph.py and
test/inductor/test_flex_attention.py (CPU, tiny shapes, the eager path).
"""

from __future__ import annotations

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from bench.hop_programs.registry import inputs, program, t

IS = "test/higher_order_ops/test_invoke_subgraph.py::TestInvokeSubgraphCompile"
FA = "test/inductor/test_flex_attention.py::TestFlexAttention"


def _g(*shape: int):
    return t(*shape, grad=True)


@torch.compiler.nested_compile_region
def gn(x, y):
    return torch.mul(x, y).sin()


@torch.compiler.nested_compile_region
def two_outputs(x):
    return x.cos(), x.sin() * 2


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return torch.tanh(self.linear(x))


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(Layer() for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@program(f"{IS}::test_simple", inputs(t(4, 4), t(4, 4)))
def region_called_twice(x, y):
    return gn(x, y) + gn(x, y)


@program(f"{IS}::test_multiple_outputs", inputs(t(4, 4)))
def region_tuple_output(x):
    a, b = two_outputs(x)
    return a + b


@program(f"{IS}::test_module_forward", inputs(t(2, 4), Stack))
def region_module_layers(x, model):
    return model(x)


@program(f"{IS}::test_simple_backward", inputs(_g(4, 4), _g(4, 4)), backward=True)
def region_backward(x, y):
    return gn(x, y) * gn(y, x)


@program(f"{IS}::test_module_backward", inputs(_g(2, 4), Stack), backward=True)
def region_module_backward(x, model):
    return model(x)


# -- flex_attention ----------------------------------------------------------------------------


def _qkv():
    return tuple(torch.randn(1, 2, 16, 8) for _ in range(3))


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@program(f"{FA}::test_builtin_score_mods_identity", lambda: _qkv())
def flex_attention_plain(q, k, v):
    return flex_attention(q, k, v)


@program(f"{FA}::test_builtin_score_mods_relative_bias", lambda: _qkv())
def flex_attention_score_mod(q, k, v):
    def relative_bias(score, b, h, q_idx, kv_idx):
        return score + (q_idx - kv_idx)

    return flex_attention(q, k, v, score_mod=relative_bias)


@program(f"{FA}::test_score_mod_closure", lambda: _qkv() + (torch.randn(2),))
def flex_attention_score_mod_closure(q, k, v, head_bias):
    def bias(score, b, h, q_idx, kv_idx):
        return score + head_bias[h]

    return flex_attention(q, k, v, score_mod=bias)


@program(f"{FA}::test_block_mask_causal", lambda: _qkv())
def flex_attention_block_mask(q, k, v):
    mask = create_block_mask(_causal, None, None, 16, 16, device="cpu")
    return flex_attention(q, k, v, block_mask=mask)
