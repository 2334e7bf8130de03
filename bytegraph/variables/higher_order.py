"""Higher-order operators: each body traced into a subgraph, called through the op.

``torch.cond(pred, true_fn, false_fn, operands)`` does not run Python: it
records one node, ``torch.ops.higher_order.cond(pred, true_graph,
false_graph, (operands..., free variables...))``, whose bodies are
GraphModules installed as attributes of the graph around it. This is the
form torch.compile hands its backends, so eager, AOTAutograd and Inductor
run and differentiate it. For each op:

1. ``speculate`` traces a body under a new SubgraphTracer
   (``graph/subgraphs.py``) and a new SideEffects scope. Its explicit inputs
   are placeholders with fresh metadata examples; tensors it closes over
   are lifted into inputs as it reads them.
2. Inside the body only values the body created may be mutated: a list,
   object, global or cell from outside, and an in-place write to a tensor
   from outside, are ``side_effect_in_higher_order_body``. Anything the
   body cannot trace is an Unsupported that leaves the whole op to Python
   (a break at the call: the op runs as in eager), with the inner reason.
3. The op's node gets the bodies' modules through ``get_attr``, the explicit
   operands, then the free variables; its outputs get fresh examples with
   the body outputs' metadata, and rebuild the structure the body returned.

Operators of torch.func and torch.autograd.Function live in
``func_transforms.py`` and ``autograd_function.py``, ``associative_scan`` in
``scans.py``, ``scan`` in ``scan_loops.py``, ``checkpoint`` in ``checkpoints.py``, ``wrap`` in
``plain_call_ops.py``, ``linearize`` in ``linearize.py``, ``flex_attention`` in
``flex_attention.py``, ``while_loop`` in ``while_loops.py``; this module holds the
shared machinery, ``torch.cond`` and ``map``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
import torch.utils.checkpoint

from bytegraph.exc import Unsupported
from bytegraph.graph.subgraphs import SubgraphTracer, order_lifted
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.cond_outputs import check_same_outputs
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import (
    NEW_VALUE,
    BaseSequenceVariable,
    ListVariable,
    SizeVariable,
    TupleVariable,
)
from bytegraph.variables.dicts import DictVariable
from bytegraph.variables.symbolic import SymIntVariable
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.graph.output_graph import OutputGraph
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx
    from bytegraph.variables.transform_arguments import TransformCall

Rebuild = Callable[[Sequence[VariableTracker]], VariableTracker]


@dataclasses.dataclass(frozen=True, eq=False)
class Body:
    """A traced body: its tracer (graph closed), the tensors it returned, and how to
    rebuild the value it returned from the op's outputs."""

    tracer: SubgraphTracer
    outputs: tuple[TensorVariable, ...]
    rebuild: Rebuild
    structure: tuple  # what the result looks like, to compare two bodies

    def module(self) -> torch.fx.GraphModule:
        return torch.fx.GraphModule(self.tracer.root_module(), self.tracer.graph)

    def lifted(self) -> list[torch.fx.Node]:
        return self.tracer.lifted_inputs()


# -- speculation -----------------------------------------------------------------
def speculate(
    tx: Tx,
    what: str,
    inputs: Sequence[tuple[VariableTracker, Any]],
    call: Callable[[list[VariableTracker]], VariableTracker],
) -> Body:
    """Trace ``call(body_inputs)`` as a body: ``inputs`` pairs each explicit input
    (a tensor or symbolic size) with the example the body sees for it."""
    from bytegraph.variables.exceptions import ObservedRaise
    from bytegraph.variables.function_modes import require_transparent_modes

    output = tx.output
    require_transparent_modes(tx, [vt for vt, _ in inputs], what)
    with output.subtracer() as tracer:
        try:
            with output.side_effects.enter_scope():
                body_inputs = [_body_input(tracer, vt, example) for vt, example in inputs]
                result = call(body_inputs)
                leaves: list[TensorVariable] = []
                rebuild, structure = flatten_result(tx, result, leaves, what)
        except ObservedRaise as error:
            error.__traceback__ = None
            raise Unsupported(
                "higher_order_call", f"the body of {what} raises {error.exc}"
            ) from None
        except Unsupported as error:
            inner = Unsupported(error.entry.name, f"in the body of {what}: {error.detail}",
                                error.frames)
            raise inner from error.__cause__
        tracer.graph.output(tuple(tracer.lift(t.node) for t in leaves))
    return Body(tracer, tuple(leaves), rebuild, structure)


