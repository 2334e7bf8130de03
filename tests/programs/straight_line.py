"""Straight-line programs: no loops, no calls into user functions, no graph breaks.

Each program is a plain function plus a maker of its inputs. Every one of
them must compile to exactly one graph that computes what eager PyTorch
computes, outputs and mutated inputs alike (``test_straight_line.py``).
Branches appear only on values known at trace time (a dtype, a Python
flag), which the translator decides while tracing.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812


@dataclasses.dataclass(frozen=True)
class Program:
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple]

    @property
    def name(self) -> str:
        return self.fn.__name__


PROGRAMS: list[Program] = []


def program(make_inputs: Callable[[], tuple]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the decorated function to the corpus with its input maker."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        PROGRAMS.append(Program(fn, make_inputs))
        return fn

    return register


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def ints(*shape: int, low: int = 0, high: int = 16) -> torch.Tensor:
    return torch.randint(low, high, shape)


def nonzero(*shape: int) -> torch.Tensor:
    """Floats bounded away from zero, for divisors."""
    t = torch.randn(*shape)
    return t.sign() * (t.abs() + 0.5)


def two(*shape: int) -> Callable[[], tuple]:
    return lambda: (randn(*shape), randn(*shape))


# --- arithmetic: every BINARY_OP operator ----------------------------------------------


@program(two(3, 4))
def add_then_mul(x, y):
    z = x + y
    z = z * 2
    return z


@program(lambda: (randn(3, 4), nonzero(3, 4)))
def sub_and_truediv(x, y):
    return (x - y) / y, x / 2.0, 1.5 - x


@program(lambda: (randn(3, 4) * 10, nonzero(3, 4)))
def floordiv_and_mod(x, y):
    return x // y, x % y, x // 3, x % 2.5


@program(lambda: (randn(3, 4), randn(3, 4).abs() + 0.1))
def power(x, y):
    return x**2, 2**x, y**x, y**0.5


@program(lambda: (randn(3, 4), randn(4, 5)))
def matmul(a, b):
    return a @ b


@program(lambda: (randn(2, 3, 4), randn(2, 4, 5)))
def batched_matmul_chain(a, b):
    return (a @ b).relu() @ b.transpose(1, 2)


@program(lambda: (ints(4, 5), ints(4, 5)))
def bitwise_on_int_tensors(a, b):
    return a & b, a | b, a ^ b, a & 3, 12 | b


@program(lambda: (randn(4, 5), randn(4, 5)))
def bitwise_on_bool_tensors(x, y):
    m = x > 0
    n = y > 0
    return m & n, m | n, m ^ n, ~m


@program(lambda: (ints(4, 5, high=8), ints(4, 5, high=4)))
def shifts(a, b):
    return a << 2, a >> 1, a << b, a >> b


@program(lambda: (randn(3, 4),))
def reflected_scalar_operators(x):
    return 1 + x, 1 - x, 3 * x, 2 / (x.abs() + 1), 2 ** x, 7 // (x.abs() + 1), 7 % (x.abs() + 1)


@program(lambda: (randn(3, 4), 3, 0.5))
def every_operator_on_python_scalars(x, n, s):
    a = n + 2
    b = n - 5
    c = n * 3
    d = n / 4
    e = n // 2
    f = n % 2
    g = n**2
    h = (n << 3) >> 1
    i = (n & 6) | (n ^ 5)
    j = s * n - s / 2 + s // 0.3 + s % 0.2
    return x * a + b + c * d - e + f * g + h + i + j


# --- in-place operators ---------------------------------------------------------------


@program(two(3, 4))
def inplace_arith_on_input(x, y):
    x += y
    x -= 1
    x *= y
    x /= 2
    return x


@program(lambda: (randn(3, 4) * 10, nonzero(3, 4)))
def inplace_floordiv_mod_pow_on_input(x, y):
    x //= y
    x %= 3
    x **= 2
    return x.sum()


@program(lambda: (ints(4, 5), ints(4, 5, high=4)))
def inplace_bitwise_on_input(a, b):
    a &= 13
    a |= b
    a ^= 6
    a <<= b
    a >>= 1
    return a


@program(lambda: (randn(3, 3), randn(3, 3)))
def inplace_matmul(a, b):
    # Tensor has no __imatmul__: ``a @= b`` rebinds a to a new tensor.
    c = a
    a @= b
    return a, c


@program(two(3, 4))
def inplace_on_intermediate(x, y):
    z = x * y
    z += 1
    z.mul_(2)
    z.clamp_(min=-1.0)
    return z


@program(two(3, 4))
def inplace_methods_on_inputs(x, y):
    x.add_(y, alpha=2)
    y.zero_()
    return x + 1


@program(lambda: (randn(3, 4), 5, 1.5))
def inplace_on_python_scalars(x, n, s):
    n += 2
    n -= 1
    n *= 3
    n //= 2
    n %= 7
    n **= 2
    n <<= 2
    n >>= 1
    n &= 0xFF
    n |= 1
    n ^= 3
    s += 1.0
    s /= 4
    s -= 0.25
    s *= 2
    return x * n + s


# --- unary operators and comparisons ---------------------------------------------------


@program(lambda: (randn(3, 4), ints(3, 4)))
def unary_operators(x, a):
    return -x, +x, ~a, -(a - 1)


@program(lambda: (randn(3, 4), True))
def not_on_python_flag(x, flag):
    keep = not flag
    return x * keep + x * (not keep)


@program(two(3, 4))
def comparisons_make_bool_tensors(x, y):
    return x < y, x <= y, x == y, x != y, x > 0, x >= 0.5


@program(two(3, 4))
def comparison_feeds_where(x, y):
    mask = (x > 0) & (y < 0.5)
    return torch.where(mask, x, y), mask.float().sum()


@program(two(3, 4))
def chained_comparison_tensor_scalar(x, y):
    return (x < 0.5) == (y >= -0.5)


# --- tensor methods --------------------------------------------------------------------


@program(lambda: (randn(3, 4),))
def reductions(x):
    return x.sum(), x.mean(dim=1), x.sum(dim=-1, keepdim=True), x.amax(0), x.prod(1), x.std()


@program(lambda: (randn(3, 4),))
def elementwise_methods(x):
    return x.exp().log1p(), x.abs().sqrt(), x.clamp(min=-0.5, max=0.5), x.sigmoid().tanh()


@program(lambda: (randn(2, 3, 4),))
def layout_methods(x):
    return (
        x.transpose(0, 1).contiguous(),
        x.permute(2, 0, 1),
        x.unsqueeze(0).squeeze(0),
        x.flatten(1),
        x.t() if x.dim() == 2 else x.mT,
    )


@program(lambda: (randn(3, 4),))
def dtype_conversions(x):
    return x.to(torch.float64), x.int(), x.half().float(), x.type(torch.int16), x.bool()


@program(lambda: (randn(3, 1),))
def expand_and_repeat(x):
    return x.expand(3, 5), x.repeat(2, 3), x.expand_as(torch.empty(3, 2))


@program(two(3, 4))
def masked_fill_with_mask(x, y):
    return x.masked_fill(y > 0, 0.0), x.masked_fill(x < 0, float("-inf")).softmax(-1)


@program(lambda: (randn(3, 4),))
def new_tensors_like_input(x):
    return x.new_zeros(2, 2), x.new_ones(x.shape), torch.zeros_like(x), torch.full_like(x, 7)


# --- torch.* functions -----------------------------------------------------------------


@program(two(3, 4))
def torch_functions(x, y):
    return torch.add(x, y, alpha=2), torch.sin(x) + torch.cos(y), torch.maximum(x, y), torch.tanh(x)


@program(lambda: (randn(2, 3, 4), randn(2, 4, 2)))
def torch_bmm_and_einsum(a, b):
    return torch.bmm(a, b), torch.einsum("bij,bjk->bik", a, b)


@program(lambda: (randn(3, 4), 5))
def torch_factories(x, n):
    ones = torch.ones(3, 4)
    r = torch.arange(n)
    eye = torch.eye(4)
    full = torch.full((3, 4), 1.5)
    return x * ones + full, r * 2, x @ eye


@program(lambda: (randn(3, 4),))
def factories_with_dtype_and_device_of_input(x):
    z = torch.zeros(x.shape[0], x.size(1), dtype=x.dtype, device=x.device)
    i = torch.ones(4, dtype=torch.int64)
    return z + x, i, torch.tensor(2.5) * x


# --- torch.nn.functional ---------------------------------------------------------------


@program(lambda: (randn(4, 8),))
def activations(x):
    return F.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.leaky_relu(x, 0.1)


@program(lambda: (randn(4, 8),))
def softmax_family(x):
    return F.softmax(x, dim=-1), F.log_softmax(x, dim=1), x.softmax(0)


@program(lambda: (randn(4, 8), randn(16, 8), randn(16)))
def linear(x, w, b):
    return F.linear(x, w, b), F.linear(x, w)


@program(lambda: (randn(2, 5, 8), randn(8), randn(8)))
def layer_norm(x, w, b):
    return F.layer_norm(x, (8,), w, b, eps=1e-5), F.layer_norm(x, x.shape[-1:])


@program(lambda: (randn(4, 8),))
def dropout_not_training(x):
    y = F.dropout(x, p=0.5, training=False)
    return y, F.dropout(x * 2, 0.3, False) + y


@program(lambda: (randn(2, 3, 8, 8), randn(4, 3, 3, 3), randn(4)))
def conv2d_and_pool(x, w, b):
    y = F.conv2d(x, w, b, padding=1)
    return F.max_pool2d(y, 2), F.avg_pool2d(y, kernel_size=2, stride=2), F.conv2d(x, w, stride=2)


@program(lambda: (randn(4, 10), torch.tensor([1, 0, 9, 3]), randn(4, 10)))
def losses(logits, target, other):
    return F.cross_entropy(logits, target), F.mse_loss(logits, other), F.nll_loss(
        F.log_softmax(logits, -1), target, reduction="sum"
    )


@program(lambda: (ints(2, 5, high=10), randn(10, 4)))
def embedding(ids, table):
    return F.embedding(ids, table), F.one_hot(ids[0], num_classes=10)


@program(lambda: (randn(2, 3, 4),))
def pad_and_normalize(x):
    return F.pad(x, (1, 2)), F.normalize(x, dim=-1)


# --- indexing and slicing --------------------------------------------------------------


@program(lambda: (randn(5, 6),))
def index_int_and_negative(x):
    return x[0], x[-1], x[2][3], x[-2, -1]


@program(lambda: (randn(5, 6),))
def index_slices(x):
    return x[1:3], x[:, 2:], x[::2], x[1:-1, ::3], x[-3:]


@program(lambda: (randn(2, 3, 4),))
def index_none_and_ellipsis(x):
    return x[None], x[:, None, :], x[..., 1], x[0, ..., None], x[..., ::2]


@program(lambda: (randn(5, 6),))
def index_tuple(x):
    idx = (1, slice(None, 4))
    return x[idx], x[(0, -1)]


@program(lambda: (randn(5, 6), torch.tensor([4, 0, 2])))
def index_with_int_tensor(x, idx):
    return x[idx], x[:, idx], x[idx, idx]


@program(lambda: (randn(5, 6),))
def index_with_bool_mask_elementwise(x):
    mask = x > 0
    return torch.where(mask, x, torch.zeros_like(x)), x * mask, mask.sum()


# --- constants and returned structures ------------------------------------------------


@program(lambda: (randn(3),))
def returns_constants(x):
    return x + 1, 3, "label", None, 2.5, True, torch.float16, (1, (2, "x"))


@program(two(3))
def returns_list(x, y):
    return [x + y, x - y]


@program(two(3))
def returns_dict(x, y):
    return {"sum": x + y, "diff": x - y, "n": 2}


@program(two(3))
def returns_nested(x, y):
    s = x + y
    return (s, [y * 2, (s, {"a": x, "b": [3, s]})], {"z": (y,)})


@program(two(3))
def returns_input_unchanged(x, y):
    return x, y * 2


@program(lambda: (randn(3),))
def returns_tensor_twice(x):
    z = x + 1
    return z, z, [z]


@program(two(3))
def returns_view_of_input(x, y):
    return x.view(3, 1), y[1:], x.t(), (x + y).view(-1)


@program(lambda: (randn(4),))
def arithmetic_identity_is_a_new_tensor(x):
    return x + 0, x * 1


@program(lambda: ([randn(2, 3), randn(2, 3)], {"w": randn(3), "b": 1.0}))
def containers_as_inputs(xs, params):
    return xs[0] * params["w"] + params["b"], xs[-1].sum()


# --- shapes, dtypes and Python scalars ------------------------------------------------


@program(lambda: (randn(4, 3, 2),))
def shape_arithmetic(x):
    b = x.shape[0]
    return x.view(x.shape[0], -1), x.reshape(b * 2, -1), x.size(1), x.dim(), x.numel()


@program(lambda: (randn(4, 3, 2),))
def shape_values_in_tensor_code(x):
    n, c, w = x.shape
    scale = c**-0.5
    return x * scale + n, x.reshape(-1, w).sum(0) / (n * c), x.ndim, tuple(x.size())


@program(lambda: (randn(3, 4),))
def dtype_dependent_constants(x):
    eps = 1e-3 if x.dtype == torch.float16 else 1e-6
    big = 65504.0 if x.dtype is torch.float16 else 1e30
    return x.clamp(max=big) + eps, x.dtype, x.device, x.is_floating_point()


@program(lambda: (randn(3, 4), torch.randn(3, 4, dtype=torch.float64), ints(3)))
def finfo_and_iinfo_constants(x, d, a):
    eps = torch.finfo(x.dtype).eps
    tiny = torch.finfo(d.dtype).tiny
    top = torch.iinfo(a.dtype).max
    return x + eps, d.clamp(min=tiny), a.clamp(max=top - 1), eps, torch.finfo(torch.float16).max


@program(lambda: (randn(3, 4),))
def device_dependent_constants(x):
    on_cpu = x.device.type == "cpu"
    factor = 5 if torch.cuda.is_available() else 7
    return x.to(x.device) * (2 if on_cpu else 3) + factor, x.is_cuda, x.device


@program(lambda: (randn(3, 4), 3, 0.25, True))
def python_scalar_args(x, n, s, flag):
    y = x * n + s
    if flag:
        y = y - n * s
    return y, n + 1, s * 2, not flag


@program(lambda: (randn(3, 4), 4))
def python_int_in_shapes(x, k):
    return x.unsqueeze(0).expand(k, 3, 4), x.repeat(1, k), torch.ones(k) * k


# --- tuple-returning ops ---------------------------------------------------------------


@program(lambda: (randn(6, 4),))
def split_and_chunk(x):
    a, b, c = x.split(2)
    first, rest = torch.split(x, [1, 5])
    return a + c, b, x.chunk(2, dim=1), first, rest.sum(0)


@program(lambda: (randn(4, 5),))
def max_with_dim(x):
    values, indices = x.max(dim=1)
    m = torch.max(x, 0)
    return values, indices, m, m.values * 2, m.indices


@program(lambda: (randn(4, 5),))
def sort_and_topk(x):
    s = x.sort(dim=-1, descending=True)
    top = torch.topk(x, 2)
    return s.values[:, 0], s.indices, top


@program(lambda: (randn(2, 3), randn(2, 3), randn(4, 3)))
def cat_and_stack(a, b, c):
    return torch.cat([a, b]), torch.cat((a, b), dim=1), torch.stack([a, b], dim=-1), torch.cat(
        [a, b, c], 0
    )


@program(lambda: (randn(2, 3), randn(2, 3)))
def unbind_and_unpack(a, b):
    r0, r1 = a.unbind(0)
    p, q = b
    return r0 * p, r1 + q


# --- operator module and builtins used as functions ------------------------------------


@program(two(3, 4))
def operator_functions(x, y):
    return operator.add(x, y), operator.mul(x, 2), operator.neg(y), operator.getitem(x, 1)


@program(lambda: (randn(3, 4),))
def builtin_len_and_abs(x):
    return x * len(x), abs(x)


# --- more shapes of straight-line code -------------------------------------------------


@program(lambda: (randn(3, 4).requires_grad_(), randn(4).requires_grad_(), randn(3, 4)))
def requires_grad_inputs(x, w, c):
    y = (x * w).sum(1)
    return y, x.detach() * 2, (c * w).relu(), c + 1, y.requires_grad, c.requires_grad


@program(lambda: (randn(3, 4),))
def tensor_attributes(x):
    return x.T, x.mT, x.ndim, x.requires_grad, x.is_leaf, x.layout, x.dtype.is_floating_point


@program(lambda: (ints(3, 4), randn(3, 4)))
def type_promotion(a, x):
    m = x > 0
    return a + 0.5, a / 2, a * x, m + 1, m * 2.5, a.float() ** 2, (a // 3).dtype


@program(lambda: (randn(2, 3), randn(2, 3)))
def keyword_arguments(a, b):
    return (
        torch.cat(tensors=[a, b], dim=0),
        torch.sum(a, dim=1, keepdim=True),
        F.softmax(a, dim=-1, dtype=torch.float64),
        a.sum(dim=(0, 1)),
    )


@program(lambda: (randn(3, 4).t(),))
def returns_sizes_and_strides(x):
    y = x * 2
    return y.shape, x.size(), x.stride(), y.stride(), x.size(-1), x.shape == (4, 3), y


@program(lambda: (randn(3),))
def returns_dict_with_other_keys(x):
    return {0: x + 1, (1, "a"): x * 2, None: 3, 2.5: [x]}


@program(lambda: (randn(8, 6), 2, 5))
def slices_with_python_int_bounds(x, start, stop):
    return x[start:], x[:stop], x[start:stop:2], x[:, -start:], x[stop - 1]


@program(lambda: (randn(5, 6),))
def index_with_python_lists(x):
    return x[[0, 2]], x[:, [1, 1, 3]], x[[0, 4], [5, 0]]


@program(lambda: (torch.zeros(0, 3), randn(3)))
def empty_tensors(e, x):
    return e.sum(0), e * 2, torch.cat([e, x[None]]), e.shape[0]


@program(lambda: (torch.tensor(3.0), randn(3)))
def zero_dim_tensors(s, x):
    t = x.sum()
    return s * x, t * s, t.dim(), (s + t).reshape(1)


@program(lambda: (randn(3), randn(3)))
def complex_tensors(x, y):
    z = torch.complex(x, y)
    return z.abs(), z.real * 2, z.imag, z * 1j, z.conj().imag


@program(lambda: ([randn(2), randn(2)], {"k": randn(2), "n": 3}))
def containers_returned_unchanged(xs, d):
    return xs, d, xs[0] * d["n"], d["k"]


@program(lambda: ([randn(2), randn(2)], {"k": randn(2), "n": 3}))
def inplace_on_container_items(xs, d):
    xs[0] += 1
    d["n"] += 1
    return xs[0] * d["n"]


@program(lambda: (randn(3, 4),))
def inplace_through_subscripts(x):
    x[0] += 1
    x[:, 1:] *= 2
    x[1, 2] = 7.0
    return x.sum()


@program(lambda: (randn(3, 4),))
def setitem_with_bool_mask(x):
    y = x.clone()
    y[y < 0] = 0.0
    return y


@program(lambda: (randn(2, 3, 4),))
def star_args_shapes(x):
    shape = x.shape[:-1]
    return x.view(*shape, 2, -1), x.reshape(-1, *x.shape[-2:]), torch.zeros(*shape)


@program(lambda: (randn(5, 2),))
def unpacking_with_star(x):
    a, *rest = x.split(1)
    *init, last = x.unbind(0)
    return a, len(rest), torch.cat(rest), last, len(init)


@program(lambda: (randn(3, 4),))
def delete_and_rebind(x):
    y = x * 2
    z = y + 1
    del y
    y = z.sum()
    return y, z


@program(lambda: (randn(3, 4), 3))
def builtins_on_python_values(x, n):
    d = x.shape[-1]
    k = max(n, d) + min(n, 2) + round(2.6) + int(d / 3) + abs(-n) + len((1, 2))
    return x * k, float(n), max(x.shape), sum(x.shape), 0 < n < 5, divmod(d, 3)


@program(lambda: (randn(3), randn(3), randn(3)))
def builtins_on_tensors(a, b, c):
    return sum([a, b, c]), abs(a - b), pow(a, 2), max(a.shape)


@program(lambda: (randn(3, 4), 3))
def tensor_from_python_values(x, n):
    t = torch.tensor([n, 2 * n, 3])
    u = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    return t, u, x + torch.tensor(n), torch.as_tensor([0.5] * 4) * x


@program(lambda: (randn(3, 4),))
def assert_on_shape(x):
    assert x.dim() == 2, "expects a matrix"
    assert x.shape[1] == 4
    return x * 2


GLOBAL_BIAS = torch.arange(4.0)
GLOBAL_SCALE = 0.5


@program(lambda: (randn(3, 4),))
def module_globals(x):
    return x * GLOBAL_SCALE + GLOBAL_BIAS, GLOBAL_BIAS


def _make_closure(k: float, t: torch.Tensor) -> Callable[..., Any]:
    def closure_constant_and_tensor(x):
        return x * k + t

    return closure_constant_and_tensor


program(lambda: (randn(3, 4),))(_make_closure(1.5, torch.ones(4)))


@program(lambda: (randn(3, 4), randn(3, 4)))
def where_with_scalars(x, y):
    return torch.where(x > 0, x, 0.0), torch.where(y > x, 1.0, -1.0), torch.where(x < y, 2, y)


@program(lambda: ([randn(2, 3), randn(1, 3)], randn(2, 3)))
def lists_built_by_extension(xs, y):
    parts = [*xs, y]
    dims = [0, *range(1, 2)]
    return torch.cat(parts), torch.cat([y, *xs], dim=dims[0]), y.permute(*[1, 0]), len(parts)


@program(lambda: (randn(4, 8),))
def random_ops(x):
    # Differential.check seeds the generator before each run, so eager and compiled
    # draw the same numbers: random ops must run at call time, never fold at trace time.
    dropped = F.dropout(x, p=0.5, training=True)
    return dropped, torch.rand_like(x), torch.randn(2, 3), x.sigmoid().bernoulli()


@program(lambda: (randn(3), randn(3), torch.empty(3)))
def out_keyword_writes_into_input(x, y, out):
    r = torch.add(x, y, out=out)
    return r, out * 2


@program(lambda: (randn(3, 4),))
def inplace_on_view_of_input(x):
    v = x.view(-1)
    v.add_(1)
    x[0].mul_(2)
    return x * 1, v.shape


@program(lambda: (randn(3, 4), randn(2)))
def inplace_metadata_changes(x, y):
    x.t_()
    y.unsqueeze_(0)
    return x.shape, y.shape, x * 2, y + 1


@program(lambda: (randn(2, 6), torch.Size([3, 4]), (1, 0), torch.float64, "sum", None))
def constant_args_of_many_types(x, shape, dims, dtype, reduction, bias):
    y = x.reshape(shape).permute(dims).to(dtype)
    z = F.linear(x, torch.ones(1, 6), bias)
    return y, F.mse_loss(x, x * 0.5, reduction=reduction), z, shape[0], dims


@program(lambda: (randn(3), randn(3).requires_grad_()))
def inplace_on_view_makes_base_require_grad(x, w):
    first = x.view(-1) * 1  # the same view op again below: its metadata may be memoized
    v = x.view(-1)
    v.mul_(w)
    z = torch.zeros(3, requires_grad=True)
    again = torch.zeros(3, requires_grad=True)
    return first, x.requires_grad, x.is_leaf, v.requires_grad, z.is_leaf, again.is_leaf, x * 2


@program(lambda: (randn(4, 8), torch.nn.Parameter(randn(3, 8)), torch.nn.Parameter(randn(3))))
def parameter_inputs(x, weight, bias):
    return F.linear(x, weight, bias), weight.is_leaf, type(weight * 1) is torch.Tensor


@program(lambda: (randn(3, 4), ints(3)))
def type_checks(x, a):
    checks = (
        isinstance(x, torch.Tensor),
        type(x) is torch.Tensor,
        torch.is_tensor(a),
        x.dtype in (torch.float16, torch.bfloat16),
        a.dtype is torch.int64,
        torch.is_floating_point(a),
    )
    return x * sum(checks), checks


@program(lambda: (randn(4, 5), torch.tensor([[0, 1], [2, 0], [4, 4], [1, 3]])))
def gather_scatter_and_friends(x, idx):
    return (
        x.flip(0),
        x.roll(1, dims=1),
        torch.cumsum(x, 0),
        x.argmax(-1),
        torch.gather(x, 1, idx),
        torch.zeros(4, 5).scatter(1, idx, 1.0),
        x.index_select(1, idx[:, 0]),
        x.topk(2).indices,
    )


@program(lambda: (randn(2, 4, 6, 8), randn(2, 4, 6, 8), randn(2, 4, 6, 8)))
def attention(q, k, v):
    scale = q.shape[-1] ** -0.5
    manual = ((q @ k.transpose(-2, -1)) * scale).softmax(-1) @ v
    return manual, F.scaled_dot_product_attention(q, k, v)


@program(lambda: (randn(4, 3, 5), randn(3), randn(3).abs() + 0.5, randn(3), randn(3)))
def batch_norm_updates_running_stats(x, running_mean, running_var, w, b):
    train = F.batch_norm(x, running_mean, running_var, w, b, training=True, momentum=0.1)
    evaluated = F.batch_norm(x, running_mean, running_var, w, b, training=False)
    return train, evaluated


@program(lambda: (randn(1, 2, 4, 4),))
def interpolate_and_unfold(x):
    up = F.interpolate(x, scale_factor=2, mode="nearest")
    return up, F.interpolate(x, size=(3, 3), mode="bilinear", align_corners=False), F.unfold(x, 2)


@program(lambda: (randn(3, 4), randn(4).requires_grad_()))
def folded_metadata_of_intermediates(x, w):
    t = x.t()
    s = x[1:, 2:]
    y = t + 1
    g = x * w
    facts = (
        t.is_contiguous(), t.stride(), y.stride(), t.contiguous().stride(), s.storage_offset(),
        s.shape, y.dtype, (x > 0).dtype, x.int().element_size(), g.requires_grad, g.is_leaf,
        g.detach().requires_grad, x.sum().dim(), x.half().dtype.itemsize, (x @ t).shape,
    )
    return facts, y, g
