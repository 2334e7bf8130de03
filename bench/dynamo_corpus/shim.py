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
        self.variant = ""  # the parametrize values in force

    def call(self, wrapper_id: int, fn: Any, args: tuple, kwargs: dict) -> Any:
        index = len(self.calls)
        self.calls.append((wrapper_id, self.variant + signature(fn, args, kwargs)))
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
        if isinstance(fn, Optimized):  # compiled twice: the program is the function
            fn = fn._fn
        if isinstance(fn, OptimizedModule):
            fn = fn._orig_mod
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


def _checked(name: str) -> Callable[..., Any]:
    real = getattr(unittest.TestCase, name)

    def check(self: Any, *args: Any, **kwargs: Any) -> Any:
        if ACTIVE:  # replaying: Dynamo's counters and results are not checked
            return Lenient()(*args, **kwargs)
        return real(self, *args, **kwargs)  # inside a program (make_dynamo_test): real

    check.__name__ = name
    return check


class TestCase(unittest.TestCase):
    """Dynamo's TestCase: ``assert*`` do nothing during a replay, check inside a program."""

    def skipTest(self, reason: Any) -> None:  # noqa: N802  (unittest's name)
        raise NeedsDynamo(f"skipTest: {reason}")

    def assertExpectedInline(self, *args: Any, **kwargs: Any) -> None:  # noqa: N802
        return None


for _name in dir(unittest.TestCase):
    if _name.startswith("assert") and _name not in vars(TestCase):
        setattr(TestCase, _name, _checked(_name))
TestCase.fail = _checked("fail")  # type: ignore[method-assign]


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


SUBMODULES = frozenset({
    "config", "testing", "test_case", "utils", "exc", "eval_frame", "common_utils",
})


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


def graph_break() -> None:
    """``torch._dynamo.graph_break()``: a C function neither compiler can trace."""
    from torch._C._dynamo.eval_frame import unsupported

    unsupported(None, None)


def compile_stub(model: Any = None, **kwargs: Any) -> Any:
    """``torch.compile`` while a test replays: a recorder, bare or as a decorator."""
    return Optimize() if model is None else Optimize()(model)


class EagerAndRecordGraphs:
    def __init__(self) -> None:
        self.graphs: list = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
        self.graphs.append(gm)
        return gm.forward


def make_dynamo_test(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The test method itself is the program, called with the test case."""
    def test(self: Any, *args: Any, **kwargs: Any) -> Any:
        return Optimized(fn)(self, *args, **kwargs)

    test.__name__ = fn.__name__
    return test


def parametrize(name: str, values: Any, **options: Any) -> Callable[..., Any]:
    """Run the test once per value (each one a distinct program: ``Recorder.variant``)."""
    names = [n.strip() for n in name.split(",")]

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        def test(self: Any, *args: Any, **kwargs: Any) -> None:
            for index, value in enumerate(values):
                if ACTIVE:
                    ACTIVE[-1].variant = f"{ACTIVE[-1].variant}{name}={index};"
                bound = dict(zip(names, value)) if len(names) > 1 else {name: value}
                fn(self, *args, **kwargs, **bound)

        test.__name__ = fn.__name__
        return test

    return decorate


def _decorator_factory(*args: Any, **kwargs: Any) -> Any:
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return _identity


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
            reset=_nothing, graph_break=graph_break, allow_in_graph=_identity,
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
            EagerAndRecordGraphs=EagerAndRecordGraphs, normalize_gm=_identity,
        )
    elif name == "torchdynamo.common_utils":
        values = dict(
            make_dynamo_test=make_dynamo_test, parametrize=parametrize,
            instantiate_parametrized_tests=_identity, munge_exc=_identity,
            run_tests=_nothing, TestCase=TestCase,
            **{n: _decorator_factory for n in (
                "skipIfTorchDynamo", "xfailIfTorchDynamo", "skipIfCrossRef", "skipIfWindows",
                "skipIfRocm", "serialTest", "unMarkDynamoStrictTest", "markDynamoStrictTest",
                "skipIfNoDill", "slowTest", "xfailIfPy312",
            )},
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
    text = text.replace(
        "from torch.testing._internal.jit_utils import JitTestCase",
        "from torchdynamo.test_case import TestCase as JitTestCase",
    )
    # the files written after the move into PyTorch: the same stand-ins, under their names
    for old, new in (
        ("torch.testing._internal.common_utils", "torchdynamo.common_utils"),
        ("torch.testing._internal.logging_utils", "torchdynamo.logging_utils"),
        ("torch._dynamo", "torchdynamo"),
    ):
        text = text.replace(old, new)
    return text
