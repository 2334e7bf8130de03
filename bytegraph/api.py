"""``compile()`` and the compiled-function wrapper with its call fast path.

A call checks the cache entries newest first: the first whose guard passes
runs its transformed function. A miss translates the call into a new entry;
after ``config.recompile_limit`` entries the function runs as plain Python,
with one warning naming the guard that kept failing.

A miss holds one process-wide lock while it compiles: threads calling one
function with new inputs compile one at a time, each first checking whether
another has just compiled an entry that fits, so ``entries`` never outgrows
the limit. A cache hit takes no lock: it reads ``_checks``, a tuple replaced
whole on every change.

A bytegraph bug while compiling (any exception that is neither an
``Unsupported`` under ``fullgraph`` nor a backend's failure) never reaches
the user: the function runs as plain Python from then on, with one warning,
and the traceback goes to the ``internal`` log artifact.
``config.strict = True`` raises it instead, as ``InternalError``.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch

from bytegraph import config, logs, structured_trace
from bytegraph.exc import InternalError, Unsupported
from bytegraph.graph.backends import Backend, BackendError, lookup_backend
from bytegraph.graph.shapes import DynamicDims
from bytegraph.guards.cache import CacheEntry
from bytegraph.markers import is_disabled
from bytegraph.runtime import Router
from bytegraph.translate.convert import bind_arguments, convert_frame
from bytegraph.translate.resume import FrameContext
from bytegraph.variables.nn_module import has_hooks

_live_functions: weakref.WeakSet[CompiledFunction] = weakref.WeakSet()
# Held by every cache miss while it looks again and compiles (re-entrant: compiling
# may call another compiled function).
_compile_lock = threading.RLock()
_CheckedRun = tuple[Callable[..., bool], Callable[..., Any]]
# The Recording (recording.py) that explain() or the command line has active, if any:
# compile() hands it each backend to wrap and each result. Never read on the call path.
active_recording: Any = None


class CompiledFunction:
    """A function compiled lazily, one cache entry per specialisation."""

    def __init__(
        self,
        fn: types.FunctionType,
        backend: Backend,
        fullgraph: bool,
        resume_cache: dict | None = None,
        router: Router | None = None,
    ) -> None:
        self.fn = fn
        self.backend = backend
        self.fullgraph = fullgraph
        # Resume functions of this function's breaks, shared by its resume functions.
        self.resume_cache = resume_cache if resume_cache is not None else {}
        # Callees of the code it runs as Python, shared by its resume functions and callees.
        if router is None:
            router = Router(self._compile_related)
            router.seed(fn, self)
        self.router = router
        self.context = FrameContext(
            fn, self._compile_related, self.resume_cache, {}, router.route
        )
        self.entries: list[CacheEntry] = []
        self._checks: tuple[_CheckedRun, ...] = ()
        self._exhausted = False
        # Which argument dimensions are dynamic (graph/shapes.py); compile(dynamic=...).
        self.dynamic: bool | None = None
        self.dynamic_dims = DynamicDims()
        functools.update_wrapper(self, fn)
        _live_functions.add(self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for check, run in self._checks:
            if check(*args, **kwargs):
                return run(*args, **kwargs)
        return self._miss(args, kwargs)

    def _compile_related(self, fn: types.FunctionType) -> CompiledFunction:
        """A resume function or a callee, compiled with this function's settings."""
        return CompiledFunction(
            fn, self.backend, self.fullgraph, self.resume_cache, self.router
        ).set_dynamic(self.dynamic)

    def set_dynamic(self, dynamic: bool | None) -> CompiledFunction:
        """None: static, then automatic dynamic on a size change; True: every dimension
        dynamic from the first call; False: never (one entry per size)."""
        self.dynamic = dynamic
        self.dynamic_dims = DynamicDims(automatic=dynamic is None, everything=dynamic is True)
        return self

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else types.MethodType(self, obj)

    def _miss(self, args: tuple, kwargs: dict) -> Any:
        with _compile_lock:
            run = self._lookup_or_compile(args, kwargs)
        return run(*args, **kwargs)

    def _lookup_or_compile(self, args: tuple, kwargs: dict) -> Callable[..., Any]:
        """What runs this call: an entry another thread compiled meanwhile, a new one, or fn."""
        for check, run in self._checks:
            if check(*args, **kwargs):
                return run
        if self._exhausted:
            return self.fn
        try:
            frame_values = bind_arguments(self.fn, args, kwargs)
        except TypeError:  # a call eager rejects: let the function raise its own error
            return self.fn
        if len(self.entries) >= config.recompile_limit:
            self._give_up(args, kwargs)
            return self.fn
        changes = self.dynamic_dims.update(frame_values)
        changes += self.dynamic_dims.update_inputs(frame_values)
        if self.entries and logs.enabled("recompiles"):
            failed = self.entries[0].guard.explain_failure(args, kwargs)
            decided = "".join(f"; {change}" for change in changes)
            logs.get_logger("recompiles").info(
                "recompiling %s (%s:%d): guard failed: %s%s",
                self.fn.__qualname__, self.fn.__code__.co_filename,
                self.fn.__code__.co_firstlineno, failed, decided,
            )
        dynamic = self.dynamic_dims.for_call(frame_values)
        started = time.perf_counter()
        try:
            with structured_trace.compiling(self, self.fn, args, kwargs, changes) as trace:
                entry = convert_frame(
                    self.context, frame_values, self.backend, self.fullgraph, dynamic
                )
                entry = dataclasses.replace(entry, compile_seconds=time.perf_counter() - started)
                trace.compiled(entry, len(self.entries) + 1)
        except (Unsupported, BackendError):
            raise
        except Exception as error:  # noqa: BLE001  (a bytegraph bug: run the function as it is)
            self._internal_error(error)
            return self.fn
        self.dynamic_dims.note_inputs(entry.tensor_inputs, entry.int_inputs, frame_values)
        self.entries.insert(0, entry)
        self._checks = ((entry.guard.check, entry.run), *self._checks)
        return entry.run

    def _internal_error(self, error: Exception) -> None:
        """Raise under ``config.strict``; otherwise warn once and run as plain Python from now."""
        code = self.fn.__code__
        where = f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"
        message = f"internal error while compiling {where}: {type(error).__name__}: {error}"
        if config.strict:
            raise InternalError(message) from error
        self._exhausted = True
        logs.get_logger("internal").info("%s", message, exc_info=error)
        warnings.warn(
            f"bytegraph: {message}. It runs as plain Python from now on. This is a bytegraph "
            f"bug: please report it with the traceback that BYTEGRAPH_LOGS=internal prints.",
            stacklevel=5,  # the user's call: _internal_error, _lookup_or_compile, _miss, __call__
        )

    def _give_up(self, args: tuple, kwargs: dict) -> None:
        self._exhausted = True
        failed = self.entries[0].guard.explain_failure(args, kwargs)
        code = self.fn.__code__
        message = (
            f"bytegraph: {code.co_name} ({code.co_filename}:{code.co_firstlineno}) hit "
            f"config.recompile_limit={config.recompile_limit}; it now runs as plain Python. "
            f"The guard that kept failing: {failed}"
        )
        structured_trace.recompile_limit(self, self.fn, message)
        # stacklevel: the user's call (_give_up, _lookup_or_compile, _miss, __call__)
        warnings.warn(message, stacklevel=5)

    def reset(self) -> None:
        self.entries.clear()
        self.resume_cache.clear()
        self.context.callee_cache.clear()
        self._checks = ()
        self._exhausted = False
        self.set_dynamic(self.dynamic)


