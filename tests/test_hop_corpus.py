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
from typing import Any

import pytest
import torch

import bytegraph
from bench.hop_programs import HopProgram, load
from bench.hop_programs.run import compare, observe

PROGRAMS = load()


class CountingBackend:
    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs.append(gm)
        return gm.forward


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
