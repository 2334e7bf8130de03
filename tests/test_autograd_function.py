"""Subclasses of torch.autograd.Function (bytegraph/variables/autograd_function.py).

``Fn.apply`` becomes one ``autograd_function_apply`` node whose forward and
backward are traced graphs; each test compiles with ``fullgraph=True`` and
compares outputs and gradients with eager (``check`` of test_higher_order).
A backward that cannot be traced is a break at ``apply``, with eager's
gradient.
"""

from __future__ import annotations

import pytest
import torch
from torch._functorch.autograd_function import autograd_function_apply

import bytegraph
from tests.test_higher_order import BACKENDS, Counting, check, refused

W = torch.randn(4, requires_grad=True)


class ScaledSin(torch.autograd.Function):
    """The classic style: ctx first, a saved tensor, a non-tensor ctx attribute and a
    non-tensor argument."""

    @staticmethod
    def forward(ctx, x, y, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x.sin() * y * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * ctx.scale, None, None


def scaled_sin(x, y):
    return ScaledSin.apply(x * 2, y, 3.0) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_classic_style_saved_tensor_and_ctx_attribute(backend: str) -> None:
    x = torch.randn(4, requires_grad=True)
    counting = check(scaled_sin, (x, torch.randn(4, requires_grad=True)), backend)
    if backend == "eager":
        assert counting.targets().count(autograd_function_apply) == 1


class SplitExp(torch.autograd.Function):
    """The setup_context style: two outputs, one marked non-differentiable, a tensor
    stashed on ctx (not saved), needs_input_grad and free variables in both methods."""

    @staticmethod
    def forward(x, y):
        e = (x * W).exp()
        return e + y, (e > 1).to(x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, y = inputs
        out, mask = output
        ctx.mark_non_differentiable(mask)
        ctx.save_for_backward(out - y)
        ctx.y = y
        ctx.shift = 0.5

    @staticmethod
    def backward(ctx, grad_out, grad_mask):
        (e,) = ctx.saved_tensors
        grad_x = grad_out * e * W + ctx.shift if ctx.needs_input_grad[0] else None
        grad_y = grad_out + ctx.y * 0 if ctx.needs_input_grad[1] else None
        return grad_x, grad_y


def split_exp(x, y):
    out, mask = SplitExp.apply(x, y)
    return out * 2, mask


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("y_grad", [True, False])
def test_setup_context_style_non_differentiable_output(backend: str, y_grad: bool) -> None:
    x = torch.randn(4, requires_grad=True)
    y = torch.randn(4, requires_grad=y_grad)
    counting = check(split_exp, (x, y), backend, params=(W,))
    assert len(counting.graphs) == 1
    out, mask = bytegraph.compile(split_exp, backend="eager", fullgraph=True)(x, y)
    assert out.requires_grad and not mask.requires_grad


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x ** 2


class CubeModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return Cube.apply(self.linear(x)).sum(-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_apply_in_a_module_gives_parameter_gradients(backend: str) -> None:
    module = CubeModule()
    check(module, (torch.randn(3, 4, requires_grad=True),), backend,
          params=tuple(module.parameters()), atol=1e-4)


def test_no_input_requires_grad_nor_grad_mode() -> None:
    check(scaled_sin, (torch.randn(4), torch.randn(4)))
    with torch.no_grad():
        counting = check(scaled_sin, (torch.randn(4, requires_grad=True), torch.randn(4)))
    # Under no_grad eager runs only the forward: its ops are the graph's (as torch.compile
    # records them), no autograd_function_apply node.
    assert autograd_function_apply not in counting.targets()
    assert any(n.target == "sin" for g in counting.graphs for n in g.graph.nodes)


def test_under_no_grad_the_backward_is_not_traced() -> None:
    """A backward bytegraph cannot trace breaks at ``apply`` with grad enabled; under
    no_grad eager never runs it, so it costs nothing (one graph)."""
    with torch.no_grad():
        check(data_dependent, (torch.randn(4),))


class DataDependentBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if grad.sum() > 0:
            return grad * x.cos()
        return -grad


def data_dependent(x):
    return DataDependentBackward.apply(x + 1) * 2


def test_backward_that_cannot_be_traced_breaks_at_apply() -> None:
    error = refused(data_dependent, torch.randn(4, requires_grad=True))
    assert "DataDependentBackward.backward" in error.detail
    counting = Counting("eager")
    compiled = bytegraph.compile(data_dependent, backend=counting)
    for sign in (1.0, -1.0):
        x = torch.randn(4).abs().mul(sign).requires_grad_()
        x_eager = x.detach().clone().requires_grad_()
        out, expected = compiled(x), data_dependent(x_eager)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x.grad, x_eager.grad)
    assert autograd_function_apply not in counting.targets()


class ReturnsInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class MarksDirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


@pytest.mark.parametrize(("fn", "reason"), [
    (ReturnsInput, "returns one of its inputs"),
    (MarksDirty, "in-place write"),
])
def test_forms_left_to_python(fn: type, reason: str) -> None:
    error = refused(lambda x: fn.apply(x * 1), torch.randn(3, requires_grad=True))
    assert reason in error.detail


def same_tensor_twice(x):
    return ScaledSin.apply(x, x, 2.0)


def test_one_tensor_passed_as_two_arguments() -> None:
    """Two placeholders of the forward body stand for one outer node: the generated
    function had two parameters of that node's name (a SyntaxError; seen in YOSO, whose
    attention passes one mask as both query and key mask)."""
    check(same_tensor_twice, (torch.randn(4, requires_grad=True),), "eager")


class StrideInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x + x

    @staticmethod
    def backward(ctx, grad):
        return grad * grad.stride()[-1] + grad.is_contiguous()


def stride_in_backward(x):
    return StrideInBackward.apply(x)


def test_gradient_layout_read_in_backward_is_refused() -> None:
    """After ``out.sum().backward()`` autograd hands backward an expanded gradient (stride
    0): the trace's example is contiguous, so a folded stride gave other gradients."""
    x = torch.randn(2, 2, requires_grad=True)
    error = refused(stride_in_backward, x)
    assert "Tensor.stride()" in error.detail and "layout" in error.detail
    grads = []
    for run in (stride_in_backward, bytegraph.compile(stride_in_backward, backend="eager")):
        a = x.detach().clone().requires_grad_()
        run(a).sum().backward()
        grads.append(a.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)


class ClassmethodScale(torch.autograd.Function):
    factor = 3.0

    @classmethod
    def forward(cls, ctx, x):
        ctx.save_for_backward(x)
        return x.sin() * cls.factor

    @classmethod
    def backward(cls, ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * cls.factor


def classmethod_apply(x):
    return ClassmethodScale.apply(x) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_classmethod_forward_and_backward(backend: str) -> None:
    """``cls`` is the class, as ``Fn.forward`` is bound to it (a break before, which
    sent the frame to Python)."""
    counting = check(classmethod_apply, (torch.randn(4, requires_grad=True),), backend)
    assert autograd_function_apply in counting.targets()


# -- forms torch.compile traces whole (issue 22) ----------------------------------------
class DropsUnusedGradient(torch.autograd.Function):
    """``set_materialize_grads(False)``: the backward gets None for an output whose
    gradient autograd did not compute, and tells it from zeros."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, grad_sin, grad_cos):
        if grad_cos is None:
            return grad_sin * 3
        if grad_sin is None:
            return grad_cos * 5
        return grad_sin + grad_cos


def first_of_two(x):
    a, _b = DropsUnusedGradient.apply(x)
    return a * 2


def second_of_two(x):
    _a, b = DropsUnusedGradient.apply(x * 1)
    return b + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [first_of_two, second_of_two])
def test_unmaterialized_gradient_of_a_dropped_output_is_none(backend: str, fn) -> None:
    """Eager's backward sees None for the dropped output (3x or 5x the gradient); the op
    hands zeros, so a backward traced with a tensor there gave 1x."""
    counting = check(fn, (torch.randn(4, requires_grad=True),), backend)
    assert autograd_function_apply in counting.targets()


def both_used(x):
    a, b = DropsUnusedGradient.apply(x)
    return a * 2, b


def unpacked_elsewhere(x):
    first, _second = list(map(DropsUnusedGradient.apply, [x, x * 2]))
    return first[0] + first[1]


class OneTensorTwice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        y = x.sin()
        return y, y

    @staticmethod
    def backward(ctx, grad_first, grad_second):
        return grad_first * 3 if grad_second is None else grad_second * 5


def one_tensor_twice(x):
    a, _b = OneTensorTwice.apply(x)
    return a * 2


@pytest.mark.parametrize("fn", [both_used, unpacked_elsewhere, one_tensor_twice])
def test_unmaterialized_gradients_of_used_outputs_break_at_apply(fn) -> None:
    """Two outputs that live on: which gradients are None is known only when backward
    runs (eager: None for ``b`` when the loss ignores it). ``unpacked_elsewhere`` unpacks
    a list of results into a dead local, not the outputs: the check when the graph is
    finished refuses it. ``one_tensor_twice``: the dropped name holds the used tensor,
    whose gradient eager hands in the second slot. Either way ``apply`` runs as Python,
    with eager's gradient."""
    x = torch.randn(4, requires_grad=True)
    error = refused(fn, x)
    assert "set_materialize_grads(False)" in error.detail
    compiled = bytegraph.compile(fn, backend="eager")
    grads = []
    for run in (fn, compiled):
        a = x.detach().clone().requires_grad_()
        out = run(a)
        (out[0] if isinstance(out, tuple) else out).sum().backward()
        grads.append(a.grad)
    torch.testing.assert_close(grads[1], grads[0])


class ReturnsMarkedInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            ctx.save_for_backward(x)
            ctx.mark_non_differentiable(x)
            return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def returns_marked_input(x):
    return ReturnsMarkedInput.apply(x) + 1


def returns_marked_input_as_is(x):
    return ReturnsMarkedInput.apply(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_returned_where_no_input_requires_grad(backend: str) -> None:
    """No tensor argument requires grad: eager runs the forward under no_grad and hands a
    returned input back as a new view of it; the forward is inlined (no op node)."""
    counting = check(returns_marked_input, (torch.randn(3),), backend)
    assert autograd_function_apply not in counting.targets()


@pytest.mark.parametrize("grad", [False, True])
def test_returned_input_is_an_alias_as_in_eager(grad: bool) -> None:
    """A view (no grad) or, under no_grad for an input that requires grad, a detached
    alias: never the input itself; a write through it reaches the input."""
    x = torch.randn(3, requires_grad=grad)
    compiled = bytegraph.compile(returns_marked_input_as_is, backend="eager", fullgraph=True)
    seen = []
    for run in (returns_marked_input_as_is, compiled):
        a = x.detach().clone().requires_grad_(grad)
        with torch.no_grad():
            out = run(a)
            out.add_(1)
        seen.append((out is a, out._base is a, out.requires_grad, a.detach().clone()))
    assert seen[1][:3] == seen[0][:3]
    torch.testing.assert_close(seen[1][3], seen[0][3])


class NonTensorOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), 4

    @staticmethod
    def backward(ctx, grad, grad_of_int):
        (x,) = ctx.saved_tensors
        return grad * x.cos() if grad_of_int is None else grad * 0


def non_tensor_output(x):
    y, n = NonTensorOutput.apply(x)
    return y * n


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_tensor_output_and_its_none_gradient(backend: str) -> None:
    counting = check(non_tensor_output, (torch.randn(3, requires_grad=True),), backend)
    assert autograd_function_apply in counting.targets()


class CubeForTransforms(torch.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x ** 3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x ** 2


def grad_of_cube(x):
    return torch.func.grad(lambda a: CubeForTransforms.apply(a).sum())(x)


def per_sample_grad_of_cube(x):
    return torch.func.vmap(torch.func.grad(lambda a: CubeForTransforms.apply(a).sum()))(x)


@pytest.mark.parametrize("fn", [grad_of_cube, per_sample_grad_of_cube])
def test_inside_a_transform_an_input_not_requiring_grad_is_still_differentiated(fn) -> None:
    """In a torch.func.grad body the input's example does not require grad, yet the
    transform differentiates ``apply``: inlining the forward there (the rule for the
    frame's own graph) gave zero gradients."""
    counting = check(fn, (torch.randn(3),))
    bodies = [m for g in counting.graphs for m in g.modules()
              if isinstance(m, torch.fx.GraphModule)]
    assert any(n.target is autograd_function_apply for m in bodies for n in m.graph.nodes)
