"""``ctx.set_materialize_grads(False)``: which gradients a traced backward gets as None.

With materialization on (the default) autograd hands ``backward`` a zero
tensor for each output whose gradient it did not compute, and so does
``autograd_function_apply`` at run time: the backward is traced with one
tensor per output. Turned off, eager hands ``None`` for those outputs, and a
backward may branch on it (``if grad is None``). The op still hands zeros, so
the trace must know, for each output, what eager hands whenever its backward
runs at all:

1. an output that never carries a gradient (marked non-differentiable, or not
   floating point) always gets None;
2. an output the program drops gets None: the call's result unpacked straight
   into locals (``a, _b = Fn.apply(x)``) that no later instruction reads
   (``translate/regions.live_locals``). Nothing can then reach it, so autograd
   computes no gradient for it. The assumption is checked when the graph is
   finished (``check_dropped_outputs``): the output's node must have no user
   (no op, no body, not a graph output); if it has one, the trace is refused
   at the call, never compiled with a backward eager would not run. The
   outputs must be distinct tensors: one returned twice takes the gradient of
   either use in its last slot;
3. if exactly one other output is left, it gets a tensor: the backward runs
   when this output's gradient was computed. (Autograd also runs it with no
   gradient at all when a later backward returns None for a tensor that
   requires grad; eager then hands all None, the op zeros. That later None
   already reaches a graph compiled by AOTAutograd as zeros, whatever the graph
   holds.)
4. if two or more are left, which of them carry a gradient is decided only
   when the backward runs: Unsupported (``apply`` runs in Python).

Inside a higher-order op's body (a torch.func transform's, a checkpoint's) the op
around it decides what the backward gets: refused there.

torch.compile traces the backward with a tensor for every output (the op
materializes zeros), which differs from eager for a backward that tells None
from zeros; bytegraph traces what eager would hand instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from bytegraph.bytecode.stack_effects import locals_written
from bytegraph.exc import Unsupported
from bytegraph.translate.regions import live_locals
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx

_CALLS = frozenset({"CALL", "CALL_KW", "CALL_FUNCTION_EX"})
_DROPPED = "bytegraph_dropped_output"  # node meta: (step, index, what) of the assumption


def none_gradients(
    tx: Tx, outputs: list[TensorVariable], non_differentiable: set[int], name: str,
    nested: bool,
) -> tuple[set[int], set[int]]:
    """The outputs whose gradient the backward gets as None, and those of them assumed
    dropped by the program (to check with ``mark_dropped``). ``nested``: ``apply`` was
    called inside a body, where a transform around it (torch.func) decides what the
    backward gets: refused."""
    if nested:
        raise Unsupported("higher_order_call", f"ctx.set_materialize_grads(False) in {name}, "
                          "called inside a higher-order op's body")
    if len({o.node for o in outputs}) != len(outputs):
        raise Unsupported("higher_order_call", f"ctx.set_materialize_grads(False) in {name}, "
                          "whose forward returns one tensor as two outputs")
    never = {
        i for i, o in enumerate(outputs)
        if i in non_differentiable
        or not (o.example.is_floating_point() or o.example.is_complex())
    }
    dropped = _dropped_items(tx, len(outputs)) - never
    left = set(range(len(outputs))) - never - dropped
    if len(left) > 1:
        raise Unsupported("higher_order_call", f"ctx.set_materialize_grads(False) in {name}: "
                          f"outputs {sorted(left)} are used after the call, and which of them "
                          "carry a gradient (the others' are None) is known only when the "
                          "backward runs")
    return never | dropped, dropped


def _dropped_items(tx: Tx, count: int) -> set[int]:
    """The items of the call's result that the next instructions unpack into locals no
    later instruction reads (none if the result is used any other way)."""
    inst = tx.current_inst
    instructions = tx.instructions
    if inst is None or inst.opname not in _CALLS or inst.index + 1 >= len(instructions):
        return set()
    unpack = instructions[inst.index + 1]
    if unpack.opname != "UNPACK_SEQUENCE" or unpack.arg != count:
        return set()
    targets: list[str] = []
    at = inst.index + 2
    while len(targets) < count and at < len(instructions):
        names = locals_written(instructions[at].opname, instructions[at].argval)
        if instructions[at].opname == "DELETE_FAST" or not names:
            return set()
        targets.extend(names)
        at += 1
    if len(targets) != count:
        return set()
    live = live_locals(tx.code, at)
    return {i for i, name in enumerate(targets) if name not in live}


def mark_dropped(tx: Tx, results: list[TensorVariable], dropped: set[int], name: str) -> None:
    """Note on each dropped output's node the assumption ``check_dropped_outputs`` checks,
    with the root frame's step to break at if it fails."""
    root = tx
    while getattr(root, "parent", None) is not None:
        root = root.parent
    steps = getattr(root, "steps", None)
    step = steps - 1 if steps is not None else None
    index = root.current_inst.index if root.current_inst is not None else None
    for i in dropped:
        what = f"{name}.apply's output {i}"
        results[i].node.meta[_DROPPED] = (step, index, what)


def check_dropped_outputs(gm: torch.fx.GraphModule) -> None:
    """Refuse a graph where an output assumed dropped (its gradient traced as None) is
    used after all: by an op, a body, or as an output of the graph."""
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            noted: Any = node.meta.get(_DROPPED)
            if noted is not None and node.users:
                _refuse(*noted)


def _refuse(step: int | None, index: int | None, what: str) -> None:
    error = Unsupported("higher_order_call", f"ctx.set_materialize_grads(False): {what} was "
                        "traced as never differentiated (a None gradient), but the program "
                        "uses it")
    error.step, error.index = step, index
    raise error
