"""The ``torchdynamo`` package the transcribed test files import, made of recorders.

The corpus files are Dynamo's own tests (2022, when the package was still called
``torchdynamo``). They are never run as tests: their test methods are *replayed*
with this stand-in installed, and every call of a function that a test handed to
``torchdynamo.optimize(...)`` (or ``optimize_assert``, or ``standard_test``) is a
program. ``Recorder`` decides, call by call, whether to run the function eagerly
(calls before the one wanted) or to stop the replay there and hand the function
and its arguments out (``Captured``).

Everything a test may touch is lenient: its assertions do nothing (they would
check Dynamo's own frame counts), ``config`` reads False and accepts patches, and
any other ``torchdynamo`` name resolves to a ``Missing`` that raises ``NeedsDynamo``
when used, so the replay of a test that needs Dynamo's internals ends with a
reason instead of a result.
"""

from __future__ import annotations

import collections
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import unittest
from collections.abc import Callable
from typing import Any

import torch


class NeedsDynamo(Exception):
    """The test uses a part of Dynamo that has no stand-in (export, internals...)."""


class Captured(BaseException):
    """Stops a replay at the wanted call: the function and its arguments, not yet run."""

    def __init__(self, fn: Any, args: tuple, kwargs: dict) -> None:
        super().__init__("captured")
        self.fn, self.args, self.kwargs = fn, args, kwargs


class Recorder:
    """Counts the calls of optimized functions during one replay.

    ``stop_at`` is the index of the call to capture (None: run every call eagerly,
    only noting each call's signature in ``calls``, as discovery does).
    """

    def __init__(self, stop_at: int | None) -> None:
        self.stop_at = stop_at
        self.calls: list[tuple[int, str]] = []  # (id of the optimized wrapper, signature)

    def call(self, wrapper_id: int, fn: Any, args: tuple, kwargs: dict) -> Any:
        index = len(self.calls)
        self.calls.append((wrapper_id, signature(fn, args, kwargs)))
        if index == self.stop_at:
            raise Captured(fn, args, kwargs)
        return fn(*args, **kwargs)


ACTIVE: list[Recorder] = []


