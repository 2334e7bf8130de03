"""Higher-order operators that mean a plain call: ``wrap(fn, *args, **kwargs)``.

``torch._higher_order_ops.wrap.wrap`` calls ``fn(*args, **kwargs)`` and
returns its result; torch.compile records it as one ``wrap`` node over a
subgraph, which the backend then inlines. bytegraph traces the call in
place (``fn`` inlined like any user function), so the ops land in the
graph around it: the same computation, and anything the body cannot trace
is an ordinary break inside it. (The op's own eager implementation imports
torch._dynamo to keep it from being traced, which a graph node would do at
run time.)
"""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class WrapVariable(PythonValueVariable):
    """``wrap(fn, *args, **kwargs)``: ``fn(*args, **kwargs)``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        if not args:
            raise Unsupported("higher_order_call", "wrap() without a function")
        fn, *rest = args
        return fn.call_function(tx, list(rest), dict(kwargs))


def registry() -> dict[int, type[VariableTracker]]:
    """The ops of this module by identity (torch's module is imported by then)."""
    wrap_module = sys.modules.get("torch._higher_order_ops.wrap")
    return {} if wrap_module is None else {id(wrap_module.wrap): WrapVariable}
