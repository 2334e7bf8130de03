"""The graph side of numpy: torch._numpy calls as fx targets, and numpy's own answer.

A numpy call in a traced program becomes one graph node whose target is a
function made here (``graph_function``): it wraps its tensor arguments as
``torch._numpy.ndarray``, calls torch._numpy's function, method or operator of
the same name, and unwraps the ndarrays in the result back to tensors::

    a = x.numpy(); b = np.sin(a) * 2
    # graph:  numpy_sin = bytegraph.variables.numpy_calls.numpy_sin(x)
    #         numpy_mul = bytegraph.variables.numpy_calls.numpy_mul(numpy_sin, 2)

torch._numpy is numpy written over torch ops, not numpy itself: a few of its
answers differ (``int_array / 2`` is float32 there, float64 in numpy), and it
has no numpy scalars (``a.sum()`` is a numpy scalar in numpy, a 0-d array
there). So every call is also run once, at trace time, in real numpy on
stand-in arrays (``probe``): read-only arrays of ones with the dtypes, shapes
and strides of the traced ones. Its result says what eager returns (an array
or a numpy scalar, which dtype and shape) and is compared with what the
graph's node returns on metadata; a difference is a graph break, never a
different answer. An in-place write into an argument fails on the read-only
stand-ins, so it breaks too. Answers are memoized on the call's metadata.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import warnings
from collections.abc import Callable
from typing import Any

import torch

from bytegraph.exc import Unsupported


@functools.cache
def tnp() -> Any:
    """torch._numpy, with numpy's default dtypes (float64, complex128, int64) set
    directly: its lazy default reads them from torch._dynamo's config, whose import
    costs a second and which bytegraph never needs (the values are the same)."""
    import torch._numpy as module
    from torch._numpy import _dtypes_impl

    if _dtypes_impl._default_dtypes is None:
        _dtypes_impl._default_dtypes = _dtypes_impl.DefaultDTypes(
            float_dtype=torch.float64, complex_dtype=torch.complex128, int_dtype=torch.int64
        )
    return module


# -- dtypes --------------------------------------------------------------------------------

_DTYPE_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32",
                "float64", "complex64", "complex128")


@functools.cache
def _dtype_maps() -> tuple[dict[Any, torch.dtype], dict[torch.dtype, Any]]:
    import numpy as np

    to_torch = {np.dtype(name): getattr(torch, name) for name in _DTYPE_NAMES}
    return to_torch, {t: n for n, t in to_torch.items()}


def torch_dtype(np_dtype: Any) -> torch.dtype:
    """The torch dtype of a numpy dtype; Unsupported where torch._numpy has none."""
    found = _dtype_maps()[0].get(np_dtype)
    if found is None:
        raise Unsupported("numpy_unsupported", f"numpy dtype {np_dtype} in a traced numpy call")
    return found


def numpy_dtype(dtype: torch.dtype) -> Any:
    found = _dtype_maps()[1].get(dtype)
    if found is None:
        raise Unsupported("numpy_unsupported", f"a {dtype} tensor as a numpy array")
    return found


# -- graph targets -------------------------------------------------------------------------


def _to_tnp(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tnp().ndarray(value)
    if type(value) in (tuple, list):
        return type(value)(_to_tnp(v) for v in value)
    return value


def _from_tnp(value: Any) -> Any:
    if isinstance(value, tnp().ndarray):
        return value.tensor
    if isinstance(value, (tuple, list)):
        return type(value)(_from_tnp(v) for v in value)
    return value


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``fn`` under numpy's default float dtype, named for the printed graph.

    torch._numpy makes a Python scalar's result dtype torch's default dtype
    (``int_array / 2`` is float32 there); numpy's is float64. Switched only while
    the call runs (a backend that traces the graph records the resulting dtypes)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_default_dtype(previous)

    call.__name__ = call.__qualname__ = f"numpy_{name.replace('.', '_')}"
    call.__module__ = __name__
    return call


@functools.cache
def graph_function(kind: str, name: str) -> Callable[..., Any]:
    """The graph target for numpy's ``name``: a function (``"linalg.norm"``), an
    ndarray method (``"sum"``) or attribute (``"T"``), or an operator (``"mul"``).
    One object per name, so the metadata memo recognises repeated calls."""
    if kind == "function":
        def call(*args: Any, **kwargs: Any) -> Any:
            fn = functools.reduce(getattr, name.split("."), tnp())
            return _from_tnp(fn(*_to_tnp(args), **_to_tnp_kwargs(kwargs)))
    elif kind == "method":
        def call(*args: Any, **kwargs: Any) -> Any:
            receiver, *rest = _to_tnp(args)
            return _from_tnp(getattr(receiver, name)(*rest, **_to_tnp_kwargs(kwargs)))
    elif kind == "attribute":
        def call(*args: Any, **kwargs: Any) -> Any:
            return _from_tnp(getattr(_to_tnp(args[0]), name))
    else:
        op = getattr(operator, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return _from_tnp(op(*_to_tnp(args)))
    return _named(call, name)


def _to_tnp_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: _to_tnp(v) for k, v in kwargs.items()}


def graph_scalar(value: complex, dtype: torch.dtype) -> torch.Tensor:
    """A numpy scalar constant inside the graph: a 0-d tensor of its dtype."""
    return torch.tensor(value, dtype=dtype)


def restride(tensor: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    """A copy of ``tensor`` with numpy's strides (numpy and torch lay out some results
    of mixed-layout operands differently)."""
    out = torch.empty_strided(tensor.shape, stride, dtype=tensor.dtype, device=tensor.device)
    return out.copy_(tensor)


def to_ndarray(tensor: torch.Tensor) -> Any:
    """The ndarray of a graph output, at the graph's edge (sharing its memory)."""
    return tensor.numpy()


