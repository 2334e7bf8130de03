"""``encode.to_code`` against the ``bytecode`` package's ``to_code``: the package is the oracle.

Every code object here is assembled both ways and the two must agree field by
field (co_code, co_stacksize, co_exceptiontable, co_linetable and so
co_positions(), the constant and name tuples, flags):

- a corpus of real code objects (this module's functions and a few
  standard-library modules, nested code objects included) decoded by
  ``bytecode`` and encoded again, in both of the package's modes (stack and try
  depths computed from the flow; stack size and try depths given), with the fast
  path required wherever it should be taken;
- bodies built the way ``assemble`` builds them: straight line, a call, a
  forward conditional jump, a loop (backward jump) long enough for EXTENDED_ARG
  on its constants and both its jumps, the graph call's try block with a value
  below it (the handler's depth is computed, not the TryBegin's 0), a closure's
  free variable, explicit locations on several lines;
- shapes ``encode`` hands to the package (a label reached at two depths, a
  stack underflow, a try block around a jump): same code, or the same error.

The runnable ones also run, both ways, on the same inputs.
"""

from __future__ import annotations

import argparse
import contextlib
import dis
import inspect
import json.decoder
import json.encoder
import textwrap
import types
from collections.abc import Callable, Iterator
from typing import Any

import bytecode as bc
import pytest
from bytecode.instr import InstrLocation

from bytegraph.bytecode import assemble, encode

FIELDS = (
    "co_code", "co_stacksize", "co_exceptiontable", "co_linetable", "co_consts", "co_names",
    "co_varnames", "co_cellvars", "co_freevars", "co_flags", "co_nlocals", "co_argcount",
    "co_posonlyargcount", "co_kwonlyargcount", "co_name", "co_qualname", "co_firstlineno",
    "co_filename",
)
DUAL_ARG = {dis.opmap[n] for n in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST",
                                  "STORE_FAST_STORE_FAST") if n in dis.opmap}


def assert_same(fast: types.CodeType, slow: types.CodeType) -> None:
    for field in FIELDS:
        assert getattr(fast, field) == getattr(slow, field), field
    assert list(fast.co_positions()) == list(slow.co_positions())


def has_dual_arg(code: types.CodeType) -> bool:
    """3.13's fused pairs of locals, which ``encode`` leaves to the package."""
    return any(inst.opcode in DUAL_ARG for inst in dis.get_instructions(code))


# ------------------------------------------------------------------ the corpus


def loops(xs: list[int]) -> tuple[int, int]:
    total, i = 0, 0
    for x in xs:
        if x < 0:
            continue
        if x == 99:
            break
        total += x
    while i < len(xs):
        i += 2
    return total, i


def tries(x: Any, log: list[str]) -> int:
    try:
        value = 10 // x
    except ZeroDivisionError:
        log.append("zero")
        value = -1
    except TypeError as e:
        log.append(type(e).__name__)
        raise
    else:
        log.append("else")
    finally:
        log.append("finally")
    return value


def withs(log: list[str], x: int) -> int:
    with contextlib.suppress(KeyError):
        with contextlib.ExitStack() as stack:
            stack.callback(log.append, "exit")
            if x == 1:
                raise KeyError(x)
            return x * 2
    return -1


def closures(n: int) -> tuple[int, list[int]]:
    count = 0

    def bump(by: int) -> int:
        nonlocal count
        count += by
        return count

    return count, [bump(i) for i in range(n)]


def generator(n: int) -> Iterator[int]:
    sent = yield n
    for i in range(n):
        sent = yield (i if sent is None else sent + i)
    yield from range(2)


def matches(value: Any) -> str:
    match value:
        case [x, *rest] if x > 0:
            return f"list {x} {len(rest)}"
        case {"k": v}:
            return f"dict {v}"
        case int() | float():
            return "number"
        case _:
            return "other"


