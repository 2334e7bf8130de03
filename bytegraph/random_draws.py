"""Draws from Python's ``random`` generators, made at run time before the graph.

A trace cannot bake a number drawn from ``random`` into the compiled code:
the next call must draw the next number. Where a generator's state is not
known at trace time (the module's generator, or a ``random.Random`` handed
to the frame, until the trace seeds it), the trace records each draw here
instead, and the transformed code makes them for real:

1. The trace records ``generator.method(*constant_args)`` in ``DrawPlan.calls``
   (``draw``), in program order, and gets back an index: its value will be
   ``___random_values[index]`` at run time. The trace itself draws from a copy
   of the generator's state (an example value); the real generator is untouched.
2. Arithmetic of such values with constants stays Python arithmetic: an
   expression over draws (``exprs``), computed by the same prologue.
3. A value that meets a tensor becomes a graph input: the prologue turns it into
   a 0-d tensor (float64 for a float, int64 for an int), read through a
   ``RandomValueSource`` (``tensor_input``). It has no guard: guards run before
   the prologue.
4. The transformed code starts with ``___random_values = plan(generators...)``
   (``emit_prologue``), before the graph inputs load: the draws happen in
   program order on the real generators, exactly once per call, so the state
   after the call is eager's, and values change from call to call.

A graph that fails at run time reruns the original code as Python
(graph/rerun.py) only after the generators are put back as the prologue found
them (``emit_restore``): the rerun draws the same numbers again, as eager.

A graph that cannot rerun (it writes into an input) lets its error through, and
the state must be eager's at that error: the draws made before the op that
failed, and no other. Each draw notes how many graph ops came before it
(``positions``); any op may be the one that fails, so ``settle_on_error``
accepts draws before every op (eager made them: kept) and after every op
(eager never reached them: undone by ``emit_restore``, the prologue saving the
states after the first ones), and refuses a draw between two ops: a graph
break at that draw, which then runs in Python between two graphs.
"""

from __future__ import annotations

import dataclasses
import operator
import random
from typing import TYPE_CHECKING, Any

import bytecode as bc
import torch

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import Source, source_record

if TYPE_CHECKING:
    from bytegraph.codegen import PyCodegen

VALUES = "___random_values"

# An expression over draws: ("draw", i), ("const", value) or (operator, *operands).
Expr = tuple


@source_record
class RandomValueSource(Source):
    """``___random_values[index]``: a value the prologue computed this call."""

    index: int | str

    def _expr(self) -> str:
        return f"{VALUES}[{self.index!r}]"

    def reconstruct(self, codegen: PyCodegen) -> None:
        codegen.append(bc.Instr("LOAD_FAST", VALUES))
        codegen.load_const(self.index)
        codegen.append(bc.Instr("BINARY_SUBSCR"))