def signature(fn: Any, args: tuple, kwargs: dict) -> str:
    """What makes two calls of one function different programs: types, shapes, constants."""
    def one(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return f"T{tuple(value.shape)}{value.dtype}{value.requires_grad}"
        if isinstance(value, (int, float, bool, str, type(None))):
            return repr(value)
        if isinstance(value, (list, tuple)):
            return type(value).__name__ + "(" + ",".join(one(v) for v in value) + ")"
        if isinstance(value, dict):
            return "{" + ",".join(f"{k!r}:{one(v)}" for k, v in value.items()) + "}"
        return type(value).__name__
    code = getattr(getattr(fn, "forward", fn), "__code__", None)
    where = f"{code.co_name}:{code.co_firstlineno}" if code else type(fn).__name__
    return where + "|" + one(args) + one(kwargs)


class Optimized:
    """What ``torchdynamo.optimize(backend)(fn)`` returns: calls go through the recorder."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn
        self.__wrapped__ = fn
        for name in ("__name__", "__qualname__", "__doc__"):
            if hasattr(fn, name):
                setattr(self, name, getattr(fn, name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not ACTIVE:
            return self._fn(*args, **kwargs)
        return ACTIVE[-1].call(id(self), self._fn, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)

    def __get__(self, obj: Any, owner: Any = None) -> Any:  # used as a method decorator
        return self if obj is None else types.MethodType(self, obj)


class Optimize:
    """``torchdynamo.optimize(...)``: a decorator; as a context manager it has no stand-in."""

    def __call__(self, fn: Any) -> Any:
        if isinstance(fn, torch.nn.Module):
            return OptimizedModule(fn)
        return Optimized(fn)

    def __enter__(self) -> None:
        raise NeedsDynamo("torchdynamo.optimize as a context manager")

    def __exit__(self, *exc: object) -> None:
        return None


class OptimizedModule(torch.nn.Module):
    """An optimized module: its calls are recorded, its attributes are the module's."""

    def __init__(self, mod: torch.nn.Module) -> None:
        super().__init__()
        self._orig_mod = mod

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not ACTIVE:
            return self._orig_mod(*args, **kwargs)
        return ACTIVE[-1].call(id(self), self._orig_mod, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return super().__getattr__(name)
        return getattr(self._orig_mod, name)


def optimize(*args: Any, **kwargs: Any) -> Optimize:
    return Optimize()


class Lenient:
    """An assertion that never fails: callable, usable as ``with``, any attribute None."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if (len(args) >= 2 and isinstance(args[0], type) and issubclass(args[0], BaseException)
                and callable(args[1])):  # assertRaises(Error, fn, *args)
            try:
                args[1](*args[2:], **kwargs)
            except Exception:  # noqa: BLE001  (what the assertion expected)
                pass
            return None
        return self

    def __enter__(self) -> Lenient:
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> bool:
        return kind is not None and not issubclass(kind, Captured)

    def __getattr__(self, name: str) -> None:
        return None


class TestCase(unittest.TestCase):
    """Dynamo's TestCase with every ``assert*`` lenient (they check Dynamo's counters)."""

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("assert") or name in ("fail", "subTest"):
            return Lenient()
        return super().__getattribute__(name)

    def skipTest(self, reason: Any) -> None:  # noqa: N802  (unittest's name)
        raise NeedsDynamo(f"skipTest: {reason}")


class Missing:
    """A ``torchdynamo`` name without a stand-in: fine to import, raises when used."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, name: str) -> Missing:
        if name.startswith("__"):
            raise AttributeError(name)
        return Missing(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NeedsDynamo(self._name)


SUBMODULES = frozenset({"config", "testing", "test_case", "utils", "exc", "eval_frame"})


class LenientModule(types.ModuleType):
    """A ``torchdynamo`` module: its stand-ins, then ``Missing`` for any other name."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self.__name__ == "torchdynamo" and name in SUBMODULES:
            return importlib.import_module(f"torchdynamo.{name}")
        return Missing(f"{self.__name__}.{name}")


class NullPatch:
    """``config.patch(...)``, ``disable_cache_limit()``: does nothing, as ``with`` or decorator."""

    def __call__(self, fn: Any) -> Any:
        return fn

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class Config(LenientModule):
    """``torchdynamo.config``: every unknown setting reads False; settings may be patched."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return False

    def patch(self, *args: Any, **kwargs: Any) -> NullPatch:
        return NullPatch()


class CompileCounter:
    def __init__(self, *args: Any) -> None:
        self.frame_count = 0
        self.op_count = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
        return gm.forward

    def clear(self) -> None:
        pass


def standard_test(self: Any, fn: Callable[..., Any], nargs: int, expected_ops: Any = None,
                  expected_ops_dynamic: Any = None) -> None:
    """Dynamo's ``standard_test``: ``fn`` on ``nargs`` random 10x10 tensors."""
    args1 = [torch.randn(10, 10) for _ in range(nargs)]
    args2 = [torch.randn(10, 10) for _ in range(nargs)]
    opt_fn = Optimized(fn)
    opt_fn(*args1)
    opt_fn(*args2)


def _identity(fn: Any = None, *args: Any, **kwargs: Any) -> Any:
    return fn


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _exceptions() -> dict[str, type]:
    return {name: type(name, (Exception,), {}) for name in (
        "ResetRequired", "Unsupported", "BackendCompilerFailed", "RestartAnalysis",
        "TorchRuntimeError", "InternalTorchDynamoError",
    )}


def _build(name: str) -> types.ModuleType:
    import torch._dynamo.testing as dynamo_testing  # the runner may; bytegraph never does
    from torch._C._dynamo.eval_frame import unsupported

    module: types.ModuleType = Config(name) if name == "torchdynamo.config" else LenientModule(name)
    module.__path__ = []  # a package: any submodule imports
    values: dict[str, Any] = {}
    if name == "torchdynamo":
        values = dict(
            optimize=optimize, optimize_assert=optimize, run=_identity, disable=_identity,
            reset=_nothing, graph_break=_nothing, allow_in_graph=_identity,
            disallow_in_graph=_identity, skip=_identity,
        )
    elif name == "torchdynamo.testing":
        values = dict(
            CompileCounter=CompileCounter, CompileCounterWithBackend=CompileCounter,
            standard_test=standard_test, requires_static_shapes=_identity,
            unsupported=unsupported, same=dynamo_testing.same,
            rand_strided=dynamo_testing.rand_strided,
            reduce_to_scalar_loss=dynamo_testing.reduce_to_scalar_loss,
            collect_results=dynamo_testing.collect_results,
        )
    elif name == "torchdynamo.test_case":
        values = dict(TestCase=TestCase, run_tests=_nothing)
    elif name == "torchdynamo.utils":
        values = dict(
            counters=collections.defaultdict(collections.Counter),
            disable_cache_limit=NullPatch,
        )
    elif name == "torchdynamo.exc":
        values = _exceptions()
    elif name == "torchdynamo.eval_frame":
        values = dict(unsupported=unsupported)
    module.__dict__.update(values)
    return module


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``torchdynamo`` and any of its submodules as stand-ins."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname == "torchdynamo" or fullname.startswith("torchdynamo."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _build(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install() -> None:
    """Make ``import torchdynamo...`` find the stand-ins (once per process)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def adapt(text: str) -> str:
    """The test file's text, with the one import that needs test-only packages replaced.

    ``jit_utils`` needs ``expecttest``; its ``JitTestCase`` only serves as a base class.
    """
    return text.replace(
        "from torch.testing._internal.jit_utils import JitTestCase",
        "from torchdynamo.test_case import TestCase as JitTestCase",
    )
