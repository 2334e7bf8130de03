"""Subclasses of ``torch.autograd.Function``: ``Fn.apply(...)`` as one graph node.

``Fn.apply(x, y, 2.0)`` runs ``Fn.forward(ctx, x, y, 2.0)`` without grad and
makes ``Fn.backward(ctx, *grads)`` the gradient of its outputs. bytegraph
records it as ``torch.ops.higher_order.autograd_function_apply(fwd, bwd,
*tensors, non_differentiable_idx=..., saved_for_backward_idx=...)``, the op
torch.compile hands its backends (torch/_functorch/autograd_function.py):
it wraps the two graphs in an autograd.Function of its own, so eager,
AOTAutograd and Inductor run and differentiate it like the original.

1. The forward is traced as a body (``higher_order.speculate``) under no
   grad, its explicit inputs the tensor arguments (other arguments are
   constants of the body); ``setup_context`` style runs ``forward(*args)``
   then ``setup_context(ctx, args, output)``. ``ctx`` is a CtxVariable: new
   attributes live in SideEffects (``ctx.scale = 2.0``, ``ctx.x = x``),
   ``save_for_backward``, ``mark_non_differentiable``, ``needs_input_grad``
   and ``saved_tensors`` are modelled.
2. Still inside the forward's tracer, the backward is traced as a body of
   its own whose explicit inputs are one gradient per output (shaped like
   it); the forward tensors it reads, saved or stashed on ``ctx``, are lifted
   into it from the forward graph, which makes them its saved values.
3. The graphs are rewired into the op's contract: ``fwd(*tensors, *free)``
   returns ``((outputs...), (saved...))``; ``bwd(*grads, *saved)`` returns
   one gradient per input of ``fwd`` (None for non-tensor arguments and for
   the forward's free variables, which eager does not differentiate either).

Under no_grad, or when no tensor argument requires grad, the forward is
inlined into the graph and the backward, which eager never runs there, is not
traced (``autograd_function_inline.py``). A forward may return constants
beside its tensors (the backward gets None for them); with
``ctx.set_materialize_grads(False)`` the backward is traced with None where
eager hands None (``materialize_grads.py``).

Anything the trace cannot follow in either method (a data-dependent branch,
``mark_dirty``, a forward returning its input while autograd records it) is
an Unsupported with the inner reason: ``apply`` then runs in Python at a
graph break, never with a gradient that differs from eager's.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import AttrSource
from bytegraph.side_effects import DELETED
from bytegraph.variables.autograd_function_inline import apply_inline, records_nothing
from bytegraph.variables.base import (
    AttributeMutationNew,
    BoundMethodVariable,
    VariableTracker,
)
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.containers import TupleVariable
from bytegraph.variables.higher_order import (
    Body,
    call_op,
    input_example,
    install,
    speculate,
)
from bytegraph.variables.materialize_grads import mark_dropped, none_gradients
from bytegraph.variables.objects import ClassVariable
from bytegraph.variables.tensor import TensorVariable, unknown_layout

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


def is_autograd_function_class(value: Any) -> bool:
    return (
        isinstance(value, type)
        and issubclass(value, torch.autograd.Function)
        and value is not torch.autograd.Function
    )


def _has_setup_context(cls: type) -> bool:
    base = torch.autograd.function._SingleLevelFunction.setup_context
    return getattr(cls.setup_context, "__func__", cls.setup_context) is not base


_MISSING = object()


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AutogradFunctionClassVariable(ClassVariable):
    """A subclass of ``torch.autograd.Function``: its ``apply`` is traced."""

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name == "apply":
            if self.source is None:
                raise Unsupported("higher_order_call", f"{self.value.__qualname__}.apply of a "
                                  "class created in the compiled function")
            return AutogradFunctionApplyVariable(self.value, source=AttrSource(self.source, name))
        static = inspect.getattr_static(self.value, name, _MISSING)
        if self.source is not None and isinstance(static, (int, float, str, bool, type(None))):
            # A constant of the class (``cls.factor`` in a classmethod): read, and guarded,
            # through its source.
            from bytegraph.variables.builder import wrap

            return wrap(tx, static, AttrSource(self.source, name))
        return super().var_getattr(tx, name)


def _method(tx: Tx, cls: type, name: str, cls_source: Any) -> VariableTracker:
    """``cls.name`` as the trace calls it: a staticmethod is its function; a classmethod
    its function with the class as first argument (what ``cls.forward`` is bound to)."""
    from bytegraph.variables.builder import wrap
    from bytegraph.variables.functions import PartialVariable

    if isinstance(inspect.getattr_static(cls, name, None), classmethod):
        source = AttrSource(AttrSource(cls_source, name), "__func__")
        function = wrap(tx, getattr(cls, name).__func__, source)
        return PartialVariable(function, (wrap(tx, cls, cls_source),), {})
    return _static_method(tx, getattr(cls, name), AttrSource(cls_source, name))


def _static_method(tx: Tx, fn: Any, source: Any) -> VariableTracker:
    """A staticmethod, traced even where the class is torch's own (ModIndex, which
    transformers' vmap masks call through TransformGetItemToIndex)."""
    from bytegraph.variables.user_defined import function_vt

    return function_vt(tx, fn, source)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class AutogradFunctionApplyVariable(VariableTracker):
    """``Fn.apply``: a call records one ``autograd_function_apply`` node."""

    cls: type

    def python_type(self) -> type:
        return type(self.cls.apply)

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:

        name = self.cls.__qualname__
        if kwargs:
            raise Unsupported("higher_order_call", f"{name}.apply() with keyword arguments")
        cls_source = self.source.base
        methods = {m: _method(tx, self.cls, m, cls_source) for m in ("forward", "backward")}
        setup = None
        if _has_setup_context(self.cls):
            setup = _static_method(
                tx, self.cls.setup_context, AttrSource(cls_source, "setup_context")
            )
        return _apply(tx, self.cls, methods["forward"], setup, methods["backward"], args)

    def __repr__(self) -> str:
        return f"AutogradFunctionApplyVariable({self.cls.__qualname__})"


