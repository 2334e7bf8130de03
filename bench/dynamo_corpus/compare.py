"""What one run of a program left behind, and how two runs are compared.

``observe`` calls the program and keeps everything a user could see afterwards:
the result or the exception, what it printed, and the state of its arguments, of
its closure cells, of the object it is a method of (a module's parameters and
buffers), and of its module's data globals. ``normalize`` turns that state into
plain containers (user objects become dicts of their attributes, classes and
functions their names) so two replays, which never share an object, compare by
structure; an iterator or generator left behind is read to its end (what a caller
would read next). ``first_difference`` finds the first place where a compiled run differs
from eager: tensors with torch's default float tolerances (NaN equal to NaN),
their dtype, shape, requires_grad and ``.grad``; everything else with ``==``.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import io
import itertools
import random
import traceback
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from bench.dynamo_corpus import shim

MAX_DEPTH = 8
MAX_ITEMS = 100  # items read from an iterator left in the result or state
# attributes a compiler sets on the module it compiles: not the program's state
COMPILER_MARKS = frozenset({"_compiled_call_impl", "_is_torch_compile"})
SEED = 1234


@dataclasses.dataclass
class Observed:
    error: BaseException | None
    stdout: str
    world: Any  # normalized (args, kwargs, result, closure, owner, globals)
    warnings: tuple[str, ...] = ()  # the messages of the warnings the call emitted


def seed() -> None:
    torch.manual_seed(SEED)
    random.seed(SEED)
    np.random.seed(SEED)


NOT_DATA = (
    types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
    functools.partial, shim.Missing, shim.NullPatch,
)


def _is_data(value: Any) -> bool:
    return not isinstance(value, NOT_DATA) and type(value).__module__ != "typing"


def state_of(fn: Any, module_globals: dict[str, Any]) -> tuple:
    """The closure, owner object and data globals ``fn`` can reach, before normalizing."""
    target = getattr(fn, "__func__", fn)
    cells = getattr(target, "__closure__", None) or ()
    closure = []
    for cell in cells:
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if _is_data(value):
            closure.append(value)
    owner = getattr(fn, "__self__", fn if isinstance(fn, torch.nn.Module) else None)
    data = {k: v for k, v in module_globals.items() if not k.startswith("__") and _is_data(v)}
    return closure, owner, data


def observe(
    fn: Callable[..., Any], args: tuple, kwargs: dict, module_globals: dict, original: Any = None
) -> Observed:
    """Call ``fn`` (``original`` compiled, or itself) and keep what a user sees afterwards."""
    seed()
    stdout = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(stdout):
        warnings.simplefilter("always")
        try:
            result, error = fn(*args, **kwargs), None
        except Exception as exc:  # noqa: BLE001  (the program's own exceptions are observations)
            result, error = None, exc
    try:
        world = normalize(
            (args, kwargs, result, *state_of(original or fn, module_globals)), {}, 0
        )
    except Exception as exc:  # noqa: BLE001  (a state that cannot even be read is reported)
        world = f"<state unreadable: {type(exc).__name__}: {exc}>"
    return Observed(error, stdout.getvalue(), world, tuple(str(w.message) for w in caught))


def normalize(value: Any, memo: dict[int, Any], depth: int) -> Any:
    """``value`` as plain containers; user objects as dicts; shared objects kept shared."""
    if id(value) in memo:
        return memo[id(value)]
    if depth > MAX_DEPTH:
        return "<deep>"
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.generic):
        return ("numpy scalar", value.dtype.str, value.item())
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, (list, collections.deque)):
        copy: Any = []
        memo[id(value)] = copy
        copy.extend(normalize(v, memo, depth + 1) for v in value)
        return copy
    if isinstance(value, dict):  # (key, value) pairs in order: keys may be tensors
        pairs: list = []
        memo[id(value)] = pairs
        pairs.extend(
            (normalize(k, memo, depth + 1), normalize(v, memo, depth + 1)) for k, v in value.items()
        )
        return ("dict", type(value).__name__, pairs)
    if isinstance(value, (set, frozenset)):
        items = [normalize(v, memo, depth + 1) for v in value]
        try:
            return (type(value).__name__, sorted(items, key=repr))
        except Exception:  # noqa: BLE001
            return (type(value).__name__, len(items))
    if type(value) is tuple:
        return tuple(normalize(v, memo, depth + 1) for v in value)
    if isinstance(value, tuple):  # a namedtuple or torch.Size
        return (type(value).__qualname__, *(normalize(v, memo, depth + 1) for v in value))
    if isinstance(value, BaseException):
        return ("exception", type(value).__name__, str(value))
    if isinstance(value, (type, types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
        return f"<{type(value).__name__} {getattr(value, '__qualname__', '?')}>"
    if isinstance(value, types.ModuleType):
        return f"<module {value.__name__}>"
    if isinstance(value, (int, float, complex, str, bytes, bool, type(None), torch.dtype,
                          torch.device, torch.Size)):
        return value
    if isinstance(value, types.GeneratorType) or (
        type(value).__module__ in ("builtins", "itertools") and hasattr(type(value), "__next__")
    ):  # what is left to read, as the caller would (at most ``MAX_ITEMS``)
        memo[id(value)] = f"<{type(value).__name__} seen before>"
        try:
            items = list(itertools.islice(value, MAX_ITEMS))
        except Exception as exc:  # noqa: BLE001  (raising while read is part of what is left)
            items = [("raised", type(exc).__name__, str(exc))]
        return ("iterator", type(value).__name__, [normalize(v, memo, depth + 1) for v in items])
    if hasattr(value, "__dict__"):
        copy = {"__class__": type(value).__qualname__}
        memo[id(value)] = copy
        copy.update((k, normalize(v, memo, depth + 1)) for k, v in vars(value).items()
                    if k not in COMPILER_MARKS)
        return copy
    return f"<{type(value).__qualname__}>"


def describe(error: BaseException | None) -> str:
    return "returned" if error is None else f"{type(error).__name__}: {str(error)[:200]}"


def same_error(a: BaseException | None, b: BaseException | None) -> bool:
    if a is None or b is None:
        return a is b
    return type(a).__name__ == type(b).__name__ and str(a) == str(b)


def first_difference(got: Any, want: Any, path: str) -> str | None:
    """Where ``got`` differs from ``want`` (normalized worlds), or None."""
    if isinstance(want, torch.Tensor) or isinstance(got, torch.Tensor):
        if not (isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor)):
            return f"{path}: {type(got).__name__} vs {type(want).__name__}"
        return tensor_difference(got, want, path)
    if type(got) is not type(want):
        return f"{path}: type {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        if list(got) != list(want):
            return f"{path}: keys {list(got)[:8]} != {list(want)[:8]}"
        for key in want:
            found = first_difference(got[key], want[key], f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            found = first_difference(g, w, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(want, float) and want != want:
        return None if got != got else f"{path}: {got!r} is not NaN"
    try:
        equal = bool(got == want)
    except Exception as exc:  # noqa: BLE001
        return f"{path}: cannot compare ({type(exc).__name__})"
    if equal:
        return None
    if isinstance(want, float) and abs(got - want) <= 1e-5 + 1.3e-6 * abs(want):
        return None  # a float the graph computed in another order
    return f"{path}: {got!r:.80} != {want!r:.80}"


def tensor_difference(got: torch.Tensor, want: torch.Tensor, path: str) -> str | None:
    if (got.dtype, got.shape, got.requires_grad) != (want.dtype, want.shape, want.requires_grad):
        return (f"{path}: {got.dtype} {tuple(got.shape)} rg={got.requires_grad} vs "
                f"{want.dtype} {tuple(want.shape)} rg={want.requires_grad}")
    try:
        torch.testing.assert_close(got.detach(), want.detach(), equal_nan=True,
                                   check_device=False, check_layout=False)
    except AssertionError as exc:
        return f"{path}: {str(exc).splitlines()[0] if str(exc) else 'values differ'}"
    except Exception as exc:  # noqa: BLE001  (sparse, quantized...: compared as unequal)
        return f"{path}: cannot compare ({type(exc).__name__})"
    if want.is_leaf and (got.grad is not None or want.grad is not None):
        if got.grad is None or want.grad is None:
            return f"{path}.grad: {got.grad is None} vs {want.grad is None} (is None)"
        return tensor_difference(got.grad, want.grad, path + ".grad")
    return None


def owners(error: BaseException, inside: tuple[str, ...]) -> bool:
    """Whether the innermost frame that is the compiler's or the program's is the compiler's."""
    frames = traceback.extract_tb(error.__traceback__)
    mine = [
        f.filename for f in frames if f.filename.startswith(inside) or "dynamo/test_" in f.filename
    ]
    return bool(mine) and mine[-1].startswith(inside)


