"""Classes made one per instance (``torch.nn.utils.parametrize``) are guarded by shape.

``weight_norm`` gives every parametrized module a class of its own; guarded by
identity, a function shared by the layers (a block's forward whose body breaks,
and its resume function) recompiled once per layer and ran as Python past the
recompile limit (EnCodec, WavTokenizer). Guarded by shape, the layers share one
entry; what a trace decided from the classes' identities (``type(a) is type(b)``,
``isinstance``) is guarded as the identities among them.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

import bytegraph

weight_norm = nn.utils.parametrizations.weight_norm


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = weight_norm(nn.Conv1d(4, 4, 3, padding=1))
        self.gate = nn.Buffer(torch.tensor(1))

    def forward(self, x):
        if self.gate > 0:  # a break: the rest is a resume function every block shares
            x = x + 1
        return self.conv(x).relu()


class Stack(nn.Module):
    def __init__(self, blocks: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def run(model, x):
    return model(x)


def test_layers_of_weight_normed_blocks_share_entries(differential, counting_backend):
    torch.manual_seed(0)
    model = Stack(10).eval()  # more blocks than config.recompile_limit
    compiled = differential.compile(run)
    with torch.no_grad():
        for _ in range(2):
            differential.check(run, compiled, (model, torch.randn(2, 4, 8)))
    # One resume function for every block (the convolution's graph); the part before
    # the first break is a graph of its own on 3.11 and none on 3.13.
    convolutions = [g for g in counting_backend.graphs
                    if any(n.target is torch.conv1d for n in g.graph.nodes)]
    assert len(convolutions) == 1
    assert counting_backend.calls <= 2


def same_class_decisions(a, b, x):
    if type(a) is type(b):
        x = x + 1
    if isinstance(a, type(b)):
        x = x * 2
    return a(x) + b(x)


def test_identities_among_made_classes_are_guarded(differential, counting_backend):
    torch.manual_seed(0)
    first, second = weight_norm(nn.Linear(3, 3)), weight_norm(nn.Linear(3, 3))
    both = weight_norm(weight_norm(nn.Linear(3, 3)), "bias")  # another shape: two properties
    copied = copy.deepcopy(first)  # a copy keeps the class: two objects, one class
    compiled = differential.compile(same_class_decisions)
    pairs = [(first, first), (first, second), (second, second), (second, first),
             (both, first), (first, both), (both, both), (first, first), (first, copied),
             (second, first)]
    with torch.no_grad():
        for a, b in pairs:
            differential.check(same_class_decisions, compiled, (a, b, torch.randn(2, 3)))
    # (first, first) and (second, second) share an entry, as do the two mixed pairs;
    # each pair with ``both`` differs in shape; (first, copied) is one class twice.
    assert len(compiled.entries) == counting_backend.calls == 6


def test_a_made_class_by_shape_reads_in_the_guards():
    layer = weight_norm(nn.Linear(3, 3))
    compiled = bytegraph.compile(lambda m, x: m(x), backend="eager")
    compiled(layer, torch.randn(2, 3))
    assert "shaped_like_ParametrizedLinear(type(m))" in str(compiled.entries[0].guard)
