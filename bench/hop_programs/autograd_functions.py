"""torch.autograd.Function programs: forward/backward, setup_context, ctx's flags and marks.

Adapted from test/dynamo/test_autograd_function.py. Every program is
differentiated: the gradients the custom backward computes are compared.
"""

from __future__ import annotations

import enum
import math

import torch
from torch.autograd.function import once_differentiable

from bench.hop_programs.registry import inputs, program, t

AF = "test/dynamo/test_autograd_function.py::AutogradFunctionTests"


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        return foo + foo

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class SaveResult(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        result = foo + foo
        result = result + foo
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * math.sqrt(result.numel())


class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(input, weight, bias):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = inputs
        ctx.save_for_backward(input, weight, bias)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class MaterializingGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, grad_out1, grad_out2):
        if grad_out2 is None:
            return grad_out1
        return grad_out1 + grad_out2


class ScaleCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.scale = 3
        return x.sin()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.scale


class Choice(enum.Enum):
    A = 0
    B = 1


class EnumArg(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, e):
        return x.sin() if e is Choice.A else x.cos()

    @staticmethod
    def backward(ctx, g):
        return g, None


class ScaleGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        return grad * 0.5


class Shake(torch.autograd.Function):
    @classmethod
    def forward(cls, ctx, foo):
        return foo + foo

    @classmethod
    def backward(cls, ctx, grad_output):
        return grad_output


class TwoOutputs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, grad1, grad2):
        return grad1 + grad2


class SaveAndMark(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        with torch.no_grad():
            ctx.save_for_backward(x)
            ctx.mark_non_differentiable(x)
            return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class NonDifferentiableIndex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        values, index = x.sort()
        ctx.mark_non_differentiable(index)
        ctx.save_for_backward(index)
        return values, index

    @staticmethod
    def backward(ctx, grad_values, grad_index):
        (index,) = ctx.saved_tensors
        return torch.zeros_like(grad_values).scatter(0, index, grad_values)


class StrideBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        return torch.add(foo, foo)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * grad_output.stride()[-1]


class MadeInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        weights = torch.arange(x.numel(), dtype=x.dtype).reshape(x.shape)
        ctx.save_for_backward(weights)
        return x * weights

    @staticmethod
    def backward(ctx, grad):
        (weights,) = ctx.saved_tensors
        return grad * weights


class NonTensorOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), 4

    @staticmethod
    def backward(ctx, grad, _unused):
        (x,) = ctx.saved_tensors
        return grad * x.cos()


class NonTensorInputs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, name):
        ctx.scale = scale
        ctx.name = name
        return x * scale

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None, None


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x ** 3, 3 * x ** 2

    @staticmethod
    def setup_context(ctx, inputs, outputs):
        ctx.save_for_backward(inputs[0], outputs[1])

    @staticmethod
    def backward(ctx, grad_output, grad_dx):
        x, dx = ctx.saved_tensors
        return grad_output * dx + grad_dx * 6 * x


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result


class BreaksInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        result = foo + foo
        print("", end="")
        result = result + foo
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * math.sqrt(result.numel())


class NoGradInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        with torch.no_grad():
            return x @ w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad @ w.t(), x.t() @ grad


