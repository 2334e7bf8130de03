"""Run one program eagerly and compiled, and say whether and how they differ.

The recipe (DESIGN.md, "Correctness rule", made exhaustive):

1. exec the program's source twice, into two fresh module namespaces, so
   globals, classes and objects of the two runs never meet;
2. call ``f`` three times on each side, each call on inputs built by the
   program's own ``inputs_<call>()`` (the same seed on both sides): the first
   call traces, the second has equal metadata and should hit the cache, the
   third changes values, shapes and ints;
3. after each call compare what a user could observe: the exception raised
   (type and message, then its args, attributes, ``__cause__`` and
   ``__context__`` chain and ``__suppress_context__``), printed output, grad
   mode, the return value, every argument after the call (objects through
   their ``__dict__``), the mutated module globals, and which of all these
   are (or share storage with) which.

The first difference ends the run with an ``Outcome`` whose ``category`` is
``internal:<type>`` (bytegraph's own machinery raised, or warned of an
internal error) or ``wrong:<what>`` (a wrong result, of kind ``what``).
Values are compared with ``assert_same_value`` and ``assert_same_aliasing``
from ``tests/conftest.py``, after ``normalize`` turns objects of the two
namespaces' classes into comparable dicts.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import inspect
import io
import linecache
import os
import random
import sys
import traceback
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch

import bytegraph
from bytegraph.graph.backends import BACKENDS
from tests.conftest import assert_same_aliasing, assert_same_value
from tests.fuzz.tree import STATE_GLOBALS, Program

BYTEGRAPH_DIR = os.path.dirname(bytegraph.__file__) + os.sep
CALLS = 3


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How one program ran: ``category`` None when eager and compiled agree."""

    category: str | None
    detail: str = ""
    graphs: int = 0
    eager_errors: int = 0
    seconds: float = 0.0


@dataclasses.dataclass
class Observed:
    """Everything a user could see after one call."""

    error: BaseException | None
    stdout: str
    grad_enabled: bool
    world: tuple[Any, Any, Any]  # normalized (args, mutated globals, result)
    warnings: list[str]
    # Read from ``error``'s traceback before ``observe`` drops it: raised by bytegraph?
    internal: bool | None = None
    explained: str = ""
    world_collected: tuple[Any, Any, Any] | None = None  # ``world`` after gc.collect()
    random_state: int = 0  # hash of ``random.getstate()`` after the call


class GraphCounter:
    """The "eager" backend, counting the graphs it is handed."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs += 1
        return BACKENDS["eager"](gm, example_inputs)


def load(source: str, filename: str, name: str) -> dict[str, Any]:
    """A fresh module ``name`` with ``source`` executed in it (dataclasses look it up)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102  (the program under test)
    return module.__dict__


def normalize(value: Any, memo: dict[int, Any]) -> Any:
    """``value`` with user objects as dicts and classes as names; identity kept through ``memo``."""
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, list):
        copy: Any = []
        memo[id(value)] = copy
        copy.extend(normalize(v, memo) for v in value)
        return copy
    if isinstance(value, dict):
        copy = {}
        memo[id(value)] = copy
        copy.update((k, normalize(v, memo)) for k, v in value.items())
        return copy
    if type(value) is tuple:
        return tuple(normalize(v, memo) for v in value)
    if isinstance(value, tuple):  # a namedtuple: its class differs between the namespaces
        return (type(value).__qualname__, *(normalize(v, memo) for v in value))
    if isinstance(value, BaseException):
        return exception_record(value, memo)
    if isinstance(value, types.GeneratorType):  # where it is paused: its state and name
        return ("generator", value.__qualname__, inspect.getgeneratorstate(value))
    if isinstance(value, (type, types.FunctionType, types.MethodType)):
        return f"<{type(value).__name__} {getattr(value, '__qualname__', '?')}>"
    if hasattr(value, "__dict__") and not isinstance(value, types.ModuleType):
        copy = {"__class__": type(value).__qualname__}
        memo[id(value)] = copy
        copy.update((k, normalize(v, memo)) for k, v in vars(value).items())
        return copy
    slots = getattr(type(value), "__slots__", None)
    if slots is not None and type(value).__module__.startswith("fuzz_"):
        copy = {"__class__": type(value).__qualname__}
        memo[id(value)] = copy
        copy.update((k, normalize(getattr(value, k, None), memo)) for k in slots)
        return copy
    return value


