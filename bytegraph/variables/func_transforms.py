"""torch.func transforms: vmap, grad, grad_and_value, jacrev, jacfwd, vjp.

``torch.func.vmap(f, in_dims=...)`` returns a function; calling it traces
``f``'s body into a subgraph (``higher_order.speculate``) on examples shaped
as one item of the batch, and records one node calling a small wrapper of
this module, ``apply_vmap(body, in_dims, out_dims, ...)``, which applies the
real transform to the body's GraphModule. The free variables of the body
are extra arguments (``in_dims`` None; never differentiated). AOTAutograd
and Inductor trace the wrapper like any torch.func call, so the transform
runs compiled, backward included; its metadata is worked out from the
body's outputs (a batch dimension added, the shape of the argument a
gradient is of). ``vjp`` records the body's call for its outputs, and each call of
the ``vjp_fn`` it returns records ``apply_vjp``, which runs the body again under
``torch.func.vjp`` (a second forward, traded for a graph with no state
carried between the two nodes). ``functional_call`` is in
``functional_call.py``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch
import torch.func

from bytegraph.exc import Unsupported
from bytegraph.variables.base import PythonValueVariable, VariableTracker
from bytegraph.variables.constant import ConstantVariable
from bytegraph.variables.functional_call import FunctionalCallVariable
from bytegraph.variables.higher_order import (
    Body,
    call_op,
    input_example,
    install,
    refuse_aliasing,
    speculate,
)
from bytegraph.variables.tensor import TensorVariable, tensor_op
from bytegraph.variables.transform_arguments import (
    TransformCall,
    has_constants,
    leaf_dims,
    leaf_indices,
)

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


# -- what the graph calls -------------------------------------------------------------------------
def apply_vmap(body: Any, in_dims: tuple, out_dims: Any, randomness: str, chunk_size: Any,
               *args: Any) -> Any:
    return torch.func.vmap(
        body, in_dims=in_dims, out_dims=out_dims, randomness=randomness, chunk_size=chunk_size
    )(*args)


def _transformed(transform: Any, body: Any, argnums: tuple, has_aux: bool, args: tuple) -> Any:
    """``transform`` applied to the body's first output (the rest of its outputs are
    the aux with ``has_aux``), called on ``args``."""
    if has_aux:
        def function(*inputs: Any) -> Any:
            out = body(*inputs)
            return out[0], tuple(out[1:])
        return transform(function, argnums=argnums, has_aux=True)(*args)
    return transform(lambda *inputs: body(*inputs)[0], argnums=argnums)(*args)


def _flat(result: Any, has_aux: bool) -> tuple:
    """A transform's per-argument results, then its aux outputs, as one tuple."""
    results, aux = result if has_aux else (result, ())
    return (*results, *aux)


def apply_grad(body: Any, argnums: tuple, has_aux: bool, *args: Any) -> tuple:
    return _flat(_transformed(torch.func.grad, body, argnums, has_aux, args), has_aux)


def apply_grad_and_value(body: Any, argnums: tuple, has_aux: bool, *args: Any) -> tuple:
    grads, value = _transformed(torch.func.grad_and_value, body, argnums, has_aux, args)
    value, aux = value if has_aux else (value, ())
    return (*grads, value, *aux)


def apply_jacrev(body: Any, argnums: tuple, has_aux: bool, *args: Any) -> tuple:
    return _flat(_transformed(torch.func.jacrev, body, argnums, has_aux, args), has_aux)


def apply_jacfwd(body: Any, argnums: tuple, has_aux: bool, *args: Any) -> tuple:
    return _flat(_transformed(torch.func.jacfwd, body, argnums, has_aux, args), has_aux)