def _body_input(tracer: SubgraphTracer, vt: VariableTracker, example: Any) -> VariableTracker:
    if isinstance(vt, TensorVariable):
        node = tracer.create_placeholder(vt.node.name)
        return TensorVariable(node, example, vt.device, tensor_type=vt.tensor_type)
    if isinstance(vt, SymIntVariable):
        return type(vt)(tracer.create_placeholder(vt.node.name), example)
    raise Unsupported("higher_order_call", f"{vt} as an input of a body")


def flatten_result(
    tx: Tx, vt: VariableTracker, leaves: list[TensorVariable], what: str
) -> tuple[Rebuild, tuple]:
    """The tensors in ``vt`` (appended to ``leaves``), a function rebuilding ``vt`` from
    new tensors, and a picture of its structure."""
    if isinstance(vt, TensorVariable):
        index = len(leaves)
        leaves.append(vt)
        return (lambda new: new[index]), ("tensor", vt.dtype, vt.device)
    if isinstance(vt, ConstantVariable) and (vt.value is None or type(vt.value) in (int, bool)):
        return (lambda new: vt), ("constant", vt.value)
    if isinstance(vt, BaseSequenceVariable) and not isinstance(vt, SizeVariable):
        parts = [flatten_result(tx, item, leaves, what) for item in vt.items_now(tx)]
        builders = [p[0] for p in parts]
        if isinstance(vt, ListVariable):
            def rebuild(new: Sequence[VariableTracker]) -> VariableTracker:
                return ListVariable(tuple(b(new) for b in builders), mutation_type=NEW_VALUE)
            return rebuild, ("list", tuple(p[1] for p in parts))
        if isinstance(vt, TupleVariable):
            tuple_type = vt.tuple_type

            def rebuild_tuple(new: Sequence[VariableTracker]) -> VariableTracker:
                return TupleVariable(tuple(b(new) for b in builders), tuple_type=tuple_type)
            return rebuild_tuple, (tuple_type, tuple(p[1] for p in parts))
    if isinstance(vt, DictVariable) and vt.dict_type is dict:
        items = vt.items_now(tx)
        if all(type(k) in (str, int) for k in items):
            keys = tuple(items)
            parts = [flatten_result(tx, item, leaves, what) for item in items.values()]

            def rebuild_dict(new: Sequence[VariableTracker]) -> VariableTracker:
                return DictVariable({k: p[0](new) for k, p in zip(keys, parts)},
                                    mutation_type=NEW_VALUE)
            return rebuild_dict, ("dict", tuple(zip(keys, (p[1] for p in parts))))
    raise Unsupported(
        "higher_order_call",
        f"the body of {what} returned {vt}: a body returns tensors, or tuples, lists and "
        "dicts of them",
    )


def refuse_aliasing(body: Body, what: str, allowed: frozenset[int] = frozenset()) -> None:
    """An op's outputs are new tensors: a body returning its input (or a view of a tensor
    from outside) is left to Python, where the op decides what that means. The outputs
    numbered in ``allowed`` are the caller's to handle."""
    for i, t in enumerate(body.outputs):
        if i not in allowed and not body.tracer.owns(t.example):
            raise Unsupported(
                "higher_order_call",
                f"the body of {what} returns a tensor from outside the body (or a view of "
                "one) instead of a new tensor",
            )


# -- examples and nodes ---------------------------------------------------------------
def fresh_example(output: OutputGraph, t: Any, requires_grad: bool | None = None) -> Any:
    """A new metadata tensor (meta, or fake in a dynamic trace) shaped like ``t``; one
    that requires grad is not a leaf, as an op's result is not."""
    mode = output.shapes.fake_mode if output.shapes is not None else contextlib.nullcontext()
    with mode, torch.enable_grad():
        new = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
        if t.requires_grad if requires_grad is None else requires_grad:
            new = new.requires_grad_().clone()
    return new


def input_example(output: OutputGraph, t: Any) -> Any:
    """What a body sees for an explicit tensor input: ``t``'s metadata, a leaf."""
    mode = output.shapes.fake_mode if output.shapes is not None else contextlib.nullcontext()
    with mode:
        new = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return new.requires_grad_(t.requires_grad)


def call_op(
    tx: Tx,
    target: Any,
    args: tuple,
    kwargs: dict[str, Any],
    like: Sequence[TensorVariable],
    requires_grad: Sequence[bool] | None = None,
) -> list[TensorVariable]:
    """Record ``target(*args, **kwargs)``, whose result is a tuple of tensors shaped
    like ``like``; the TensorVariables of its items."""
    output = tx.output
    node = output.create_node("call_function", target, args, kwargs)
    results = []
    for i, t in enumerate(like):
        grad = None if requires_grad is None else requires_grad[i]
        example = fresh_example(output, t.example, grad)
        output.note_result(example, ())
        item = output.create_node("call_function", operator.getitem, (node, i), {})
        results.append(TensorVariable(item, example, t.device))
    return results


