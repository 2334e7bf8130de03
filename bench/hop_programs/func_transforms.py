"""torch.func programs: grad, vmap, jacrev/jacfwd, hessian, jvp, vjp, linearize, functional_call.

Adapted from test/dynamo/test_higher_order_ops.py (FuncTorchHigherOrderOpTests)
and test/functorch/test_eager_transforms.py.
"""

from __future__ import annotations

import torch
import torch.func as tf

from bench.hop_programs.registry import inputs, program, t

HOP = "test/dynamo/test_higher_order_ops.py::FuncTorchHigherOrderOpTests"
EAGER = "test/functorch/test_eager_transforms.py"


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))


@program(f"{HOP}::test_grad", inputs(t(3, 3)))
def grad_simple(x):
    return tf.grad(lambda v: v.sin().sum())(x)


@program(f"{HOP}::test_grad_freevar_tensor", inputs(t(3, 3), t(3, 3)))
def grad_closure_tensor(x, y):
    def fn(v):
        return (v.sin() + y).sum()

    return tf.grad(fn)(x)


@program(f"{HOP}::test_grad_freevar_python_scalar", inputs(t(3, 3)))
def grad_closure_scalar(x):
    y = 3

    def fn(v):
        return (v.sin() + y).sum()

    return tf.grad(fn)(x)


@program(f"{HOP}::test_grad_has_aux", inputs(t(3, 3), t(3, 3)))
def grad_has_aux(x, y):
    def fn(v):
        return (v.sin() * y).sum(), v.cos()

    return tf.grad(fn, has_aux=True)(x)


@program(f"{HOP}::test_grad_two_tensor_has_aux", inputs(t(3, 3), t(3, 3)))
def grad_argnums_tuple(x, y):
    def fn(a, b):
        return (a.sin() + b.cos()).sum()

    return tf.grad(fn, argnums=(0, 1))(x, y)


@program(f"{HOP}::test_grad_two_tensor_all_grad_has_aux", inputs(t(3, 3), t(3, 3)))
def grad_argnums_tuple_has_aux(x, y):
    def fn(a, b):
        return (a.sin() + b.cos()).sum(), (a.cos(), b.sin())

    return tf.grad(fn, argnums=(0, 1), has_aux=True)(x, y)


@program(f"{HOP}::test_grad_with_kwargs", inputs(t(3, 3), t(3, 3)))
def grad_keyword_argument(x, y):
    def fn(a, b):
        return (a.sin() * b).sum()

    return tf.grad(fn)(x, b=y)


@program(f"{HOP}::test_grad_non_tensor_input", inputs(t(3, 3)))
def grad_non_tensor_argument(x):
    def fn(a, scale, shift):
        return (a.sin() * scale + shift).sum()

    return tf.grad(fn)(x, 2.0, 1)


@program(f"{HOP}::test_grad_pytree", inputs(t(3, 3), t(3)))
def grad_pytree_input(x, y):
    def fn(d):
        return (d["a"].sin().sum() + d["b"][0].cos().sum())

    return tf.grad(fn)({"a": x, "b": (y,)})


@program(f"{HOP}::test_grad_disable_capturing", inputs(t(3, 3)))
def grad_of_grad(x):
    def fn(v):
        return v.sin().sum()

    return tf.grad(lambda v: tf.grad(fn)(v).sum())(x)


@program(f"{HOP}::test_grad_and_value", inputs(t(3, 3)))
def grad_and_value(x):
    return tf.grad_and_value(lambda v: v.sin().sum())(x)


@program(f"{HOP}::test_grad_and_value_has_aux", inputs(t(3, 3)))
def grad_and_value_has_aux(x):
    def fn(v):
        return v.sin().sum(), v.cos()

    return tf.grad_and_value(fn, has_aux=True)(x)


@program(f"{HOP}::test_grad_fn_with_kwargs", inputs(t(3), t(3)))
def grad_output_used_after(x, y):
    g = tf.grad(lambda v, w: (v * w).pow(2).sum())(x, y)
    return g + x, g.mean()