def apply_jvp(body: Any, n_primals: int, has_aux: bool, n_aux: int, *args: Any) -> tuple:
    """``torch.func.jvp`` of the body, whose last ``n_aux`` outputs are the aux."""
    primals, tangents = args[:n_primals], args[n_primals:2 * n_primals]
    free = args[2 * n_primals:]

    def function(*inputs: Any) -> Any:
        out = tuple(body(*inputs, *free))
        main = out[:len(out) - n_aux]
        return (main, out[len(out) - n_aux:]) if has_aux else main

    result = torch.func.jvp(function, primals, tangents, has_aux=has_aux)
    return (*result[0], *result[1], *(result[2] if has_aux else ()))


def apply_body(body: Any, *args: Any) -> tuple:
    return body(*args)


def apply_vjp(body: Any, n_primals: int, n_free: int, *args: Any) -> tuple:
    primals, free = args[:n_primals], args[n_primals:n_primals + n_free]
    cotangents = args[n_primals + n_free:]
    _, vjp_fn = torch.func.vjp(lambda *p: body(*p, *free), *primals)
    return vjp_fn(cotangents)


def apply_vjp_with_aux(body: Any, n_out: int, n_primals: int, n_free: int, *args: Any) -> tuple:
    """``apply_vjp`` of a body whose outputs after the first ``n_out`` are has_aux's aux."""
    return apply_vjp(lambda *a: tuple(body(*a))[:n_out], n_primals, n_free, *args)