def install(tx: Tx, prefix: str, body: Body) -> torch.fx.Node:
    """The body's module as an attribute of the current graph; its get_attr node."""
    return tx.output.tracer.install(prefix, body.module())


def bind(
    what: str, names: tuple[str, ...], args: Sequence[VariableTracker],
    kwargs: dict[str, VariableTracker],
) -> list[VariableTracker]:
    """The arguments of ``what(*names)`` given by position or keyword, all required."""
    bound = dict(zip(names, args))
    for name, value in kwargs.items():
        if name not in names or name in bound:
            raise Unsupported("higher_order_call", f"{what}() got argument {name!r}")
        bound[name] = value
    if len(args) > len(names) or len(bound) != len(names):
        raise Unsupported("higher_order_call", f"{what}() takes arguments {', '.join(names)}")
    return [bound[n] for n in names]


def bind_with_defaults(
    what: str, names: tuple[str, ...], defaults: dict[str, Any], args: Sequence[VariableTracker],
    kwargs: dict[str, VariableTracker], positional: int | None = None,
) -> dict[str, VariableTracker]:
    """The arguments of ``what(*names)`` by name: given by position (the first
    ``positional`` names, all by default) or keyword, else their constant default."""
    positional = len(names) if positional is None else positional
    bound = dict(zip(names[:positional], args))
    for name, value in kwargs.items():
        if name not in names or name in bound:
            raise Unsupported("higher_order_call", f"{what}() got argument {name!r}")
        bound[name] = value
    for name, default in defaults.items():
        bound.setdefault(name, ConstantVariable(default))
    if len(args) > positional or len(bound) != len(names):
        raise Unsupported("higher_order_call", f"{what}() takes {', '.join(names)}")
    return bound


def tensor_items(tx: Tx, vt: VariableTracker, what: str) -> list[TensorVariable]:
    """The tensors of a tuple or list argument (``operands``, ``carried_inputs``)."""
    if isinstance(vt, BaseSequenceVariable) and not isinstance(vt, SizeVariable):
        items = list(vt.items_now(tx))
        if all(isinstance(i, TensorVariable) for i in items):
            return items
    raise Unsupported("higher_order_call", f"{what} must be a tuple or list of tensors: {vt}")


def tensor_tree(tx: Tx, vt: VariableTracker, what: str) -> TransformCall:
    """A pytree of tensors (a tensor, or tuples, lists and dicts of them) flattened to its
    leaves; ``rebuild_argument(0, leaves)`` rebuilds it around other tensors."""
    from bytegraph.variables.transform_arguments import TransformCall, has_constants

    call = TransformCall.of(tx, what, [vt], {})
    if has_constants(call.argument(0)):
        raise Unsupported("higher_order_call", f"{what} holds non-tensor values: {vt}")
    return call


def _operand_list(call: TransformCall, leaves: Sequence[VariableTracker]) -> list:
    """The operands (a tuple or list pytree) rebuilt around ``leaves``, as a call's arguments."""
    return list(call.rebuild_argument(0, dict(enumerate(leaves))).items)


