"""Shape rules for the frequent ops of plain models, ahead of torch's meta kernels.

``graph/metadata.run`` asks ``infer(kind, target, args, kwargs)`` before it runs an
op on meta tensors. A rule answers with the result's ``Inferred`` (shape, dtype,
requires_grad; the result is always contiguous) or None, and None sends the op to
its meta kernel as before. Why: torch's meta kernels for these ops are Python (decompositions and
references behind ``torch._prims_common`` wrappers), and the first one a process
runs imports ``torch._dynamo``, Inductor's config and sympy, seconds of a cold
start; a program whose every op has a rule or a C++ meta kernel imports none of it.

Each rule accepts only the simplest form of its op and refuses the rest:

- every tensor argument a plain meta tensor of one floating dtype, with no size 0,
  and the main input laid out contiguously (so the result is contiguous too);
- no torch function or dispatch mode, functorch transform (a vmap body's tensors
  are meta tensors of another shape), autocast or inference mode active;
- the result requires grad exactly when grad mode is on and an input requires it
  (then it is no leaf, as an op's result is).

``tests/graph/test_shape_rules.py`` checks every rule against the meta kernel for
equality of shape, strides, dtype, requires_grad and is_leaf, under grad mode and
no_grad, and checks the refusals.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F  # noqa: N812 (the universal alias)

_FLOATS = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16})


class Inferred(NamedTuple):
    """A rule's answer: one contiguous result tensor."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    requires_grad: bool


Rule = Callable[[tuple, dict], "Inferred | None"]


def infer(kind: str, target: Any, args: tuple, kwargs: dict) -> Inferred | None:
    """The result's spec by a rule, or None (no rule, or a form the rule refuses)."""
    try:
        rule = (_METHOD_RULES.get(target) if kind == "call_method"
                else _FUNCTION_RULES.get(target) if kind == "call_function" else None)
    except TypeError:  # an unhashable target has no rule
        return None
    if rule is None or not _plain_context():
        return None
    return rule(args, kwargs)


def _plain_context() -> bool:
    """No mode, transform or autocast that could change what the op gives."""
    return (
        torch._C._len_torch_function_stack() == 0
        and torch._C._len_torch_dispatch_stack() == 0
        and torch._C._functorch.maybe_current_level() is None  # vmap, grad... bodies
        and not torch._C._is_any_autocast_enabled()
        and not torch.is_inference_mode_enabled()
    )


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _plain(t: Any, dtype: torch.dtype | None = None, contiguous: bool = False) -> bool:
    """A plain meta tensor of a floating dtype (``dtype`` if given), no size 0."""
    return (
        type(t) is torch.Tensor
        and t.is_meta
        and not torch._C._functorch.is_functorch_wrapped_tensor(t)  # batched: other shape
        and t.layout == torch.strided
        and t.dtype in _FLOATS
        and (dtype is None or t.dtype == dtype)
        and not t.is_inference()
        and 0 not in t.shape  # sizes are never negative
        and (not contiguous or _contiguous(t))
    )


def _contiguous(t: torch.Tensor) -> bool:
    """Exactly the strides of a new tensor of its shape. ``is_contiguous()`` says so but for
    the strides of size-1 dimensions, which it does not look at (and is cheaper)."""
    return t.is_contiguous() and (1 not in t.shape or t.stride() == contiguous_strides(t.shape))


def _result(shape: Sequence[int], dtype: torch.dtype, inputs: Sequence[Any]) -> Inferred:
    grad = False
    if torch.is_grad_enabled():
        for t in inputs:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                grad = True
                break
    return Inferred(tuple(shape), dtype, grad)


def _bind(args: tuple, kwargs: dict, names: Sequence[str], defaults: dict[str, Any],
          keyword_only: int = 0):
    """Arguments by name (the last ``keyword_only`` names by keyword only), or None for
    an extra or unknown argument: the op's own call raises its own error."""
    if len(args) > len(names) - keyword_only or any(k not in names for k in kwargs):
        return None
    bound = dict(defaults)
    bound.update(zip(names, args))
    for k, v in kwargs.items():
        if k in bound and names.index(k) < len(args):
            return None  # given twice: let the op raise its own error
        bound[k] = v
    return bound if all(n in bound for n in names) else None