# -- the transforms as values ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class FuncTransformVariable(PythonValueVariable):
    """``torch.func.vmap`` and friends: calling one makes a TransformedFunctionVariable."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        if not args:
            raise Unsupported("higher_order_call", f"{self.value.__name__}() without a function")
        options = {k: v.as_python_constant() for k, v in kwargs.items()}
        extra = list(args[1:])
        names = _POSITIONAL[self.value]
        if len(extra) > len(names):
            raise Unsupported("higher_order_call", f"{self.value.__name__}() arguments {args}")
        options.update({n: a.as_python_constant() for n, a in zip(names, extra)})
        if self.value is torch.func.hessian:  # hessian(f) is jacfwd(jacrev(f)), as in torch
            by_argnums = (("argnums", options.pop("argnums", 0)),)
            if options:
                raise Unsupported("higher_order_call", f"torch.func.hessian options {options}")
            inner = TransformedFunctionVariable(torch.func.jacrev, args[0], by_argnums)
            return TransformedFunctionVariable(torch.func.jacfwd, inner, by_argnums)
        return TransformedFunctionVariable(self.value, args[0], tuple(sorted(options.items())))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class TransformedFunctionVariable(VariableTracker):
    """``torch.func.vmap(fn, ...)``: a call traces ``fn`` and records the transform."""

    transform: Any
    fn: VariableTracker
    options: tuple[tuple[str, Any], ...]

    def python_type(self) -> type:
        return type(lambda: None)

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        name = f"torch.func.{self.transform.__name__}"
        call = TransformCall.of(tx, name, args, kwargs)
        options = dict(self.options)
        if self.transform is torch.func.vmap:
            return _vmap(tx, self.fn, call, options)
        return _differentiate(tx, self.transform, self.fn, call, options)


_POSITIONAL: dict[Any, tuple[str, ...]] = {
    torch.func.vmap: ("in_dims", "out_dims", "randomness"),
    torch.func.grad: ("argnums", "has_aux"),
    torch.func.grad_and_value: ("argnums", "has_aux"),
    torch.func.jacrev: ("argnums", "has_aux"),
    torch.func.jacfwd: ("argnums", "has_aux"),
    torch.func.hessian: ("argnums",),
}
REGISTRY: dict[int, type[VariableTracker]] = {
    id(fn): FuncTransformVariable for fn in _POSITIONAL
}
REGISTRY[id(torch.func.functional_call)] = FunctionalCallVariable


# -- vjp ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class VjpVariable(PythonValueVariable):
    """``torch.func.vjp(fn, *primals)``: the body's outputs from one node calling it, and
    a VjpFunctionVariable that records the vector-Jacobian product when called (the
    body runs again there, under torch.func.vjp)."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.containers import TupleVariable

        if any(k != "has_aux" for k in kwargs):
            raise Unsupported("higher_order_call", "torch.func.vjp with options")
        has_aux = "has_aux" in kwargs and kwargs["has_aux"].as_python_constant()
        if len(args) < 2 or not all(isinstance(a, TensorVariable) for a in args[1:]):
            raise Unsupported("higher_order_call", "torch.func.vjp(fn, *primals) with primals "
                              "other than positional tensors")
        fn, primals = args[0], list(args[1:])
        call = TransformCall.of(tx, "torch.func.vjp", primals, {})
        n_out: list[int] = []
        if has_aux:
            fn = _AuxSplit(fn, n_out)
        body = _trace(tx, "torch.func.vjp", fn, call)
        graph = install(tx, "vjp_body", body)
        outputs = call_op(tx, apply_body, (graph, *(a.node for a in primals), *body.lifted()),
                          {}, body.outputs)
        result = body.rebuild(outputs)
        vjp_fn = VjpFunctionVariable(body, tuple(primals), n_out[0] if n_out else None)
        if not has_aux:
            return TupleVariable((result, vjp_fn))
        out, aux = result.items_now(tx)
        return TupleVariable((out, vjp_fn, aux))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class _AuxSplit(VariableTracker):
    """``fn`` of ``vjp(fn, ..., has_aux=True)``: its result must be ``(output, aux)``;
    notes how many tensor leaves ``output`` has (the ones differentiated)."""

    fn: VariableTracker
    n_out: list

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.containers import BaseSequenceVariable
        from bytegraph.variables.higher_order import flatten_result

        result = self.fn.call_function(tx, args, kwargs)
        items = result.items_now(tx) if isinstance(result, BaseSequenceVariable) else ()
        if len(items) != 2:
            raise Unsupported("higher_order_call", "torch.func.vjp with has_aux=True of a "
                              f"function not returning (output, aux): {result}")
        leaves: list[TensorVariable] = []
        flatten_result(tx, items[0], leaves, "torch.func.vjp")
        self.n_out[:] = [len(leaves)]
        return result


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class VjpFunctionVariable(VariableTracker):
    """The ``vjp_fn`` that ``torch.func.vjp`` returned: ``vjp_fn(cotangents)``."""

    body: Body
    primals: tuple[TensorVariable, ...]
    n_out: int | None = None  # with has_aux: the body's outputs before aux's

    def python_type(self) -> type:
        return type(lambda: None)

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.containers import BaseSequenceVariable, TupleVariable

        if kwargs or len(args) != 1:
            raise Unsupported("higher_order_call", "vjp_fn() takes one argument, the cotangents")
        (given,) = args
        cotangents = (list(given.items_now(tx)) if isinstance(given, BaseSequenceVariable)
                      else [given])
        outputs = self.body.outputs[:self.n_out]
        if len(cotangents) != len(outputs) or not all(
            isinstance(c, TensorVariable) for c in cotangents
        ):
            raise Unsupported("higher_order_call", "vjp_fn() with cotangents unlike the outputs")
        free = self.body.lifted()
        graph = install(tx, "vjp_body", self.body)
        grad = any(t.example.requires_grad for t in (*cotangents, *outputs))
        like = [_Shaped(tx, tuple(p.example.shape), p, grad) for p in self.primals]
        target, head = (apply_vjp, ()) if self.n_out is None else (
            apply_vjp_with_aux, (self.n_out,))
        results = call_op(
            tx, target,
            (graph, *head, len(self.primals), len(free), *(p.node for p in self.primals), *free,
             *(c.node for c in cotangents)), {}, like,
        )
        return TupleVariable(tuple(results))


REGISTRY[id(torch.func.vjp)] = VjpVariable