def observe(namespace: dict[str, Any], fn: Callable[..., Any], call: int) -> Observed:
    args = namespace[f"inputs_{call}"]()
    torch.manual_seed(call)
    random.seed(call)  # the module's generator too: programs draw from ``random``
    stdout = io.StringIO()
    # No automatic collection from here to the first snapshot: ``world`` is what
    # reference counting alone left, whatever earlier programs did to the collector's
    # counters; ``world_collected`` is what the collector then adds (see ``compare``).
    gc.disable()
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(stdout):
            warnings.simplefilter("always")
            try:
                result, error = fn(*args), None
            except Exception as exc:  # noqa: BLE001  (the program's own exceptions are observations)
                result, error = None, exc
        internal, explained = None, ""
        if error is not None:
            internal, explained = is_internal(error, namespace["__file__"]), explain_internal(error)
            drop_tracebacks(error)
        grad_enabled = torch.is_grad_enabled()
        random_state = hash(random.getstate())
        torch.set_grad_enabled(True)
        state = {name: namespace[name] for name in STATE_GLOBALS}
        world = normalize((args, state, result), {})
    finally:
        gc.enable()
    gc.collect()
    collected = normalize((args, state, result), {})
    return Observed(
        error, stdout.getvalue(), grad_enabled, world, [str(w.message) for w in caught],
        internal, explained, collected, random_state,
    )


def drop_tracebacks(error: BaseException) -> None:
    """Drop the tracebacks of ``error`` and its chain, as a caller that handled it would.

    Their frames keep the raising frames' locals alive, and ``observe`` itself makes a
    cycle (its frame holds the exception): a generator local would then close, and run
    its ``finally``, whenever the cyclic collector happens to run, at a different moment
    on each side. Without them both sides observe the state after the locals are gone.
    """
    work: list[BaseException | None] = [error]
    seen: set[int] = set()
    while work:
        item = work.pop()
        if item is not None and id(item) not in seen:
            seen.add(id(item))
            item.__traceback__ = None
            work += [item.__cause__, item.__context__]


def is_internal(error: BaseException, filename: str) -> bool:
    """Raised by bytegraph itself: its own error type, or the innermost frame that is ours."""
    if isinstance(error, bytegraph.BytegraphError):
        return True
    owners = [
        frame.filename for frame in traceback.extract_tb(error.__traceback__)
        if frame.filename.startswith(BYTEGRAPH_DIR) or frame.filename == filename
    ]
    return bool(owners) and owners[-1].startswith(BYTEGRAPH_DIR)


def explain_internal(error: BaseException) -> str:
    """The error and its cause in one line each, then the innermost frames of the root cause."""
    lines, root = [], error
    while True:
        lines.append(f"{type(root).__name__}: {str(root).splitlines()[0] if str(root) else ''}")
        if root.__cause__ is None:
            break
        root = root.__cause__
    frames = traceback.format_tb(root.__traceback__)[-4:]
    return " <- ".join(lines) + "\n" + "".join(frames)


def exception_record(error: BaseException, memo: dict[int, Any], depth: int = 0) -> tuple:
    """What a user sees of an exception: type, str, args, attributes, and its cause and context.

    Chains are followed three links deep (a chain of the program's own making is short).
    """
    def link(other: BaseException | None) -> tuple | None:
        return None if other is None or depth >= 3 else exception_record(other, memo, depth + 1)

    attributes = {k: normalize(v, memo) for k, v in sorted(vars(error).items())}
    return (
        "exception", type(error).__name__, str(error), normalize(error.args, memo), attributes,
        link(error.__cause__), link(error.__context__), error.__suppress_context__,
    )


def describe(error: BaseException | None) -> tuple[str, str] | None:
    return None if error is None else (type(error).__name__, str(error))


def same_exception(eager: BaseException | None, compiled: BaseException | None) -> str | None:
    """Where the escaping exceptions differ past type and message: args, attributes, chain."""
    if eager is None or compiled is None:
        return None
    try:
        assert_same_value(exception_record(compiled, {}), exception_record(eager, {}), "exception")
    except Exception as exc:  # noqa: BLE001  (a comparison that cannot even run differs too)
        return f"{type(exc).__name__}: {exc}"
    return None