@dataclasses.dataclass(frozen=True)
class _Trace:
    """What tracing the forward found out, for wiring the op afterwards."""

    ctx: CtxVariable
    outputs: tuple[TensorVariable, ...]
    backward: Body
    grads: tuple[VariableTracker, ...]  # what backward returned, one per input
    dropped: frozenset[int]  # outputs assumed never used (materialize_grads.py)


def _apply(
    tx: Tx, cls: type, forward: VariableTracker, setup: VariableTracker | None,
    backward: VariableTracker, args: list[VariableTracker],
) -> VariableTracker:
    name = cls.__qualname__
    tensors = [a for a in args if isinstance(a, TensorVariable)]
    if records_nothing(tx, args):
        return apply_inline(tx, cls, forward, setup, args)
    needs_grad = tuple(isinstance(a, TensorVariable) and a.example.requires_grad for a in args)
    nested = tx.output.tracer.parent is not None
    found: list[_Trace] = []

    def run_forward(body_inputs: list[VariableTracker]) -> VariableTracker:
        given = iter(body_inputs)
        call_args = [next(given) if isinstance(a, TensorVariable) else a for a in args]
        ctx = CtxVariable(cls, needs_grad,
                          mutation_type=tx.output.side_effects.new_mutation(AttributeMutationNew))
        with torch.no_grad():
            if setup is None:
                result = forward.call_function(tx, [ctx, *call_args], {})
            else:
                result = forward.call_function(tx, call_args, {})
                setup.call_function(tx, [ctx, TupleVariable(tuple(call_args)), result], {})
            items = _forward_outputs(tx, result, name)
            outputs = [i for i in items if isinstance(i, TensorVariable)]
            none, dropped = set(), set()
            if not ctx.materializes_grads(tx):
                none, dropped = none_gradients(
                    tx, outputs, ctx.non_differentiable(tx, tuple(outputs)), name, nested)
            grad_inputs = [(o, input_example(tx.output, o.example)) for o in outputs]
            returned: list[VariableTracker] = []

            def run_backward(grads: list[VariableTracker]) -> VariableTracker:
                given = iter(_none_where(grads, none))
                user_grads = [next(given) if isinstance(i, TensorVariable)
                              else ConstantVariable(None) for i in items]
                token = unknown_layout.set(
                    f"in {name}.backward: its gradients' layout is autograd's at run time"
                )
                try:
                    value = backward.call_function(tx, [ctx, *user_grads], {})
                finally:
                    unknown_layout.reset(token)
                returned.append(value)
                return value

            body = speculate(tx, f"{name}.backward", grad_inputs, run_backward)
        found.append(_Trace(ctx, tuple(outputs), body, _gradients(tx, returned[0], args, name),
                            frozenset(dropped)))
        return result

    fwd = speculate(tx, f"{name}.forward", [(t, input_example(tx.output, t.example))
                                            for t in tensors], run_forward)
    (trace,) = found
    saved = _wire(fwd, trace, args)
    non_differentiable = trace.ctx.non_differentiable(tx, trace.outputs)
    # Inside a body (a torch.func transform's) the inputs' examples may not require grad.
    differentiable = any(t.example.requires_grad for t in tensors)
    requires_grad = [
        differentiable and i not in non_differentiable
        and (o.example.is_floating_point() or o.example.is_complex())
        for i, o in enumerate(trace.outputs)
    ]
    saved_nodes = trace.ctx.saved_nodes(tx)
    from torch._functorch.autograd_function import autograd_function_apply

    graphs = (install(tx, "fwd_body", fwd), install(tx, "bwd_body", trace.backward))
    results = call_op(
        tx, autograd_function_apply,
        (*graphs, *(t.node for t in tensors), *fwd.lifted()),
        {"non_differentiable_idx": sorted(non_differentiable),
         "saved_for_backward_idx": [i for i, n in enumerate(saved) if n in saved_nodes]},
        trace.outputs, requires_grad,
    )
    mark_dropped(tx, results, trace.dropped, name)
    return fwd.rebuild(results)


