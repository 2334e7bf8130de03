"""The switch: ``torch.compile`` routed to ``bytegraph.compile``, from Python or for a script.

``use_for_torch_compile()`` replaces the attribute ``torch.compile`` with a
router that takes torch.compile's own signature and calls
``bytegraph.compile`` with the same arguments. Every way of reaching
torch.compile looks the attribute up when it is called, so one patch covers
them all::

    torch.compile(m)                          # a module or a function
    torch.compile(m, backend="eager", mode=...)
    @torch.compile                            # a bare decorator
    @torch.compile(fullgraph=True)            # a decorator with arguments
    m.compile(...)                            # torch.compile(self._call_impl, ...)
    torch.compiler.compile(...)               # which calls torch.compile

A name bound before the switch (``from torch import compile`` done earlier)
keeps torch's function; ``bytegraph run`` switches before the script runs,
so there every call is routed.

The handle is a context manager and a plain call, like
``torch.set_grad_enabled``: creating it switches, ``undo()`` (or leaving
the ``with``) switches back. Handles nest and may be undone in any order:
the first one installs the router, the last one undone puts back exactly the
``torch.compile`` it found; undoing a handle twice does nothing.

Arguments, against torch.compile's signature (a call torch.compile rejects
is rejected with torch's own TypeError):

1. ``model``, ``fullgraph``, ``dynamic``, ``backend`` (None: bytegraph's
   default, Inductor) go to ``bytegraph.compile`` as they are; so does any
   other argument given a value other than torch's default, when
   ``bytegraph.compile`` takes a parameter of that name (``mode``,
   ``options``, ``disable``...).
2. ``name`` (a label for torch's debugging tools) and ``isolate_recompiles``
   (bytegraph keeps one cache per compile call, which is what
   ``isolate_recompiles=True`` asks for) change no result; they are dropped
   when bytegraph.compile has no such parameter.
3. Any other argument set to something other than torch's default is a
   ``TypeError`` in one line naming it: bytegraph cannot honour it, and
   dropping it silently would run something else than the user asked for.

``mode`` and ``options`` configure Inductor: given with the backend "eager" or
"aot_eager", torch.compile drops them, and so does the switch (with a
warning), where ``bytegraph.compile`` itself refuses them.
``use_for_torch_compile(backend=...)`` (``bytegraph run --backend``) compiles
every call with that backend instead of the one named; the call's ``mode``
and ``options`` are then left out unless the override is Inductor itself.

This module never imports ``torch._dynamo``: the router never calls torch's
implementation.
"""

from __future__ import annotations

import inspect
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch

from bytegraph.graph.backend_options import drops_settings
from bytegraph.graph.backends import Backend

__all__ = ["TorchCompileSwitch", "use_for_torch_compile"]

# Arguments that change no result when bytegraph ignores them (see the docstring).
_HARMLESS = frozenset({"name", "isolate_recompiles"})
# Inductor's own settings: dropped with a backend override other than Inductor.
_INDUCTOR_SETTINGS = frozenset({"mode", "options"})

_lock = threading.Lock()
_active: list[TorchCompileSwitch] = []  # oldest first; the newest one's override applies
_original: Callable[..., Any] | None = None  # torch.compile as the first switch found it


class TorchCompileSwitch:
    """One use of the switch: active from creation until ``undo()`` or the end of ``with``."""

    def __init__(self, backend: str | Backend | None = None) -> None:
        self.backend = backend  # an override of every call's backend, or None
        self.calls = 0  # torch.compile calls routed while this switch was the newest
        self.active = False
        _switch_on(self)

    def undo(self) -> None:
        """Switch back (torch.compile is torch's again once every switch is undone)."""
        _switch_off(self)

    def __enter__(self) -> TorchCompileSwitch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.undo()

    def __repr__(self) -> str:
        state = "active" if self.active else "undone"
        return f"<bytegraph torch.compile switch, {state}, {self.calls} calls routed>"