# -- elementwise ----------------------------------------------------------------------------


def _unary(args: tuple, kwargs: dict) -> Inferred | None:
    b = _bind(args, kwargs, ("input",), {})
    if b is None or not _plain(b["input"], contiguous=True):
        return None
    return _result(b["input"].shape, b["input"].dtype, [b["input"]])


def _method_unary(args: tuple, kwargs: dict) -> Inferred | None:
    """``x.tanh()`` and the like: the tensor is ``self``, nothing else is given."""
    return _unary(args, {}) if len(args) == 1 and not kwargs else None


def _binary(args: tuple, kwargs: dict) -> Inferred | None:
    """``x + y``, ``x * 0.5``, ``torch.mul(x, y)``, ``x.div(y)``...: tensors of one shape and
    one floating dtype, all laid out contiguously, and Python ints and floats (which
    take the tensors' dtype). Broadcasting, 0-d tensors, ``alpha`` or ``rounding_mode``,
    mixed dtypes: the meta kernel (their result layout follows the inputs' strides)."""
    if len(args) != 2 or kwargs:
        return None
    a, b = args
    a_tensor, b_tensor = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
    if not (a_tensor or _scalar(a)) or not (b_tensor or _scalar(b)):
        return None
    if a_tensor and b_tensor:
        if not (_plain(a, contiguous=True) and _plain(b, a.dtype, contiguous=True)
                and b.shape == a.shape):
            return None
        return _result(a.shape, a.dtype, (a, b))
    first = a if a_tensor else b if b_tensor else None
    if first is None or not _plain(first, contiguous=True):
        return None
    return _result(first.shape, first.dtype, (first,))


def _tensor_first_binary(args: tuple, kwargs: dict) -> Inferred | None:
    """``torch.add(x, y)``, ``x.mul(y)``: unlike ``2 * x``, these take no number first."""
    return _binary(args, kwargs) if args and isinstance(args[0], torch.Tensor) else None


def _scalar(value: Any) -> bool:
    """A Python float, or an int torch converts (one beyond 64 bits raises OverflowError)."""
    return type(value) is float or (type(value) is int and -(2**63) <= value < 2**64)


def _softmax(args: tuple, kwargs: dict) -> Inferred | None:
    """``F.softmax(x, dim)``, ``torch.softmax(x, dim)``, ``x.softmax(dim)`` over a given
    dimension, without ``dtype``."""
    b = _bind(args, kwargs, ("input", "dim", "_stacklevel", "dtype"),
              {"_stacklevel": 3, "dtype": None})
    if b is None or b["dtype"] is not None or type(b["dim"]) is not int:
        return None
    x = b["input"]
    if not _plain(x, contiguous=True) or not -x.dim() <= b["dim"] < max(x.dim(), 1):
        return None
    return _result(x.shape, x.dtype, [x])


def _matmul(args: tuple, kwargs: dict) -> Inferred | None:
    """``x @ y`` of one floating dtype: 2-d by 2-d (any strides: the product is a new
    tensor), a contiguous n-d (n >= 3) by 2-d, or n-d by n-d with equal batch sizes.
    Vectors and broadcast batches: the meta kernel."""
    if len(args) != 2 or kwargs:
        return None
    x, y = args
    if not (_plain(x) and _plain(y, x.dtype) and x.dim() >= 2 and y.dim() >= 2):
        return None
    if x.shape[-1] != y.shape[-2]:
        return None
    if y.dim() == 2:
        if x.dim() > 2 and not _plain(x, contiguous=True):
            return None
        return _result((*x.shape[:-1], y.shape[1]), x.dtype, [x, y])
    if x.dim() != y.dim() or x.shape[:-2] != y.shape[:-2]:
        return None
    return _result((*x.shape[:-1], y.shape[-1]), x.dtype, [x, y])


