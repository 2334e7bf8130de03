"""Backends: ``backend(gm, example_inputs) -> callable``, exactly torch.compile's protocol.

Built in: "eager" (run the GraphModule's code as is), "aot_eager"
(AOTAutograd with no compiler: checks the joint graph), "inductor". Other
names are the backends that installed packages register for torch.compile
under the ``torch_dynamo_backends`` entry-point group, loaded on first use
(read with ``importlib.metadata``; torch._dynamo's registry is not imported).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

import torch

from bytegraph.exc import BytegraphError

Backend = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


class BackendError(BytegraphError):
    """The backend raised, or returned something that is not callable."""


def eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    # forward, not gm itself: nn.Module.__call__'s hook machinery costs microseconds a call.
    return gm.forward


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    from torch._functorch._aot_autograd.utils import make_boxed_func
    from torch._functorch.aot_autograd import aot_module_simplified

    def no_compiler(graph: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        return make_boxed_func(graph.forward)

    return aot_module_simplified(gm, example_inputs, fw_compiler=no_compiler)


def inductor(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    from torch._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


BACKENDS: dict[str, Backend] = {"eager": eager, "aot_eager": aot_eager, "inductor": inductor}


def lookup_backend(backend: str | Backend) -> Backend:
    """The backend callable for a name or a callable; a clear error otherwise."""
    if isinstance(backend, str):
        if backend in BACKENDS:
            return BACKENDS[backend]
        registered = registered_backends()
        if backend not in registered:
            known = ", ".join(sorted({*BACKENDS, *registered}))
            raise ValueError(
                f"unknown backend {backend!r}: use one of {known}, "
                "or pass a callable(gm, example_inputs) (one of torch.compile's own, which "
                "bytegraph does not import, is passed as "
                f"backend=torch._dynamo.lookup_backend({backend!r}))"
            )
        return _load_registered(backend, registered[backend])
    if not callable(backend):
        raise TypeError(
            "backend must be a name or a callable(gm, example_inputs), "
            f"not {type(backend).__name__}"
        )
    return backend


ENTRY_POINT_GROUP = "torch_dynamo_backends"


def registered_backends() -> dict[str, importlib.metadata.EntryPoint]:
    """The backends installed packages register for torch.compile, by name (read each
    time: a lookup by name is made once per compile() call, never on the call path)."""
    entry_points = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return {entry_point.name: entry_point for entry_point in entry_points}


def _load_registered(name: str, entry_point: importlib.metadata.EntryPoint) -> Backend:
    try:
        backend = entry_point.load()
    except Exception as e:  # noqa: BLE001  (a broken package: say which, in one line)
        raise ValueError(
            f"backend {name!r} ({entry_point.value}, registered by an installed package) "
            f"failed to load: {type(e).__name__}: {e}"
        ) from e
    if not callable(backend):
        raise TypeError(
            f"backend {name!r} ({entry_point.value}) is a {type(backend).__name__}, "
            "not a callable(gm, example_inputs)"
        )
    return backend


def call_backend(
    backend: Backend, gm: torch.fx.GraphModule, example_inputs: list[Any]
) -> Callable[..., Any]:
    name = getattr(backend, "__name__", type(backend).__name__)
    try:
        compiled = backend(gm, example_inputs)
    except BytegraphError:
        raise
    except Exception as e:
        raise BackendError(f"backend {name!r} raised {type(e).__name__}: {e}") from e
    if not callable(compiled):
        raise BackendError(
            f"backend {name!r} returned a {type(compiled).__name__}, not a callable: "
            "a backend must return the function that runs the graph"
        )
    return compiled
