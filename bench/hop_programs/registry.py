"""The program record and the ``program`` decorator the family modules register with."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch


@dataclasses.dataclass(frozen=True)
class HopProgram:
    """One program: ``fn(*make_inputs())``, compared with eager.

    ``backward``: the float outputs that require grad are summed and
    differentiated, and the gradients of the inputs (and module parameters)
    compared too. ``graphs``: the graphs bytegraph compiles for it (pinned by
    tests/test_hop_corpus.py). ``origin``: the PyTorch test it is adapted from.
    """

    name: str
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple]
    origin: str
    backward: bool = False
    graphs: int = 1


PROGRAMS: list[HopProgram] = []


def program(
    origin: str, make_inputs: Callable[[], tuple], *, backward: bool = False, graphs: int = 1,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as a corpus program."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        assert fn.__name__ not in {p.name for p in PROGRAMS}, fn.__name__
        PROGRAMS.append(HopProgram(fn.__name__, fn, make_inputs, origin, backward, graphs))
        return fn

    return register


def randn(*shape: int, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=grad)


def inputs(*makers: Callable[[], Any]) -> Callable[[], tuple]:
    """A maker of inputs from makers of each input."""
    return lambda: tuple(m() for m in makers)


def t(*shape: int, grad: bool = False) -> Callable[[], torch.Tensor]:
    """A maker of one random tensor."""
    return lambda: randn(*shape, grad=grad)
