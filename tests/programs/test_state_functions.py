"""Functions reporting torch's state, folded at trace time (variables/torch.py): vs eager.

Library code asks ``torch.backends.mha.get_fastpath_enabled()``,
``torch.is_autocast_enabled()`` or ``has_torch_function(...)`` before doing
tensor work. Each is answered in the trace with no break, and where the
answer can change between calls (a switch the user flips), the entry's guard
calls the function again: flipping it recompiles, and the new entry takes
the other branch, as eager does.
"""

from __future__ import annotations

import pytest
import torch

import bytegraph


def fastpath(x):
    if torch.backends.mha.get_fastpath_enabled():
        return x + 1
    return x - 1


def autocast_aware(x):
    if torch.is_autocast_enabled("cpu"):
        return x * 2
    return x * 3


def deterministic(x):
    return x.cumsum(0) if torch.are_deterministic_algorithms_enabled() else x.flip(0)


def inference_mode_aware(x):
    return x.sin() if torch.is_inference_mode_enabled() else x.cos()


def checks_overrides(x, w):
    if torch._C._has_torch_function_variadic(x, w):
        return x
    if torch.overrides.has_torch_function((x, None, w)):
        return w
    return x @ w


def compiler_flags(x):
    if torch.compiler.is_dynamo_compiling() and not torch.jit.is_scripting():
        return x + 10
    return x


def tensor_kind_flags(x):
    if x.is_nested or x.is_mkldnn or x.is_meta or not x.is_cpu:
        return x
    return x * 4


@pytest.mark.parametrize(
    "fn, args",
    [
        (fastpath, (torch.randn(3),)),
        (autocast_aware, (torch.randn(3),)),
        (deterministic, (torch.randn(3),)),
        (inference_mode_aware, (torch.randn(3),)),
        (checks_overrides, (torch.randn(2, 3), torch.nn.Parameter(torch.randn(3, 2)))),
        (tensor_kind_flags, (torch.randn(3),)),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_state_function_folds_in_one_graph(fn, args, differential, counting_backend) -> None:
    full = differential.compile(fn, fullgraph=True)
    differential.check(fn, full, args)
    assert counting_backend.calls == 1


def test_is_dynamo_compiling_is_true_while_tracing(differential) -> None:
    compiled = differential.compile(compiler_flags)
    assert torch.equal(compiled(torch.zeros(2)), torch.full((2,), 10.0))


def test_flipping_a_switch_recompiles(differential, counting_backend) -> None:
    compiled = differential.compile(fastpath)
    before = torch.backends.mha.get_fastpath_enabled()
    try:
        for enabled in (True, False, True):
            torch.backends.mha.set_fastpath_enabled(enabled)
            differential.check(fastpath, compiled, (torch.randn(3),))
    finally:
        torch.backends.mha.set_fastpath_enabled(before)
    assert len(compiled.entries) == 2 and counting_backend.calls == 2


def test_autocast_switch_is_guarded(differential) -> None:
    compiled = differential.compile(autocast_aware)
    x = torch.randn(3)
    assert torch.equal(compiled(x), x * 3)
    with torch.autocast("cpu"):
        assert torch.equal(compiled(x), autocast_aware(x))
    assert torch.equal(compiled(x), x * 3)


def test_a_tensor_subclass_with_torch_function_is_left_to_python(differential) -> None:
    class Logged(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return super().__torch_function__(func, types, args, kwargs or {})

    x = torch.randn(2, 3).as_subclass(Logged)
    compiled = differential.compile(checks_overrides)
    got = compiled(x, torch.randn(3, 2))
    assert type(got) is Logged


def test_guard_reads_the_switch_by_name() -> None:
    out = bytegraph.explain(fastpath)(torch.randn(3))
    assert "torch.backends.mha.get_fastpath_enabled() is True" in str(out)
