"""Run one corpus program eagerly and compiled, and compare what each observed.

``observe(prog, fn)`` calls ``fn`` on fresh inputs made under a fixed seed
(so every run sees equal inputs and draws equal random numbers), then, for a
``backward`` program, sums the outputs that require grad and differentiates.
What it keeps: the outputs, every gradient of an input leaf or module
parameter, the inputs after the call, or the exception raised. ``compare``
says ``None`` when two observations agree (torch's default float
tolerances: a compiler may reorder float work), else what differs. Where
eager raises, bytegraph's ``UserError`` (the same mistake found at compile
time, said in bytegraph's words) agrees with any exception of eager's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from bench.hop_programs.registry import HopProgram
from bytegraph.exc import UserError

SEED = 0


@dataclasses.dataclass
class Observed:
    output: Any = None
    grads: list[Any] = dataclasses.field(default_factory=list)
    inputs: Any = None
    error: BaseException | None = None


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of a value: tensors, tuples, lists, dicts, dataclass-like objects."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [t for f in dataclasses.fields(value) for t in tensors(getattr(value, f.name))]
    return []


def leaves(inputs: tuple) -> list[torch.Tensor]:
    """Input tensors and module parameters whose ``.grad`` a backward fills."""
    found: list[torch.Tensor] = []
    for value in inputs:
        if isinstance(value, torch.nn.Module):
            found.extend(value.parameters())
        else:
            found.extend(t for t in tensors(value) if t.is_leaf and t.requires_grad)
    return found


def observe(prog: HopProgram, fn: Callable[..., Any]) -> Observed:
    torch.manual_seed(SEED)
    inputs = prog.make_inputs()
    torch.manual_seed(SEED + 1)
    try:
        output = fn(*inputs)
        grads: list[Any] = []
        if prog.backward:
            outs = [t for t in tensors(output) if t.requires_grad and t.is_floating_point()]
            if outs:
                sum(o.sum() for o in outs).backward()
            grads = [None if x.grad is None else x.grad.clone() for x in leaves(inputs)]
    except Exception as error:  # noqa: BLE001  (eager's own error is an outcome to compare)
        return Observed(error=error)
    return Observed(_detach(output), grads, _detach(inputs))


def _detach(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_detach(v) for v in value) if type(value) in (tuple, list) else value
    if isinstance(value, dict):
        return {k: _detach(v) for k, v in value.items()}
    if isinstance(value, torch.nn.Module):
        return [p.detach().clone() for p in value.parameters()]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, [_detach(getattr(value, f.name))
                                       for f in dataclasses.fields(value)])
    return value


def compare(actual: Observed, expected: Observed) -> str | None:
    """None when both agree; else the first difference."""
    if expected.error is not None or actual.error is not None:
        if expected.error is not None and actual.error is not None:
            if isinstance(actual.error, (type(expected.error), UserError)):
                return None
        return f"eager: {_what(expected.error)}; compiled: {_what(actual.error)}"
    for what, a, e in (("output", actual.output, expected.output),
                       ("grads", actual.grads, expected.grads),
                       ("inputs after the call", actual.inputs, expected.inputs)):
        difference = _difference(a, e, what)
        if difference is not None:
            return difference
    return None


def _what(error: BaseException | None) -> str:
    if error is None:
        return "no error"
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200] if lines else ''}"


def _difference(actual: Any, expected: Any, path: str) -> str | None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"{path}: {type(actual).__name__}, eager has a tensor"
        try:
            torch.testing.assert_close(actual, expected, equal_nan=True)
        except AssertionError as error:
            return f"{path}: {str(error).strip().splitlines()[0]}"
        return None
    if type(actual) is not type(expected):
        return f"{path}: {type(actual).__name__}, eager has {type(expected).__name__}"
    if isinstance(expected, dict):
        if list(actual) != list(expected):
            return f"{path}: keys {list(actual)} != {list(expected)}"
        pairs = [(actual[k], expected[k], f"{path}[{k!r}]") for k in expected]
    elif isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            return f"{path}: length {len(actual)} != {len(expected)}"
        pairs = [(a, e, f"{path}[{i}]") for i, (a, e) in enumerate(zip(actual, expected))]
    else:
        same = actual == expected or expected != expected  # NaN: a float equal to nothing
        return None if same else f"{path}: {actual!r} != {expected!r}"
    for a, e, p in pairs:
        difference = _difference(a, e, p)
        if difference is not None:
            return difference
    return None