class CompiledModule(torch.nn.Module):
    """An nn.Module whose forward runs through a CompiledFunction.

    Calling it is calling the original module: ``type(module).forward`` runs
    compiled with the module as ``self``. A module with hooks of its own, a
    global module hook, or a ``forward`` set on the instance runs as plain
    Python, so hooks run exactly as eager runs them. Attributes the wrapper
    does not have are the original module's.
    """

    def __init__(
        self, module: torch.nn.Module, backend: Backend, fullgraph: bool,
        dynamic: bool | None = None,
    ) -> None:
        super().__init__()
        self._orig_mod = module
        self._compiled_forward = CompiledFunction(
            type(module).forward, backend, fullgraph
        ).set_dynamic(dynamic)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Not nn.Module.__call__: the wrapper's own hook machinery would run hooks twice.
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        module = self._orig_mod
        if has_hooks(module) or "forward" in module.__dict__:
            return module(*args, **kwargs)
        return self._compiled_forward(module, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._orig_mod, name)


def compile(
    model: Callable[..., Any] | None = None,
    *,
    backend: str | Backend = "inductor",
    fullgraph: bool = False,
    dynamic: bool | None = None,
) -> Any:
    """Compile a function or nn.Module; usable as a decorator, bare or with arguments.

    ``dynamic``: None (the default) compiles static shapes first and makes a
    dimension size-generic once its size changes; True makes every dimension
    of every tensor argument size-generic from the first call; False never
    does (one entry per size, up to ``config.recompile_limit``).
    """
    backend_fn = lookup_backend(backend)
    if dynamic not in (None, True, False):
        raise TypeError(f"bytegraph.compile: dynamic must be None, True or False, not {dynamic!r}")
    if model is not None and is_disabled(model):
        return model
    if model is None:
        return lambda fn: compile(fn, backend=backend_fn, fullgraph=fullgraph, dynamic=dynamic)
    recording = active_recording
    if recording is not None:
        backend_fn = recording.backend(backend_fn)
    if isinstance(model, torch.nn.Module):
        compiled: Any = CompiledModule(model, backend_fn, fullgraph, dynamic)
    elif isinstance(model, types.MethodType):
        function = CompiledFunction(model.__func__, backend_fn, fullgraph).set_dynamic(dynamic)
        compiled = types.MethodType(function, model.__self__)
    elif isinstance(model, types.FunctionType):
        compiled = CompiledFunction(model, backend_fn, fullgraph).set_dynamic(dynamic)
    else:
        raise TypeError(
            f"bytegraph.compile expects a Python function, method or nn.Module, "
            f"not {type(model).__name__}"
        )
    if recording is not None:
        recording.add_root(compiled)
    return compiled


def reset() -> None:
    """Drop every cache: compiled entries, decoded code, metadata memo."""
    from bytegraph.bytecode.instructions import reset as reset_decoded
    from bytegraph.graph.metadata import reset as reset_metadata

    for compiled in list(_live_functions):
        compiled.reset()
    reset_decoded()
    reset_metadata()
