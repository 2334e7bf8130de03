"""``torch.func.linearize(f, *primals)``: ``f``'s output now, its JVP function for later.

``out, jvp_fn = linearize(f, x)`` returns ``f(x)`` and a function with
``jvp_fn(v) == jvp(f, (x,), (v,))[1]``. bytegraph traces ``f(x)`` in place
(its ops land in the graph around it, the same values eager's linearize
returns) and makes ``jvp_fn`` a LinearizedVariable: each call records the
``torch.func.jvp`` of ``f`` at the primals with the given tangents (the
JvpVariable of func_transforms.py). Primals other than positional tensors,
or ones that require grad, are a break with the reason; so is a ``jvp_fn``
that escapes the graph (it has no value to rebuild).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.containers import TupleVariable
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

WHAT = "torch.func.linearize"


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LinearizeVariable(PythonValueVariable):
    """``torch.func.linearize``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        if kwargs or len(args) < 2 or not all(isinstance(a, TensorVariable) for a in args[1:]):
            raise Unsupported("higher_order_call", f"{WHAT}(f, *primals) with primals other "
                              "than positional tensors")
        fn, primals = args[0], tuple(args[1:])
        if torch.is_grad_enabled() and any(p.example.requires_grad for p in primals):
            raise Unsupported("higher_order_call", f"{WHAT} of primals that require grad")
        output = fn.call_function(tx, list(primals), {})
        return TupleVariable((output, LinearizedVariable(fn, primals)))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class LinearizedVariable(VariableTracker):
    """The ``jvp_fn`` that ``linearize`` returned: ``jvp_fn(*tangents)``."""

    fn: VariableTracker
    primals: tuple[TensorVariable, ...]

    def python_type(self) -> type:
        return type(lambda: None)

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.func_transforms import JvpVariable

        if kwargs or len(args) != len(self.primals):
            raise Unsupported("higher_order_call", "jvp_fn() takes one tangent per primal")
        jvp = JvpVariable(torch.func.jvp)
        result = jvp.call_function(
            tx, [self.fn, TupleVariable(self.primals), TupleVariable(tuple(args))], {}
        )
        return result.items_now(tx)[1]


REGISTRY: dict[int, type[VariableTracker]] = {id(torch.func.linearize): LinearizeVariable}
