"""Inductor training over changing batch sizes: one static entry, then one size-generic
entry (Inductor code over a symbolic batch) whose gradients equal eager's at every size.
Inductor compiles take seconds: one small model, three sizes."""

from __future__ import annotations

import torch

import bytegraph


def test_inductor_training_with_dynamic_batch_sizes() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 12), torch.nn.GELU(), torch.nn.LayerNorm(12), torch.nn.Linear(12, 2)
    )
    compiled = bytegraph.compile(model, backend="inductor")
    for b in (4, 7, 10):
        x = torch.randn(b, 6)
        model.zero_grad()
        model(x).pow(2).mean().backward()
        want = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        compiled(x).pow(2).mean().backward()
        got = [p.grad.clone() for p in model.parameters()]
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert len(compiled._compiled_forward.entries) <= 2