@dataclasses.dataclass(eq=False)
class DrawPlan:
    """What the prologue computes, in order: draws, then expressions and tensors.

    ``generators`` are the VTs of the real generators drawn from (loaded by the
    transformed code from their sources); ``calls`` name one of them each.
    """

    generators: list[Any] = dataclasses.field(default_factory=list)
    calls: list[tuple[int, str, tuple, dict]] = dataclasses.field(default_factory=list)
    outputs: list[tuple[str, Expr]] = dataclasses.field(default_factory=list)
    # Per real generator: a copy of its state at the trace's start, drawn from at trace
    # time for example values (the real one is untouched until the code runs).
    shadows: dict[int, random.Random] = dataclasses.field(default_factory=dict)
    inputs: dict[RandomValueSource, Any] = dataclasses.field(default_factory=dict)  # their VTs
    # Per call: the graph ops traced before it, and the root frame's (step, index) there.
    positions: list[tuple[int, Any]] = dataclasses.field(default_factory=list)
    # The prologue saves the states after this many draws, for emit_restore (None: never).
    saved_after: int | None = None

    def shadow(self, real: random.Random) -> random.Random:
        copy = self.shadows.get(id(real))
        if copy is None:
            copy = self.shadows[id(real)] = random.Random()
            copy.setstate(real.getstate())
        return copy

    def draw(
        self, generator: Any, method: str, args: tuple, kwargs: dict,
        ops: int = 0, where: Any = None,
    ) -> int:
        """Record ``generator.method(*args, **kwargs)``, made after ``ops`` graph ops at the
        root frame's ``where`` (step, index); the index of its value."""
        self.positions.append((ops, where))
        known = [i for i, g in enumerate(self.generators) if g is generator]
        position = known[0] if known else len(self.generators)
        if not known:
            self.generators.append(generator)
        self.calls.append((position, method, args, dict(kwargs)))
        return len(self.calls) - 1

    def value(self, expr: Expr) -> int | str:
        """The index of ``expr``'s value (a draw itself needs no new entry)."""
        if expr[0] == "draw":
            return expr[1]
        return self._output("value", expr)

    def tensor_input(self, expr: Expr) -> str:
        """The index of ``expr``'s value as a 0-d tensor (float64 or int64)."""
        return self._output("tensor", expr)

    def _output(self, kind: str, expr: Expr) -> str:
        """Computed values are keyed ``"o<n>"`` (draws by their position): more draws
        may still be recorded after this one."""
        entry = (kind, expr)
        if entry not in self.outputs:
            self.outputs.append(entry)
        return f"o{self.outputs.index(entry)}"

    @property
    def draws(self) -> bool:
        return bool(self.calls)

    def settle_on_error(self, ops: int) -> None:
        """A graph of ``ops`` ops that cannot rerun: keep what eager has drawn when one of
        them fails (``saved_after``), or refuse a draw made between two of them."""
        for before, where in self.positions:
            if 0 < before < ops:
                refused = Unsupported(
                    "random_draw_not_rerunnable",
                    f"a random draw after {before} of the graph's {ops} ops, in a graph that "
                    "cannot rerun as Python if one fails",
                )
                refused.step, refused.index = where or (None, None)
                raise refused
        kept = sum(1 for before, _ in self.positions if before == 0)
        if kept < len(self.calls):
            self.saved_after = kept

    def emit_prologue(self, codegen: PyCodegen) -> None:
        """``___random_values = run_plan(*generators)`` at the top of the code; with
        ``saved_after``, the generators' states after that many draws are kept too."""
        codegen.load_callable(_Prologue(tuple(self.calls), self.outputs, self.saved_after))
        for generator in self.generators:
            codegen(generator)
        codegen.append(*codegen.call_instrs(len(self.generators)))
        codegen.append(bc.Instr("STORE_FAST", VALUES))


    def emit_restore(self, codegen: PyCodegen) -> None:
        """Put every generator drawn from back as the prologue saved it: the graph failed,
        and the original code runs instead (graph/rerun.py), drawing again, or the error
        leaves the call, as eager's would, before the draws after the failing op."""
        codegen.load_callable(_restore)
        codegen.append(bc.Instr("LOAD_FAST", VALUES))
        for generator in self.generators:
            codegen(generator)
        codegen.append(*codegen.call_instrs(1 + len(self.generators)))
        codegen.append(bc.Instr("POP_TOP"))


def _restore(values: dict[int | str, Any], *generators: Any) -> None:
    for generator, state in zip(generators, values["states"], strict=True):
        generator.setstate(state)


@dataclasses.dataclass(frozen=True, eq=False)
class _Prologue:
    """The callable the transformed code starts with. ``outputs`` is the plan's own
    list: entries added while the rest of the code is generated are computed too."""

    calls: tuple[tuple[int, str, tuple, dict], ...]
    outputs: list[tuple[str, Expr]]
    saved_after: int | None  # save the states after this many draws (625 ints each)

    def __call__(self, *generators: Any) -> dict[int | str, Any]:
        values: dict[int | str, Any] = {}
        for i, (position, method, args, kwargs) in enumerate(self.calls):
            if i == self.saved_after:
                values["states"] = [generator.getstate() for generator in generators]
            values[i] = getattr(generators[position], method)(*args, **kwargs)
        for n, (kind, expr) in enumerate(list(self.outputs)):
            value = evaluate(expr, values)
            values[f"o{n}"] = as_tensor(value) if kind == "tensor" else value
        return values


def evaluate(expr: Expr, values: dict[int | str, Any]) -> Any:
    """The value of ``expr`` given the draws ``values``."""
    head = expr[0]
    if head == "draw":
        return values[expr[1]]
    if head == "const":
        return expr[1]
    return head(*(evaluate(e, values) for e in expr[1:]))


def as_tensor(value: int | float) -> torch.Tensor:
    """The 0-d tensor a Python number enters the graph as."""
    return torch.tensor(value, dtype=torch.float64 if type(value) is float else torch.int64)


# Python arithmetic that a draw's expression may use (a tensor sees only the result).
EXPR_OPERATORS = frozenset({
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.neg, operator.pos, operator.abs,
    operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow,
})
