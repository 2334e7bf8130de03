"""``module.to(...)`` in forward (variables/module_conversions.py).

A conversion to what the module already has is the module itself, and
assigning it back to its own attribute changes nothing (Switch Transformers'
router: 26 graphs where torch.compile has 20). A real conversion, a module
whose ``_apply`` is its own, or torch's switches that replace parameters on
conversion stay breaks. Each is compared with eager on a copy of the module
(outputs, then every parameter and buffer, by value and by identity).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import bytegraph


class Router(nn.Module):
    """Switch Transformers' router: the classifier converted to a dtype in forward."""

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.classifier = nn.Linear(4, 3)
        self.register_buffer("scale", torch.ones(3))
        self.dtype = dtype

    def forward(self, h):
        h = h.to(self.dtype)
        self.classifier = self.classifier.to(self.dtype)
        return (self.classifier(h) * self.scale.to(self.dtype)).softmax(-1)


class FlatWeights(nn.Linear):
    def _apply(self, fn, recurse=True):
        self.applied = True  # what an RNN does: flattens its weights
        return super()._apply(fn, recurse)


def _state(module: nn.Module) -> list:
    return [(name, t.dtype, t.clone()) for name, t in module.state_dict().items()]


def _check(module: nn.Module, x: torch.Tensor, graphs: int, counting_backend) -> None:
    eager_module, compiled_module = copy.deepcopy(module), copy.deepcopy(module)
    tensors = [id(t) for t in compiled_module.state_dict(keep_vars=True).values()]
    compiled = bytegraph.compile(compiled_module, backend=counting_backend)
    for _ in range(2):
        expected, got = eager_module(x), compiled(x)
        assert got.dtype == expected.dtype and torch.equal(got, expected)
    for (n, dt, t), (n2, dt2, t2) in zip(_state(eager_module), _state(compiled_module)):
        assert (n, dt) == (n2, dt2) and torch.equal(t, t2)
    if graphs == 1:  # nothing converted: the very same tensors are still there
        assert tensors == [id(t) for t in compiled_module.state_dict(keep_vars=True).values()]
    assert counting_backend.calls == graphs


def test_a_conversion_to_the_dtype_it_has_is_the_module_itself(counting_backend) -> None:
    _check(Router(), torch.randn(2, 4), 1, counting_backend)


def test_a_real_conversion_still_breaks(counting_backend) -> None:
    _check(Router(torch.float64), torch.randn(2, 4), 2, counting_backend)


def test_a_module_with_its_own_apply_breaks(counting_backend) -> None:
    router = Router()
    router.classifier = FlatWeights(4, 3)
    _check(router, torch.randn(2, 4), 2, counting_backend)


@pytest.mark.parametrize("switch", ["overwrite", "swap"])
def test_torch_switches_that_replace_parameters_break(switch, counting_backend) -> None:
    setter = getattr(torch.__future__, f"set_{switch}_module_params_on_conversion")
    setter(True)
    try:
        _check(Router(), torch.randn(2, 4), 2, counting_backend)
    finally:
        setter(False)
