"""The higher-order-op corpus (bench/hop_programs) under bytegraph, each program against eager.

The programs are adapted from PyTorch's public tests of higher-order ops,
torch.func, autograd.Function and activation checkpointing. Each runs
eagerly and compiled on equal inputs under the same seed: outputs, the
gradients of every input leaf and parameter (for programs that
differentiate) and the inputs after the call must agree, or both raise the
same exception type; and bytegraph compiles the number of graphs the program
declares (0 where the form is still a break). bench/hop_corpus.py runs the
same corpus beside torch.compile.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import bytegraph
from bench.counting import CountingBackend
from bench.hop_programs import HopProgram, load
from bench.hop_programs.run import compare, observe

PROGRAMS = load()


def test_corpus_size() -> None:
    assert len(PROGRAMS) >= 100


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_program(prog: HopProgram) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flex_attention's "called without torch.compile"
        expected = observe(prog, prog.fn)
        backend = CountingBackend()
        actual = observe(prog, bytegraph.compile(prog.fn, backend=backend))
    difference = compare(actual, expected)
    assert difference is None, difference
    assert len(backend.graphs) == prog.graphs, f"{len(backend.graphs)} graphs"


# Programs where bytegraph compiled one graph but broke inside it while torch.compile
# traces them whole (issue 22): pinned whole, under fullgraph=True.
WHOLE = ("function_set_materialize_grads", "function_mark_non_differentiable_input",
         "function_non_tensor_output", "flex_attention_block_mask",
         "checkpoint_sequential_segments")


@pytest.mark.parametrize("name", WHOLE)
def test_program_traced_whole(name: str) -> None:
    (prog,) = [p for p in PROGRAMS if p.name == name]
    expected = observe(prog, prog.fn)
    actual = observe(prog, bytegraph.compile(prog.fn, backend="eager", fullgraph=True))
    assert actual.error is None, actual.error
    assert compare(actual, expected) is None


def test_op_counts_include_subgraph_bodies() -> None:
    """bench/'s counts with bodies: the cond node's two branches are counted too."""
    from bench.counting import op_count

    def f(x):
        return torch.cond(x.sum() > 0, lambda a: a.sin() * 2, lambda a: a.cos(), (x,)) + 1

    backend = CountingBackend()
    bytegraph.compile(f, backend=backend)(torch.randn(3))
    (gm,) = backend.graphs
    top = op_count(gm, nested=False)
    bodies = sum(op_count(child, nested=False) for child in gm.children())
    assert bodies == 3  # sin, mul; cos
    assert op_count(gm, nested=True) == backend.ops_all == top + bodies