def use_for_torch_compile(*, backend: str | Backend | None = None) -> TorchCompileSwitch:
    """Route ``torch.compile`` (and ``nn.Module.compile``) to ``bytegraph.compile``.

    ``with bytegraph.use_for_torch_compile(): ...`` or
    ``switch = bytegraph.use_for_torch_compile(); ...; switch.undo()``.
    ``backend``: compile every call with this backend instead of the one it names.
    """
    if backend is not None:
        from bytegraph.graph.backends import lookup_backend

        lookup_backend(backend)  # an unknown name fails here, not at the first compile
    return TorchCompileSwitch(backend)


def _switch_on(switch: TorchCompileSwitch) -> None:
    global _original
    with _lock:
        if not _active:
            _original = torch.compile
            torch.compile = _routed_compile
        _active.append(switch)
        switch.active = True


def _switch_off(switch: TorchCompileSwitch) -> None:
    global _original
    with _lock:
        if not switch.active:
            return
        switch.active = False
        _active.remove(switch)
        if not _active:
            torch.compile = _original  # type: ignore[assignment]
            _original = None


def torch_compile_signature() -> inspect.Signature:
    """The signature of the ``torch.compile`` that the switch replaced (torch's own)."""
    return inspect.signature(_original if _original is not None else torch.compile)


def _routed_compile(*args: Any, **kwargs: Any) -> Any:
    """torch.compile's replacement while a switch is on."""
    try:
        bound = torch_compile_signature().bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"torch.compile() {e}") from None
    switch = _active[-1] if _active else None
    compile_args = bytegraph_arguments(bound, switch.backend if switch else None)
    model = compile_args.pop("model", None)
    if model is None:  # a decorator with arguments: torch.compile(fullgraph=True)(fn)
        return lambda fn: _compile(fn, compile_args, switch)
    return _compile(model, compile_args, switch)


def _compile(model: Any, compile_args: dict[str, Any], switch: TorchCompileSwitch | None) -> Any:
    from bytegraph.api import compile

    if switch is not None:
        switch.calls += 1
    return compile(model, **compile_args)


def bytegraph_arguments(
    bound: inspect.BoundArguments, backend_override: str | Backend | None = None
) -> dict[str, Any]:
    """The keywords for ``bytegraph.compile`` from a bound torch.compile call (the rules
    of the module docstring); ``model`` among them."""
    from bytegraph.api import compile

    takes = _takes(compile)
    defaults = {name: p.default for name, p in bound.signature.parameters.items()}
    arguments: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        if name != "model" and _is_default(value, defaults[name]):
            continue
        if name == "model" or takes(name):
            arguments[name] = value
        elif name not in _HARMLESS:
            raise TypeError(
                f"torch.compile(..., {name}={value!r}) routed to bytegraph: bytegraph.compile "
                f"has no {name!r} argument, so it cannot honour it (leave it out, or "
                f"undo the switch for this call)"
            )
    if backend_override is not None:
        arguments["backend"] = backend_override
    settings = sorted(_INDUCTOR_SETTINGS & set(arguments))
    backend = arguments.get("backend", "inductor")
    if settings and backend_override is not None and backend_override != "inductor":
        for name in settings:
            arguments.pop(name)
    elif settings and drops_settings(backend):
        # torch.compile drops them for this backend: a script it runs runs here too.
        for name in settings:
            arguments.pop(name)
        warnings.warn(
            f"torch.compile(..., {'/'.join(settings)}=...) routed to bytegraph: backend "
            f"{backend!r} ignores it, as under torch.compile", stacklevel=3,
        )
    return arguments


def _takes(fn: Callable[..., Any]) -> Callable[[str], bool]:
    """Whether ``fn`` takes a keyword argument of that name."""
    parameters = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return lambda name: True
    return lambda name: name in parameters


def _is_default(value: Any, default: Any) -> bool:
    return value is default or (type(value) is type(default) and value == default)
