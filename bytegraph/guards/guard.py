"""Guard records: one condition on one source that a cache entry relies on."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import torch

from bytegraph.exc import Unsupported
from bytegraph.guards.sources import Source


class GuardKind(enum.Enum):
    TENSOR_MATCH = "tensor_match"  # type, dtype, device, shape, stride, requires_grad, is_leaf
    CONSTANT_MATCH = "constant_match"  # exact type and equal value
    ID_MATCH = "id_match"  # the very same object
    TYPE_MATCH = "type_match"  # exact type
    LEN_MATCH = "len_match"  # exact type and length (lists, tuples)
    DICT_KEYS = "dict_keys"  # exact type and keys in order
    SAME_OBJECT = "same_object"  # two sources reach one object (expected: other source)
    EMPTY = "empty"  # no items (expected: the container itself, when it is a fixed object)
    GLOBAL_ABSENT = "global_absent"  # a module global that must stay undefined (builtins)
    DISTINCT = "distinct"  # not the same object as any of others (expected: tuple of sources)
    KEY_ABSENT = "key_absent"  # a mapping (a class's __dict__) lacks a key (expected: the key)
    SHAPE = "shape"  # a relation between sizes the ShapeEnv relied on (expected: Python text)
    CLOSES_QUIETLY = "closes_quietly"  # freeing it runs no code (dropped_values.py)
    # A module subtree's guards, checked by one helper shared by the copies of a repeated
    # block (expected: the helper). Made for the fast guard function only (subtrees.py).
    SUBTREE = "subtree"

    # Members are singletons: hash them by identity, in C (Enum's hashes the name in
    # Python, and a trace keys every guard by its kind: 4,600 times on 60 Linear calls).
    __hash__ = object.__hash__


@dataclasses.dataclass(frozen=True, slots=True)
class TensorSnapshot:
    """What TENSOR_MATCH compares: the metadata the trace specialised on."""

    tensor_type: type
    dtype: torch.dtype
    device: torch.device
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    requires_grad: bool
    is_leaf: bool  # only ever False when requires_grad is True
    # Dimensions whose size, and those whose stride, is symbolic (graph/shapes.py): not
    # compared; their relations are SHAPE guards.
    dynamic: frozenset[int] = frozenset()
    dynamic_strides: frozenset[int] = frozenset()

    @staticmethod
    def of(t: torch.Tensor, dynamic: frozenset[int] = frozenset()) -> TensorSnapshot:
        """The snapshot of a strided tensor; Unsupported for any other kind."""
        if t.layout is not torch.strided or t.is_nested or t.is_quantized:
            kind = "nested" if t.is_nested else "quantized" if t.is_quantized else str(t.layout)
            detail = f"a {kind} tensor (only strided ones are traced)"
            raise Unsupported("unsupported_tensor_kind", detail)
        return TensorSnapshot(
            type(t), t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t.requires_grad,
            t.is_leaf, dynamic,
        )


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Guard:
    kind: GuardKind
    source: Source
    expected: Any = None

    @property
    def key(self) -> tuple[Any, ...]:
        return guard_key(self.kind, self.source, self.expected)


# The kinds of which one source may have several guards, told apart by what they
# expect: one per key or relation (a source may be told apart from several groups).
KEYED_BY_EXPECTED = frozenset({GuardKind.KEY_ABSENT, GuardKind.SHAPE, GuardKind.DISTINCT})


def guard_key(kind: GuardKind, source: Source, expected: Any) -> tuple[Any, ...]:
    """What tells guards apart: their kind and source, and for some kinds what they expect."""
    return (kind, source, expected) if kind in KEYED_BY_EXPECTED else (kind, source)
