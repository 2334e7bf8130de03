"""``torch.compiler.nested_compile_region``: a block traced as a subgraph and shared.

A function marked with ``nested_compile_region`` (torch leaves
``__marked_compile_region_fn__`` on the wrapper it returns) is not inlined:
each call traces its body into a subgraph (``higher_order.speculate``) and
records ``torch.ops.higher_order.invoke_subgraph(subgraph, identifier,
*operands)``, the form torch.compile hands its backends. Calls whose bodies
trace to the same code, on inputs of the same metadata, share one subgraph
attribute and identifier, so a block called N times (a transformer's layers)
is one subgraph the backend compiles once. The same code on the same input
metadata is the same function of its inputs, whatever the Python objects (the
module, its parameters) it was traced from: those reach the body as operands.
A call whose outputs require grad is inlined instead: torch's Inductor
differentiates invoke_subgraph wrongly.

The tensors among the call's arguments are the body's explicit inputs; other
arguments (the module of a method, options) are used by the body as they are.
"""

from __future__ import annotations

import dataclasses
import types
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.higher_order import call_op, input_example, refuse_aliasing, speculate
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.higher_order import Body

_MARK = "__marked_compile_region_fn__"


def marked_function(value: Any) -> types.FunctionType | None:
    """The function a ``nested_compile_region`` wrapper calls; None for anything else."""
    if not isinstance(value, types.FunctionType):
        return None
    inner = value.__dict__.get(_MARK)
    while isinstance(inner, types.FunctionType) and _MARK in inner.__dict__:
        inner = inner.__dict__[_MARK]
    return inner if isinstance(inner, types.FunctionType) else None


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CompileRegionVariable(PythonValueVariable):
    """A function marked with ``torch.compiler.nested_compile_region``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.functions import UserFunctionVariable

        function = marked_function(self.value)
        assert function is not None
        return call_region(tx, UserFunctionVariable(function), args, kwargs)


def call_region(tx: Tx, function: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
    """``function(*args, **kwargs)`` as one ``invoke_subgraph`` node."""
    what = "a nested_compile_region"
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, TensorVariable)]
    examples = [input_example(tx.output, t.example) for t in tensors]

    def body_call(inputs: list[VariableTracker]) -> VariableTracker:
        inside = dict(zip(map(id, tensors), inputs))
        return function.call_function(
            tx, [inside.get(id(a), a) for a in args],
            {k: inside.get(id(v), v) for k, v in kwargs.items()},
        )

    body = speculate(tx, what, list(zip(tensors, examples)), body_call)
    refuse_aliasing(body, what)
    if any(t.example.requires_grad for t in body.outputs):
        # Differentiated, the block is inlined: in torch 2.13, Inductor's backward of
        # invoke_subgraph is wrong (gradients, and a shared subgraph's writes into a
        # parameter), under torch.compile too (tests/test_compile_regions.py shows it).
        return function.call_function(tx, args, kwargs)
    lifted = body.lifted()
    key = _sharing_key(tx, function, body, examples, lifted)
    graph = tx.output.tracer.install_shared("subgraph", key, body.module())
    outputs = call_op(
        tx, torch.ops.higher_order.invoke_subgraph,
        (graph, graph.target, *(t.node for t in tensors), *lifted), {}, body.outputs,
    )
    return body.rebuild(outputs)


def _sharing_key(tx: Tx, function: VariableTracker, body: Body, examples: list,
                 lifted: list[torch.fx.Node]) -> tuple | None:
    """What two calls must agree on to share a subgraph: the body's code and its inputs'
    metadata. None (never shared) for a body calling bodies of its own."""
    index: dict[torch.fx.Node, int] = {}
    code = []
    for node in body.tracer.graph.nodes:
        if node.op == "get_attr":
            return None
        index[node] = len(index)
        arguments = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: f"%{index[n]}")
        code.append((node.op, node.target if node.op != "placeholder" else None,
                     repr(arguments)))
    graph_inputs = {i.node: i.example for i in tx.output.inputs}
    free = tuple(_metadata(graph_inputs[n]) if n in graph_inputs else n for n in lifted)
    return (getattr(function, "fn", None), tuple(code),
            tuple(_metadata(e) for e in examples), free)


def _metadata(value: Any) -> Any:
    """A tensor's metadata as text (a symbolic size is its expression), or a value's type."""
    if isinstance(value, torch.Tensor):
        return (str(tuple(value.shape)), str(value.stride()), value.dtype, value.device,
                value.requires_grad, type(value))
    return type(value)