# -- jvp ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class JvpVariable(PythonValueVariable):
    """``torch.func.jvp(fn, primals, tangents)``: one node computing the body's outputs
    and their tangents (and its aux, with ``has_aux``)."""

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.containers import BaseSequenceVariable, TupleVariable

        what = "torch.func.jvp"
        bound = dict(zip(("func", "primals", "tangents"), args), **kwargs)
        options = {k: bound.pop(k).as_python_constant() for k in ("strict", "has_aux")
                   if k in bound}
        if len(args) > 3 or set(bound) != {"func", "primals", "tangents"} or options.get(
            "strict"
        ) or not all(isinstance(bound[k], BaseSequenceVariable) for k in ("primals", "tangents")):
            raise Unsupported("higher_order_call", f"{what} with arguments {sorted(bound)}, "
                              f"{options}")
        has_aux = bool(options.get("has_aux", False))
        primals = TransformCall.of(tx, what, bound["primals"].items_now(tx), {})
        tangents = TransformCall.of(tx, what, bound["tangents"].items_now(tx), {})
        if primals.skeleton != tangents.skeleton or has_constants(primals.skeleton):
            raise Unsupported("higher_order_call",
                              f"{what} with tangents unlike the primals, or non-tensors")
        body = _trace(tx, what, bound["func"], primals)
        structure = body.structure
        if has_aux and not (structure[0] is tuple and len(structure[1]) == 2):
            raise Unsupported("higher_order_call", f"{what} has_aux of a function not "
                              "returning a pair")
        n_aux = _tensor_count(structure[1][1]) if has_aux else 0
        n_main = len(body.outputs) - n_aux
        main, aux = body.outputs[:n_main], body.outputs[n_main:]
        grad = any(t.example.requires_grad for t in (*primals.leaves, *tangents.leaves))
        like = [*main, *(_Shaped(tx, tuple(t.example.shape), t, grad) for t in main), *aux]
        graph = install(tx, "jvp_body", body)
        outputs = call_op(
            tx, apply_jvp,
            (graph, len(primals.leaves), has_aux, n_aux, *(a.node for a in primals.leaves),
             *(a.node for a in tangents.leaves), *body.lifted()), {}, like,
        )
        values, derivatives, rest = (outputs[:n_main], outputs[n_main:2 * n_main],
                                     outputs[2 * n_main:])
        if not has_aux:
            return TupleVariable((body.rebuild(values), body.rebuild(derivatives)))
        pair, tangent_pair = body.rebuild([*values, *rest]), body.rebuild([*derivatives, *rest])
        return TupleVariable((pair.items[0], tangent_pair.items[0], pair.items[1]))


def _tensor_count(structure: tuple) -> int:
    if structure[0] in ("tensor", "constant"):
        return int(structure[0] == "tensor")
    parts = [part for _, part in structure[1]] if structure[0] == "dict" else structure[1]
    return sum(_tensor_count(part) for part in parts)


REGISTRY[id(torch.func.jvp)] = JvpVariable


def _trace(tx: Tx, what: str, fn: VariableTracker, call: TransformCall) -> Body:
    return _trace_on(tx, what, fn, call,
                     [input_example(tx.output, a.example) for a in call.leaves])


def _trace_on(tx: Tx, what: str, fn: VariableTracker, call: TransformCall,
              examples: list, returned_inputs: list[int | None] | None = None) -> Body:
    """The body traced on ``examples``. With ``returned_inputs``, an output that is one of
    the body's inputs itself is allowed, and the list gets, per output, that input's
    leaf number (None for the others)."""
    inputs: list[VariableTracker] = []

    def traced(leaves: list[VariableTracker]) -> VariableTracker:
        inputs.extend(leaves)
        return fn.call_function(tx, *call.variables_of(leaves))

    body = speculate(tx, what, list(zip(call.leaves, examples)), traced)
    if returned_inputs is None:
        refuse_aliasing(body, what)
        return body
    number = {id(v): i for i, v in enumerate(inputs)}
    returned_inputs.extend(number.get(id(t)) for t in body.outputs)
    refuse_aliasing(body, what, frozenset(k for k, i in enumerate(returned_inputs)
                                          if i is not None))
    return body