@program(f"{HOP}::test_vmap", inputs(t(3, 3)))
def vmap_simple(x):
    return torch.vmap(lambda v: v.sum(0) + v)(x)


@program(f"{HOP}::test_vmap_two_inputs", inputs(t(3, 3), t(3)))
def vmap_in_dims_none(x, y):
    return torch.vmap(lambda a, b: a * b + 1, in_dims=(0, None))(x, y)


@program(f"{HOP}::test_vmap_two_inputs_tuple_in_dims", inputs(t(2, 3), t(3, 2)))
def vmap_in_dims_per_input(x, y):
    return torch.vmap(lambda a, b: a + b, in_dims=(0, 1))(x, y)


@program(f"{HOP}::test_vmap_out_dims", inputs(t(3, 4)))
def vmap_out_dims(x):
    return torch.vmap(lambda v: v * 2, out_dims=1)(x)


@program(f"{HOP}::test_vmap_multiple_outputs", inputs(t(3, 4)))
def vmap_tuple_outputs(x):
    return torch.vmap(lambda v: (v.sum(0), v * 3))(x)


@program(f"{HOP}::test_vmap_multiple_outputs_diff_dims", inputs(t(3, 4)))
def vmap_tuple_out_dims(x):
    return torch.vmap(lambda v: (v, v * 2), out_dims=(0, 1))(x)


@program(f"{HOP}::test_vmap_nested", inputs(t(2, 3, 4)))
def vmap_nested(x):
    return torch.vmap(torch.vmap(lambda v: v.sin() * 2))(x)


@program(f"{HOP}::test_vmap_free_tensor", inputs(t(3, 3), t(3)))
def vmap_free_tensor(x, y):
    def fn(v):
        return v + y

    return torch.vmap(fn)(x)


@program(f"{HOP}::test_vmap_kwargs", inputs(t(3, 3), t(3)))
def vmap_keyword_argument(x, y):
    return torch.vmap(lambda a, *, b: a + b)(x, b=y)


@program(f"{HOP}::test_vmap_pytree_inputs", inputs(t(3, 3), t(3, 3)))
def vmap_dict_input(x, y):
    return torch.vmap(lambda d: d["a"] * d["b"])({"a": x, "b": y})


@program(f"{HOP}::test_vmap_pytree_in_dims", inputs(t(3, 4), t(4, 3)))
def vmap_nested_in_dims(x, y):
    return torch.vmap(lambda p: p[0] + p[1], in_dims=((0, 1),))((x, y))


@program(f"{HOP}::test_vmap_chunk_size", inputs(t(6, 3)))
def vmap_chunk_size(x):
    return torch.vmap(lambda v: v.cos() * 2, chunk_size=2)(x)


@program(f"{HOP}::test_vmap_method", inputs(t(4, 3)))
def vmap_tensor_method(x):
    return torch.vmap(torch.Tensor.sum)(x)


@program(f"{HOP}::test_vmap_module", inputs(t(5, 3), _mlp))
def vmap_over_module(x, model):
    return torch.vmap(model)(x)


@program(f"{HOP}::test_vmap_grad", inputs(t(4, 3)))
def vmap_of_grad(x):
    return torch.vmap(tf.grad(lambda v: v.sin().sum()))(x)


@program(f"{EAGER}::TestGradTransform::test_per_sample_grads", inputs(t(5, 3), t(5, 2), _mlp))
def per_sample_grads(x, target, model):
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, xi, ti):
        out = tf.functional_call(model, p, (xi.unsqueeze(0),))
        return torch.nn.functional.mse_loss(out, ti.unsqueeze(0))

    return torch.vmap(tf.grad(loss), in_dims=(None, 0, 0))(params, x, target)


@program(f"{EAGER}::TestFunctionalCall::test_functional_call", inputs(t(5, 3), _mlp))
def functional_call_params(x, model):
    params = {k: v * 2 for k, v in model.named_parameters()}
    return tf.functional_call(model, params, (x,))


