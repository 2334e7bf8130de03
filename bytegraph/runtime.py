"""The router that call sites in code run as Python ask what to call.

``translate/routing.py`` rewrites the call sites of code bytegraph runs as
Python (a break's Python part, a loop region, a frame that cannot be traced)
so each calls ``route(callable)`` first. ``route`` does what a frame hook
would do at that call:

* a user function: its ``CompiledFunction``, made once per function object
  with the settings of the frame the code came from (backend, the router
  itself), so a callee whose own code breaks routes its own calls in turn;
* a bound method of a user function: the same, bound to the same receiver;
* an nn.Module whose class keeps ``nn.Module.__call__``: a caller of the
  class's compiled ``forward``, one per class (a module is guarded by its
  type, so layers of one class share entries), torch.nn's own modules
  included (``nn.Sequential`` of user blocks); at the call it runs the module
  as it is if it has a ``forward`` of its own or jit tracing is on, and so is
  a torch.nn module with no submodules and no hooks (an ``nn.ELU`` called from
  a loop run as Python): torch.compile never starts a frame in torch.nn but
  for a module with hooks, and a graph of one op is only overhead;
* a function torch.compiler.disable(recursive=False) marked: its own code run
  as Python with its call sites routed, so what it calls is compiled;
* anything else (builtins, classes, torch and standard-library functions,
  generator functions, functions marked by ``bytegraph.disable`` or another
  marker, compiled wrappers): the callable itself.

A hit costs one Python call and a dict lookup. ``route`` never raises: a
failure while deciding leaves the callable as it is.
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from bytegraph import config
from bytegraph.markers import is_disabled, marking
from bytegraph.module_calls import call_with_hooks
from bytegraph.torch_markers import nonrecursive_target
from bytegraph.variables.nn_module import has_hooks

_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # generator, coroutine, async generator
_OWN_DIRS = (  # torch's and bytegraph's (this module's folder: no import of the package above)
    os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), ""),
    os.path.join(os.path.dirname(os.path.abspath(__file__)), ""),
)
_TORCH_NN = os.path.join(os.path.dirname(os.path.abspath(nn.__file__)), "")
_TORCH_NN_PARALLEL = os.path.join(_TORCH_NN, "parallel", "")


class Router:
    """Compiled wrappers of the callees of one compiled function and its relatives."""

    def __init__(self, compile_function: Callable[[types.FunctionType], Any]) -> None:
        self._compile = compile_function
        self.functions: dict[types.FunctionType, Any] = {}  # routed function -> compiled
        self._skipped: dict[int, types.CodeType] = {}  # id(code) -> code never routed
        self._per_code: dict[int, int] = {}  # id(code) -> function objects routed
        self._classes: dict[int, tuple[type, Any]] = {}  # id(class) -> (class, caller or None)
        self._forwards: dict[types.FunctionType, Any] = {}  # a module class's forward -> compiled
        self.route = self._make_route()

    def seed(self, fn: types.FunctionType, compiled: Any) -> None:
        """Route calls of ``fn`` to ``compiled`` (the compiled function that owns the router)."""
        self.functions[fn] = compiled

    def compiled(self) -> list[Any]:
        """Every compiled wrapper this router made or was seeded with (for reports)."""
        wrappers = [*self.functions.values(), *self._forwards.values()]
        # Not the plain functions that run a disable(recursive=False) frame as Python.
        return [w for w in wrappers if not isinstance(w, types.FunctionType)]

    def _make_route(self) -> Callable[[Any], Any]:
        functions, classes, first_function = self.functions, self._classes, self._first_function
        first_class = self._first_class
        function_type, method_type = types.FunctionType, types.MethodType

        def route(callee: Any) -> Any:
            kind = type(callee)
            if kind is function_type:
                routed = functions.get(callee)
                return routed if routed is not None else first_function(callee)
            if kind is method_type:
                func = callee.__func__
                if type(func) is not function_type:
                    return callee
                routed = functions.get(func)
                if routed is None:
                    routed = first_function(func)
                    if routed is func:
                        return callee
                return method_type(routed, callee.__self__)
            known = classes.get(id(kind))
            caller = known[1] if known is not None and known[0] is kind else first_class(kind)
            return callee if caller is None else method_type(caller, callee)

        return route

    def _first_function(self, fn: types.FunctionType) -> Any:
        """The compiled wrapper of ``fn`` on its first call here, or ``fn`` if not routed."""
        try:
            code = fn.__code__
            target = nonrecursive_target(fn)
            if target is not None:  # torch.compiler.disable(recursive=False)
                self.functions[fn] = runner = self._python_with_routed_calls(target)
                return runner
            if self._skipped.get(id(code)) is code or marking(fn) is not None:
                return fn
            routed_before = self._per_code.get(id(code), 0)
            # A nested function is often made anew by each call of its maker: a second
            # object of its code runs as it is, rather than compiling on every call.
            limit = 1 if "<locals>" in fn.__qualname__ else config.recompile_limit
            if not _routable_code(code) or routed_before >= limit:
                self._skipped[id(code)] = code
                return fn
            compiled = self._compile(fn)
        except Exception:  # noqa: BLE001  (routing is optional: the call runs as it is)
            return fn
        self._per_code[id(code)] = self._per_code.get(id(code), 0) + 1
        self.functions[fn] = compiled
        return compiled

    def _python_with_routed_calls(self, fn: types.FunctionType) -> types.FunctionType:
        """``fn`` run as Python, the functions it calls compiled: its own frame is left
        alone, as torch's hook leaves a frame of ``disable(recursive=False)``."""
        from bytegraph.translate.convert import _function_like
        from bytegraph.translate.routing import routed_code

        if not _routable_code(fn.__code__):
            return fn
        code = routed_code(fn.__code__, self.route)
        return fn if code is fn.__code__ else _function_like(fn, code)

    def compiled_forward(self, kind: type) -> Any:
        """The compiled forward that instances of the module class ``kind`` run, if any."""
        forward = _module_forward(kind)
        return self.functions.get(forward) or self._forwards.get(forward)

    def _first_class(self, kind: type) -> Any:
        """The caller of ``kind``'s compiled forward, or None if its instances run as they are."""
        caller = None
        try:
            forward = _module_forward(kind)
            if forward is not None:
                compiled = self.compiled_forward(kind)
                if compiled is None:
                    compiled = self._forwards[forward] = self._compile(forward)
                caller = _module_caller(kind, forward, compiled)
        except Exception:  # noqa: BLE001  (routing is optional: the call runs as it is)
            caller = None
        self._classes[id(kind)] = (kind, caller)
        return caller