# -- vmap -----------------------------------------------------------------------------------------
def _vmap(tx: Tx, fn: VariableTracker, call: TransformCall, options: dict) -> VariableTracker:
    in_dims = options.pop("in_dims", 0)
    out_dims = options.pop("out_dims", 0)
    randomness = options.pop("randomness", "error")
    chunk_size = options.pop("chunk_size", None)
    if options or isinstance(in_dims, list):  # torch takes a tuple; it raises for the rest
        raise Unsupported("higher_order_call", f"vmap options {sorted(options)}, {in_dims!r}")
    dims = leaf_dims(call, in_dims)
    batched = [(a, d) for a, d in zip(call.leaves, dims) if d is not None]
    if not all(-a.example.dim() <= d < a.example.dim() for a, d in batched):
        raise Unsupported("higher_order_call", f"vmap in_dims {in_dims!r} out of range")
    sizes = {a.example.shape[d] for a, d in batched}
    if len(sizes) != 1:
        raise Unsupported("higher_order_call", "vmap: no batched input, or batch sizes differ")
    examples = [
        input_example(tx.output, a.example if d is None else a.example.select(d, 0))
        for a, d in zip(call.leaves, dims)
    ]
    returned: list[int | None] = []
    body = _trace_on(tx, "torch.func.vmap", fn, call, examples, returned)
    outs = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(body.outputs)
    if len(outs) != len(body.outputs) or not all(isinstance(d, int) for d in outs):
        raise Unsupported("higher_order_call", f"vmap out_dims {out_dims!r}")
    if any(i is not None and dims[i] is None for i in returned):
        raise Unsupported("higher_order_call", "vmap of a function returning an unbatched "
                          "input (eager expands it)")
    free = body.lifted()
    graph = install(tx, "vmap_body", body)
    full_dims = tuple(dims) + (None,) * len(free)
    (size,) = sizes
    like = [_Batched(t, d, size, tx) for t, d in zip(body.outputs, outs)]
    outputs = call_op(
        tx, apply_vmap,
        (graph, full_dims, outs, randomness, chunk_size, *(a.node for a in call.leaves), *free),
        {}, like,
    )
    results: list[VariableTracker] = list(outputs)
    for k, i in enumerate(returned):
        if i is not None:  # eager hands back the input itself, its batch dimension moved
            results[k] = _moved(tx, call.leaves[i], dims[i], outs[k])
    return body.rebuild(results)


def _moved(tx: Tx, t: TensorVariable, source: int, destination: int) -> VariableTracker:
    """``t`` with dimension ``source`` at ``destination``: ``t`` itself where that is
    where it is (as vmap returns it), else ``torch.movedim``'s view."""
    rank = t.example.dim()
    if source % rank == destination % rank:
        return t
    return tensor_op(tx, "call_function", torch.movedim,
                     [t, ConstantVariable(source), ConstantVariable(destination)], {})


class _Batched:
    """A body output with the batch dimension put back (what ``call_op`` copies)."""

    def __init__(self, t: TensorVariable, dim: int, size: Any, tx: Tx) -> None:
        shape = list(t.example.shape)
        shape.insert(dim if dim >= 0 else len(shape) + 1 + dim, size)
        self.example = t.example.detach().new_empty(shape)
        if t.example.requires_grad:
            self.example.requires_grad_()
        self.device = t.device


# -- grad, grad_and_value, jacrev, jacfwd ---------------------------------------------------------
_WRAPPERS = {
    torch.func.grad: apply_grad, torch.func.grad_and_value: apply_grad_and_value,
    torch.func.jacrev: apply_jacrev, torch.func.jacfwd: apply_jacfwd,
}


