"""Code a break generates must assemble, and guards must compile, whatever the frame.

Two families of programs from outside corpora that used to crash the
compiler (an ``InternalError`` under ``config.strict``, a silent fallback to
eager otherwise):

* a break inside grad-mode with-blocks (nested, or inside a decorated
  function) followed, in the same block, by an instruction that never
  falls through (``assert``, ``raise``): the resume function, entered in the
  middle of the block's exception-table range, failed to assemble
  ("Failed to compute stacksize, got negative size");
* a comprehension frame compiled on its own (a break in its body), whose
  argument ``.0`` is no identifier, and guards on dict keys whose ``repr`` is
  no literal (enums, NaN, inf, dtypes): the guard function was not valid
  Python, or never passed.

Each program runs eager and compiled (``differential``: outputs, inputs
after the call, aliasing, ``requires_grad``), with the graph count asserted
and a second call that must hit the cache.

The programs' ``assert`` statements must compile as Python compiles them
(LOAD_ASSERTION_ERROR, RAISE_VARARGS), so pytest must not rewrite them:
PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import enum
import math
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

import bytegraph
from bytegraph.guards.sources import KEPT_CONSTANTS, const_expr, local_name


class _Sink:
    def write(self, text: str) -> None:
        pass


SINK = _Sink()


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    LOW = 1


def leaf() -> torch.Tensor:
    """The same values on every call: Python values computed from them (``.item()``, a
    branch) are guarded, so a second call must see them again to hit the cache."""
    generator = torch.Generator().manual_seed(0)
    return torch.randn(3, generator=generator).requires_grad_()


def check(
    fn: Callable[..., Any], make_inputs: Callable[[], tuple], graphs: int, differential,
    counting_backend,
) -> Any:
    """Eager vs compiled twice; ``graphs`` graphs in all, one cache entry, grad mode restored."""
    compiled = differential.compile(fn)
    result = differential.check(fn, compiled, make_inputs())
    assert counting_backend.calls == graphs, f"{counting_backend.calls} graphs, not {graphs}"
    differential.check(fn, compiled, make_inputs())
    assert counting_backend.calls == graphs, "the second call compiled a new graph"
    if hasattr(compiled, "entries"):  # a compiled module has its cache on its forward
        assert len(compiled.entries) == 1, "the second call missed the cache"
    assert torch.is_grad_enabled(), "grad mode leaked out of the call"
    return result


# --- breaks inside grad-mode with-blocks ------------------------------------------------------


def nested_modes_break_then_assert(x):
    before = torch.is_grad_enabled()
    with torch.set_grad_enabled(False):
        bytegraph.graph_break()
        with torch.set_grad_enabled(True):
            x = torch.mul(x, 5)
            bytegraph.graph_break()
            x = torch.sqrt(x)
            assert torch.is_grad_enabled()
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled() == before
    return x


def print_then_assert_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("break", file=SINK)
        assert y is not None
        y = y + 1
    return y, x * 3


def break_in_or_then_assert(x):
    with torch.no_grad():
        x = x * 2
        x = print("break", file=SINK) or x
        assert x is not None
    return x


def break_in_method_receiver_then_assert(x):
    with torch.set_grad_enabled(False):
        y = (bytegraph.graph_break() or x).mul(2)
        assert y is not None
    return y + x


def item_in_call_argument_then_raise(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = torch.add(x, x.sum().item())
            if y is None:
                raise ValueError("unreachable")
        z = y * 2
    return y, z


def data_dependent_then_assert_in_user_block(x):
    with torch.no_grad():
        with contextlib_free_cm():
            x = x * 5
            if x.sum() > 0:
                x = x + 1
            assert x is not None
    return x


class contextlib_free_cm:  # noqa: N801  (reads as the with-statement it is used in)
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def tolist_in_display_inside_loop(x):
    with torch.no_grad():
        for i in range(2):
            x = x + i
            y = [x, x * len(x.tolist()), x][1]
            assert y is not None
    return x, y


@torch.no_grad()
def decorated_with_inner_enable_grad(x):
    x = x * 2
    with torch.enable_grad():
        y = x * 3
        print("break", file=SINK)
        if y is None:
            raise ValueError("unreachable")
    return x, y


def calls_decorated(x):
    with torch.enable_grad():
        y = decorated_with_inner_enable_grad(x)
    return y[1] + x


class Scaler(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    @torch.set_grad_enabled(False)
    def forward(self, x):
        y = self.lin(x)
        with torch.enable_grad():
            z = self.lin(y) * float(y.sum())
            assert z is not None
        return y, z


# A stretch of code that only switches grad mode (entering a block before a break,
# leaving it after) compiles no graph: the transformed code sets the mode itself.
GRAD_MODE_PROGRAMS = [
    # the first switch alone, no graph; g1 switches on and multiplies; g2 from the
    # second break to the end
    (nested_modes_break_then_assert, lambda: (leaf().detach().abs(),), 2),
    # g1 multiplies; after the break only the block's exit is left
    (break_in_or_then_assert, lambda: (leaf(),), 1),
    # before the break only the block's entry; g1 multiplies and adds
    (break_in_method_receiver_then_assert, lambda: (leaf(),), 1),
    (print_then_assert_in_no_grad, lambda: (leaf(),), 2),
    (item_in_call_argument_then_raise, lambda: (leaf(),), 2),
    # g1 multiplies; the branch is not taken (the leaf's sum is negative), so only the
    # blocks' exits are left
    (data_dependent_then_assert_in_user_block, lambda: (leaf(),), 1),
    # the loop runs in Python, and around it only the block's entry and exit are left
    (tolist_in_display_inside_loop, lambda: (leaf(),), 0),
    # the decorator's wrapper only switches; g1 is the compiled callee's body until the
    # print; after it, and the wrapper's switch back, only switch the mode
    (decorated_with_inner_enable_grad, lambda: (leaf(),), 1),
    (calls_decorated, lambda: (leaf(),), 2),
]


@pytest.mark.parametrize(
    "fn,make_inputs,graphs", GRAD_MODE_PROGRAMS, ids=[p[0].__name__ for p in GRAD_MODE_PROGRAMS]
)
def test_break_in_grad_mode_block(fn, make_inputs, graphs, differential, counting_backend) -> None:
    check(fn, make_inputs, graphs, differential, counting_backend)


def test_break_in_decorated_module_forward(differential, counting_backend) -> None:
    torch.manual_seed(0)
    module = Scaler()
    # g1: the first linear and the sum float() needs; g2: the second linear, scaled
    y, z = check(module, lambda: (leaf(),), 2, differential, counting_backend)
    assert not y.requires_grad and z.requires_grad


def test_requires_grad_follows_the_blocks(counting_backend) -> None:
    x = leaf()
    compiled = bytegraph.compile(item_in_call_argument_then_raise, backend=counting_backend)
    y, z = compiled(x)
    assert y.requires_grad and not z.requires_grad
    assert torch.is_grad_enabled()


# --- comprehension frames and dict keys in guards ---------------------------------------------


def listcomp_float_of_values(d, x):
    return [float(t.sum()) * x for t in d.values()]


def setcomp_print_of_keys(d, x):
    return {print(k, file=SINK) or k for k in d.keys()}, x * 2


def dictcomp_break_over_items(d, x):
    return {k: (print(k, file=SINK) or v * x) for k, v in d.items()}


def genexp_break_over_values(d, x):
    return list(v * x + float(v.sum()) for v in d.values())


def nested_listcomp_break(d, x):
    return [[print(k, file=SINK) or v * x for _ in range(2)] for k, v in d.items()]


def item_by_key(d, x):
    return [d[k] * x for k in d]


KEYS = {
    "enum": Color.RED,
    "int_enum": Level.LOW,
    "nan": math.nan,
    "inf": -math.inf,
    "dtype": torch.float32,
    "nan_tuple": (math.nan, "a"),
    "quotes": "it's \"quoted\"",
    "none": None,
    "tuple": (1, "b"),
}
COMPREHENSIONS = [
    listcomp_float_of_values, setcomp_print_of_keys, dictcomp_break_over_items,
    genexp_break_over_values, nested_listcomp_break, item_by_key,
]


@pytest.mark.parametrize("fn", COMPREHENSIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("key", list(KEYS.values()), ids=list(KEYS))
def test_comprehension_over_dict(fn, key, differential) -> None:
    compiled = differential.compile(fn)
    for _ in range(2):
        d = {key: torch.randn(3), "z": torch.ones(3)}
        differential.check(fn, compiled, (d, torch.randn(3)))
    # A dict with an Enum key is not modelled: the frame runs as Python, guarded on the
    # dict's identity, and each new dict compiles a new entry.
    if not isinstance(key, Color):
        assert len(compiled.entries) == 1, "the second call missed the cache"


def _comprehension_function(fn: Callable[..., Any], **free: Any) -> types.FunctionType:
    """The comprehension in ``fn``'s body as a function of ``.0``, its free variables bound."""
    (code,) = [c for c in fn.__code__.co_consts if isinstance(c, types.CodeType)]
    cells = tuple(types.CellType(free[name]) for name in code.co_freevars)
    return types.FunctionType(code, fn.__globals__, None, None, cells)


@pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="3.12+ inlines list comprehensions into their function (PEP 709): no frame of "
    "their own exists (test_comprehension_over_dict covers them inlined)",
)
@pytest.mark.parametrize("key", [Color.RED, math.nan, "a"], ids=repr)
def test_comprehension_frame_compiled_on_its_own(key, counting_backend) -> None:
    """The frame a break in the body compiles on its own, guarded on its argument ``.0``."""
    d, x = {key: torch.randn(3), "z": torch.ones(3)}, torch.randn(3)
    comprehension = _comprehension_function(item_by_key, d=d, x=x)
    assert comprehension.__code__.co_varnames[0] == ".0"
    compiled = bytegraph.compile(comprehension, backend=counting_backend)
    for _ in range(2):
        actual, expected = compiled(iter(list(d))), comprehension(iter(list(d)))
        for a, e in zip(actual, expected, strict=True):
            torch.testing.assert_close(a, e, rtol=0, atol=0)
    assert len(compiled.entries) == 1


def test_item_by_nan_key_hits_the_cache(counting_backend) -> None:
    """The guard reads ``d[nan]`` with the very key object: another NaN finds no entry."""
    key = math.nan
    d = {key: torch.randn(3)}

    def fn(d, x):
        return d[key] * x

    compiled = bytegraph.compile(fn, backend=counting_backend)
    for _ in range(3):
        torch.testing.assert_close(compiled(d, torch.ones(3)), d[key])
    assert len(compiled.entries) == 1 and counting_backend.calls == 1


@pytest.mark.parametrize("value", [
    1, -0.0, 1.5, 3j, "it's \"q\"", b"b", None, True, (1, ("a", 2.5)), (),
    math.nan, math.inf, complex(math.nan, 1), (math.nan, 1), Color.RED, Level.LOW,
    torch.float16, torch.device("cpu"), frozenset({1}), int,
], ids=repr)
def test_const_expr_reads_back_as_the_value(value) -> None:
    text = const_expr(value)
    back = eval(text, {"___K": KEPT_CONSTANTS})  # noqa: S307  (our own generated text)
    assert type(back) is type(value)
    assert back is value or (back == value and repr(back) == repr(value))


@pytest.mark.parametrize("name", [".0", "x", "___stack0", "a.b", "é"])
def test_local_name_is_an_identifier(name) -> None:
    text = local_name(name)
    assert text.isidentifier()
    assert (text == name) is name.isidentifier()
