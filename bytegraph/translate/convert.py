"""Translate one call of a function into a cache entry.

``convert_frame`` binds the call's arguments, runs the InstructionTranslator,
compiles the graph through the backend, generates the transformed code, and
builds the guard function. A frame whose trace records no tensor operation,
or that hits something unsupported, gets an entry that runs the original
function (behind the same guards), so it is never traced twice for the same
inputs.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

from bytegraph.codegen import transformed_code
from bytegraph.exc import Unsupported
from bytegraph.graph.backends import Backend, call_backend
from bytegraph.graph.output_graph import OutputGraph, reachable_tensors
from bytegraph.guards.build import build_guard_function
from bytegraph.guards.sources import ClosureCellSource
from bytegraph.guards.cache import CacheEntry
from bytegraph.translate.translator import InstructionTranslator


def bind_arguments(fn: types.FunctionType, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The frame's initial locals for ``fn(*args, **kwargs)``, as CPython binds them."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def convert_frame(
    fn: types.FunctionType,
    args: tuple,
    kwargs: dict,
    backend: Backend,
    fullgraph: bool,
) -> CacheEntry:
    output = OutputGraph()
    cells = {
        name: output.cell_for(cell, ClosureCellSource(name))
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())
    }
    tx = InstructionTranslator(
        fn.__code__, {}, fn.__globals__, cells, output,
        frame_values=bind_arguments(fn, args, kwargs),
    )
    try:
        tx.run()
    except Unsupported:
        if fullgraph:
            raise
        return _entry(fn, output, fn)
    if output.count_calls() == 0:
        return _entry(fn, output, fn)
    return_value = tx.return_value
    tensors = reachable_tensors([return_value], output.side_effects)
    outputs = [t for t in tensors if t.source is None]
    gm, inputs = output.finish_graph([t.node for t in outputs])
    compiled = call_backend(backend, gm, [i.example for i in inputs])
    code = transformed_code(
        fn.__code__, compiled, inputs, {t.node: i for i, t in enumerate(outputs)},
        return_value, output.side_effects,
    )
    return _entry(fn, output, _function_like(fn, code), (gm,))


def _entry(
    fn: types.FunctionType, output: OutputGraph, run: Callable[..., Any], graphs: tuple = ()
) -> CacheEntry:
    return CacheEntry(build_guard_function(list(output.guards.values()), fn), run, graphs)


def _function_like(fn: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    """A function running ``code`` with ``fn``'s globals, defaults and closure."""
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new