def compare(eager: Observed, compiled: Observed, filename: str) -> tuple[str, str] | None:
    """The first difference between the two runs of one call, as (category, detail)."""
    # torch's own warnings end "(Triggered internally at ...)": internal only when eager lacks it.
    internal = [w for w in compiled.warnings if "internal" in w.lower() and w not in eager.warnings]
    if internal:
        return "internal:warning", internal[0]
    same_error = describe(eager.error) == describe(compiled.error)
    if compiled.error is not None and not same_error and (
        compiled.internal if compiled.internal is not None
        else is_internal(compiled.error, filename)
    ):
        explained = compiled.explained or explain_internal(compiled.error)
        return f"internal:{type(compiled.error).__name__}", explained
    if not same_error:
        detail = f"eager {describe(eager.error)}, compiled {describe(compiled.error)}"
        return "wrong:exception", detail
    chain = same_exception(eager.error, compiled.error)
    if chain is not None:
        return "wrong:exception_chain", chain
    if eager.stdout != compiled.stdout:
        return "wrong:stdout", f"eager {eager.stdout!r}, compiled {compiled.stdout!r}"
    if eager.random_state != compiled.random_state:
        return "wrong:random_state", "the random module's generator state after the call differs"
    if eager.grad_enabled != compiled.grad_enabled:
        return "wrong:grad_mode", f"grad mode after the call: compiled {compiled.grad_enabled}"
    collected = eager.world_collected, compiled.world_collected
    if None not in collected and compare_world(eager.world, collected[0]) is not None:
        # Eager's state changed when the cyclic collector ran: the program keeps a frame
        # alive in a cycle (an exception it stored holds its traceback), so a generator
        # local's ``finally`` runs whenever the collector happens to, at a different moment
        # on each side. Compared once both collected; prompt finalization stays checked
        # wherever eager's own state does not depend on the collector.
        return compare_world(*collected)
    return compare_world(eager.world, compiled.world)


def compare_world(eager: tuple, compiled: tuple) -> tuple[str, str] | None:
    for what, index in (("result", 2), ("args", 0), ("globals", 1)):
        try:
            assert_same_value(compiled[index], eager[index], what)
        except Exception as exc:  # noqa: BLE001  (a comparison that cannot even run differs too)
            return f"wrong:{what}", f"{type(exc).__name__}: {exc}"
    try:
        assert_same_aliasing(compiled, eager)
    except AssertionError as exc:
        return "wrong:aliasing", str(exc)
    return compare_grads(eager, compiled)


def tensors(value: Any, path: str) -> list[tuple[str, torch.Tensor]]:
    """Every tensor reachable through lists, tuples and dicts, with its path."""
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return []
    return [found for key, item in items for found in tensors(item, f"{path}[{key!r}]")]


def compare_grads(eager: tuple, compiled: tuple) -> tuple[str, str] | None:
    """The ``.grad`` of every leaf tensor, once values and aliasing agree (same structure)."""
    for (path, e), (_, c) in zip(tensors(eager, "world"), tensors(compiled, "world")):
        leaf = leaf_state(e)
        if leaf != leaf_state(c):
            return "wrong:grad", f"{path}: is_leaf {leaf!r} vs {leaf_state(c)!r}"
        if leaf is not True:
            continue
        try:
            assert_same_value(c.grad, e.grad, path + ".grad")
        except AssertionError as exc:
            return "wrong:grad", f"{type(exc).__name__}: {exc}"
    return None


def leaf_state(t: torch.Tensor) -> bool | str:
    """``t.is_leaf``, or the error reading it raises (a view its base invalidated in place)."""
    try:
        return t.is_leaf
    except RuntimeError as exc:
        return str(exc)


def configure() -> None:
    """Internal errors raise instead of falling back, where bytegraph offers the switch."""
    if hasattr(bytegraph.config, "strict"):
        bytegraph.config.strict = True


def run_source(source: str, filename: str) -> Outcome:
    """Compare eager and compiled runs of ``source``'s ``f`` over its three calls."""
    configure()
    bytegraph.reset()
    # ``observe`` runs the cyclic collector after every call: with what exists already
    # frozen out of its reach (torch, the test session), that costs a few ms, not 50.
    gc.freeze()
    eager_ns = load(source, filename, "fuzz_eager")
    compiled_ns = load(source, filename, "fuzz_compiled")
    counter = GraphCounter()
    compiled_fn = bytegraph.compile(compiled_ns["f"], backend=counter)
    eager_errors = 0
    try:
        for call in range(1, CALLS + 1):
            eager = observe(eager_ns, eager_ns["f"], call)
            compiled = observe(compiled_ns, compiled_fn, call)
            eager_errors += eager.error is not None
            difference = compare(eager, compiled, filename)
            if difference is not None:
                category, detail = difference
                return Outcome(category, f"call {call}: {detail}", counter.graphs, eager_errors)
    finally:
        bytegraph.reset()
        gc.unfreeze()
    return Outcome(None, "", counter.graphs, eager_errors)


def run_program(program: Program) -> Outcome:
    """``run_source`` on a generated program; a harness failure is its own category."""
    filename = f"fuzz_{program.seed}_{program.index}.py"
    try:
        return run_source(program.source(), filename)
    except Exception as exc:  # noqa: BLE001  (reported, never hidden)
        trace = "".join(traceback.format_exception(exc)[-4:])
        return Outcome(f"harness:{type(exc).__name__}", trace)
