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
from bytegraph.variables.functional_call import FunctionalCallVariable
from bytegraph.variables.higher_order import (
    Body,
    call_op,
    input_example,
    install,
    refuse_aliasing,
    speculate,
)
from bytegraph.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from bytegraph.translate.translator import InstructionTranslatorBase as Tx


# -- what the graph calls -------------------------------------------------------------------------
def apply_vmap(body: Any, in_dims: tuple, out_dims: Any, randomness: str, chunk_size: Any,
               *args: Any) -> Any:
    return torch.func.vmap(
        body, in_dims=in_dims, out_dims=out_dims, randomness=randomness, chunk_size=chunk_size
    )(*args)


def _first(body: Any) -> Any:
    return lambda *args: body(*args)[0]


def apply_grad(body: Any, argnums: Any, *args: Any) -> tuple:
    grads = torch.func.grad(_first(body), argnums=argnums)(*args)
    return grads if isinstance(grads, tuple) else (grads,)


def apply_grad_and_value(body: Any, argnums: Any, *args: Any) -> tuple:
    grads, value = torch.func.grad_and_value(_first(body), argnums=argnums)(*args)
    return (*(grads if isinstance(grads, tuple) else (grads,)), value)


def apply_jacrev(body: Any, argnums: int, *args: Any) -> tuple:
    return (torch.func.jacrev(_first(body), argnums=argnums)(*args),)


def apply_jacfwd(body: Any, argnums: int, *args: Any) -> tuple:
    return (torch.func.jacfwd(_first(body), argnums=argnums)(*args),)


def apply_body(body: Any, *args: Any) -> tuple:
    return body(*args)


def apply_vjp(body: Any, n_primals: int, n_free: int, *args: Any) -> tuple:
    primals, free = args[:n_primals], args[n_primals:n_primals + n_free]
    cotangents = args[n_primals + n_free:]
    _, vjp_fn = torch.func.vjp(lambda *p: body(*p, *free), *primals)
    return vjp_fn(cotangents)


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
        if kwargs or not all(isinstance(a, TensorVariable) for a in args):
            raise Unsupported(
                "higher_order_call",
                f"{self.transform.__name__}(fn)(...) with arguments other than positional "
                "tensors",
            )
        options = dict(self.options)
        if self.transform is torch.func.vmap:
            return _vmap(tx, self.fn, args, options)
        return _differentiate(tx, self.transform, self.fn, args, options)


