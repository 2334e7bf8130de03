"""The recipe of the side-effect corpora: compare the complete state, twice.

A ``StateProgram`` is a function (or a factory of closures, for programs
that write to closure cells), a maker of its inputs, the module globals and
class attributes it may touch, and the number of graphs it must compile to.
``check_state_program`` runs it eagerly and compiled, each side twice in a
row, and after every call compares a *snapshot* of everything the program
could have changed:

* the result and the inputs (deep copies of the same inputs on each side),
* the declared module globals and class attributes,
* the function's closure cells,

structurally (tensors bit for bit with dtype, shape, stride and
requires_grad; objects by type and ``__dict__``), including which of those
values are the same object (aliasing). Before each call the globals, class
attributes and cells are put back to their initial values, so the second
call must hit the cache: the graph count and the cache entries are asserted
after both calls. A one-graph program must also compile with
``fullgraph=True`` (one graph could otherwise hide a break at its end).
"""

from __future__ import annotations

import copy
import dataclasses
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch

import bytegraph

MISSING = object()


@dataclasses.dataclass(frozen=True)
class StateProgram:
    fn: Callable[..., Any]
    make_inputs: Callable[[], tuple]
    graphs: int = 1
    globals_: tuple[str, ...] = ()
    class_attrs: tuple[tuple[type, str], ...] = ()
    factory: bool = False  # fn() builds the function to run (a fresh closure per side)
    entries: int = 1
    fullgraph: bool | None = None  # also compile with fullgraph=True (default: if one graph)

    @property
    def name(self) -> str:
        return self.fn.__name__


class StateCorpus:
    """An ordered list of programs filled by the ``add`` decorator."""

    def __init__(self) -> None:
        self.programs: list[StateProgram] = []

    def add(self, make_inputs: Callable[[], tuple], **options: Any) -> Callable[[Any], Any]:
        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            assert fn.__name__ not in {p.name for p in self.programs}, fn.__name__
            self.programs.append(StateProgram(fn, make_inputs, **options))
            return fn

        return register

    def __iter__(self) -> Iterator[StateProgram]:
        return iter(self.programs)

    def __len__(self) -> int:
        return len(self.programs)


# -- snapshots -------------------------------------------------------------------------


def snapshot(value: Any, memo: dict[int, str] | None = None, path: str = "world") -> Any:
    """A structural description of ``value``; a second visit of an object is an alias."""
    memo = {} if memo is None else memo
    if isinstance(value, (int, float, complex, str, bytes, bool, type(None), torch.dtype)):
        return ("value", type(value), value)
    if id(value) in memo:
        return ("alias", memo[id(value)])
    memo[id(value)] = path
    if isinstance(value, torch.Tensor):
        return (
            "tensor",
            type(value),
            value.detach().clone(),
            tuple(value.stride()),
            value.requires_grad,
        )
    if isinstance(value, (list, tuple)):
        items = tuple(snapshot(v, memo, f"{path}[{i}]") for i, v in enumerate(value))
        return ("sequence", type(value), items)
    if isinstance(value, dict):
        items = tuple((k, snapshot(v, memo, f"{path}[{k!r}]")) for k, v in value.items())
        return ("mapping", type(value), items)
    if isinstance(value, (set, frozenset)):
        return ("set", type(value), frozenset(value))
    if isinstance(value, types.CellType):
        try:
            contents = value.cell_contents
        except ValueError:
            return ("cell", "empty")
        return ("cell", snapshot(contents, memo, f"{path}.cell_contents"))
    if isinstance(value, types.MethodType):
        return ("method", value.__func__, snapshot(value.__self__, memo, f"{path}.__self__"))
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
        return ("ref", value)
    return ("object", type(value), _object_state(value, memo, path))