def long_function_source(statements: int) -> str:
    """More than 256 constants and jumps longer than 255 units: EXTENDED_ARG everywhere."""
    body = "\n".join(
        f"        acc = acc + {i}.5 * x if x != {i} else acc - {i}.25" for i in range(statements)
    )
    return (
        "def long_function(xs):\n    acc = 0\n    for x in xs:\n"
        f"{body}\n        if x == 999:\n            break\n    return acc // (len(xs) - 1)\n"
    )


def make_long_function() -> Callable[[list[int]], float]:
    namespace: dict[str, Any] = {}
    exec(compile(long_function_source(300), "<long_function>", "exec"), namespace)
    return namespace["long_function"]


def call(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


def drain(fn: Callable[..., Any], *args: Any) -> Any:
    return list(fn(*args))


RUNS: dict[str, tuple[Callable[..., Any], list[tuple[Any, ...]], Callable[..., Any]]] = {
    # name: (function, its inputs, how to run it)
    "loops": (loops, [([1, -2, 3],), ([99, 1],), ([],), ([1, "x"],)], call),
    "tries": (tries, [(0, []), (5, []), ("s", [])], call),
    "withs": (withs, [([], 0), ([], 1), ([], 7)], call),
    "closures": (closures, [(0,), (4,)], call),
    "generator": (generator, [(0,), (3,)], drain),
    "matches": (matches, [([1, 2, 3],), ({"k": 1},), (2.5,), ("s",), ([-1],)], call),
    "long_function": (make_long_function(), [([1, 2, 3],), ([5, 999, 7],), ([4],)], call),
}


def code_objects(*roots: Any) -> list[types.CodeType]:
    """The code of each function (and method) defined in ``roots``, nested code too."""
    found: dict[int, types.CodeType] = {}

    def add(code: types.CodeType) -> None:
        if id(code) not in found:
            found[id(code)] = code
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    add(const)

    for root in roots:
        values = list(vars(root).values()) if isinstance(root, types.ModuleType) else [root]
        for value in values:
            members = vars(value).values() if isinstance(value, type) else [value]
            for member in members:
                code = getattr(inspect.unwrap(member), "__code__", None) if callable(
                    member) else None
                if isinstance(code, types.CodeType) and (
                    not isinstance(root, types.ModuleType)
                    or code.co_filename == getattr(root, "__file__", None)
                ):
                    add(code)
    return list(found.values())


CORPUS: dict[str, list[types.CodeType]] = {
    "this_module": code_objects(*(fn for fn, _, _ in RUNS.values())),
    "json": code_objects(json.decoder, json.encoder),
    "argparse": code_objects(argparse),
    "textwrap_contextlib": code_objects(textwrap, contextlib),
}


@pytest.mark.parametrize("corpus", list(CORPUS))
def test_corpus_sized_from_the_flow(corpus: str) -> None:
    """``to_code()``: stack and try depths computed; the fast path takes every code
    object without an exception table (bar 3.13's fused locals)."""
    fast_taken = 0
    for code in CORPUS[corpus]:
        slow = bc.Bytecode.from_code(code).to_code()
        fast = encode.try_encode(bc.Bytecode.from_code(code))
        if fast is None:
            assert code.co_exceptiontable or has_dual_arg(code), code.co_qualname
            fast = encode.to_code(bc.Bytecode.from_code(code))
        else:
            fast_taken += 1
        assert_same(fast, slow)
    assert fast_taken


def decoded(code: types.CodeType) -> bc.Bytecode:
    """``code`` decoded with its exception table's depths kept on the TryBegins."""
    return bc.Bytecode.from_code(code, conserve_exception_block_stackdepth=True)


@pytest.mark.parametrize("corpus", list(CORPUS))
def test_corpus_with_given_depths(corpus: str) -> None:
    """``to_code(stacksize=..., compute_exception_stack_depths=False)``, try depths
    kept from the decoded table: the fast path takes every code object (bar 3.13's
    fused locals)."""
    for code in CORPUS[corpus]:
        given = {"stacksize": code.co_stacksize, "compute_exception_stack_depths": False}
        slow = decoded(code).to_code(**given)
        fast = encode.try_encode(decoded(code), **given)
        if fast is None:
            assert has_dual_arg(code), code.co_qualname
            continue
        assert_same(fast, slow)


@pytest.mark.parametrize("name", list(RUNS))
def test_reencoded_functions_run_alike(name: str) -> None:
    fn, calls, run = RUNS[name]
    code = encode.to_code(bc.Bytecode.from_code(fn.__code__))
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    for args in calls:
        assert outcome(run, copy, *args) == outcome(run, fn, *args)


def outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    try:
        return "returned", fn(*args)
    except Exception as e:
        return "raised", (type(e), e.args)


# ------------------------------------------------ bodies shaped like assemble's


def template(x: Any) -> Any:
    """The signature the assembled bodies get."""


def fails_on_zero(x: int) -> int:
    return 10 // x


def jump_if_false(label: bc.Label) -> list[bc.Instr]:
    """Pop the top and jump to ``label`` if it is false (3.13 wants a bool there)."""
    to_bool = [bc.Instr("TO_BOOL")] if "TO_BOOL" in dis.opmap else []
    name = "POP_JUMP_FORWARD_IF_FALSE" if "POP_JUMP_FORWARD_IF_FALSE" in dis.opmap else (
        "POP_JUMP_IF_FALSE")
    return [*to_bool, bc.Instr(name, label)]


def straight_line() -> list[Any]:
    return [bc.Instr("LOAD_FAST", "x"), bc.Instr("LOAD_CONST", 1),
            bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value), bc.Instr("RETURN_VALUE")]


