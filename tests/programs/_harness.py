"""The corpus recipe shared by test_control_flow, test_functions and test_with.

A ``Corpus`` collects small programs, each a function plus a maker of its
inputs and the number of graphs it must compile to. ``check_program`` runs
one through the recipe of DESIGN.md ("Correctness rule"): eager and compiled
on clones of the same inputs, outputs and every input after the call equal
(``differential.check`` from conftest), the graph count asserted, then a
second call on fresh inputs of the same metadata that must hit the cache.
A program meant to compile to one graph must also compile with
``fullgraph=True``: one graph could otherwise come from a graph break at its
last line.
"""

from __future__ import annotations

import dataclasses
import dis
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch


@dataclasses.dataclass(frozen=True)
class Program:
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple]
    graphs: int = 1

    @property
    def name(self) -> str:
        return self.fn.__name__


class Corpus:
    """An ordered, named list of programs, filled by the ``add`` decorator."""

    def __init__(self) -> None:
        self.programs: list[Program] = []

    def add(
        self, make_inputs: Callable[[], tuple], *, graphs: int = 1
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            assert fn.__name__ not in {p.name for p in self.programs}, fn.__name__
            self.programs.append(Program(fn, make_inputs, graphs))
            return fn

        return register

    def __iter__(self) -> Iterator[Program]:
        return iter(self.programs)

    def __len__(self) -> int:
        return len(self.programs)


def check_program(prog: Program, differential: Any, counting_backend: Any) -> None:
    compiled = differential.compile(prog.fn)
    differential.check(prog.fn, compiled, prog.make_inputs())
    assert counting_backend.calls == prog.graphs, (
        f"expected {prog.graphs} graph(s), got {counting_backend.calls}"
    )
    entries = len(compiled.entries)
    differential.check(prog.fn, compiled, prog.make_inputs())  # new values, same metadata
    assert counting_backend.calls == prog.graphs, "the second call compiled a new graph"
    assert len(compiled.entries) == entries, "the second call missed the cache"
    assert torch.is_grad_enabled(), "grad mode leaked out of the call"
    if prog.graphs == 1:
        full = differential.compile(prog.fn, backend="eager", fullgraph=True)
        differential.check(prog.fn, full, prog.make_inputs())


def opnames(fn: Callable[..., Any]) -> set[str]:
    """Every opcode name in ``fn``'s code and the code objects nested in it."""
    names: set[str] = set()
    work = [fn.__code__]
    while work:
        code = work.pop()
        names.update(inst.opname for inst in dis.get_instructions(code))
        work.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def randn(*shape: int, requires_grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=requires_grad)