_POSITIONAL: dict[Any, tuple[str, ...]] = {
    torch.func.vmap: ("in_dims", "out_dims", "randomness"),
    torch.func.grad: ("argnums", "has_aux"),
    torch.func.grad_and_value: ("argnums", "has_aux"),
    torch.func.jacrev: ("argnums", "has_aux"),
    torch.func.jacfwd: ("argnums", "has_aux"),
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

        if any(k != "has_aux" for k in kwargs) or (
            "has_aux" in kwargs and kwargs["has_aux"].as_python_constant()
        ):
            raise Unsupported("higher_order_call", "torch.func.vjp with has_aux or options")
        if len(args) < 2 or not all(isinstance(a, TensorVariable) for a in args[1:]):
            raise Unsupported("higher_order_call", "torch.func.vjp(fn, *primals) with primals "
                              "other than positional tensors")
        fn, primals = args[0], list(args[1:])
        examples = [input_example(tx.output, a.example) for a in primals]
        body = _trace(tx, "torch.func.vjp", fn, primals, examples)
        graph = install(tx, "vjp_body", body)
        outputs = call_op(tx, apply_body, (graph, *(a.node for a in primals), *body.lifted()),
                          {}, body.outputs)
        return TupleVariable((body.rebuild(outputs), VjpFunctionVariable(body, tuple(primals))))


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class VjpFunctionVariable(VariableTracker):
    """The ``vjp_fn`` that ``torch.func.vjp`` returned: ``vjp_fn(cotangents)``."""

    body: Body
    primals: tuple[TensorVariable, ...]

    def python_type(self) -> type:
        return type(lambda: None)

    def call_function(self, tx: Tx, args: list, kwargs: dict) -> VariableTracker:
        from bytegraph.variables.containers import BaseSequenceVariable, TupleVariable

        if kwargs or len(args) != 1:
            raise Unsupported("higher_order_call", "vjp_fn() takes one argument, the cotangents")
        (given,) = args
        cotangents = (list(given.items_now(tx)) if isinstance(given, BaseSequenceVariable)
                      else [given])
        outputs = self.body.outputs
        if len(cotangents) != len(outputs) or not all(
            isinstance(c, TensorVariable) for c in cotangents
        ):
            raise Unsupported("higher_order_call", "vjp_fn() with cotangents unlike the outputs")
        free = self.body.lifted()
        graph = install(tx, "vjp_body", self.body)
        grad = any(t.example.requires_grad for t in (*cotangents, *outputs))
        like = [_Shaped(tx, tuple(p.example.shape), p, grad) for p in self.primals]
        results = call_op(
            tx, apply_vjp,
            (graph, len(self.primals), len(free), *(p.node for p in self.primals), *free,
             *(c.node for c in cotangents)), {}, like,
        )
        return TupleVariable(tuple(results))


REGISTRY[id(torch.func.vjp)] = VjpVariable


def _trace(tx: Tx, what: str, fn: VariableTracker, args: list, examples: list) -> Body:
    body = speculate(tx, what, list(zip(args, examples)),
                     lambda body_args: fn.call_function(tx, body_args, {}))
    refuse_aliasing(body, what)
    return body


# -- vmap -----------------------------------------------------------------------------------------
def _vmap(tx: Tx, fn: VariableTracker, args: list, options: dict) -> VariableTracker:
    in_dims = options.pop("in_dims", 0)
    out_dims = options.pop("out_dims", 0)
    randomness = options.pop("randomness", "error")
    chunk_size = options.pop("chunk_size", None)
    if options:
        raise Unsupported("higher_order_call", f"vmap options {sorted(options)}")
    dims = tuple(in_dims) if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
    if len(dims) != len(args) or not all(d is None or isinstance(d, int) for d in dims):
        raise Unsupported("higher_order_call", f"vmap in_dims {in_dims!r} for {len(args)} tensors")
    sizes = {a.example.shape[d] for a, d in zip(args, dims) if d is not None}
    if len(sizes) != 1:
        raise Unsupported("higher_order_call", "vmap: no batched input, or batch sizes differ")
    examples = [
        input_example(tx.output, a.example if d is None else a.example.select(d, 0))
        for a, d in zip(args, dims)
    ]
    body = _trace(tx, "torch.func.vmap", fn, args, examples)
    outs = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(body.outputs)
    if len(outs) != len(body.outputs) or not all(isinstance(d, int) for d in outs):
        raise Unsupported("higher_order_call", f"vmap out_dims {out_dims!r}")
    free = body.lifted()
    graph = install(tx, "vmap_body", body)
    full_dims = dims + (None,) * len(free)
    (size,) = sizes
    like = [_Batched(t, d, size, tx) for t, d in zip(body.outputs, outs)]
    outputs = call_op(
        tx, apply_vmap,
        (graph, full_dims, outs, randomness, chunk_size, *(a.node for a in args), *free), {},
        like,
    )
    return body.rebuild(outputs)


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
    tx: Tx, transform: Any, fn: VariableTracker, args: list, options: dict
) -> VariableTracker:
    from bytegraph.variables.containers import TupleVariable

    name = transform.__name__
    argnums = options.pop("argnums", 0)
    if options.pop("has_aux", False) or options:
        raise Unsupported("higher_order_call", f"torch.func.{name} with has_aux or other options")
    numbers = argnums if isinstance(argnums, tuple) else (argnums,)
    if transform in (torch.func.jacrev, torch.func.jacfwd) and isinstance(argnums, tuple):
        raise Unsupported("higher_order_call", f"torch.func.{name} with a tuple of argnums")
    if not all(isinstance(n, int) and 0 <= n < len(args) for n in numbers):
        raise Unsupported("higher_order_call", f"torch.func.{name} argnums {argnums!r}")
    examples = [input_example(tx.output, a.example) for a in args]
    body = _trace(tx, f"torch.func.{name}", fn, args, examples)
    if len(body.outputs) != 1:
        raise Unsupported("higher_order_call", f"torch.func.{name} of a function not returning "
                          "one tensor")
    (out,) = body.outputs
    grad = out.example.requires_grad
    if transform in (torch.func.jacrev, torch.func.jacfwd):
        like = [_Shaped(tx, tuple(out.example.shape) + tuple(args[numbers[0]].example.shape),
                        args[numbers[0]], grad)]
    else:
        like = [_Shaped(tx, tuple(args[n].example.shape), args[n], grad) for n in numbers]
        if transform is torch.func.grad_and_value:
            like.append(_Shaped(tx, tuple(out.example.shape), out, grad))
    graph = install(tx, f"{name}_body", body)
    outputs = call_op(
        tx, _WRAPPERS[transform],
        (graph, argnums, *(a.node for a in args), *body.lifted()), {}, like,
    )
    results: list[VariableTracker] = list(outputs)
    if transform is torch.func.grad_and_value:
        value = results.pop()
        grads = results[0] if not isinstance(argnums, tuple) else TupleVariable(tuple(results))
        return TupleVariable((grads, value))
    if isinstance(argnums, tuple):
        return TupleVariable(tuple(results))
    return results[0]


class _Shaped:
    """An output of a given shape, dtype and device (what ``call_op`` copies)."""

    def __init__(self, tx: Tx, shape: tuple, like: TensorVariable, requires_grad: bool) -> None:
        self.example = like.example.detach().new_empty(shape)
        if requires_grad:
            self.example.requires_grad_()
        self.device = like.device
