"""TorchFunctionModes entered in compiled code (variables/function_modes.py).

Ops under ``with Mode():`` go through the mode's ``__torch_function__``, traced
as Python with the arguments torch hands it. transformers' vmap masks run under
``TransformGetItemToIndex`` (t5gemma2, unlimited_ocr, the NeMo ASR models: 5-6
graphs where torch.compile has 1). Each program is compared with eager, the
state modes write included, and its graph count asserted.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
from torch.overrides import TorchFunctionMode

import bytegraph
from tests.programs._harness import Corpus, check_program

corpus = Corpus()


class AddToMul(TorchFunctionMode):
    """Rewrites every addition into a multiplication."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.add or func is torch.add:
            func = torch.mul
        return func(*args, **(kwargs or {}))


class Recording(TorchFunctionMode):
    """Records the name of every call torch dispatches to it."""

    def __init__(self, log: list) -> None:
        super().__init__()
        self.log = log

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.log.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def _vmapped_mask(padding: torch.Tensor):
    """transformers' sdpa_mask with use_vmap: a mask function vmapped over 4 indices."""

    def mask(b, h, q, kv):
        return (kv <= q) & padding[b, kv]

    for dims in ((None, None, None, 0), (None, None, 0, None), (None, 0, None, None),
                 (0, None, None, None)):
        mask = torch.vmap(mask, in_dims=dims, out_dims=0)
    return mask


def _mask_inputs() -> tuple:
    padding = torch.tensor([[True, True, False, True], [True, False, True, True]])
    return torch.randn(2, 1, 4, 4), padding


@corpus.add(_mask_inputs)
def vmap_mask_under_transform_getitem_to_index(x, padding):
    batch, q = torch.arange(2), torch.arange(4)
    with TransformGetItemToIndex():
        m = _vmapped_mask(padding)(batch, torch.arange(1), q, torch.arange(4))
    return x.masked_fill(~m, 0.0)


@corpus.add(lambda: (torch.randn(3), torch.randn(3)))
def user_mode_rewrites_every_spelling_of_add(x, y):
    with AddToMul():
        a = x + y
        b = torch.add(x, y)
        c = x.add(y)
        d = 1 + x
    return a, b, c, d, x + y


@corpus.add(lambda: (torch.randn(4, 3),))
def mode_query_is_true_under_a_mode(x):
    with AddToMul():
        enabled = torch._C._is_torch_function_mode_enabled()
        y = x + 1
    return y * 2 if enabled else y


@corpus.add(lambda: (torch.randn(3),))
def nested_modes_each_dispatch_once(x):
    with AddToMul(), AddToMul():
        y = x + 2
    return y


@pytest.mark.parametrize("program", list(corpus), ids=lambda p: p.name)
def test_program(program, differential, counting_backend) -> None:
    check_program(program, differential, counting_backend)


def _recorded(fn, *args) -> tuple[list, object]:
    log: list = []
    result = fn(log, *args)
    return log, result


def recorded_ops(log, x, i):
    with Recording(log):
        a = x + 1
        b = 2 * x
        c = x[i:]
        d = x.shape[0] * a
        e = torch.nn.functional.relu(b).sum(dim=0)
        f = torch.add(c, d.size(0))
        g = x.dtype
        x[0] = 5.0
        n = len(x) if x is not None else 0
    return a, b, c, d, e, f, g, n


def test_a_mode_sees_what_eager_shows_it(counting_backend) -> None:
    x, i = torch.randn(3, 2), 1
    expected_log, expected = _recorded(recorded_ops, x.clone(), i)
    compiled = bytegraph.compile(recorded_ops, backend=counting_backend)
    log, got = _recorded(compiled, x.clone(), i)
    assert log == expected_log
    for a, b in zip(got, expected):
        assert torch.equal(a, b) if isinstance(b, torch.Tensor) else a == b
    assert counting_backend.calls == 1


def breaks_inside_the_mode(x):
    y = x * 2
    with AddToMul():
        a = y + 1
        print("inside")
        b = a + 2
    return (b + 3).sin()


def test_a_break_inside_a_mode_leaves_the_stack_as_eager(capsys) -> None:
    x = torch.randn(3)
    compiled = bytegraph.compile(breaks_inside_the_mode, backend="eager")
    assert torch.equal(compiled(x), breaks_inside_the_mode(x))
    assert torch._C._len_torch_function_stack() == 0


def plain_add(x, y):
    return x + y


def test_a_function_compiled_without_a_mode_is_not_run_under_one(counting_backend) -> None:
    x, y = torch.full((2,), 3.0), torch.full((2,), 2.0)
    compiled = bytegraph.compile(plain_add, backend="aot_eager")
    assert torch.equal(compiled(x, y), x + y)
    with AddToMul():
        expected = plain_add(x, y)
        assert torch.equal(compiled(x, y), expected)  # aot_eager once returned x + y here
    assert torch.equal(expected, x * y)


class DefaultDtype(TorchFunctionMode):
    """Fills in a dtype where a factory got none, changing the kwargs it was handed."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {} if kwargs is None else kwargs
        if func is torch.zeros and kwargs.get("dtype") is None:
            kwargs["dtype"] = torch.float64
        return func(*args, **kwargs)


def factory_under_a_mode(x):
    with DefaultDtype():
        z = torch.zeros(3)
    return x + z


def test_a_mode_may_change_the_kwargs_it_is_handed(differential, counting_backend) -> None:
    compiled = differential.compile(factory_under_a_mode)
    result = differential.check(factory_under_a_mode, compiled, (torch.randn(3),))
    assert result.dtype == torch.float64 and counting_backend.calls == 1