class Nested(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return Exp.apply(x) * 2

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x.exp()


class FunctionModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fn = Double.apply
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.fn(self.linear(x))


def _g(*shape: int):
    return t(*shape, grad=True)


@program(f"{AF}::test_autograd_function_equivalence", inputs(_g(2, 3)), backward=True)
def function_plain(x):
    return Double.apply(x)


@program(f"{AF}::test_save_for_bwd", inputs(_g(2, 2)), backward=True)
def function_save_for_backward(x):
    return SaveResult.apply(x)


@program(f"{AF}::test_linear_setup_context", inputs(_g(2, 2), _g(3, 2), _g(3)), backward=True)
def function_setup_context(x, w, b):
    return LinearFunction.apply(x, w, b)


@program(f"{AF}::test_linear_setup_context", inputs(_g(2, 2), t(3, 2)), backward=True)
def function_needs_input_grad(x, w):
    return LinearFunction.apply(x, w, None)


@program(f"{AF}::test_materialize_grad", inputs(_g(2, 2)), backward=True)
def function_set_materialize_grads(x):
    a, _b = MaterializingGrad.apply(x)
    return a * 2


@program(f"{AF}::test_function_ctx_does_not_instantiate_function", inputs(_g(3)), backward=True)
def function_ctx_attribute(x):
    return ScaleCtx.apply(x)


@program(f"{AF}::test_enum_arg", inputs(_g(2, 3)), backward=True)
def function_enum_argument(x):
    return EnumArg.apply(x, Choice.A) + EnumArg.apply(x, Choice.B)


@program(f"{AF}::test_once_differentiable", inputs(_g(3)), backward=True)
def function_once_differentiable(x):
    return ScaleGradient.apply(x)


@program(f"{AF}::test_classmethod", inputs(_g(2, 3)), backward=True)
def function_classmethods(x):
    return Shake.apply(x)


@program(f"{AF}::test_multi_output", inputs(_g(3)), backward=True)
def function_two_outputs(x):
    return TwoOutputs.apply(x)


@program(f"{AF}::test_function_context_save_and_mark", inputs(t(3)), backward=True)
def function_mark_non_differentiable_input(x):
    return SaveAndMark.apply(x) + 1


@program(f"{AF}::test_mark_non_differentiable", inputs(_g(5)), backward=True)
def function_non_differentiable_output(x):
    values, index = NonDifferentiableIndex.apply(x)
    return values * 2, index


@program(f"{AF}::test_stride_in_bwd", inputs(_g(2, 2)), backward=True, graphs=0)
def function_stride_in_backward(x):
    return StrideBackward.apply(x)


@program(f"{AF}::test_tensor_made_in_forward", inputs(_g(2, 3)), backward=True)
def function_saves_tensor_made_in_forward(x):
    return MadeInForward.apply(x)


@program(f"{AF}::test_non_tensor_output", inputs(_g(3)), backward=True)
def function_non_tensor_output(x):
    y, n = NonTensorOutput.apply(x)
    return y * n


@program(f"{AF}::test_function_with_bound_free_variable", inputs(_g(3)), backward=True)
def function_non_tensor_inputs(x):
    return NonTensorInputs.apply(x, 2.5, "scale")


@program(f"{AF}::test_setup_context_two_outputs", inputs(_g(4)), backward=True)
def function_setup_context_saves_output(x):
    y, dy = Cube.apply(x)
    return y + dy


@program(f"{AF}::test_exp", inputs(_g(3, 3)), backward=True)
def function_saves_output(x):
    return Exp.apply(x).sum(0)


@program(f"{AF}::test_autograd_function_has_graph_break", inputs(_g(10)), backward=True)
def function_forward_breaks(x):
    return BreaksInForward.apply(x) * 2


@program(f"{AF}::test_no_grad_in_forward", inputs(_g(2, 3), _g(3, 2)), backward=True)
def function_no_grad_block_in_forward(x, w):
    return NoGradInForward.apply(x, w)


@program(f"{AF}::test_nested_function", inputs(_g(3)), backward=True)
def function_calls_function(x):
    return Nested.apply(x)


@program(f"{AF}::test_autograd_function_equivalence (Module2)",
         inputs(_g(2, 3), FunctionModule), backward=True)
def function_apply_stored_on_module(x, model):
    return model(x)


@program(f"{AF}::test_function_twice", inputs(_g(3)), backward=True)
def function_applied_twice(x):
    return Exp.apply(Exp.apply(x) * 0.1)


@program(f"{AF}::test_function_no_grad_input", inputs(t(3)), backward=True)
def function_without_grad(x):
    return Exp.apply(x) + Double.apply(x)