def _object_state(value: Any, memo: dict[int, str], path: str) -> Any:
    attrs = dict(getattr(value, "__dict__", {}))
    for klass in type(value).__mro__:
        for slot in vars(klass).get("__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                attrs[slot] = getattr(value, slot)
    return tuple((k, snapshot(v, memo, f"{path}.{k}")) for k, v in attrs.items())


def assert_same_snapshot(actual: Any, expected: Any, path: str = "world") -> None:
    assert type(actual) is type(expected), f"{path}: {actual!r} vs {expected!r}"
    if isinstance(expected, tuple) and expected and expected[0] == "tensor":
        assert actual[0] == "tensor", f"{path}: {actual[0]} instead of a tensor"
        assert actual[1] is expected[1], f"{path}: tensor type {actual[1]} != {expected[1]}"
        torch.testing.assert_close(
            actual[2], expected[2], rtol=0, atol=0, equal_nan=True, msg=lambda m: f"{path}: {m}"
        )
        assert actual[3:] == expected[3:], (
            f"{path}: stride/requires_grad {actual[3:]} != {expected[3:]}"
        )
        return
    if isinstance(expected, tuple):
        assert len(actual) == len(expected), f"{path}: {actual!r} vs {expected!r}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_snapshot(a, e, f"{path}/{i}")
        return
    if isinstance(expected, float) and expected != expected:
        assert actual != actual, f"{path}: {actual!r} is not NaN"
        return
    same = (
        actual is expected
        if isinstance(expected, (type, types.FunctionType))
        else actual == expected
    )
    assert same, f"{path}: {actual!r} != {expected!r}"


# -- running one side ------------------------------------------------------------------


@dataclasses.dataclass
class _World:
    """The state a program may touch outside its arguments, and how to reset it."""

    prog: StateProgram
    fn: Callable[..., Any]
    initial_globals: dict[str, Any]
    initial_attrs: dict[tuple[type, str], Any]
    initial_cells: list[Any]

    @staticmethod
    def of(prog: StateProgram, fn: Callable[..., Any], initial: dict[str, Any]) -> _World:
        attrs = {key: copy.deepcopy(vars(key[0]).get(key[1], MISSING)) for key in prog.class_attrs}
        cells = [_cell_value(c) for c in (fn.__closure__ or ())]
        return _World(prog, fn, initial, attrs, copy.deepcopy(cells))

    def reset(self) -> None:
        module_globals = self.fn.__globals__
        for name, value in self.initial_globals.items():
            if value is MISSING:
                module_globals.pop(name, None)
            else:
                module_globals[name] = copy.deepcopy(value)
        for (cls, name), value in self.initial_attrs.items():
            if value is MISSING:
                if name in vars(cls):
                    delattr(cls, name)
            else:
                setattr(cls, name, copy.deepcopy(value))
        for cell, value in zip(self.fn.__closure__ or (), self.initial_cells):
            if value is MISSING:
                if _cell_value(cell) is not MISSING:
                    del cell.cell_contents
            else:
                cell.cell_contents = copy.deepcopy(value)

    def snapshot(self, result: Any, args: tuple) -> Any:
        module_globals = self.fn.__globals__
        world = {
            "result": result,
            "args": args,
            "globals": {n: module_globals.get(n, "<missing>") for n in self.initial_globals},
            "class_attrs": {
                f"{c.__qualname__}.{n}": vars(c).get(n, "<missing>") for c, n in self.initial_attrs
            },
            "cells": list(self.fn.__closure__ or ()),
        }
        return snapshot(world)


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return MISSING


def _initial_globals(prog: StateProgram, module_globals: dict[str, Any]) -> dict[str, Any]:
    return {n: copy.deepcopy(module_globals.get(n, MISSING)) for n in prog.globals_}


def run_twice(
    prog: StateProgram,
    fn: Callable[..., Any],
    call: Callable[..., Any],
    inputs: tuple,
    initial: dict,
) -> list[Any]:
    """Two calls in a row from the same initial state; the snapshot after each."""
    world = _World.of(prog, fn, initial)
    snaps = []
    try:
        for _ in range(2):
            world.reset()
            args = copy.deepcopy(inputs)
            result = call(*args)
            snaps.append(world.snapshot(result, args))
    finally:
        world.reset()
    return snaps


def build(prog: StateProgram) -> Callable[..., Any]:
    return prog.fn() if prog.factory else prog.fn


def check_state_program(prog: StateProgram, counting_backend: Any, backend: Any = None) -> None:
    torch.manual_seed(0)
    inputs = prog.make_inputs()
    eager_fn = build(prog)
    initial = _initial_globals(prog, eager_fn.__globals__)
    expected = run_twice(prog, eager_fn, eager_fn, inputs, initial)

    compiled_fn = build(prog)
    compiled = bytegraph.compile(compiled_fn, backend=backend or counting_backend)
    actual = run_twice(prog, compiled_fn, compiled, inputs, initial)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_same_snapshot(a, e, f"call {i + 1}")
    if backend is None:
        assert counting_backend.calls == prog.graphs, (
            f"expected {prog.graphs} graph(s), got {counting_backend.calls}"
        )
    assert len(compiled.entries) == prog.entries, (
        f"expected {prog.entries} cache entr(ies), got {len(compiled.entries)}"
    )
    fullgraph = prog.graphs == 1 if prog.fullgraph is None else prog.fullgraph
    if fullgraph and backend is None:
        full_fn = build(prog)
        full = bytegraph.compile(full_fn, backend="eager", fullgraph=True)
        actual = run_twice(prog, full_fn, full, inputs, initial)
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_snapshot(a, e, f"fullgraph call {i + 1}")