def _forward_outputs(tx: Tx, result: VariableTracker, name: str) -> list[VariableTracker]:
    """What ``forward`` returned, as a list: one tensor, or a tuple of new tensors and
    constants (ints, bools, None: eager hands their gradient to backward as None)."""
    items = [result] if isinstance(result, TensorVariable) else None
    if isinstance(result, TupleVariable) and result.tuple_type is tuple:
        items = list(result.items_now(tx))
    if not items or not all(isinstance(i, TensorVariable) or _is_constant_output(i)
                            for i in items):
        raise Unsupported("higher_order_call", f"{name}.forward returned {result}: a traced "
                          "forward returns a tensor or a tuple of tensors and constants")
    tracer = tx.output.tracer
    if not all(tracer.owns(i.example) for i in items if isinstance(i, TensorVariable)):
        raise Unsupported("higher_order_call", f"{name}.forward returns one of its inputs (or a "
                          "view of a tensor from outside) instead of a new tensor")
    return items


def _is_constant_output(vt: VariableTracker) -> bool:
    """A non-tensor output the op's result rebuilds as is (``flatten_result``'s)."""
    return isinstance(vt, ConstantVariable) and (vt.value is None or type(vt.value) in (int, bool))


def _none_where(grads: list[VariableTracker], none: set[int]) -> list[VariableTracker]:
    return [ConstantVariable(None) if i in none else g for i, g in enumerate(grads)]


def _gradients(
    tx: Tx, value: VariableTracker, args: list[VariableTracker], name: str
) -> tuple[VariableTracker, ...]:
    """``backward``'s result, one item per argument of ``apply``."""
    items = list(value.items_now(tx)) if isinstance(value, TupleVariable) else [value]
    extra = items[len(args):]
    items = items[:len(args)]
    is_none = [isinstance(i, ConstantVariable) and i.value is None for i in items + extra]
    if len(items) < len(args) or not all(is_none[len(args):]):
        raise Unsupported("higher_order_call", f"{name}.backward returned {len(items + extra)} "
                          f"gradients for {len(args)} inputs")
    for arg, grad, none in zip(args, items, is_none):
        tensor_grad = isinstance(grad, TensorVariable)
        if not (none or tensor_grad) or (tensor_grad and not isinstance(arg, TensorVariable)):
            raise Unsupported("higher_order_call", f"{name}.backward returned {grad} as the "
                              f"gradient of {arg}")
    return tuple(items)


def _wire(fwd: Body, trace: _Trace, args: list[VariableTracker]) -> list[torch.fx.Node]:
    """Rewrite the two graphs' outputs into the op's contract; the forward's saved
    values (its nodes the backward reads), in the backward's placeholder order."""
    bwd = trace.backward
    saved = bwd.lifted()
    fwd_out = next(n for n in fwd.tracer.graph.nodes if n.op == "output")
    fwd_out.args = ((fwd_out.args[0], tuple(saved)),)
    grads = [
        bwd.tracer.lift(g.node) if isinstance(g, TensorVariable) else None
        for a, g in zip(args, trace.grads) if isinstance(a, TensorVariable)
    ]
    grads.extend([None] * len(fwd.lifted()))
    bwd_out = next(n for n in bwd.tracer.graph.nodes if n.op == "output")
    bwd_out.args = (tuple(grads),)
    # Gradients the backward computed but returned for no tensor input are dead code now.
    bwd.tracer.graph.eliminate_dead_code()
    fwd.tracer.graph.lint()
    bwd.tracer.graph.lint()
    return saved