INTERNAL_WARNING = "bytegraph: internal error"  # what bytegraph warns when it falls back


def classify(
    eager: Observed, got: Observed, is_internal: Callable[[BaseException], bool]
) -> tuple[str, str]:
    """(outcome, detail): pass, wrong, error (raised differently) or internal.

    An internal error bytegraph caught itself (``config.strict`` off: it warns and
    runs the frame as Python) is ``internal`` too, whatever the result.
    """
    fallback = [w for w in got.warnings if w.startswith(INTERNAL_WARNING)]
    if fallback:
        return "internal", fallback[0].split(". It runs as plain Python")[0][:300]
    if got.error is not None and not same_error(got.error, eager.error):
        if is_internal(got.error):
            first = str(got.error).strip().splitlines()
            return "internal", f"{type(got.error).__name__}: {first[0] if first else ''}"[:300]
        if eager.error is None:
            return "error", f"eager returned, compiled {describe(got.error)}"
        return "error", f"eager {describe(eager.error)}, compiled {describe(got.error)}"
    if eager.error is not None and got.error is None:
        return "wrong", f"eager raised {describe(eager.error)}, compiled returned"
    if got.stdout != eager.stdout:
        return "wrong", f"stdout {got.stdout[:80]!r} != {eager.stdout[:80]!r}"
    where = first_difference(got.world, eager.world, "world")
    if where is not None:
        names = ("args", "kwargs", "result", "closure", "owner", "globals")
        for i, name in enumerate(names):
            where = where.replace(f"world[{i}]", name, 1)
        return "wrong", where[:300]
    return "pass", ""