def _relu(args: tuple, kwargs: dict) -> Inferred | None:
    b = _bind(args, kwargs, ("input", "inplace"), {"inplace": False})
    return None if b is None or b["inplace"] is not False else _unary((b["input"],), {})


def _torch_relu(args: tuple, kwargs: dict) -> Inferred | None:
    return _unary(args, kwargs)


def _silu(args: tuple, kwargs: dict) -> Inferred | None:
    b = _bind(args, kwargs, ("input", "inplace"), {"inplace": False})
    return None if b is None or b["inplace"] is not False else _unary((b["input"],), {})


def _gelu(args: tuple, kwargs: dict) -> Inferred | None:
    b = _bind(args, kwargs, ("input", "approximate"), {"approximate": "none"}, keyword_only=1)
    approximate = None if b is None else b["approximate"]
    if type(approximate) is not str or approximate not in ("none", "tanh"):
        return None
    return _unary((b["input"],), {})


# -- linear algebra and convolution ------------------------------------------------------------


def _linear(args: tuple, kwargs: dict) -> Inferred | None:
    b = _bind(args, kwargs, ("input", "weight", "bias"), {"bias": None})
    if b is None:
        return None
    x, w, bias = b["input"], b["weight"], b["bias"]
    if not (_plain(x, contiguous=True) and _plain(w, x.dtype) and x.dim() >= 2 and w.dim() == 2):
        return None
    if x.shape[-1] != w.shape[1]:
        return None
    if bias is not None and not (_plain(bias, x.dtype) and tuple(bias.shape) == (w.shape[0],)):
        return None
    return _result((*x.shape[:-1], w.shape[0]), x.dtype, [x, w, bias])


def _pair(value: Any) -> tuple[int, int] | None:
    if type(value) is int:
        return value, value
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(type(v) is int for v in value):
        return value[0], value[1]
    return None


def _window(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _conv2d(args: tuple, kwargs: dict) -> Inferred | None:
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
    b = _bind(args, kwargs, names, {"bias": None, "stride": 1, "padding": 0, "dilation": 1,
                                    "groups": 1})
    if b is None:
        return None
    x, w, bias, groups = b["input"], b["weight"], b["bias"], b["groups"]
    stride, padding, dilation = (_pair(b[k]) for k in ("stride", "padding", "dilation"))
    if None in (stride, padding, dilation) or type(groups) is not int or groups < 1:
        return None
    # Every size above 1: a size-1 dimension makes a contiguous tensor look channels-last too.
    if not (_plain(x, contiguous=True) and _plain(w, x.dtype, contiguous=True)
            and x.dim() == 4 and w.dim() == 4 and all(n > 1 for n in (*x.shape, *w.shape))):
        return None
    out_channels = w.shape[0]
    if x.shape[1] != w.shape[1] * groups or out_channels % groups:
        return None
    if bias is not None and not (_plain(bias, x.dtype) and tuple(bias.shape) == (out_channels,)):
        return None
    if min(stride) < 1 or min(padding) < 0 or min(dilation) < 1:
        return None
    spatial = [_window(x.shape[2 + i], w.shape[2 + i], stride[i], padding[i], dilation[i])
               for i in range(2)]
    if min(spatial) < 2:
        return None
    return _result((x.shape[0], out_channels, *spatial), x.dtype, [x, w, bias])


# -- normalization, pooling, reduction ------------------------------------------------------------


def _batch_norm(args: tuple, kwargs: dict) -> Inferred | None:
    names = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum",
             "eps")
    b = _bind(args, kwargs, names, {"weight": None, "bias": None, "training": False,
                                    "momentum": 0.1, "eps": 1e-5})
    if b is None or b["training"] is not False:  # training writes the running statistics
        return None
    x = b["input"]
    if not (_plain(x, contiguous=True) and x.dim() >= 2):
        return None
    channels = (x.shape[1],)
    params = [b[k] for k in ("running_mean", "running_var", "weight", "bias")]
    for i, p in enumerate(params):
        optional = i >= 2
        if p is None and optional:
            continue
        if not (_plain(p, x.dtype) and tuple(p.shape) == channels):
            return None
    if any(p.requires_grad for p in params[:2]):
        return None
    return _result(x.shape, x.dtype, [x, *params[2:]])


