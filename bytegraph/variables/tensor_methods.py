"""``torch.Tensor.<method>`` read from the class: the unbound method as a value.

``torch.Tensor.sum(x)``, ``m = torch.Tensor.add; m(x, 1)`` and
``torch.vmap(torch.Tensor.sum)(x)`` call a method of the tensor passed first.
The VT keeps the method's name: a call with a tensor first is that tensor's
method call (``TensorVariable.call_method``, so the graph records what
``x.sum()`` records); anything else first is a break. The value itself is the
real descriptor (a constant of the class, loaded again as one if it escapes).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TensorMethodVariable(PythonValueVariable):
    """An unbound method of ``torch.Tensor`` (``value``) named ``name``."""

    name: str = ""
    rebuilt_as_constant = True

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        if not args or not isinstance(args[0], TensorVariable):
            raise Unsupported("unsupported_method", f"torch.Tensor.{self.name} called without "
                              "a tensor first")
        return args[0].call_method(tx, self.name, list(args[1:]), dict(kwargs))

    def __repr__(self) -> str:
        return f"TensorMethodVariable({self.name})"


def tensor_method(cls: Any, name: str) -> TensorMethodVariable | None:
    """The VT of ``cls.name`` for ``torch.Tensor`` (or a subclass) and a method torch's
    tensors have; None otherwise."""
    if not (isinstance(cls, type) and issubclass(cls, torch.Tensor)) or name.startswith("__"):
        return None
    value = getattr(torch.Tensor, name, None)
    if value is None or getattr(cls, name, None) is not value or not callable(value) or (
        isinstance(value, (property, type))
    ):
        return None
    return TensorMethodVariable(value, name=name)
