"""Activation checkpointing: ``torch.utils.checkpoint.checkpoint`` as one higher-order node.

``checkpoint(fn, *args, use_reentrant=..., context_fn=..., **fn_kwargs)``
runs ``fn`` without keeping its activations and recomputes them in backward.
bytegraph records it as torch.compile does: the body traced into a subgraph
(``higher_order.speculate``) and one node
``torch.ops.higher_order.tag_activation_checkpoint(body, *free_variables)``,
which eager runs through the non-reentrant checkpoint and AOTAutograd
recomputes in its backward graph.

1. ``use_reentrant=False``: the plain form.
2. ``use_reentrant=True`` (or not given: torch's default) is the same
   computation where eager gives the same gradients: some tensor argument
   requires grad and every tensor the body returns requires grad (the
   reentrant variant is an autograd.Function: its outputs require grad
   exactly when an argument does, and parameters the body reads get their
   gradients only then). Keyword arguments for ``fn`` are eager's ValueError.
3. ``context_fn`` (selective activation checkpointing,
   ``create_selective_checkpoint_contexts(policy_or_ops)``) must be a
   constant callable (a function read from the frame, or a
   ``functools.partial`` of constants): it goes on the body's module as
   ``meta["_checkpoint_context_fn"]``, where torch's implementation of the
   op reads it, so the policy runs when eager's would.
4. A body that draws random numbers (dropout, rand...) is refused: the op's
   eager implementation recomputes without restoring the generator's state
   (torch leaves that to Inductor's RNG functionalization), so backward
   would see other random numbers than forward, unlike eager's checkpoint.

Everything refused is a break with the reason; the call then runs in Python.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.graph.rerun import draws_random_numbers
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.higher_order import Body, call_op, refuse_aliasing, speculate
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_OPTIONS = ("use_reentrant", "preserve_rng_state", "determinism_check", "debug")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CheckpointVariable(PythonValueVariable):
    """``torch.utils.checkpoint.checkpoint``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        if not args:
            raise Unsupported("higher_order_call", "checkpoint() without a function")
        fn, *fn_args = args
        options = {k: _constant(kwargs[k], k) for k in _OPTIONS if k in kwargs}
        reentrant = options.pop("use_reentrant", None) is not False
        # A function read from the frame, or a partial of constants.
        context_fn = kwargs["context_fn"].as_python_constant() if "context_fn" in kwargs else None
        fn_kwargs = {k: v for k, v in kwargs.items() if k not in (*_OPTIONS, "context_fn")}
        if reentrant and (fn_kwargs or context_fn is not None):
            raise Unsupported("higher_order_call", "checkpoint with use_reentrant=True and "
                              "keyword arguments or a context_fn (eager's ValueError)")
        body = speculate(tx, "checkpoint", [],
                         lambda _: fn.call_function(tx, list(fn_args), fn_kwargs))
        refuse_aliasing(body, "checkpoint")
        _refuse_random(body)
        if reentrant:
            _check_reentrant_grads(fn_args, body)
        module = body.module()
        if context_fn is not None:
            module.meta["_checkpoint_context_fn"] = context_fn
        graph = tx.output.tracer.install("checkpoint_body", module)
        outputs = call_op(
            tx, torch.ops.higher_order.tag_activation_checkpoint,
            (graph, *body.lifted()), options, body.outputs,
        )
        return body.rebuild(outputs)


def _constant(vt: VariableTracker, what: str) -> Any:
    if not vt.is_python_constant():
        raise Unsupported("higher_order_call", f"checkpoint's {what} is not a constant")
    return vt.as_python_constant()


def _refuse_random(body: Body) -> None:
    for node in body.tracer.graph.nodes:
        if node.op in ("call_function", "call_method") and draws_random_numbers(node):
            raise Unsupported(
                "higher_order_call",
                f"checkpoint of a body that draws random numbers ({node.name}): the graph "
                "form recomputes it with other random numbers than the forward's",
            )


def _check_reentrant_grads(fn_args: list[VariableTracker], body: Body) -> None:
    if not torch.is_grad_enabled():
        return
    inputs_grad = any(isinstance(a, TensorVariable) and a.example.requires_grad for a in fn_args)
    outputs_grad = all(t.example.requires_grad for t in body.outputs)
    if not (inputs_grad and outputs_grad):
        raise Unsupported(
            "higher_order_call",
            "checkpoint with use_reentrant=True where no tensor argument requires grad, or "
            "an output does not (the reentrant variant's gradients differ there)",
        )
