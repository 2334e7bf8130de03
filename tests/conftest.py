"""Shared test helpers: a counting backend and the eager-vs-compiled differential check.

Every program test follows one recipe (DESIGN.md, "Correctness rule"): run
the function eagerly on a clone of its inputs, run the compiled function on
another clone, and compare the outputs *and* the state of every input after
the call, including which outputs are (or alias) which inputs. Helpers are
handed out as fixtures so test modules in any folder can use them without
importing this file.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import bytegraph

# A bytegraph bug met while compiling raises in tests instead of falling back to Python.
bytegraph.config.strict = True


class CountingBackend:
    """A backend that records every GraphModule it gets and runs it as is (like "eager")."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.example_inputs: list[list[Any]] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(gm)
        self.example_inputs.append(list(example_inputs))
        return gm.forward

    @property
    def calls(self) -> int:
        return len(self.graphs)


def clone_value(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """A deep copy of tensors and containers, keeping strides, requires_grad and sharing."""
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()  # preserve_format: a transposed input stays transposed
        assert copy.stride() == value.stride(), "test inputs must be dense"
        copy.requires_grad_(value.requires_grad)
        if type(value) is torch.nn.Parameter:
            copy = torch.nn.Parameter(copy, requires_grad=value.requires_grad)
        assert type(copy) is type(value), f"cannot clone a {type(value).__name__}"
    elif isinstance(value, list):
        copy = [clone_value(v, memo) for v in value]
    elif isinstance(value, dict):
        copy = {k: clone_value(v, memo) for k, v in value.items()}
        if type(value) is collections.defaultdict:
            copy = collections.defaultdict(value.default_factory, copy)
        elif type(value) in (collections.OrderedDict, collections.Counter):
            copy = type(value)(copy)
    elif type(value) is tuple:
        copy = tuple(clone_value(v, memo) for v in value)
    elif type(value) is collections.deque:
        copy = collections.deque((clone_value(v, memo) for v in value), maxlen=value.maxlen)
    else:
        return value  # immutable Python values: int, float, str, dtype, None...
    memo[id(value)] = copy
    return copy


def assert_same_value(actual: Any, expected: Any, path: str = "result") -> None:
    """Same structure, same types, tensors equal bit for bit (NaN equal to NaN) with metadata."""
    assert type(actual) is type(expected), (
        f"{path}: type {type(actual).__name__} != {type(expected).__name__}"
    )
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(
            actual, expected, rtol=0, atol=0, equal_nan=True, check_stride=True,
            msg=lambda m: f"{path}: {m}",
        )
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same_value(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (tuple, list, collections.deque)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_value(a, e, f"{path}[{i}]")
    elif isinstance(expected, float) and expected != expected:
        assert actual != actual, f"{path}: {actual!r} is not NaN"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _objects(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every tensor, list and dict reachable from ``value``, with its path."""
    if isinstance(value, (torch.Tensor, list, dict, collections.deque)):
        yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _objects(item, f"{path}[{key!r}]")
    elif isinstance(value, (tuple, list, collections.deque)):
        for i, item in enumerate(value):
            yield from _objects(item, f"{path}[{i}]")


def _partition(items: list[tuple[str, Any]], key: Callable[[Any], Any]) -> list[int]:
    """For each item, the index of the first item with the same key."""
    first: dict[Any, int] = {}
    return [first.setdefault(key(obj), i) for i, (_, obj) in enumerate(items)]


def _storage(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor) and obj.numel() > 0:
        return obj.untyped_storage().data_ptr()
    return ("no storage", id(obj))


def assert_same_aliasing(actual_world: Any, expected_world: Any, check_views: bool = True) -> None:
    """Identity (and storage sharing) among inputs and outputs is the same on both sides.

    ``*_world`` is ``(args, kwargs, result)`` after the call: returning an input
    unchanged must return that very object; returning one tensor twice must
    return one object twice; a view of an input must still share its storage.
    """
    actual = list(_objects(actual_world, "world"))
    expected = list(_objects(expected_world, "world"))
    assert [p for p, _ in actual] == [p for p, _ in expected]
    paths = [p for p, _ in expected]
    kinds: list[tuple[str, Callable[[Any], Any]]] = [("the same object as", id)]
    if check_views:
        kinds.append(("sharing storage with", _storage))
    for what, key in kinds:
        got, want = _partition(actual, key), _partition(expected, key)
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, (
                f"aliasing differs at {paths[i]}: eager has it {what} {paths[w]}, "
                f"compiled has it {what} {paths[g]}"
            )


@dataclasses.dataclass
class Differential:
    """Run a function eagerly and compiled on equal inputs and compare everything."""

    backend: CountingBackend

    def compile(self, fn: Callable[..., Any], **options: Any) -> Any:
        return bytegraph.compile(fn, backend=options.pop("backend", self.backend), **options)

    def check(
        self,
        fn: Callable[..., Any],
        compiled: Callable[..., Any],
        args: tuple,
        kwargs: dict[str, Any] | None = None,
        *,
        exact: bool = True,
    ) -> Any:
        """Call both on clones of ``args``; assert equal results, inputs and aliasing."""
        kwargs = kwargs or {}
        seed = int(torch.randint(0, 2**31, ()))  # both runs draw the same random numbers
        eager_args, eager_kwargs = clone_value((args, kwargs))
        torch.manual_seed(seed)
        expected = fn(*eager_args, **eager_kwargs)
        compiled_args, compiled_kwargs = clone_value((args, kwargs))
        torch.manual_seed(seed)
        actual = compiled(*compiled_args, **compiled_kwargs)
        if exact:
            assert_same_value(actual, expected)
        else:
            assert_close_value(actual, expected)
        assert_same_value(compiled_args, eager_args, "args after the call")
        assert_same_value(compiled_kwargs, eager_kwargs, "kwargs after the call")
        assert_same_aliasing(
            (compiled_args, compiled_kwargs, actual), (eager_args, eager_kwargs, expected), exact
        )
        return actual


def assert_close_value(actual: Any, expected: Any, path: str = "result") -> None:
    """Like ``assert_same_value`` with torch's default float tolerances (other compilers)."""
    assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{path}: {m}")
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length differs"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close_value(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys differ"
        for key in expected:
            assert_close_value(actual[key], expected[key], f"{path}[{key!r}]")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


@pytest.fixture(autouse=True)
def fresh_bytegraph() -> Iterator[None]:
    """Every test starts and ends with empty caches and the default seed."""
    bytegraph.reset()
    torch.manual_seed(0)
    yield
    bytegraph.reset()


@pytest.fixture
def counting_backend() -> CountingBackend:
    return CountingBackend()


@pytest.fixture
def differential(counting_backend: CountingBackend) -> Differential:
    return Differential(counting_backend)


@pytest.fixture
def quiet_transformers() -> Iterator[None]:
    """transformers' logging at error level for one test (tiny configs trip warnings)."""
    transformers = pytest.importorskip("transformers")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(verbosity)