# -- torch.cond --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CondVariable(PythonValueVariable):
    """``torch.cond(pred, true_fn, false_fn, operands)``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        names = ("pred", "true_fn", "false_fn", "operands")
        pred, true_fn, false_fn, operands = bind("torch.cond", names, args, kwargs)
        tree = tensor_tree(tx, operands, "torch.cond's operands")
        if tree.argument(0)[0] not in ("tuple", "list"):
            raise Unsupported("higher_order_call", "torch.cond's operands must be a tuple or "
                              f"list: {operands}")
        items = list(tree.leaves)
        if not isinstance(pred, TensorVariable):
            # A Python predicate: eager calls the branch it picks, and so does the trace.
            chosen = true_fn if pred.as_python_constant() else false_fn
            return chosen.call_function(tx, _operand_list(tree, items), {})
        if pred.example.numel() != 1:
            raise Unsupported("higher_order_call", "torch.cond's pred has more than one element")
        branches = [
            speculate(tx, f"torch.cond's {name}", _inputs(tx, items),
                      lambda body_args, fn=fn: fn.call_function(
                          tx, _operand_list(tree, body_args), {}))
            for name, fn in (("true_fn", true_fn), ("false_fn", false_fn))
        ]
        true_body, false_body = branches
        check_same_outputs(tx, true_body, false_body)
        for body in branches:
            refuse_aliasing(body, "torch.cond")
        free = share_inputs(branches)
        graphs = (install(tx, "cond_true", true_body), install(tx, "cond_false", false_body))
        grads = [a.example.requires_grad or b.example.requires_grad
                 for a, b in zip(true_body.outputs, false_body.outputs)]
        outputs = call_op(
            tx, torch.ops.higher_order.cond,
            (pred.node, *graphs, tuple(t.node for t in items) + tuple(free)), {},
            true_body.outputs, grads,
        )
        return true_body.rebuild(outputs)


def _inputs(tx: Tx, items: Sequence[TensorVariable]) -> list[tuple[VariableTracker, Any]]:
    return [(t, input_example(tx.output, t.example)) for t in items]


def share_inputs(bodies: Sequence[Body]) -> list[torch.fx.Node]:
    """Give every body the free variables of all of them, in one order (the op passes
    one list); the outer handles of those free variables."""
    order: list[torch.fx.Node] = []
    for body in bodies:
        order.extend(n for n in body.tracer.lifted if n not in order)
    for body in bodies:
        for node in order:
            body.tracer.lift(node)
        order_lifted(body.tracer, order)
    return bodies[0].lifted()


# -- torch._higher_order_ops.map ----------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class MapVariable(PythonValueVariable):
    """``map(f, xs, *args)``: ``f`` traced on one slice of each tensor of ``xs`` and the
    whole ``args``, called through ``torch.ops.higher_order.map_impl``."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        if kwargs or len(args) < 2:
            raise Unsupported("higher_order_call", "map(f, xs, *args) with keyword arguments")
        fn, xs, *rest = args
        tree = tensor_tree(tx, xs, "map's xs")
        mapped = list(tree.leaves)
        extra = tensor_items(tx, TupleVariable(tuple(rest)), "map's extra arguments")
        sizes = {x.example.shape[0] if x.example.dim() else None for x in mapped}
        if len(sizes) != 1 or None in sizes:
            raise Unsupported("higher_order_call", "map's xs of different leading sizes")
        examples = [(x, input_example(tx.output, x.example.select(0, 0))) for x in mapped]

        def call(body_args: list[VariableTracker]) -> VariableTracker:
            slices = body_args[:len(mapped)]
            first = tree.rebuild_argument(0, dict(enumerate(slices)))
            return fn.call_function(tx, [first, *body_args[len(mapped):]], {})

        body = speculate(tx, "map", examples + _inputs(tx, extra), call)
        refuse_aliasing(body, "map")
        (size,) = sizes
        like = [_Stacked(t, size) for t in body.outputs]
        outputs = call_op(
            tx, torch.ops.higher_order.map_impl,
            (install(tx, "map_body", body), [x.node for x in mapped],
             [t.node for t in extra] + body.lifted()), {}, like,
        )
        return body.rebuild(outputs)


class _Stacked:
    """A body output with the mapped dimension in front (what ``call_op`` copies)."""

    def __init__(self, t: TensorVariable, size: int) -> None:
        self.example = t.example.detach().new_empty((size, *t.example.shape))
        self.example.requires_grad_(t.example.requires_grad)
        self.device = t.device


# -- which values are higher-order ops ------------------------------------------------------
def _cond_module() -> Any:
    import torch._higher_order_ops  # noqa: F401  (loads the cond module)

    return sys.modules["torch._higher_order_ops.cond"]


def _registry() -> dict[int, type[VariableTracker]]:
    from bytegraph.variables import (
        checkpoints,
        flex_attention,
        func_transforms,
        linearize,
        plain_call_ops,
        scan_loops,
        scans,
        while_loops,
    )

    table: dict[int, type[VariableTracker]] = {
        id(_cond_module().cond): CondVariable,
        id(torch.utils.checkpoint.checkpoint): checkpoints.CheckpointVariable,
        id(sys.modules["torch._higher_order_ops.map"].map): MapVariable,
    }
    table.update(func_transforms.REGISTRY)
    table.update(scans.REGISTRY)
    table.update(plain_call_ops.registry())
    table.update(scan_loops.REGISTRY)
    table.update(linearize.REGISTRY)
    table.update(flex_attention.REGISTRY)
    table.update(while_loops.REGISTRY)
    return table


_REGISTRY: dict[int, type[VariableTracker]] | None = None


def higher_order_variable(value: Any, source: Any) -> VariableTracker | None:
    """The VT of a higher-order op, or None if ``value`` is not one."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _registry()
    cls = _REGISTRY.get(id(value))
    if cls is not None:
        return cls(value, source=source)
    from bytegraph.variables import autograd_function, compile_regions

    if compile_regions.marked_function(value) is not None:
        return compile_regions.CompileRegionVariable(value, source=source)
    if autograd_function.is_autograd_function_class(value):
        return autograd_function.AutogradFunctionClassVariable(value, source=source)
    return None