def _differentiate(
    tx: Tx, transform: Any, fn: VariableTracker, call: TransformCall, options: dict
) -> VariableTracker:
    from bytegraph.variables.containers import TupleVariable

    name = f"torch.func.{transform.__name__}"
    argnums = options.pop("argnums", 0)
    has_aux = bool(options.pop("has_aux", False))
    if options:
        raise Unsupported("higher_order_call", f"{name} options {sorted(options)}")
    numbers = _argument_numbers(name, argnums, call)
    wrt = [i for n in numbers for i in leaf_indices(call.argument(n))]
    body = _trace(tx, name, fn, call)
    _check_scalar_output(body, has_aux, name)
    out, aux = body.outputs[0], body.outputs[1:]
    grad = out.example.requires_grad
    jacobian = transform in (torch.func.jacrev, torch.func.jacfwd)
    like = [
        _Shaped(tx, (*out.example.shape, *call.leaves[i].example.shape) if jacobian
                else tuple(call.leaves[i].example.shape), call.leaves[i], grad)
        for i in wrt
    ]
    if transform is torch.func.grad_and_value:
        like.append(_Shaped(tx, tuple(out.example.shape), out, grad))
    like.extend(_Shaped(tx, tuple(t.example.shape), t, t.example.requires_grad) for t in aux)
    graph = install(tx, f"{transform.__name__}_body", body)
    outputs = call_op(
        tx, _WRAPPERS[transform],
        (graph, tuple(wrt), has_aux, *(a.node for a in call.leaves), *body.lifted()), {}, like,
    )
    by_leaf = dict(zip(wrt, outputs))
    per_argument = [call.rebuild_argument(n, by_leaf) for n in numbers]
    result = per_argument[0] if not isinstance(argnums, tuple) else TupleVariable(
        tuple(per_argument))
    rest = list(outputs[len(wrt):])
    value = rest.pop(0) if transform is torch.func.grad_and_value else None
    if has_aux:
        aux_value = body.rebuild([ConstantVariable(None), *rest]).items[1]
        second = aux_value if value is None else TupleVariable((value, aux_value))
        return TupleVariable((result, second))
    return result if value is None else TupleVariable((result, value))


def _argument_numbers(name: str, argnums: Any, call: TransformCall) -> tuple[int, ...]:
    """The positional arguments ``argnums`` names, each a tensor or a pytree of tensors."""
    n = call.n_positional
    numbers = argnums if isinstance(argnums, tuple) else (argnums,)
    if not numbers or not all(type(i) is int and -n <= i < n for i in numbers):
        raise Unsupported("higher_order_call", f"{name} argnums {argnums!r} for {n} arguments")
    numbers = tuple(i % n for i in numbers)
    for i in numbers:
        if has_constants(call.argument(i)) or not leaf_indices(call.argument(i)):
            raise Unsupported("higher_order_call",
                              f"{name} differentiating an argument that holds non-tensors")
    return numbers


def _check_scalar_output(body: Body, has_aux: bool, name: str) -> None:
    """The body returns one tensor, or with ``has_aux`` a pair (tensor, aux)."""
    main = body.structure
    if has_aux:
        pair = main[0] is tuple and len(main[1]) == 2
        main = main[1][0] if pair else None
    if main is None or main[0] != "tensor":
        raise Unsupported(
            "higher_order_call",
            f"{name} of a function not returning " + ("a pair (tensor, aux)" if has_aux
                                                       else "one tensor"),
        )


class _Shaped:
    """An output of a given shape, dtype and device (what ``call_op`` copies)."""

    def __init__(self, tx: Tx, shape: tuple, like: TensorVariable, requires_grad: bool) -> None:
        self.example = like.example.detach().new_empty(shape)
        if requires_grad:
            self.example.requires_grad_()
        self.device = like.device
