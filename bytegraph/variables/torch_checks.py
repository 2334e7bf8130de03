"""``torch._check`` and its siblings: assertions libraries make for compilers.

``torch._check(cond, message)`` raises when ``cond`` is False; code written for
torch.compile calls it on sizes (``torch._check(total == seq_len)``) where an
``if ...: raise`` would be a data-dependent branch. In the trace ``cond`` is a
Python bool, or a relation between sizes decided by the ShapeEnv (a guard), so
a true condition is nothing at all and a false one is a graph break: Python
then runs the call and raises eager's error, message included. A condition only
the data decides (``Tensor.item()``, ``torch._check_tensor_all``) breaks where
the value is needed, as it does under torch.compile without
``capture_scalar_outputs``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.variables.constant import ConstantVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.base import VariableTracker

# Each check and the position of its condition (``_check_with`` takes the error type first).
_CONDITION_INDEX = {
    torch._check: 0, torch._check_index: 0, torch._check_value: 0, torch._check_type: 0,
    torch._check_not_implemented: 0, torch._check_with: 1,
}


def is_torch_check(value: Any) -> bool:
    try:
        return value in _CONDITION_INDEX
    except TypeError:  # unhashable
        return False


def call_torch_check(
    tx: Tx, fn: Any, args: list[VariableTracker], kwargs: dict[str, VariableTracker]
) -> VariableTracker:
    """``fn(cond, message)`` of a condition the trace can decide: None, or a break."""
    from bytegraph.variables.tensor import TensorVariable

    index = _CONDITION_INDEX[fn]
    cond = args[index] if len(args) > index else kwargs.get("cond")
    if cond is None or isinstance(cond, TensorVariable):  # eager raises a TypeError
        raise Unsupported("builtin_arguments", f"{fn.__name__}() without a bool condition")
    if not cond.truth(tx):  # a size relation is decided here: a guard
        raise Unsupported(
            "operation_raises", f"{fn.__name__}() of a false condition (raises in eager)"
        )
    return ConstantVariable(None)