# -- ctx ----------------------------------------------------------------------------------
_METHODS = ("save_for_backward", "mark_non_differentiable", "set_materialize_grads",
            "mark_dirty", "save_for_forward")


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class CtxVariable(VariableTracker):
    """The ``ctx`` of a traced ``forward``/``backward``; its state lives in SideEffects
    (under FunctionCtx's own attribute names: ``to_save``, ``non_differentiable``)."""

    cls: type
    needs_input_grad: tuple[bool, ...]

    def python_type(self) -> type:
        return self.cls._backward_cls

    def _load(self, tx: Tx, name: str) -> Any:
        value = tx.output.side_effects.load_attr(self, name)
        return None if value is DELETED else value

    def var_getattr(self, tx: Tx, name: str) -> VariableTracker:
        if name in _METHODS:
            return BoundMethodVariable(self, name)
        if name == "needs_input_grad":
            return TupleVariable(tuple(ConstantVariable(b) for b in self.needs_input_grad))
        if name in ("saved_tensors", "saved_variables"):
            saved = self._load(tx, "to_save")
            return saved if saved is not None else TupleVariable(())
        value = self._load(tx, name)
        if value is None:
            raise Unsupported("unknown_attribute", f"attribute {name!r} of an autograd.Function "
                              "ctx that the traced forward did not set")
        return value

    def var_setattr(self, tx: Tx, name: str, value: VariableTracker) -> VariableTracker:
        if name in _METHODS or name in ("saved_tensors", "needs_input_grad", "to_save"):
            raise Unsupported("attribute_mutation", f"setting ctx.{name}")
        tx.output.side_effects.store_attr(self, name, value)
        return ConstantVariable(None)

    def call_method(self, tx: Tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if kwargs:
            raise Unsupported("unsupported_method", f"ctx.{name}() with keyword arguments")
        side_effects = tx.output.side_effects
        if name == "save_for_backward":
            if not all(isinstance(a, TensorVariable) or _is_none(a) for a in args):
                raise Unsupported("higher_order_call", "ctx.save_for_backward() of a non-tensor")
            side_effects.store_attr(self, "to_save", TupleVariable(tuple(args)))
        elif name == "mark_non_differentiable":
            if not all(isinstance(a, TensorVariable) for a in args):
                raise Unsupported("higher_order_call", "ctx.mark_non_differentiable() of a "
                                  "non-tensor")
            marked = self._load(tx, "non_differentiable")
            before = () if marked is None else marked.items
            side_effects.store_attr(self, "non_differentiable", TupleVariable(before + tuple(args)))
        elif name == "set_materialize_grads" and len(args) == 1 and args[0].is_python_constant():
            side_effects.store_attr(self, "materialize_grads",
                                    ConstantVariable(bool(args[0].as_python_constant())))
        else:
            raise Unsupported("higher_order_call", f"ctx.{name}() in a traced autograd.Function")
        return ConstantVariable(None)

    def materializes_grads(self, tx: Tx) -> bool:
        flag = self._load(tx, "materialize_grads")
        return True if flag is None else flag.as_python_constant()

    def non_differentiable(self, tx: Tx, outputs: tuple[TensorVariable, ...]) -> set[int]:
        marked = self._load(tx, "non_differentiable")
        nodes = {t.node for t in (marked.items if marked is not None else ())}
        return {i for i, o in enumerate(outputs) if o.node in nodes}

    def saved_nodes(self, tx: Tx) -> set[torch.fx.Node]:
        saved = self._load(tx, "to_save")
        items = saved.items if saved is not None else ()
        return {t.node for t in items if isinstance(t, TensorVariable)}

    def __repr__(self) -> str:
        return f"CtxVariable({self.cls.__qualname__})"


def _is_none(vt: VariableTracker) -> bool:
    return isinstance(vt, ConstantVariable) and vt.value is None
