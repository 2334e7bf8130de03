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

import pytest
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


class Folding(nn.Module):
    """Folds its parameter's device and first stride into the trace as constants."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.w.device.type != "cpu":
            return x - 1
        return (x * self.w.stride(0)).sum() + self.w.sum()


def _folding_twins(counting_backend, shape: tuple[int, ...]):
    torch.manual_seed(0)
    model = Folding(shape)
    twin = copy.deepcopy(model)
    return model, twin, bytegraph.compile(twin, backend=counting_backend)


def test_parameter_moved_to_another_device(counting_backend) -> None:
    """The guard's device check (``is_cpu`` in its fast form) sees the parameter moved."""
    model, twin, compiled = _folding_twins(counting_backend, (4,))
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    for m in (model, twin):
        m.to("meta")  # a new Parameter: set_data cannot change the device type
    _same(compiled, model, x)
    assert counting_backend.calls == 2


@pytest.mark.parametrize(
    "shape, strided",
    [((4, 4), (1, 4)), ((1, 4), (1, 1))],
    ids=["transposed", "size_one_dimension"],
)
def test_parameter_strides_changed_in_place(counting_backend, shape, strided) -> None:
    """``p.data`` replaced by the same shape with other strides: the trace folded
    ``w.stride(0)``. A (1, 4) tensor is contiguous whatever its first stride, so there
    the guard must compare the strides themselves, not the contiguity flag."""
    model, twin, compiled = _folding_twins(counting_backend, shape)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    data = torch.randn(tuple(reversed(shape))).t()
    assert data.shape == shape and data.stride() == strided
    for m in (model, twin):
        m.w.data = data.clone()
        assert m.w.stride() == strided
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_module_converted_to_another_dtype(counting_backend) -> None:
    """``.double()`` replaces every parameter's data in place (``p.data = ...``)."""
    model, twin, compiled = _twins(counting_backend)
    _same(compiled, model, torch.randn(2, 4))
    for m in (model, twin):
        m.double()
    _same(compiled, model, torch.randn(2, 4, dtype=torch.float64))
    assert counting_backend.calls == 2


class Doubled(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) * 2


def test_submodule_class_swapped(counting_backend) -> None:
    """``m.__class__ = Sub``: the exact type check (which makes ``m.__class__ is C``
    redundant in the fast form) sees it."""
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    for m in (model, twin):
        m.layers[0].__class__ = Doubled
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_forward_hook_added_to_a_submodule(counting_backend) -> None:
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    for m in (model, twin):
        m.layers[1].register_forward_hook(lambda mod, args, out: out + 1)
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_parameter_or_submodule_replaced_by_an_equal_one_keeps_the_entry(
    counting_backend,
) -> None:
    """Parameters and submodules are read through the module on every call, and guarded
    by their metadata and class, not their identity: a new Parameter (or Linear) of the
    same kind is used without a recompile, with its own values."""
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    weight, layer = torch.randn(4, 4), nn.Linear(4, 4)
    for m in (model, twin):
        m.layers[0].weight = nn.Parameter(weight.clone())
        m.layers[1] = copy.deepcopy(layer)
    _same(compiled, model, x)
    assert counting_backend.calls == 1


def test_failure_reason_names_the_check_the_fast_guard_failed(counting_backend) -> None:
    """The fast guard function checks a parameter with cheaper equivalent expressions
    (``is_cpu``, ``is_contiguous()``); the readable form that names a failure must pass
    where it passes and fail on the same check."""
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    guard = compiled._compiled_forward.entries[0].guard
    assert guard.check(twin, x) and guard.first_failure((twin, x), {}) is None
    twin.layers[1].weight.data = torch.randn(4, 4).t()
    assert not guard.check(twin, x)
    weight = "self._modules['layers']._modules['1']._parameters['weight']"
    assert guard.first_failure((twin, x), {}) == f"{weight}.stride() == (4, 1)"


def test_parameter_deleted_and_added(counting_backend) -> None:
    """A parameter deleted (``bias`` registered as None: ``F.linear`` without one) must
    recompile; one added that no lookup of the trace meets keeps the entry."""
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    extra = torch.randn(3)
    for m in (model, twin):
        m.layers[0].register_parameter("extra", nn.Parameter(extra.clone()))
    _same(compiled, model, x)
    assert counting_backend.calls == 1
    for m in (model, twin):
        del m.layers[1].bias
        m.layers[1].register_parameter("bias", None)
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_parameter_swapped_with_another_tensor(counting_backend) -> None:
    """``torch.utils.swap_tensors`` (what ``module.to()`` uses for some tensor kinds)
    keeps the Parameter object and swaps everything under it: shape, strides, leafness."""
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    weight = torch.randn(4, 4).t()  # same shape, other strides
    for m in (model, twin):
        torch.utils.swap_tensors(m.layers[0].weight, nn.Parameter(weight.clone()))
    assert twin.layers[0].weight.stride() == (1, 4)
    _same(compiled, model, x)
    assert counting_backend.calls == 2


def test_parameter_made_a_non_leaf_in_place(counting_backend) -> None:
    """A parameter that stops requiring grad, then takes an in-place op with one that
    does, requires grad again but is no longer a leaf: ``requires_grad`` reads as traced,
    ``is_leaf`` does not, and the guard must see it."""
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4)
    _same(compiled, model, x)
    scale = torch.full((4,), 1.5, requires_grad=True)
    for m in (model, twin):
        bias = m.layers[1].bias
        bias.requires_grad_(False)
        bias.mul_(scale)
        assert bias.requires_grad and not bias.is_leaf
    _same(compiled, model, x)
    assert counting_backend.calls == 2


@pytest.mark.parametrize("kind", ["forward_pre", "full_backward", "full_backward_pre"])
def test_other_hooks_added_to_a_submodule(counting_backend, kind) -> None:
    """Each hook dict of a submodule is checked empty: a hook in any of them must run
    as eager runs it (the compiled call falls back or recompiles)."""
    model, twin, compiled = _twins(counting_backend)
    x = torch.randn(2, 4, requires_grad=True)
    _same(compiled, model, x)
    seen: list[str] = []
    for name, m in (("eager", model), ("compiled", twin)):
        layer = m.layers[1]
        if kind == "forward_pre":
            layer.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
        elif kind == "full_backward":
            layer.register_full_backward_hook(lambda mod, gi, go, n=name: seen.append(n))
        else:
            layer.register_full_backward_pre_hook(lambda mod, go, n=name: seen.append(n))
    expected, actual = model(x), compiled(x)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    expected.sum().backward()
    actual.sum().backward()
    assert seen == ([] if kind == "forward_pre" else ["eager", "compiled"])
