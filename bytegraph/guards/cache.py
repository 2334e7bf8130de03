"""Cache entries: a guard function and the code to run when it passes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from bytegraph.guards.build import GuardFunction


@dataclasses.dataclass(frozen=True, slots=True)
class CacheEntry:
    """One specialisation of a function.

    ``run`` is the transformed function (or the original one, when the trace
    found nothing to compile); ``graphs`` are the GraphModules it calls;
    ``breaks`` the Unsupported reasons of the graph break (or whole-frame
    fallback) this entry contains.
    """

    guard: GuardFunction
    run: Callable[..., Any]
    graphs: tuple[torch.fx.GraphModule, ...] = ()
    breaks: tuple[Exception, ...] = ()
    compile_seconds: float = 0.0  # tracing, backend and codegen of this entry
    # Seconds per stage of that compile, in pipeline order (translate/stage_times.py).
    stage_seconds: tuple[tuple[str, float], ...] = ()
    # The sizes of the graph's tensor inputs by source (``cache.layers[0].keys``
    # included): automatic dynamic shapes compare them with a later call's.
    tensor_inputs: tuple[tuple[Any, tuple[int, ...]], ...] = ()
    # The ints the entry fixed by value (``cache.layers[0].cumulative_length``): one that
    # differs on a later compile becomes symbolic, like a size.
    int_inputs: tuple[Any, ...] = ()