@program(f"{HOP}::test_jacrev", inputs(t(4)))
def jacrev_simple(x):
    return tf.jacrev(torch.sin)(x)


@program(f"{HOP}::test_jacrev_two_tensors_argnums", inputs(t(3), t(3)))
def jacrev_argnums(x, y):
    return tf.jacrev(lambda a, b: a.sin() * b, argnums=(0, 1))(x, y)


@program(f"{HOP}::test_jacrev_has_aux", inputs(t(3)))
def jacrev_has_aux(x):
    return tf.jacrev(lambda a: (a.sin(), a.cos()), has_aux=True)(x)


@program(f"{HOP}::test_jacfwd", inputs(t(4)))
def jacfwd_simple(x):
    return tf.jacfwd(torch.sin)(x)


@program(f"{HOP}::test_jacfwd_argnums", inputs(t(3), t(3)))
def jacfwd_argnums(x, y):
    return tf.jacfwd(lambda a, b: a.sin() * b, argnums=1)(x, y)


@program(f"{EAGER}::TestHessian::test_hessian_simple", inputs(t(3)))
def hessian_simple(x):
    return tf.hessian(lambda a: a.sin().sum())(x)


@program(f"{HOP}::test_jacrev_of_jacrev", inputs(t(3)))
def jacrev_of_jacrev(x):
    return tf.jacrev(tf.jacrev(lambda a: a.sin() * a))(x)


@program(f"{HOP}::test_jvp_simple", inputs(t(3, 3), t(3, 3)))
def jvp_simple(x, v):
    return tf.jvp(lambda a: a.sin().sum(), (x,), (v,))


@program(f"{HOP}::test_jvp_has_aux", inputs(t(3, 3), t(3, 3)))
def jvp_has_aux(x, v):
    return tf.jvp(lambda a: (a.sin().sum(), a.cos()), (x,), (v,), has_aux=True)


@program(f"{HOP}::test_jvp_two_tensors", inputs(t(3), t(3), t(3), t(3)))
def jvp_two_primals(x, y, vx, vy):
    return tf.jvp(lambda a, b: a * b.sin(), (x, y), (vx, vy))


@program(f"{HOP}::test_jvp_nested", inputs(t(3), t(3)))
def jvp_of_jvp(x, v):
    def inner(a):
        return tf.jvp(torch.sin, (a,), (v,))[1]

    return tf.jvp(inner, (x,), (v,))


@program(f"{HOP}::test_vjp_simple", inputs(t(3, 3), t(3, 3)))
def vjp_simple(x, ct):
    out, vjp_fn = tf.vjp(torch.sin, x)
    return out, vjp_fn(ct)


@program(f"{HOP}::test_vjp_multiple_outputs", inputs(t(3), t(3), t(3)))
def vjp_tuple_output(x, c1, c2):
    out, vjp_fn = tf.vjp(lambda a: (a.sin(), a.cos()), x)
    return out, vjp_fn((c1, c2))


@program(f"{HOP}::test_vjp_has_aux", inputs(t(3), t(3)))
def vjp_has_aux(x, ct):
    out, vjp_fn, aux = tf.vjp(lambda a: (a.sin(), a.cos()), x, has_aux=True)
    return out, vjp_fn(ct), aux


@program(f"{EAGER}::TestLinearize::test_basic", inputs(t(3), t(3)))
def linearize_simple(x, v):
    out, jvp_fn = tf.linearize(torch.sin, x)
    return out, jvp_fn(v)


@program(f"{HOP}::test_grad_backward", inputs(t(3, 3, grad=True)), backward=True)
def grad_then_backward(x):
    return tf.grad(lambda v: (v.sin() * v).sum())(x) * 2


@program(f"{HOP}::test_vmap_backward", inputs(t(3, 3, grad=True), t(3, grad=True)), backward=True)
def vmap_then_backward(x, y):
    return torch.vmap(lambda a: a * y + a.sin())(x)
