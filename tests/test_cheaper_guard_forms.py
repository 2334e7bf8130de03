"""The fast guard function's cheaper forms (guards/cheaper_forms.py) apply only where they
decide exactly what the plain form decides."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import bytegraph
from bytegraph.guards import cheaper_forms


class OwnHooksProperty(nn.Linear):
    @property
    def _forward_hooks(self):  # a class attribute: the instance dict is not what m.attr reads
        return {}


class OwnLookup(nn.Linear):
    def __getattribute__(self, name: str):
        return super().__getattribute__(name)


def test_module_attributes_read_from_the_instance_dict_only_where_lookup_finds_them_there():
    assert cheaper_forms.reads_instance_dict(nn.Linear, "_forward_hooks")
    assert cheaper_forms.reads_instance_dict(nn.Sequential, "_modules")
    assert not cheaper_forms.reads_instance_dict(nn.Linear, "weight")  # found by __getattr__
    assert not cheaper_forms.reads_instance_dict(OwnHooksProperty, "_forward_hooks")
    assert not cheaper_forms.reads_instance_dict(OwnLookup, "_forward_hooks")
    assert not cheaper_forms.reads_instance_dict(None, "_forward_hooks")  # type not checked


class Keyed(nn.Module):
    """Submodules equal to each other: a set of them holds one."""

    hashes = 0

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Keyed)

    def __hash__(self) -> int:
        Keyed.hashes += 1
        return 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


class Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = Keyed(2.0), Keyed(3.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x) + self.b(x)


def test_objects_put_in_a_set_only_where_they_hash_by_identity():
    assert cheaper_forms.hashed_by_identity([nn.Linear, nn.ReLU])
    assert not cheaper_forms.hashed_by_identity([nn.Linear, Keyed])
    assert not cheaper_forms.hashed_by_identity([torch.Tensor])  # elementwise __eq__
    assert not cheaper_forms.hashed_by_identity([None])  # type not checked


def test_distinct_objects_told_apart_by_id_where_they_define_equality(counting_backend):
    """Two submodules the trace told apart, of a class with its own ``__eq__``/``__hash__``:
    the guard compares their ids (a set of the modules would hold one, and the guard
    would fail on every call), and calls none of the user's methods."""
    model = Pair()
    compiled = bytegraph.compile(copy.deepcopy(model), backend=counting_backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), model(x))
    Keyed.hashes = 0
    torch.testing.assert_close(compiled(x), model(x))
    assert counting_backend.calls == 1
    assert Keyed.hashes == 0


def _by_layout(x: torch.Tensor) -> torch.Tensor:
    if x.layout == torch.strided:
        return x * 2
    return x * 3


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no mkldnn")
@pytest.mark.parametrize("shape", [(4,), (4, 4)])
def test_a_tensor_of_another_layout_fails_the_guard(counting_backend, shape):
    """An mkldnn tensor reports the strides ``(1, 0...)``, those of a 1-d contiguous
    tensor, and is contiguous whatever its shape: neither the stride check nor
    ``is_contiguous()`` tells it from a strided tensor, the layout check does."""
    compiled = bytegraph.compile(_by_layout, backend=counting_backend)
    x = torch.ones(shape)
    torch.testing.assert_close(compiled(x), _by_layout(x))
    opaque = x.to_mkldnn()
    torch.testing.assert_close(compiled(opaque).to_dense(), _by_layout(opaque).to_dense())


class FlagOwnTensor(torch.Tensor):
    """A subclass may answer ``requires_grad`` or ``is_leaf`` with any value."""


def test_flags_read_as_truth_values_only_on_torchs_own_tensors():
    from bytegraph.guards.guard import TensorSnapshot

    own = TensorSnapshot.of(nn.Parameter(torch.zeros(2)))
    assert cheaper_forms.flag_check("w", "requires_grad", True, own) == "w.requires_grad"
    assert cheaper_forms.flag_check("w", "is_leaf", False, own) == "not w.is_leaf"
    subclass = TensorSnapshot.of(torch.zeros(2).as_subclass(FlagOwnTensor))
    assert cheaper_forms.flag_check("w", "requires_grad", False, subclass) is None