def _routable_code(code: types.CodeType) -> bool:
    """A user's function: neither a generator nor torch's, bytegraph's or the standard library's."""
    from bytegraph.translate.resume import _is_standard_library

    if code.co_flags & _GENERATOR_FLAGS:
        return False
    filename = os.path.abspath(code.co_filename)
    return not filename.startswith(_OWN_DIRS) and not _is_standard_library(code.co_filename)


def _module_forward(kind: type) -> types.FunctionType | None:
    """``kind.forward`` when ``kind`` is an nn.Module class that is called the usual way."""
    if not isinstance(kind, type) or not issubclass(kind, nn.Module):
        return None
    if _class_attribute(kind, "__call__") is not nn.Module.__call__:
        return None  # a __call__ of its own (a compiled module, a wrapper): as it is
    forward = _class_attribute(kind, "forward")
    if not isinstance(forward, types.FunctionType) or forward is nn.Module.forward:
        return None
    if is_disabled(forward) or forward.__code__.co_flags & _GENERATOR_FLAGS:
        return None
    filename = os.path.abspath(forward.__code__.co_filename)
    if filename.startswith(_OWN_DIRS) and (
        not filename.startswith(_TORCH_NN) or filename.startswith(_TORCH_NN_PARALLEL)
    ):
        return None  # bytegraph's, torch's outside torch.nn, or a data-parallel wrapper
    return forward


def _class_attribute(kind: type, name: str) -> Any:
    for klass in kind.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _module_caller(kind: type, forward: types.FunctionType, compiled: Any) -> Callable[..., Any]:
    tracing_state = torch._C._get_tracing_state
    module_call = nn.Module.__call__
    torch_nn = os.path.abspath(forward.__code__.co_filename).startswith(_TORCH_NN)

    def call(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
        # What nn.Module.__call__ would do differently from calling forward, or a class
        # patched since (its forward or __call__ replaced): run the module as it is.
        if (
            "forward" in module.__dict__ or is_disabled(module)
            or module.__dict__.get("_compiled_call_impl") is not None or tracing_state()
            or kind.forward is not forward or kind.__call__ is not module_call
        ):
            return module(*args, **kwargs)
        if has_hooks(module):  # the hooks in Python, the forward compiled (module_calls.py)
            return call_with_hooks(module, compiled, args, kwargs)
        if torch_nn and not module.__dict__.get("_modules", True):
            return module(*args, **kwargs)  # a leaf of torch.nn (nn.ELU, nn.Conv1d): eager
        return compiled(module, *args, **kwargs)

    return call
