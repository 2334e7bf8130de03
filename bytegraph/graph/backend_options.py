"""torch.compile's ``mode=`` and ``options=``: what they make of the backend ``compile()`` uses.

torch.compile hands them on in one of two ways, and so does bytegraph:

1. Inductor: ``mode`` becomes Inductor config through
   ``torch._inductor.list_mode_options(mode, dynamic)`` ("reduce-overhead" is
   ``triton.cudagraphs``, "max-autotune" adds ``max_autotune`` and
   ``coordinate_descent_tuning``...), ``options`` are config names (``-`` read
   as ``_``) checked against ``torch._inductor.config`` for existence and type;
   the result patches Inductor's config around ``compile_fx`` for each graph
   (``InductorBackend``), leaving the global config untouched.
2. Any other backend: torch.compile calls it as ``backend(gm, inputs,
   mode=..., options=...)``. A backend that takes those keywords (a
   third-party one such as TensorRT's) gets them (``BackendWithOptions``); the
   built-in "eager" and "aot_eager", or a callable whose signature has no such
   keyword, are refused at ``compile()`` with a one-line error naming the
   option (torch's "eager" warns and drops them; a wrong result of the user's
   intent is worse than an error).

Also as in torch: ``mode`` and ``options`` together are an error, and
``mode="default"`` (or ``None``) with no options is the plain backend.
``options`` may carry two keys torch.compile takes out for itself:
``guard_filter_fn`` (drops guards; bytegraph keeps every guard, which is
always correct, and says so once) and ``use_aoti`` (AOTInductor: refused).
"""

from __future__ import annotations

import difflib
import inspect
import typing
import warnings
from typing import Any

import torch

from bytegraph.graph.backends import Backend, aot_eager, eager, inductor, lookup_backend

_BOTH = (
    "Either mode or options can be specified, but both can't be specified at the same time."
)


class InductorBackend:
    """Inductor with config patches: torch.compile's ``mode``/``options`` for "inductor"."""

    __name__ = "inductor"

    def __init__(self, config_patches: dict[str, Any]) -> None:
        self.config_patches = config_patches

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        from torch._inductor.compile_fx import compile_fx

        return compile_fx(gm, example_inputs, config_patches=dict(self.config_patches))

    def __repr__(self) -> str:
        return f"InductorBackend({self.config_patches!r})"


class BackendWithOptions:
    """Another backend, called with the keywords torch.compile would pass it."""

    def __init__(self, backend: Backend, keywords: dict[str, Any]) -> None:
        self.backend = backend
        self.keywords = keywords
        self.__name__ = backend_name(backend)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        return self.backend(gm, example_inputs, **self.keywords)


def configure_backend(
    backend: str | Backend, mode: str | None, options: dict[str, Any] | None,
    dynamic: bool | None,
) -> Backend:
    """The backend ``compile()`` hands each graph to, with ``mode`` and ``options`` applied."""
    if mode is not None and options is not None:
        raise RuntimeError(_BOTH)
    if mode is not None and not isinstance(mode, str):
        raise TypeError(f"bytegraph.compile: mode must be a str, not {type(mode).__name__}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(
            f"bytegraph.compile: options must be a dict, not {type(options).__name__}"
        )
    backend_fn = lookup_backend(backend)
    options = _without_torch_compile_keys(dict(options or {}))
    if mode in (None, "default") and not options:
        return backend_fn
    if backend_fn is inductor:
        return InductorBackend(inductor_config(mode, options, dynamic))
    keywords: dict[str, Any] = {"mode": mode} if mode not in (None, "default") else {}
    if options:
        keywords["options"] = options
    _check_takes_keywords(backend_fn, keywords)
    return BackendWithOptions(backend_fn, keywords)


def inductor_config(
    mode: str | None, options: dict[str, Any], dynamic: bool | None
) -> dict[str, Any]:
    """Inductor config patches for ``mode`` or ``options``, checked as torch.compile checks."""
    import torch._inductor
    from torch._inductor import config

    if mode not in (None, "default"):
        options = torch._inductor.list_mode_options(mode, dynamic)  # raises on an unknown mode
    current = config.get_config_copy()
    patches: dict[str, Any] = {}
    for key, value in options.items():
        name = key.replace("-", "_")
        if name not in current:
            close = difflib.get_close_matches(name, list(current), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise RuntimeError(
                f"Unexpected optimization option {key}{hint}: torch._inductor.list_options() "
                "lists the known ones"
            )
        expected = config.get_type(name)
        if typing.get_origin(expected) is None and not isinstance(value, expected):
            raise RuntimeError(
                f"Unexpected type of attr {key}, got {type(value).__name__} "
                f"should be {type(current[name]).__name__}"
            )
        patches[name] = value
    return patches


def backend_name(backend: Any) -> str:
    return getattr(backend, "__name__", type(backend).__name__)


def _without_torch_compile_keys(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` less the two keys torch.compile keeps for itself (see the docstring)."""
    if options.pop("use_aoti", False):
        raise ValueError(
            "bytegraph.compile: options['use_aoti'] (AOTInductor) is not supported; "
            "use torch._inductor.aoti_compile_and_package on an exported program"
        )
    if options.pop("guard_filter_fn", None) is not None:
        warnings.warn(
            "bytegraph.compile keeps every guard: options['guard_filter_fn'] is not applied",
            stacklevel=4,  # the user's compile() call: this, configure_backend, compile
        )
    return options


def drops_settings(backend: str | Backend) -> bool:
    """Whether torch.compile drops ``mode`` and ``options`` given with ``backend``: its
    "eager" and "aot_eager" do (a callable that takes neither fails at its first graph)."""
    if isinstance(backend, str):
        return backend in ("eager", "aot_eager")
    return backend is eager or backend is aot_eager


def _check_takes_keywords(backend: Backend, keywords: dict[str, Any]) -> None:
    """A clear error now rather than a TypeError from inside the first compile."""
    name = backend_name(backend)
    if backend in (eager, aot_eager):
        accepted: set[str] = set()
    else:
        try:
            parameters = inspect.signature(backend).parameters.values()
        except (TypeError, ValueError):  # no signature to read: pass them, as torch does
            return
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return
        accepted = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    for keyword, value in keywords.items():
        if keyword not in accepted:
            raise ValueError(
                f"bytegraph.compile: {keyword}={value!r} is for Inductor, and backend "
                f"{name!r} takes no {keyword}= argument (use backend='inductor', or drop "
                f"{keyword}=)"
            )