def a_call() -> list[Any]:
    load = [bc.Instr("LOAD_GLOBAL", (True, "fails_on_zero")), bc.Instr("LOAD_FAST", "x")]
    return [*load, *assemble.call(1), bc.Instr("RETURN_VALUE")]


def branch() -> list[Any]:
    no = bc.Label()
    return [bc.Instr("LOAD_FAST", "x"), *jump_if_false(no), bc.Instr("LOAD_CONST", "yes"),
            bc.Instr("RETURN_VALUE"), no, bc.Instr("LOAD_CONST", "no"), bc.Instr("RETURN_VALUE")]


def long_loop() -> list[Any]:
    """sum(range(x)), with 300 distinct constants loaded and dropped in the loop body."""
    top, done = bc.Label(), bc.Label()
    filler = [i for k in range(300) for i in (bc.Instr("LOAD_CONST", k + 0.5),
                                               bc.Instr("POP_TOP"))]
    end_for = {(3, 11): [], (3, 12): ["END_FOR"]}.get(
        assemble.compat.PY_VERSION, ["END_FOR", "POP_TOP"])
    return [
        bc.Instr("LOAD_CONST", 0), bc.Instr("STORE_FAST", "total"),
        bc.Instr("LOAD_GLOBAL", (True, "range")), bc.Instr("LOAD_FAST", "x"),
        *assemble.call(1), bc.Instr("GET_ITER"),
        top, bc.Instr("FOR_ITER", done), bc.Instr("STORE_FAST", "i"), *filler,
        bc.Instr("LOAD_FAST", "total"), bc.Instr("LOAD_FAST", "i"),
        bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value), bc.Instr("STORE_FAST", "total"),
        bc.Instr("JUMP_BACKWARD", top),
        done, *map(bc.Instr, end_for), bc.Instr("LOAD_FAST", "total"), bc.Instr("RETURN_VALUE"),
    ]


