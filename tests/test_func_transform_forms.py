"""torch.func transforms in the forms users write: options, keyword and pytree
arguments and results, aux outputs, jvp and hessian, transforms composed.

Each program is compiled whole (``fullgraph=True``: one graph) and compared with
eager: outputs, and the gradients of its inputs and of ``W``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.func import functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vmap

import bytegraph
from tests.test_higher_order import check, refused

W = torch.randn(4, requires_grad=True)


def grad_has_aux(x):
    g, aux = grad(lambda a: ((a.sin() * W).sum(), {"cos": a.cos(), "pair": (a * 2, a + 1)}),
                  has_aux=True)(x)
    return g, aux


def grad_and_value_has_aux(x):
    g, (value, aux) = grad_and_value(lambda a: ((a * W).sum(), [a.exp()]), has_aux=True)(x)
    return g, value, aux


def grad_keyword_arguments(x):
    return grad(lambda a, scale=1.0, shift=None: (a * scale + shift).sum())(
        x, scale=3.0, shift=W)


def grad_of_a_dict(x):
    grads = grad(lambda d, k: (d["a"] * d["b"] * k).sum())({"a": x, "b": x.cos()}, W)
    return grads["a"], grads["b"]


def grad_argnums_pytrees(x):
    ga, gb = grad(lambda p, q: (p[0] * p[1] * q["w"]).sum(), argnums=(0, 1))(
        (x, x * 2), {"w": W})
    return ga, gb


def grad_negative_argnums(x):
    return grad(lambda a, b: (a * b).sum(), argnums=-1)(W, x)


def jacrev_tuple_argnums_with_aux(x):
    (ja, jb), aux = jacrev(lambda a, b: (a.sin() * b, a.sum()), argnums=(0, 1), has_aux=True)(
        x, W)
    return ja, jb, aux


def jacfwd_of_a_pytree(x):
    return jacfwd(lambda d: d["a"].sin() * W)({"a": x})["a"]


def hessian_of(x):
    return hessian(lambda a: (a.sin() * W).sum())(x)


def jvp_of(x):
    out, tangent = jvp(lambda a, b: (a.sin() * b, a * W), (x, x * 2), (torch.ones_like(x), x))
    return out, tangent


def jvp_has_aux(x):
    out, tangent, aux = jvp(lambda a: (a.sin() * W, {"c": a.cos()}), (x,), (x,), has_aux=True)
    return out, tangent, aux


def jvp_of_jvp(x):
    return jvp(lambda a: jvp(torch.sin, (a,), (a,))[1], (x,), (x,))


def vmap_keyword_arguments(x):
    return vmap(lambda a, scale=1.0: a * scale + W)(x, scale=2.0)


def vmap_of_a_dict(x):
    return vmap(lambda d: {"sum": d["a"] + d["b"], "w": d["a"] * W})({"a": x, "b": x.exp()})


def vmap_nested_in_dims(x):
    return vmap(lambda pair, t: pair[0] * pair[1] + t, in_dims=((0, None), 1))(
        (x, W), x.t().contiguous())


def vmap_in_dims_dict(x):
    return vmap(lambda d: d["a"] * d["w"], in_dims=({"a": 0, "w": None},))({"a": x, "w": W})


def vmap_of_grad_with_aux(x):
    return vmap(grad(lambda a: ((a * W).sum(), a.cos()), has_aux=True))(x)


MLP = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
TARGETS = torch.randn(5, 2)


def per_sample_grads(x):
    params = {k: v.detach() for k, v in MLP.named_parameters()}

    def loss(p, sample, target):
        out = functional_call(MLP, p, (sample.unsqueeze(0),))
        return torch.nn.functional.mse_loss(out, target.unsqueeze(0))

    return vmap(grad(loss), in_dims=(None, 0, 0))(params, x, TARGETS)


def batched(shape: tuple) -> Callable[[], torch.Tensor]:
    return lambda: torch.randn(*shape)


PROGRAMS = [
    (grad_has_aux, batched((4,))),
    (grad_and_value_has_aux, batched((4,))),
    (grad_keyword_arguments, batched((4,))),
    (grad_of_a_dict, batched((4,))),
    (grad_argnums_pytrees, batched((4,))),
    (grad_negative_argnums, batched((4,))),
    (jacrev_tuple_argnums_with_aux, batched((4,))),
    (jacfwd_of_a_pytree, batched((4,))),
    (hessian_of, batched((4,))),
    (jvp_of, batched((4,))),
    (jvp_has_aux, batched((4,))),
    (jvp_of_jvp, batched((4,))),
    (vmap_keyword_arguments, batched((3, 4))),
    (vmap_of_a_dict, batched((3, 4))),
    (vmap_nested_in_dims, batched((4, 4))),
    (vmap_in_dims_dict, batched((3, 4))),
    (vmap_of_grad_with_aux, batched((3, 4))),
    (per_sample_grads, batched((5, 4))),
]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize(("fn", "make"), PROGRAMS, ids=[f.__name__ for f, _ in PROGRAMS])
def test_transform_form_is_one_graph(backend: str, fn: Callable, make: Callable) -> None:
    torch.manual_seed(0)
    check(fn, (make().requires_grad_(),), backend, params=(W,))


@pytest.mark.parametrize("fn", [grad_has_aux, hessian_of, per_sample_grads],
                         ids=["grad_has_aux", "hessian", "per_sample_grads"])
def test_transform_form_inductor(fn: Callable) -> None:
    x = torch.randn(5, 4) if fn is per_sample_grads else torch.randn(4)
    check(fn, (x,), "inductor", params=(W,))


def grad_of_a_constant_argument(x):
    return grad(lambda a, b: (a * b).sum(), argnums=1)(x, 2.0)


def test_differentiating_a_non_tensor_is_left_to_python() -> None:
    error = refused(grad_of_a_constant_argument, torch.randn(3))
    assert "non-tensors" in error.detail
    with pytest.raises(Exception) as eager:
        grad_of_a_constant_argument(torch.randn(3))
    with pytest.raises(type(eager.value), match=str(eager.value)[:30]):
        bytegraph.compile(grad_of_a_constant_argument, backend="eager")(torch.randn(3))


def test_grad_with_aux_of_a_function_not_returning_a_pair_is_left_to_python() -> None:
    def wrong(x):
        return grad(lambda a: a.sum(), has_aux=True)(x)

    error = refused(wrong, torch.randn(3))
    assert "pair" in error.detail


def vjp_with_aux(x, ct):
    def f(a):
        return (a.sin() * W_AUX, a.cos()), {"aux": a.exp()}

    out, vjp_fn, aux = torch.func.vjp(f, x, has_aux=True)
    return out, vjp_fn((ct, ct * 2)), aux


W_AUX = torch.randn(3, requires_grad=True)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_vjp_has_aux(backend: str) -> None:
    """The aux leaves come back beside the outputs and are not differentiated by vjp_fn
    (a break before, which sent the frame to Python)."""
    check(vjp_with_aux, (torch.randn(3, requires_grad=True), torch.randn(3)), backend,
          params=(W_AUX,))


# -- a vmap body returning its input: eager hands back the input itself, or a view ----------
def returns_its_input(x):
    return vmap(lambda v: (v, v * 2), out_dims=(0, 1))(x)


def returns_its_input_moved(x):
    return vmap(lambda v: v, in_dims=1, out_dims=-1)(x)


@pytest.mark.parametrize("fn", [returns_its_input, returns_its_input_moved])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_vmap_returning_its_input_is_the_input_or_a_view_of_it(fn, backend) -> None:
    x = torch.randn(3, 4)
    expected = fn(x)
    got = bytegraph.compile(fn, backend=backend, fullgraph=True)(x)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e)
        assert (g is x) == (e is x)
        assert (g._base is x) == (e._base is x)


def returns_an_unbatched_input(x, y):
    return vmap(lambda v, w: (v * 2, w), in_dims=(0, None))(x, y)


def test_vmap_returning_an_unbatched_input_is_left_to_python() -> None:
    error = refused(returns_an_unbatched_input, torch.randn(3, 4), torch.randn(4))
    assert "unbatched" in error.detail
