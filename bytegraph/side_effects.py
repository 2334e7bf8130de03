"""SideEffects: mutations of Python state, recorded in program order.

The graph holds only tensor work; every change the program makes to Python
objects that exist outside the trace is recorded here and replayed by the
generated code after the graph call.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen


@dataclasses.dataclass(frozen=True, slots=True)
class Mutation:
    """One recorded change; ``replay`` emits the bytecode that performs it."""

    def replay(self, codegen: PyCodegen) -> None:
        raise NotImplementedError


class SideEffects:
    def __init__(self) -> None:
        self.mutations: list[Mutation] = []
        self.keepalive: list[Any] = []

    def record(self, mutation: Mutation) -> None:
        self.mutations.append(mutation)

    def replay_all(self, codegen: PyCodegen) -> None:
        for mutation in self.mutations:
            mutation.replay(codegen)