def guarded_call() -> list[Any]:
    """'got ' + str(fails_on_zero(x)), or 'got !' if it raises: codegen's graph call,
    with a value below the try block (its handler keeps it), which the block itself
    makes from the two it starts with (the handler's depth is the lowest inside)."""
    handler = bc.Label()
    guarded = bc.TryBegin(handler, push_lasti=False, stack_depth=0)
    call = [*assemble.with_null([bc.Instr("LOAD_GLOBAL", (False, "fails_on_zero"))]),
            bc.Instr("LOAD_FAST", "x"), *assemble.call(1)]
    return [
        bc.Instr("LOAD_CONST", "go"), bc.Instr("LOAD_CONST", "t "), guarded,
        bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value), *call, bc.Instr("STORE_FAST", "out"),
        bc.TryEnd(guarded),
        bc.Instr("LOAD_GLOBAL", (True, "str")), bc.Instr("LOAD_FAST", "out"),
        *assemble.call(1), bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value),
        bc.Instr("RETURN_VALUE"),
        handler, bc.Instr("POP_TOP"), bc.Instr("LOAD_CONST", "!"),
        bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value), bc.Instr("RETURN_VALUE"),
    ]


def kept_by_handler() -> list[Any]:
    """x, through the handler of a deletion that always fails: the handler's entry
    (x and the exception) is the deepest the stack gets."""
    handler = bc.Label()
    guarded = bc.TryBegin(handler, push_lasti=False)
    return [bc.Instr("LOAD_FAST", "x"), guarded, bc.Instr("DELETE_FAST", "unbound"),
            bc.TryEnd(guarded), bc.Instr("RETURN_VALUE"),
            handler, bc.Instr("POP_TOP"), bc.Instr("RETURN_VALUE")]


def located() -> list[Any]:
    """Locations on several lines (short, one-line, long and no-column forms, none)."""
    at = InstrLocation
    first = template.__code__.co_firstlineno
    return [
        bc.Instr("LOAD_GLOBAL", (True, "fails_on_zero"), location=at(first + 1, first + 1, 4, 9)),
        bc.Instr("LOAD_FAST", "x", location=at(first + 2, first + 2, 100, 120)),
        *assemble.call(1),
        bc.SetLineno(first + 40),
        bc.Instr("LOAD_CONST", 2, location=at(first + 3, first + 5, 0, 3)),
        bc.Instr("BINARY_OP", bc.BinaryOp.MULTIPLY.value, location=at(None, None, None, None)),
        bc.Instr("LOAD_CONST", 1, location=at(first - 1, None, None, None)),
        bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value),
        bc.Instr("RETURN_VALUE", location=at(first, first, 0, 1)),
    ]


def make_adder(k: int) -> Callable[[Any], Any]:
    def adder(x: Any) -> Any:
        return x + k
    return adder


def free_variable() -> list[Any]:
    return [bc.Instr("LOAD_FAST", "x"), bc.Instr("LOAD_DEREF", bc.FreeVar("k")),
            bc.Instr("BINARY_OP", bc.BinaryOp.ADD.value), bc.Instr("RETURN_VALUE")]


Body = tuple[Callable[..., Any], Callable[[], list[Any]], list[Any], Callable[..., Any]]
BODIES: dict[str, Body] = {
    # name: (template, body, inputs, what plain Python computes)
    "straight_line": (template, straight_line, [1, 2.5], lambda x: x + 1),
    "call": (template, a_call, [2, 0], fails_on_zero),
    "branch": (template, branch, [0, 3, ""], lambda x: "yes" if x else "no"),
    "long_loop": (template, long_loop, [0, 1, 30], lambda x: sum(range(x))),
    "guarded_call": (template, guarded_call, [5, 0],
                     lambda x: "got !" if x == 0 else "got " + str(fails_on_zero(x))),
    "kept_by_handler": (template, kept_by_handler, [3, "s"], lambda x: x),
    "located": (template, located, [5, 0], lambda x: fails_on_zero(x) * 2 + 1),
    "free_variable": (make_adder(7), free_variable, [1, 2.5], lambda x: x + 7),
}


@pytest.mark.parametrize("name", list(BODIES))
def test_assembled_bodies_match_package(name: str) -> None:
    fn, body, inputs, expected = BODIES[name]
    slow = assemble.bytecode_for(fn.__code__, body()).to_code()
    fast = encode.try_encode(assemble.bytecode_for(fn.__code__, body()))
    assert fast is not None
    assert_same(fast, slow)
    assert fast == assemble.assemble(fn.__code__, body())
    made = types.FunctionType(fast, globals(), fn.__name__, None, fn.__closure__)
    for x in inputs:
        assert outcome(made, x) == outcome(expected, x)


