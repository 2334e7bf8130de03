"""What may change on a compiled module between calls, and the guards that see it.

Each test compiles a twin of a module, changes the module and its twin alike
between calls, and compares the compiled call with eager (outputs, and the
graph count: a recompile where the change matters, none where it does not).
The changes: a parameter replaced or resized in place (``p.data = ...``),
``requires_grad_``, a submodule added or removed, an instance attribute that
shadows a class attribute, one that shadows nothing.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

import bytegraph


class Scaled(nn.Module):
    scale = 2.0  # a class attribute an instance attribute may shadow

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x) * self.scale


def _twins(counting_backend):
    torch.manual_seed(0)
    model = Scaled()
    twin = copy.deepcopy(model)
    return model, twin, bytegraph.compile(twin, backend=counting_backend)


def _same(compiled, model, x: torch.Tensor) -> None:
    expected = model(x)
    actual = compiled(x)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert actual.requires_grad == expected.requires_grad


def test_parameter_data_replaced_with_another_shape(counting_backend) -> None:
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    transposed, weight, bias = torch.randn(4, 4).t(), torch.randn(3, 4), torch.randn(3)
    for m in (model, twin):
        m.layers[1].weight.data = transposed.clone()  # same shape, other strides
    assert twin.layers[1].weight.stride() == (1, 4)
    _same(compiled, model, x)
    for m in (model, twin):
        m.layers[1].weight.data = weight.clone()  # same object, new shape
        m.layers[1].bias.data = bias.clone()
    _same(compiled, model, x)
    assert counting_backend.calls == 3


def test_parameter_data_replaced_with_another_dtype(counting_backend) -> None:
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4, dtype=torch.float64)
    for m in (model, twin):
        m.double()
    _same(compiled, model, x)
    for m in (model, twin):
        m.layers[0].bias.data = m.layers[0].bias.data.float()
    # eager raises on the mixed dtypes; so must the compiled module
    for m in (model, compiled):
        try:
            m(x)
        except RuntimeError:
            continue
        raise AssertionError(f"{m} ran with a float32 bias and float64 weights")


def test_requires_grad_toggled(counting_backend) -> None:
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    for m in (model, twin):
        m.requires_grad_(False)
    _same(compiled, model, x)
    for m in (model, twin):
        m.layers[0].weight.requires_grad_(True)
    _same(compiled, model, x)
    assert counting_backend.calls == 3


def test_submodule_added_and_removed(counting_backend) -> None:
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    for m in (model, twin):
        m.layers.append(nn.Tanh())
    _same(compiled, model, x)
    for m in (model, twin):
        del m.layers[0]
    _same(compiled, model, x)
    assert counting_backend.calls == 3


def test_instance_attribute_shadowing_a_class_attribute(counting_backend) -> None:
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    for m in (model, twin):
        m.scale = 3.0  # now found in the instance's __dict__, before the class's
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_instance_attribute_shadowing_nothing_keeps_the_entry(counting_backend) -> None:
    """The trace relies on ``scale``, ``forward``... being absent from the instance, not on
    all of its keys: an attribute no lookup of the trace met leaves the entry valid."""
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    for m in (model, twin, model.layers[0], twin.layers[0]):
        m.note = "unrelated"
    _same(compiled, model, x)
    assert counting_backend.calls == 1


def test_forward_shadowed_on_a_submodule(counting_backend) -> None:
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    for m in (model, twin):
        inner = m.layers[1]
        inner.forward = lambda t, inner=inner: torch.relu(nn.Linear.forward(inner, t))
    _same(compiled, model, x)
    assert counting_backend.calls == 2
