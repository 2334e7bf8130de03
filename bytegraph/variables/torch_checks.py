"""``torch._check`` and its siblings: assertions libraries make for compilers.

``torch._check(cond, message)`` raises when ``cond`` is False; code written for
torch.compile calls it on sizes (``torch._check(total == seq_len)``) where an
``if ...: raise`` would be a data-dependent branch. In the trace ``cond`` is a
Python bool, or a relation between sizes decided by the ShapeEnv (a guard), so
a true condition is nothing at all and a false one is a graph break: Python
then runs the call and raises eager's error, message included. A condition only
the data decides (``Tensor.item()``) breaks where the value is needed, as it
does under torch.compile without ``capture_scalar_outputs``.

``torch._check_tensor_all(cond)`` on a CPU tensor (transformers'
``torch_compilable_check`` while compiling: the DETR family, Grounding DINO)
stays in the graph as ``torch._assert_async(cond._is_all_true(), msg)``, which
raises there when an element is False. The graph must then be one that reruns
as Python when it raises (graph/rerun.py: it writes no input and draws no
random numbers), so the call raises eager's own error, message included, with
eager's state behind it. ``convert`` traces a frame whose graph cannot rerun
again with ``checks_break()``: the check is then a break, as before. A CUDA
condition is a break too (its assert is asynchronous: nothing to rerun from).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
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
    torch._check_tensor_all: 0, torch._check_tensor_all_with: 1,
}
_TENSOR_CHECKS = (torch._check_tensor_all, torch._check_tensor_all_with)
# Off while ``convert`` traces a frame again whose graph could not rerun as Python.
_checks_in_graph: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "checks_in_graph", default=True
)


@contextlib.contextmanager
def checks_break() -> Iterator[None]:
    """Tensor checks break instead of staying in the graph, for one retrace."""
    token = _checks_in_graph.set(False)
    try:
        yield
    finally:
        _checks_in_graph.reset(token)


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
    if fn in _TENSOR_CHECKS:
        return _check_in_graph(tx, fn, cond)
    if cond is None or isinstance(cond, TensorVariable):  # eager raises a TypeError
        raise Unsupported("builtin_arguments", f"{fn.__name__}() without a bool condition")
    if not cond.truth(tx):  # a size relation is decided here: a guard
        raise Unsupported(
            "operation_raises", f"{fn.__name__}() of a false condition (raises in eager)"
        )
    return ConstantVariable(None)


def _check_in_graph(tx: Tx, fn: Any, cond: VariableTracker | None) -> VariableTracker:
    """``torch._check_tensor_all(cond)``: an assert node, where a failure can rerun."""
    from bytegraph.variables.tensor import TensorVariable, tensor_op

    output = tx.output
    why = None
    if not isinstance(cond, TensorVariable) or cond.dtype is not torch.bool:
        why = "a condition that is not a bool tensor (raises in eager)"
    elif cond.device.type != "cpu":
        why = f"a condition on {cond.device.type} (its assert would be asynchronous)"
    elif not _checks_in_graph.get():
        why = "a graph that cannot rerun as Python if the check fails"
    elif output.tracer is not output.root_tracer:
        why = "a condition inside the body of a higher-order op"
    if why is not None:
        raise Unsupported("torch_internal_call", f"call of torch.{fn.__name__} on {why}")
    every = tensor_op(tx, "call_method", "_is_all_true", [cond], {})
    message = ConstantVariable(f"torch.{fn.__name__} failed")  # the .msg overload: kept by AOT
    tensor_op(tx, "call_function", torch._assert_async, [every, message], {})
    output.checks_in_graph = True
    return ConstantVariable(None)