def test_guarded_call_handler_depth_is_computed() -> None:
    """The try block's table entry says 1 (the string below it), not the TryBegin's 0."""
    code = assemble.assemble(template.__code__, guarded_call())
    assert code.co_exceptiontable
    assert assemble.bytecode_for(template.__code__, guarded_call()).to_code().co_exceptiontable \
        == code.co_exceptiontable
    depths = {entry.depth for entry in dis._parse_exception_table(code)}  # type: ignore[attr-defined]
    assert depths == {1}


# ------------------------------------------------------ left to the package


def two_depths() -> list[Any]:
    """A label reached with one value on the stack and with two."""
    join = bc.Label()
    return [bc.Instr("LOAD_CONST", 1), bc.Instr("LOAD_FAST", "x"), *jump_if_false(join),
            bc.Instr("LOAD_CONST", 2), join, bc.Instr("RETURN_VALUE")]


def jump_in_try() -> list[Any]:
    handler, skip = bc.Label(), bc.Label()
    guarded = bc.TryBegin(handler, push_lasti=False)
    return [guarded, bc.Instr("LOAD_FAST", "x"), *jump_if_false(skip),
            bc.Instr("LOAD_CONST", 1), bc.Instr("POP_TOP"), skip, bc.TryEnd(guarded),
            bc.Instr("LOAD_CONST", None), bc.Instr("RETURN_VALUE"),
            handler, bc.Instr("POP_TOP"), bc.Instr("LOAD_CONST", 0), bc.Instr("RETURN_VALUE")]


def label_placed_twice() -> list[Any]:
    """The package jumps to a label's last place."""
    twice = bc.Label()
    return [bc.Instr("LOAD_CONST", 1), bc.Instr("JUMP_FORWARD", twice), twice,
            bc.Instr("LOAD_CONST", 2), bc.Instr("POP_TOP"), twice, bc.Instr("RETURN_VALUE")]


@pytest.mark.parametrize("body", [two_depths, jump_in_try, label_placed_twice])
def test_declined_shapes_come_out_as_the_package_makes_them(body: Callable[[], list[Any]]) -> None:
    assert encode.try_encode(assemble.bytecode_for(template.__code__, body())) is None
    slow = assemble.bytecode_for(template.__code__, body()).to_code()
    assert_same(assemble.assemble(template.__code__, body()), slow)


def test_underflow_raises_as_the_package_does() -> None:
    body = [bc.Instr("POP_TOP"), bc.Instr("LOAD_CONST", None), bc.Instr("RETURN_VALUE")]
    with pytest.raises(RuntimeError, match="negative size") as slow:
        assemble.bytecode_for(template.__code__, body).to_code()
    with pytest.raises(RuntimeError) as fast:
        assemble.assemble(template.__code__, body)
    assert str(fast.value) == str(slow.value)


def test_nested_try_blocks_raise_as_the_package_does() -> None:
    outer, inner, handler = bc.Label(), bc.Label(), bc.Label()
    first, second = bc.TryBegin(outer, push_lasti=False), bc.TryBegin(inner, push_lasti=False)
    body = [first, second, bc.Instr("NOP"), bc.TryEnd(second), bc.TryEnd(first),
            bc.Instr("LOAD_CONST", None), bc.Instr("RETURN_VALUE"),
            outer, inner, handler, bc.Instr("POP_TOP"), bc.Instr("LOAD_CONST", None),
            bc.Instr("RETURN_VALUE")]
    given = {"stacksize": 3, "compute_exception_stack_depths": False}
    for kwargs in ({}, given):
        with pytest.raises(RuntimeError, match="nested") as slow:
            assemble.bytecode_for(template.__code__, body).to_code(**kwargs)
        with pytest.raises(RuntimeError) as fast:
            encode.to_code(assemble.bytecode_for(template.__code__, body), **kwargs)
        assert str(fast.value) == str(slow.value)
