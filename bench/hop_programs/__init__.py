"""An outside corpus of higher-order-op programs, adapted from PyTorch's public tests.

Each program is a small self-contained function plus a maker of its inputs,
transcribed from pytorch/pytorch's tests of higher-order operators
(test/dynamo/test_higher_order_ops.py, test/functorch/test_control_flow.py),
torch.func (test/functorch/test_eager_transforms.py), autograd.Function
(test/dynamo/test_autograd_function.py) and activation checkpointing
(test/dynamo/test_activation_checkpointing.py), rewritten without
torch._dynamo (CPU, tiny shapes). ``origin`` names the test it comes from.

``run.py`` runs one program eagerly and under a compiler and compares
outputs and, for ``backward`` programs, the gradients of every input leaf
and module parameter; bench/hop_corpus.py runs the corpus under bytegraph
and torch.compile side by side, tests/test_hop_corpus.py under bytegraph.
"""

from __future__ import annotations

from bench.hop_programs.registry import PROGRAMS, HopProgram

__all__ = ["PROGRAMS", "HopProgram", "load"]


def load() -> list[HopProgram]:
    """Every program of every family, in file order."""
    from bench.hop_programs import (  # noqa: F401  (each module registers its programs)
        autograd_functions,
        checkpointing,
        control_flow,
        func_transforms,
        regions_and_attention,
    )

    return list(PROGRAMS)
