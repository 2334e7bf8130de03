"""The exact differential check of test_containers and test_builtins.

Programs there take and return Python containers of every kind: sets,
OrderedDicts, defaultdicts, named tuples, dataclass-free nests of them. So
inputs are copied with ``copy.deepcopy`` (which keeps their types, a
defaultdict's factory and the sharing between them), and values are compared
strictly: the same type at every level, dict keys in the same order, sets
equal *and* iterating in the same order, tensors equal bit for bit with the
same dtype, shape, strides and requires_grad; dataclass instances field by
field. Identity among the mutable
objects reachable from the inputs and the result (which input a result is,
which outputs are one object) must match eager too.

Each program compiles with ``fullgraph=True`` into exactly one graph, and a
second call on fresh inputs (same Python values, new tensor values) must hit
the cache: no new graph, no new cache entry.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import torch

import bytegraph

_MUTABLE = (torch.Tensor, list, dict, set)


def assert_exact(actual: Any, expected: Any, path: str = "result") -> None:
    assert type(actual) is type(expected), (
        f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
    )
    if isinstance(expected, torch.Tensor):
        for attr in ("dtype", "shape", "device", "requires_grad"):
            assert getattr(actual, attr) == getattr(expected, attr), f"{path}: {attr} differs"
        assert actual.stride() == expected.stride(), f"{path}: strides differ"
        assert torch.equal(actual.nan_to_num(), expected.nan_to_num()), f"{path}: values differ"
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        if hasattr(expected, "default_factory"):
            assert actual.default_factory == expected.default_factory, f"{path}: factory"
        for key in expected:
            assert_exact(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_exact(a, e, f"{path}[{i}]")
    elif dataclasses.is_dataclass(expected):
        for field in dataclasses.fields(expected):
            name = field.name
            assert_exact(getattr(actual, name), getattr(expected, name), f"{path}.{name}")
    elif isinstance(expected, (set, frozenset)):
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
        assert list(actual) == list(expected), f"{path}: iteration order differs"
    elif isinstance(expected, float) and expected != expected:
        assert actual != actual, f"{path}: {actual!r} is not NaN"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _mutables(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, _MUTABLE):
        yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _mutables(item, f"{path}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _mutables(item, f"{path}[{i}]")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        yield path, value
        for field in dataclasses.fields(value):
            yield from _mutables(getattr(value, field.name), f"{path}.{field.name}")


def assert_same_identities(actual_world: Any, expected_world: Any) -> None:
    """Each mutable object is the same object as the same others on both sides."""
    actual = list(_mutables(actual_world, "world"))
    expected = list(_mutables(expected_world, "world"))
    assert [p for p, _ in actual] == [p for p, _ in expected]

    def partition(items: list[tuple[str, Any]]) -> list[int]:
        first: dict[int, int] = {}
        return [first.setdefault(id(obj), i) for i, (_, obj) in enumerate(items)]

    for (path, _), got, want in zip(expected, partition(actual), partition(expected)):
        assert got == want, (
            f"identity differs at {path}: eager has it the same object as "
            f"{expected[want][0]}, compiled as {expected[got][0]}"
        )


def check_exact(fn: Callable[..., Any], make_inputs: Callable[[], tuple], backend: Any) -> None:
    """Compiled ``fn`` matches eager, in one graph, twice (the second from the cache)."""
    compiled = bytegraph.compile(fn, backend=backend, fullgraph=True)
    for call in range(2):
        inputs = make_inputs()
        eager_inputs, compiled_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
        expected = fn(*eager_inputs)
        actual = compiled(*compiled_inputs)
        assert_exact(actual, expected)
        assert_exact(compiled_inputs, eager_inputs, "inputs after the call")
        assert_same_identities((compiled_inputs, actual), (eager_inputs, expected))
        assert backend.calls == 1, f"call {call + 1}: {backend.calls} graphs, expected 1"
        assert len(compiled.entries) == 1, f"call {call + 1}: {len(compiled.entries)} entries"