def _max_pool2d(args: tuple, kwargs: dict) -> Inferred | None:
    names = ("input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
             "return_indices")
    b = _bind(args, kwargs, names, {"stride": None, "padding": 0, "dilation": 1,
                                    "ceil_mode": False, "return_indices": False})
    if b is None or b["ceil_mode"] is not False or b["return_indices"] is not False:
        return None
    x = b["input"]
    kernel = _pair(b["kernel_size"])
    default_stride = b["stride"] is None or (type(b["stride"]) is list and not b["stride"])
    stride = kernel if default_stride else _pair(b["stride"])
    padding, dilation = _pair(b["padding"]), _pair(b["dilation"])
    if None in (kernel, stride, padding, dilation):
        return None
    if not (_plain(x, contiguous=True) and x.dim() == 4 and all(n > 1 for n in x.shape)):
        return None
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        return None
    if any(2 * p > k for p, k in zip(padding, kernel)):
        return None  # torch refuses padding above half the kernel
    spatial = [_window(x.shape[2 + i], kernel[i], stride[i], padding[i], dilation[i])
               for i in range(2)]
    if min(spatial) < 2:
        return None
    return _result((*x.shape[:2], *spatial), x.dtype, [x])


def _mean(args: tuple, kwargs: dict) -> Inferred | None:
    """``x.mean(dim=...)`` over a tuple of distinct dimensions, keepdim False, no dtype."""
    b = _bind(args, kwargs, ("self", "dim", "keepdim", "dtype"),
              {"keepdim": False, "dtype": None}, keyword_only=1)
    if b is None or b["keepdim"] is not False or b["dtype"] is not None:
        return None
    x, dims = b["self"], b["dim"]
    if type(dims) is int:
        dims = (dims,)
    if not (isinstance(dims, (tuple, list)) and dims and all(type(d) is int for d in dims)):
        return None
    if not _plain(x, contiguous=True) or x.dim() == 0:
        return None
    rank = x.dim()
    if any(not -rank <= d < rank for d in dims):
        return None
    kept = {d % rank for d in dims}
    if len(kept) != len(dims):
        return None
    return _result([n for i, n in enumerate(x.shape) if i not in kept], x.dtype, [x])


_FUNCTION_RULES: dict[Any, Rule] = {
    F.linear: _linear,
    F.relu: _relu,
    torch.relu: _torch_relu,
    F.gelu: _gelu,
    torch.conv2d: _conv2d,
    F.conv2d: _conv2d,
    F.batch_norm: _batch_norm,
    F.max_pool2d: _max_pool2d,
    F.silu: _silu,
    F.softmax: _softmax,
    torch.softmax: _softmax,
    operator.matmul: _matmul,
    torch.matmul: _matmul,
    operator.neg: _unary,
    **dict.fromkeys((operator.add, operator.sub, operator.mul, operator.truediv), _binary),
    **dict.fromkeys((torch.add, torch.sub, torch.mul, torch.div), _tensor_first_binary),
    **dict.fromkeys(
        (torch.tanh, torch.sigmoid, torch.exp, torch.neg, torch.sin, torch.cos, torch.sqrt,
         torch.rsqrt, torch.abs), _unary),
}
_METHOD_RULES: dict[str, Rule] = {
    "mean": _mean,
    "softmax": _softmax,
    "matmul": _matmul,
    **dict.fromkeys(("add", "sub", "mul", "div"), _tensor_first_binary),
    **dict.fromkeys(
        ("tanh", "sigmoid", "exp", "neg", "sin", "cos", "sqrt", "rsqrt", "abs"), _method_unary),
}
