"""Global state the trace depends on is guarded: grad mode, default dtype, default device."""

from __future__ import annotations

import torch

import bytegraph


def make_ones(x):
    return x + torch.ones(3)  # a factory: its device is the default device's


def test_default_device_change_recompiles(counting_backend) -> None:
    compiled = bytegraph.compile(make_ones, backend=counting_backend)
    x = torch.zeros(3)
    assert torch.equal(compiled(x), make_ones(x))
    try:
        torch.set_default_device("meta")
        meta_x = torch.zeros(3)
        got, want = compiled(meta_x), make_ones(meta_x)
        assert got.device == want.device == torch.device("meta")
        assert got.shape == want.shape
    finally:
        torch.set_default_device(None)
    assert counting_backend.calls == 2
    assert torch.equal(compiled(x), make_ones(x))  # back to cpu: the first entry again
    assert counting_backend.calls == 2


def test_default_device_is_not_guarded_without_a_factory(counting_backend) -> None:
    def f(x):
        return x * 2

    compiled = bytegraph.compile(f, backend=counting_backend)
    compiled(torch.ones(2))
    assert "get_default_device" not in str(compiled.entries[0].guard)
    with_factory = bytegraph.compile(make_ones, backend=counting_backend)
    with_factory(torch.ones(3))
    assert "get_default_device" in str(with_factory.entries[0].guard)