def to_numpy_scalar(tensor: torch.Tensor) -> Any:
    """The numpy scalar of a 0-d graph output (``a.sum()`` is one in numpy)."""
    return tensor.numpy()[()]


# -- numpy's own answer ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """What a traced ndarray is, for the stand-in numpy sees: dtype, shape, strides
    (in elements) and whether it is a numpy scalar rather than an array; for numpy's
    answer, also whether the array is a view of an argument."""

    dtype: Any
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    scalar: bool = False
    # numpy's result shares memory with an argument (a view): compared with the graph's
    view: bool = dataclasses.field(default=False, compare=False)

    def stand_in(self) -> Any:
        import numpy as np

        if self.scalar:
            return self.dtype.type(1)
        reach = [(n - 1) * s for n, s in zip(self.shape, self.strides)] if all(self.shape) else []
        low = sum(r for r in reach if r < 0)  # a[::-1]: its first element is the last in memory
        buffer = np.ones(1 + sum(r for r in reach if r > 0) - low, self.dtype)
        strides = tuple(s * self.dtype.itemsize for s in self.strides)
        return np.lib.stride_tricks.as_strided(buffer[-low:], self.shape, strides, writeable=False)


@dataclasses.dataclass(frozen=True)
class Answer:
    """numpy's result, leaf by leaf: ArraySpecs where it returned arrays or numpy
    scalars, the value itself where it returned a Python constant."""

    value: Any


_answers: dict[Any, Answer] = {}


def probe(call: Callable[[], tuple[Any, list[Any]]], key: Any) -> Answer:
    """Run ``call`` (numpy on stand-ins: the result and the arguments) once per ``key``;
    Unsupported if numpy raises."""
    known = _answers.get(key) if key is not None else None
    if known is not None:
        return known
    import numpy as np

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result, arguments = call()
    except Exception as e:  # eager raises, or writes into an argument: run it there
        raise Unsupported(
            "numpy_unsupported", f"numpy raised {type(e).__name__} on stand-in arrays "
            f"(an error in eager too, or a write into an array): {e}"
        ) from None
    answer = Answer(_summarize(result, _arrays(arguments)))
    if key is not None:
        _answers[key] = answer
    return answer


def _arrays(value: Any) -> list[Any]:
    import numpy as np

    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _arrays(v)]
    return []


def _summarize(value: Any, arguments: list[Any]) -> Any:
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.dtype.itemsize == 0 or any(s % value.dtype.itemsize for s in value.strides):
            raise Unsupported("numpy_unsupported", f"numpy returned a {value.dtype} array")
        strides = tuple(s // value.dtype.itemsize for s in value.strides)
        view = any(np.may_share_memory(value, a) for a in arguments)
        return ArraySpec(value.dtype, value.shape, strides, view=view)
    if isinstance(value, np.generic):
        return ArraySpec(value.dtype, (), (), scalar=True)
    if type(value) in (tuple, list):
        return type(value)(_summarize(v, arguments) for v in value)
    return value


def check_answer(expected: Any, example: Any, what: str) -> None:
    """Unsupported unless the graph's metadata result matches numpy's answer."""
    if isinstance(expected, ArraySpec):
        if not isinstance(example, torch.Tensor):
            raise _diverges(what, "a value where numpy returns an array")
        if example.dtype != torch_dtype(expected.dtype) or tuple(example.shape) != expected.shape:
            raise _diverges(
                what, f"{example.dtype} {list(example.shape)} where numpy returns "
                f"{expected.dtype} {list(expected.shape)}",
            )
        return
    if type(expected) in (tuple, list):
        if type(example) is not type(expected) or len(example) != len(expected):
            raise _diverges(what, f"a {type(example).__name__} where numpy returns a "
                                  f"{type(expected).__name__}")
        for e, x in zip(expected, example):
            check_answer(e, x, what)
        return
    raise _diverges(what, f"numpy returns a {type(expected).__name__} here")


def _diverges(what: str, detail: str) -> Unsupported:
    return Unsupported("numpy_divergence", f"torch._numpy's {what} gives {detail}")


def reset() -> None:
    _answers.clear()
