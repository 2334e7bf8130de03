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

torch.compiler.set_stance is honoured (``torch_markers.py``): a hit checks
only that torch's stance object is the one last seen not to be "force_eager";
a miss reads the stance ("eager_on_recompile" runs the function as Python,
"fail_on_recompile" raises torch's error naming the guard that failed).

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

from bytegraph import config, events, logs
from bytegraph.compile_targets import compile_other, see_through
from bytegraph.compiled_ddp import compile_ddp, is_ddp
from bytegraph.compiled_module import CompiledModule
from bytegraph.dropped_values import collect_after_refusal
from bytegraph.exc import InternalError, Unsupported, UserError
from bytegraph.graph.backend_options import configure_backend
from bytegraph.graph.backends import Backend, BackendError
from bytegraph.graph.shapes import DynamicDims
from bytegraph.guards.cache import CacheEntry
from bytegraph.markers import is_disabled
from bytegraph.runtime import Router
from bytegraph.torch_markers import (
    WATCH,
    current_stance,
    frame_has_torch,
    innermost,
    recompile_error,
)
from bytegraph.translate import stage_times
from bytegraph.translate.convert import bind_arguments, convert_frame
from bytegraph.translate.resume import FrameContext

_live_functions: weakref.WeakSet[CompiledFunction] = weakref.WeakSet()
# Held by every cache miss while it looks again and compiles (re-entrant: compiling
# may call another compiled function).
_compile_lock = threading.RLock()
_CheckedRun = tuple[Callable[..., bool], Callable[..., Any]]


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
        self.is_root = router is None  # what compile() made, not a resume function or callee
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
        module = WATCH.module
        if module is None or module._stance is not WATCH.usual:
            if current_stance() == "force_eager":  # torch.compiler.set_stance
                return self.fn(*args, **kwargs)
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
        stance = current_stance()
        if stance in ("force_eager", "eager_on_recompile"):
            return self.fn  # no new entry: what the cache cannot serve runs as Python
        try:
            frame_values = bind_arguments(self.fn, args, kwargs)
        except TypeError:  # a call eager rejects: let the function raise its own error
            return self.fn
        if len(self.entries) >= config.recompile_limit:
            self._give_up(args, kwargs)
            return self.fn
        if stance == "fail_on_recompile":
            # torch's hook leaves alone a frame without torch, except a compiled root.
            if not self.is_root and not frame_has_torch(self.fn, frame_values):
                return self.fn
            failed = self.entries[0].guard.explain_failure(args, kwargs) if self.entries else None
            raise recompile_error(self.fn, failed)
        changes = self.dynamic_dims.update(frame_values)
        changes += self.dynamic_dims.update_inputs(frame_values)
        if self.entries and (logs.enabled("recompiles") or events.RECOMPILE.subscribers):
            self._report_recompile(args, kwargs, changes)
        dynamic = self.dynamic_dims.for_call(frame_values)
        started = time.perf_counter()
        try:
            events.COMPILE_STARTED.publish(self, self.fn, args, kwargs, changes)
            try:
                with stage_times.recording() as stages:
                    entry = convert_frame(
                        self.context, frame_values, self.backend, self.fullgraph, dynamic
                    )
                entry = dataclasses.replace(
                    entry, compile_seconds=time.perf_counter() - started,
                    stage_seconds=stage_times.ordered(stages),
                )
                events.FRAME_COMPILED.publish(self, self.fn, entry, len(self.entries) + 1)
            except BaseException as error:
                events.COMPILE_FAILED.publish(self, self.fn, error)
                raise
        except (Unsupported, UserError, BackendError):
            raise
        except Exception as error:  # noqa: BLE001  (a bytegraph bug: run the function as it is)
            self._internal_error(error)
            return self.fn
        collect_after_refusal()
        self.dynamic_dims.note_inputs(entry.tensor_inputs, entry.int_inputs, frame_values)
        self.entries.insert(0, entry)
        self._checks = ((entry.guard.check, entry.run), *self._checks)
        return entry.run

    def _report_recompile(self, args: tuple, kwargs: dict, changes: list[str]) -> None:
        """The ``recompiles`` log artifact and the RECOMPILE event: the guard that failed."""
        failed = self.entries[0].guard.explain_failure(args, kwargs)
        decided = "".join(f"; {change}" for change in changes)
        code = self.fn.__code__
        if logs.enabled("recompiles"):
            logs.get_logger("recompiles").info(
                "recompiling %s (%s:%d): guard failed: %s%s",
                self.fn.__qualname__, code.co_filename, code.co_firstlineno, failed, decided,
            )
        events.RECOMPILE.publish(
            self.fn.__qualname__, code.co_filename, code.co_firstlineno, failed, decided
        )

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
        events.RECOMPILE_LIMIT.publish(self, self.fn, message)
        # stacklevel: the user's call (_give_up, _lookup_or_compile, _miss, __call__)
        warnings.warn(message, stacklevel=5)

    def reset(self) -> None:
        self.entries.clear()
        self.resume_cache.clear()
        self.context.callee_cache.clear()
        self._checks = ()
        self._exhausted = False
        self.set_dynamic(self.dynamic)


def compile(
    model: Callable[..., Any] | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Backend = "inductor",
    mode: str | None = None,
    options: dict[str, Any] | None = None,
    disable: bool = False,
) -> Any:
    """Compile a function, nn.Module or other callable; usable as a decorator, bare or with
    arguments. The arguments mean what they mean to ``torch.compile``:

    ``fullgraph``: a graph break raises ``Unsupported`` instead of running that part in
    Python. ``dynamic``: None (the default) compiles static shapes first and makes a
    dimension size-generic once its size changes; True makes every dimension of every
    tensor argument size-generic from the first call; False never does (one entry per
    size, up to ``config.recompile_limit``). ``backend``: "inductor", "eager",
    "aot_eager", a name an installed package registers for torch.compile, or a
    ``callable(gm, example_inputs)``. ``mode`` ("default", "reduce-overhead",
    "max-autotune", "max-autotune-no-cudagraphs") or ``options`` (Inductor config
    names): Inductor's settings, as torch.compile applies them (graph/backend_options.py).
    ``disable``: return ``model`` unchanged.

    Any callable is accepted (compile_targets.py): compiled wrappers (torch.compile's or
    bytegraph's) are compiled from their original, a callable object's ``__call__`` is
    compiled, and a builtin with no Python code to trace is returned as is.
    """
    if dynamic not in (None, True, False):
        raise TypeError(f"bytegraph.compile: dynamic must be None, True or False, not {dynamic!r}")
    backend_fn = configure_backend(backend, mode, options, dynamic)
    if model is None:
        return functools.partial(
            _compile_decorated, fullgraph=fullgraph, dynamic=dynamic, backend=backend_fn,
            disable=disable,
        )
    if disable or is_disabled(innermost(model)):
        return model
    model = innermost(model)  # torch.compile(torch.compiler.disable(f)) compiles f
    model = see_through(model)
    if is_disabled(model):
        return model
    if not isinstance(model, (torch.nn.Module, types.FunctionType, types.MethodType)):
        def compile_part(part: Any) -> Any:
            return compile(part, fullgraph=fullgraph, dynamic=dynamic, backend=backend_fn)

        return compile_other(model, compile_part)
    # explain()'s Recording, the command line: they keep each graph and each result.
    backend_fn = events.WRAP_BACKEND.apply(backend_fn)
    compiled = _compile_python(model, backend_fn, fullgraph, dynamic)
    if compiled is not model:
        events.ROOT_COMPILED.publish(compiled)
    return compiled


def _compile_decorated(model: Any, **settings: Any) -> Any:
    """``@compile(...)``'s decorator."""
    if model is None:
        raise TypeError("bytegraph.compile(...) was applied to None: nothing to compile")
    return compile(model, **settings)


def _compile_python(
    model: Any, backend: Backend, fullgraph: bool, dynamic: bool | None
) -> Any:
    """A module, a function, or a method of a Python function, compiled; any other method
    (of a builtin) as it is."""
    if is_ddp(model):
        return compile_ddp(
            model,
            lambda fn: CompiledFunction(fn, backend, fullgraph).set_dynamic(dynamic),
        )
    if isinstance(model, torch.nn.Module):
        # see_through: a class whose forward was compiled in place (compile(NetClass))
        forward = CompiledFunction(see_through(type(model).forward), backend, fullgraph)
        return CompiledModule(model, forward.set_dynamic(dynamic))
    if isinstance(model, types.FunctionType):
        return CompiledFunction(model, backend, fullgraph).set_dynamic(dynamic)
    if isinstance(model.__func__, types.FunctionType):
        function = CompiledFunction(model.__func__, backend, fullgraph).set_dynamic(dynamic)
        return types.MethodType(function, model.__self__)
    return model


def reset() -> None:
    """Drop every compiled entry and what user code defined. Pure memos keep what they
    know (decoded bytecode, the metadata of torch's own ops), as ``torch._dynamo.reset()``
    keeps its own: they are bounded, and a function of immutable inputs."""
    from bytegraph.graph.metadata import reset as reset_metadata

    for compiled in list(_live_functions):
        compiled.reset()
    reset_metadata()
