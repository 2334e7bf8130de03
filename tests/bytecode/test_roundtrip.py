"""``roundtrip(code)`` keeps what real functions do: CPython is the oracle.

Each case is a real function (loops with break/continue/else, try/except/
finally nested and re-raised, except*, with-blocks with a recording context
manager, closures writing nonlocals, comprehensions, generators with yield,
yield from, send, throw and close, a coroutine, every parameter kind, match,
a class body, a function long enough to need EXTENDED_ARG). The test rebuilds
the function around ``roundtrip(fn.__code__)`` (and, in ``deep`` mode, around
roundtripped nested code objects too: generator-expression, lambda, closure and
class bodies, and on 3.11 comprehension bodies, which 3.12+ inlines) and runs the
original and the copy on the same inputs. They must return equal values, leave
equal argument objects behind, and raise the same exceptions (type, arguments,
cause and context) from the same lines. Every case has at least one input that
returns and one that raises. The opcodes the corpus must contain depend on the
running version (``compat``, ``dis``).
"""

from __future__ import annotations

import copy
import dataclasses
import dis
import traceback
import types
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from bytegraph.bytecode import compat
from bytegraph.bytecode.assemble import roundtrip
from bytegraph.bytecode.instructions import Instruction, decode

Call = tuple[tuple[Any, ...], dict[str, Any]]


def c(*args: Any, **kwargs: Any) -> Call:
    """One call's arguments, written like the call itself."""
    return args, kwargs


# --------------------------------------------------------------------- loops


def loop_for_break_continue(xs: list[int]) -> tuple[int, str]:
    total = 0
    for x in xs:
        if x < 0:
            continue
        if x == 99:
            break
        total += 10 // x
    else:
        return total, "exhausted"
    return total, "broke"


def loop_while(n: int) -> list[int]:
    out, i = [], 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        if i > 10:
            break
        out.append(i)
    else:
        out.append(-1)
    if n < 0:
        raise ValueError(f"negative n: {n}")
    return out


def loop_nested(matrix: list[list[int]]) -> list[tuple[int, int]]:
    found = []
    for r, row in enumerate(matrix):
        if not row:
            continue
        for col, value in enumerate(row):
            if value == 0:
                break
            if value % 2:
                continue
            found.append((r, col))
        else:
            found.append((r, -1))
    return found + [(len(matrix), matrix[0][0])]


def loop_return_inside(xs: list[int], target: int) -> int:
    while True:
        for i, x in enumerate(xs):
            for _ in range(2):
                if x == target:
                    return i
        raise LookupError(target)


def loop_unpacking(pairs: list[tuple[int, ...]]) -> list[int]:
    out = []
    for first, *middle, last in pairs:
        out.append(first * last + sum(middle))
    (head, *_), = [pairs[0]]
    return out + [head]


# ----------------------------------------------------------------- exceptions


def try_except_else_finally(x: Any, log: list[str]) -> int:
    try:
        log.append("try")
        y = 100 // x
    except ZeroDivisionError:
        log.append("zero")
        y = -1
    except TypeError as e:
        log.append(f"type: {e}")
        raise
    else:
        log.append("else")
    finally:
        log.append("finally")
    return y


def try_nested_reraise(x: int) -> str:
    try:
        try:
            if x == 0:
                raise KeyError("zero")
            if x == 1:
                raise ValueError("one")
            return "ok"
        except KeyError:
            raise
        except ValueError as e:
            raise RuntimeError("wrapped") from e
        finally:
            if x == 2:
                raise OSError("from finally")
    except RuntimeError as e:
        if x == 1:
            raise TypeError("context is RuntimeError") from None
        raise AssertionError(e) from e


def try_finally_return(x: int, log: list[str]) -> int:
    for i in range(3):
        try:
            if i == x:
                raise IndexError(i)
            log.append(f"body {i}")
        finally:
            log.append(f"finally {i}")
            if x == 1:
                return i  # noqa: B012  (swallowing the exception is the point)
    return -1


def try_in_loop(xs: list[Any], log: list[str]) -> int:
    count = 0
    for x in xs:
        try:
            if x is None:
                continue
            if x == "stop":
                break
            count += int(x)
        except ValueError:
            log.append(f"bad {x!r}")
            continue
        finally:
            log.append(f"after {x!r}")
    return count


def try_except_as_cleared(x: int) -> str:
    try:
        if x:
            raise ValueError(x)
    except ValueError as e:
        message = str(e)
    if x > 5:
        return e  # noqa: F821  (the except clause deleted e: UnboundLocalError)
    return message  # UnboundLocalError when x == 0


def except_star(kinds: list[str]) -> list[str]:
    seen = []
    try:
        errors: list[Exception] = []
        for kind in kinds:
            errors.append(ValueError(kind) if kind.startswith("v") else TypeError(kind))
        if errors:
            raise ExceptionGroup("many", errors)
    except* ValueError as group:
        seen.append(f"values {len(group.exceptions)}")
    except* TypeError as group:
        seen.append(f"types {len(group.exceptions)}")
        if len(group.exceptions) > 1:
            raise
    return seen


# --------------------------------------------------------------- with-blocks


class Recorder:
    """A context manager that logs enter/exit and can suppress one exception type."""

    def __init__(self, log: list[str], name: str, suppress: type[BaseException] | None = None):
        self.log, self.name, self.suppress = log, name, suppress

    def __enter__(self) -> str:
        self.log.append(f"enter {self.name}")
        return self.name.upper()

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> bool:
        self.log.append(f"exit {self.name} {exc_type.__name__ if exc_type else None}")
        return self.suppress is not None and exc_type is not None and issubclass(
            exc_type, self.suppress
        )


def with_recorder(log: list[str], x: int) -> str:
    with Recorder(log, "a") as a:
        log.append(f"inside {a}")
        y = 10 // x
    return f"{a}{y}"


def with_nested_suppress(log: list[str], x: Any) -> int:
    with Recorder(log, "outer", suppress=KeyError), Recorder(log, "inner", ValueError) as inner:
        log.append(inner)
        if x == "key":
            raise KeyError(x)
        if x == "value":
            raise ValueError(x)
        with Recorder(log, "innermost"):
            return 1 + x
    return -1


def with_return_break(log: list[str], xs: list[int]) -> int:
    for x in xs:
        with Recorder(log, f"r{x}"):
            if x == 0:
                continue
            if x < 0:
                break
            if x > 100:
                return x
            log.append(str(100 // (x - 50)))
    return len(log)


# ------------------------------------------------------------------ closures


def closure_nonlocal(n: int) -> tuple[int, list[int]]:
    count = 0

    def bump(by: int) -> int:
        nonlocal count
        count += by
        if count > 100:
            raise OverflowError(count)
        return count

    for i in range(n):
        bump(i)
    late = [lambda: i for i in range(3)]  # noqa: B023  (late binding is the point)
    bound = [lambda i=i: i for i in range(3)]
    return count, [f() for f in late] + [f() for f in bound]


def make_accumulator() -> Callable[[int], int]:
    total = 0
    calls = 0

    def accumulate(x: int) -> int:
        nonlocal total, calls
        calls += 1
        total += 10 // x
        return total * 100 + calls

    return accumulate


def closure_three_levels(x: int) -> list[int]:
    seen = []

    def middle(y: int) -> Callable[[], int]:
        acc = y

        def inner() -> int:
            nonlocal acc
            acc += x
            seen.append(acc)
            return acc // (y - 3)

        return inner

    fns = [middle(y) for y in range(x)]
    return [f() for f in fns] + seen


@dataclasses.dataclass  # compared by value when the test compares arguments
class Base:
    def describe(self, n: int) -> str:
        return f"base {n}"


class Child(Base):
    def describe(self, n: int) -> str:
        if n < 0:
            raise ValueError(n)
        return "child/" + super().describe(n) + f"/{__class__.__name__}"


def make_appender() -> Callable[..., list[int]]:
    def append(x: int, acc: list[int] = []) -> list[int]:  # noqa: B006  (shared default)
        acc.append(100 // x)
        return list(acc)

    return append


def class_in_function(x: int) -> list[int]:
    offset = x

    class Point:
        scale = 2

        def __init__(self, v: int) -> None:
            self.v = v * self.scale + offset

        def __lt__(self, other: Point) -> bool:
            return self.v < other.v

    points = sorted(Point(v) for v in (3, 1, 2))
    if x < 0:
        points.append(Point("bad"))  # type: ignore[arg-type]
    return [p.v for p in points]


# ------------------------------------------------------------ comprehensions


def comp_list(xs: list[int], k: int) -> list[Any]:
    pairs = [(x, y) for x in xs if x % 2 == 0 for y in range(x) if y > k]
    divided = [k // x for x in xs]
    return [pairs, divided, [[x * k for x in xs] for _ in range(2)]]


def comp_dict_set(words: list[str]) -> tuple[dict[str, int], set[str], dict[int, set[str]]]:
    lengths = {w: len(w) for w in words if w}
    initials = {w[0] for w in words}
    by_len = {n: {w for w in words if len(w) == n} for n in set(lengths.values())}
    return lengths, initials, by_len


def comp_genexpr(xs: list[int]) -> tuple[int, bool, bool, list[float]]:
    total = sum(x * x for x in xs)
    has_big = any(x > 10 for x in xs)
    all_pos = all(x > 0 for x in xs)
    gen = (1 / x for x in xs)
    return total, has_big, all_pos, sorted(gen)


# ---------------------------------------------------------------- generators


def drain(gen: Iterator[Any]) -> tuple[list[Any], Any]:
    items = []
    while True:
        try:
            items.append(next(gen))
        except StopIteration as stop:
            return items, stop.value


def converse(gen: Generator[Any, Any, Any]) -> tuple[list[Any], Any]:
    """Send 1, 2, 3... into ``gen`` after priming it; record what comes back."""
    items = [next(gen)]
    for value in range(1, 20):
        try:
            items.append(gen.send(value))
        except StopIteration as stop:
            return items, stop.value
    return items, "unfinished"


def throw_in(gen: Generator[Any, Any, Any]) -> tuple[list[Any], Any]:
    items = [next(gen)]
    try:
        items.append(gen.throw(ValueError("thrown")))
    except StopIteration as stop:
        return items, stop.value
    rest, value = drain(gen)
    return items + rest, value


def close_early(gen: Generator[Any, Any, Any]) -> Any:
    first = next(gen)
    gen.close()
    return first


def gen_simple(n: int, log: list[str]) -> Generator[int, None, str]:
    try:
        for i in range(n):
            log.append(f"yield {i}")
            yield 10 // (i - 2)
        return f"done {n}"
    finally:
        log.append("finally")


def gen_inner(n: int) -> Generator[int, int, int]:
    total = 0
    for _ in range(n):
        got = yield total
        total += got
        if total > 12:
            raise OverflowError(total)
    return total


def gen_yield_from(n: int) -> Generator[int, int, tuple[int, int]]:
    first = yield from gen_inner(n)
    second = yield from gen_inner(n)
    return first, second


def gen_throw(n: int, log: list[str]) -> Generator[str, None, int]:
    caught = 0
    for i in range(n):
        try:
            yield f"item {i}"
        except ValueError as e:
            caught += 1
            log.append(str(e))
            if n > 3:
                raise RuntimeError("not here") from e
    return caught


def gen_close(log: list[str], fail: bool) -> Generator[int, None, None]:
    try:
        yield 1
        yield 2
    except GeneratorExit:
        log.append("exit")
        if fail:
            raise RuntimeError("refused to close") from None
        raise
    finally:
        log.append("finally")


class Ready:
    """An awaitable that finishes at once with ``value``."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __await__(self) -> Generator[None, None, int]:
        if False:
            yield
        return self.value


async def coroutine(xs: list[int]) -> int:
    total = 0
    for x in xs:
        total += await Ready(100 // x)
    return total


def run_coroutine(coro: Any) -> Any:
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the coroutine suspended")


# ---------------------------------------------------------------- signatures


def sig_kwonly_defaults(a: int, b: int = 2, *, c: int, d: int = 4) -> tuple[int, ...]:
    return a, b, c, d, a * b // c


def sig_varargs(a: int, *args: int, k: int = 1, **kwargs: int) -> tuple[Any, ...]:
    return a, args, k, sorted(kwargs.items()), sum(args) // k


def sig_posonly(a: int, b: int, /, c: int = 3, *, d: int = 5) -> int:
    return (a - b) * c // d


# --------------------------------------------------------------------- misc


@dataclasses.dataclass
class Box:
    w: int
    h: int


def misc_match(value: Any) -> str:
    match value:
        case Box(w=0) | Box(h=0):
            return "empty box"
        case Box(w=w, h=h) if w == h:
            return f"square {w}"
        case {"kind": "circle", "r": r}:
            return f"circle {r}"
        case [x, y, *rest]:
            return f"seq {x} {y} {len(rest)}"
        case str() as s:
            return s.upper()
        case _:
            raise TypeError(f"no match for {value!r}")


GLOBAL_STATE = 0


def misc_expressions(xs: list[int]) -> tuple[Any, ...]:
    global GLOBAL_STATE
    GLOBAL_STATE = len(xs)
    assert xs, "need items"
    if (n := len(xs)) > 2 and 0 < xs[0] < xs[1] <= xs[2]:
        kind = "rising"
    else:
        kind = "other" if n else "none"
    flag = xs[0] and xs[-1] or None
    tmp = n
    del tmp
    return kind, flag, GLOBAL_STATE, not xs, -xs[0], ~xs[-1], xs[::2], {**{"n": n}}


def long_function_source(statements: int) -> str:
    """More than 256 constants and jumps longer than 255: EXTENDED_ARG everywhere."""
    body = "\n".join(
        f"        acc = acc + {i}.5 * x if x != {i} else acc - {i}.25" for i in range(statements)
    )
    return (
        "def long_function(xs):\n"
        "    acc = 0\n"
        "    for x in xs:\n"
        f"{body}\n"
        "        if x == 999:\n"
        "            break\n"
        "    return acc // (len(xs) - 1)\n"
    )


def make_long_function() -> Callable[[list[int]], float]:
    namespace: dict[str, Any] = {}
    exec(compile(long_function_source(300), "<long_function>", "exec"), namespace)
    return namespace["long_function"]


# --------------------------------------------------------------------- cases


def identity(value: Any) -> Any:
    return value


@dataclasses.dataclass(frozen=True)
class Case:
    """A function (made fresh for each run), the calls to make in order, and a driver."""

    make: Callable[[], Callable[..., Any]]
    calls: tuple[Call, ...]
    drive: Callable[[Any], Any] = identity


def plain(fn: Callable[..., Any]) -> Callable[[], Callable[..., Any]]:
    return lambda: fn


CASES: dict[str, Case] = {
    "loop_for_break_continue": Case(
        plain(loop_for_break_continue), (c([1, 2, -1, 5]), c([3, 99, 4]), c([]), c([1, 0])),
    ),
    "loop_while": Case(plain(loop_while), (c(0), c(5), c(20), c(-3))),
    "loop_nested": Case(
        plain(loop_nested),
        (c([[2, 4, 3], [], [6, 0, 8], [1, 1]]), c([[1]]), c([[], [2]]), c([])),
    ),
    "loop_return_inside": Case(
        plain(loop_return_inside), (c([5, 6, 7], 7), c([5], 5), c([1, 2], 3)),
    ),
    "loop_unpacking": Case(plain(loop_unpacking), (c([(1, 2), (1, 2, 3, 4)]), c([(1,)]), c([]))),
    "try_except_else_finally": Case(
        plain(try_except_else_finally), (c(5, []), c(0, []), c("s", []), c(None, [])),
    ),
    "try_nested_reraise": Case(plain(try_nested_reraise), (c(0), c(1), c(2), c(3))),
    "try_finally_return": Case(plain(try_finally_return), (c(0, []), c(1, []), c(5, []))),
    "try_in_loop": Case(
        plain(try_in_loop), (c([1, None, "x", "2", "stop", 9], []), c([[1]], []), c([], [])),
    ),
    "try_except_as_cleared": Case(plain(try_except_as_cleared), (c(3), c(0), c(7))),
    "except_star": Case(
        plain(except_star), (c(["v1", "t1", "v2"]), c([]), c(["t1", "t2"]), c(["v"])),
    ),
    "with_recorder": Case(plain(with_recorder), (c([], 5), c([], 0), c([], "s"))),
    "with_nested_suppress": Case(
        plain(with_nested_suppress), (c([], 1), c([], "key"), c([], "value"), c([], "other")),
    ),
    "with_return_break": Case(
        plain(with_return_break),
        (c([], [1, 0, 2, 200, 3]), c([], [0, -1, 5]), c([], [60, 50]), c([], [])),
    ),
    "closure_nonlocal": Case(plain(closure_nonlocal), (c(0), c(5), c(20))),
    "closure_accumulator": Case(make_accumulator, (c(1), c(2), c(0), c(5), c("x"), c(3))),
    "closure_three_levels": Case(plain(closure_three_levels), (c(2), c(0), c(5))),
    "super_method": Case(
        lambda: Child.describe, (c(Child(), 1), c(Child(), -1), c(Base(), 2)),
    ),
    "mutable_default": Case(make_appender, (c(1), c(2), c(0), c(5, [7]), c(4))),
    "class_in_function": Case(plain(class_in_function), (c(0), c(10), c(-1))),
    "comp_list": Case(plain(comp_list), (c([1, 2, 4], 0), c([4, 6], 2), c([3, 0], 1))),
    "comp_dict_set": Case(
        plain(comp_dict_set), (c(["ab", "cd", "e", "abc"]), c([]), c(["x", ""])),
    ),
    "comp_genexpr": Case(plain(comp_genexpr), (c([1, 2, 30]), c([-1, 4]), c([5, 0]))),
    "gen_simple": Case(plain(gen_simple), (c(2, []), c(0, []), c(5, [])), drain),
    "gen_yield_from": Case(plain(gen_yield_from), (c(2), c(0), c(6)), converse),
    "gen_throw": Case(plain(gen_throw), (c(2, []), c(5, []), c(1, []), c(0, [])), throw_in),
    "gen_close": Case(plain(gen_close), (c([], False), c([], True)), close_early),
    "coroutine": Case(plain(coroutine), (c([1, 2, 5]), c([]), c([3, 0])), run_coroutine),
    "sig_kwonly_defaults": Case(
        plain(sig_kwonly_defaults),
        (c(1, c=3), c(1, 5, c=2, d=0), c(a=4, b=5, c=1), c(1, c=0), c(1), c(1, 2, 3)),
    ),
    "sig_varargs": Case(
        plain(sig_varargs), (c(1), c(1, 2, 3, k=2, z=4, y=5), c(1, 2, k=0), c(k=3), c(1, a=2)),
    ),
    "sig_posonly": Case(
        plain(sig_posonly), (c(9, 2), c(9, 2, 4, d=3), c(1, 2, c=5), c(1, b=2), c(1, 2, d=0)),
    ),
    "misc_match": Case(
        plain(misc_match),
        (c(Box(0, 3)), c(Box(4, 4)), c(Box(2, 3)), c({"kind": "circle", "r": 2}),
         c([1, 2, 3, 4]), c("abc"), c(5), c((1,))),
    ),
    "misc_expressions": Case(
        plain(misc_expressions), (c([1, 2, 3]), c([3, 1]), c([0, 5, 7]), c([]), c(["a"])),
    ),
    "long_function": Case(make_long_function, (c([1, 2, 3]), c([5, 999, 7]), c([4]))),
}


# --------------------------------------------------------------------- the test


def deep_roundtrip(code: types.CodeType) -> types.CodeType:
    """Roundtrip the nested code objects (comprehensions, closures) first, then ``code``."""
    consts = tuple(
        deep_roundtrip(const) if isinstance(const, types.CodeType) else const
        for const in code.co_consts
    )
    return roundtrip(code.replace(co_consts=consts))


def rebuild(fn: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new


def plain_value(value: Any) -> Any:
    """``value`` with exceptions (compared by identity) replaced by their description."""
    if isinstance(value, BaseException):
        return describe_exception(value)
    if isinstance(value, (list, tuple)):
        return type(value)(plain_value(item) for item in value)
    return value


def describe_exception(exc: BaseException) -> tuple[Any, ...]:
    frames = [(frame.name, frame.lineno) for frame in traceback.extract_tb(exc.__traceback__)]
    return (
        type(exc),
        plain_value(exc.args),
        type(exc.__cause__),
        type(exc.__context__),
        exc.__suppress_context__,
        frames,
    )


def observe(fn: Callable[..., Any], case: Case) -> list[tuple[Any, ...]]:
    """What each call of ``case`` does: its result or exception, and its arguments after."""
    outcomes = []
    for args, kwargs in copy.deepcopy(case.calls):
        try:
            result: tuple[Any, ...] = ("returned", plain_value(case.drive(fn(*args, **kwargs))))
        except Exception as exc:
            result = ("raised", describe_exception(exc))
        outcomes.append((result, args, kwargs))
    return outcomes


@pytest.mark.parametrize("mode", ["shallow", "deep"])
@pytest.mark.parametrize("name", list(CASES))
def test_roundtrip_behaves_like_original(name: str, mode: str) -> None:
    case = CASES[name]
    original = case.make()
    new_code = (roundtrip if mode == "shallow" else deep_roundtrip)(original.__code__)
    assert new_code is not original.__code__
    expected = observe(original, case)
    kinds = {result[0] for result, _, _ in expected}
    assert kinds == {"returned", "raised"}, "each case needs inputs that return and that raise"

    copy_fn = rebuild(case.make(), new_code)
    assert copy_fn.__code__ is new_code
    assert observe(copy_fn, case) == expected


def nested_code(code: types.CodeType) -> list[types.CodeType]:
    return [const for const in code.co_consts if isinstance(const, types.CodeType)]


@pytest.mark.parametrize("name", list(CASES))
def test_roundtrip_keeps_code_attributes(name: str) -> None:
    code = CASES[name].make().__code__
    new = roundtrip(code)
    for attr in (
        "co_name", "co_qualname", "co_filename", "co_firstlineno", "co_argcount",
        "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_freevars", "co_cellvars",
    ):
        assert getattr(new, attr) == getattr(code, attr), attr
    # The package numbers plain locals in order of first use, CPython in order of
    # first appearance in the source: only the arguments' order is part of the meaning.
    nargs = code.co_argcount + code.co_kwonlyargcount
    nargs += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    assert new.co_varnames[:nargs] == code.co_varnames[:nargs]
    assert sorted(new.co_varnames) == sorted(code.co_varnames)
    # Shallow mode leaves nested code objects as they were.
    assert nested_code(new) == nested_code(code)


def instruction_shape(code: types.CodeType) -> list[tuple[Any, ...]]:
    """Opname, jump target index (or constant argument) and line of each instruction."""
    shape = []
    for inst in decode(code).instructions:
        arg = inst.target if inst.target is not None else inst.argval
        if isinstance(arg, types.CodeType):
            arg = ("code", arg.co_qualname)
        shape.append((inst.opname, arg, inst.lineno))
    return shape


@pytest.mark.parametrize("name", list(CASES))
def test_roundtrip_keeps_instructions_and_handlers(name: str) -> None:
    code = CASES[name].make().__code__
    new = roundtrip(code)
    assert instruction_shape(new) == instruction_shape(code)
    assert list(new.co_positions()) == list(code.co_positions())
    ranges = [(e.start, e.end, e.target, e.lasti) for e in decode(code).exception_table]
    assert [(e.start, e.end, e.target, e.lasti) for e in decode(new).exception_table] == ranges


# The ``bytecode`` package recomputes each handler's stack depth from its own
# flow analysis. For the cleanup code of a try/except nested in a try/finally
# (COPY 3; POP_EXCEPT; RERAISE 1, handled by the finally) it finds 2 where
# CPython's compiler wrote 0, leaving two dead items under a handler that always
# re-raises (co_stacksize 7 instead of 5). Behaviour is unchanged (the cases
# above run it); strict, so a package that matches CPython turns this into a failure.
# gen_close has the same shape; 3.11 lays it out so that the package still finds 0,
# 3.12+ (the finally's normal copy returning before the handlers) so that it finds 2.
DEPTH_DIFFERS = pytest.mark.xfail(
    strict=True, reason="bytecode recomputes a finally-cleanup handler depth as 2, CPython 0"
)
DEPTH_DIFFERS_CASES = {"try_nested_reraise"} | (
    {"gen_close"} if compat.PY_VERSION >= (3, 12) else set()
)


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=DEPTH_DIFFERS) if n in DEPTH_DIFFERS_CASES else n for n in CASES],
)
def test_roundtrip_keeps_handler_depths(name: str) -> None:
    code = CASES[name].make().__code__
    assert decode(roundtrip(code)).exception_table == decode(code).exception_table


def real_opcode(name: str) -> bool:
    """Whether ``name`` can appear in a code object on this interpreter: 3.12+
    ``dis.opmap`` also lists the compiler's pseudo-instructions (opcode 256 and up)."""
    return dis.opmap.get(name, 256) < 256


def constructs(inst: Instruction) -> set[str]:
    """The opname, and for 3.12+'s LOAD_ATTR with its low bit set, 3.11's LOAD_METHOD."""
    names = {inst.opname}
    if compat.LOAD_ATTR_METHOD_BIT and inst.opname in ("LOAD_ATTR", "LOAD_SUPER_ATTR"):
        names.add(f"{inst.opname} (method)" if inst.arg & 1 else inst.opname)
    return names


# Opcodes that 3.12 or 3.13 added for constructs the corpus has on every version:
# loops and ``yield from``/``await`` end with END_FOR/END_SEND; inlined comprehensions
# save the outer variable; a generator's body is wrapped to turn StopIteration into an
# error (CALL_INTRINSIC_1); ``return <constant>``; 3.13's explicit bool conversion, split
# f-string formatting, fused pairs of local loads and stores, one-by-one function
# attributes and keyword calls.
NEWER_OPCODES = (
    "END_FOR", "END_SEND", "LOAD_FAST_AND_CLEAR", "CALL_INTRINSIC_1", "RETURN_CONST",
    "TO_BOOL", "FORMAT_SIMPLE", "CONVERT_VALUE", "LOAD_FAST_LOAD_FAST",
    "STORE_FAST_STORE_FAST", "SET_FUNCTION_ATTRIBUTE", "CALL_KW",
)


def versioned_constructs() -> set[str]:
    """What the corpus's constructs compile to on the running version only."""
    wanted = {name for name in NEWER_OPCODES if real_opcode(name)}
    # ``obj.method(...)``, ``super().method(...)`` and calls with keywords.
    wanted.add("LOAD_ATTR (method)" if compat.LOAD_ATTR_METHOD_BIT else "LOAD_METHOD")
    if real_opcode("LOAD_SUPER_ATTR"):
        wanted.add("LOAD_SUPER_ATTR (method)")
    wanted |= {"PRECALL"} if compat.HAS_PRECALL else set()
    if compat.HAS_KW_NAMES:
        wanted.add("KW_NAMES")
    # A closure's cells (3.13 loads them with LOAD_FAST).
    if compat.HAS_LOAD_CLOSURE:
        wanted.add("LOAD_CLOSURE")
    # A while loop's bottom test: 3.11 jumps back conditionally; 3.12+ jumps forward
    # out of the loop and back with JUMP_BACKWARD (in every version's set).
    if real_opcode("POP_JUMP_BACKWARD_IF_TRUE"):
        wanted.add("POP_JUMP_BACKWARD_IF_TRUE")
    # except*: 3.11's opcode became an intrinsic function in 3.12.
    wanted.add("PREP_RERAISE_STAR" if real_opcode("PREP_RERAISE_STAR") else "CALL_INTRINSIC_2")
    return wanted


def test_cases_cover_the_constructs() -> None:
    """The corpus really contains the opcodes it is meant to exercise."""
    seen: set[str] = set()
    nested_names: set[str] = set()
    for case in CASES.values():
        todo = [case.make().__code__]
        while todo:
            code = todo.pop()
            for inst in decode(code).instructions:
                seen |= constructs(inst)
            todo.extend(nested_code(code))
            nested_names.update(nested.co_name for nested in nested_code(code))
    wanted = {
        "FOR_ITER", "JUMP_BACKWARD", "PUSH_EXC_INFO",
        "CHECK_EXC_MATCH", "CHECK_EG_MATCH", "RERAISE", "BEFORE_WITH", "WITH_EXCEPT_START",
        "MAKE_CELL", "COPY_FREE_VARS", "LOAD_DEREF", "STORE_DEREF",
        "LIST_APPEND", "MAP_ADD", "SET_ADD", "YIELD_VALUE", "SEND", "GET_AWAITABLE",
        "RETURN_GENERATOR", "MATCH_CLASS", "MATCH_MAPPING", "MATCH_SEQUENCE",
        "LOAD_BUILD_CLASS", "EXTENDED_ARG", "UNPACK_EX", "STORE_GLOBAL", "DELETE_FAST",
        "DICT_UPDATE", "BUILD_SLICE", *versioned_constructs(),
    }
    assert wanted <= seen, sorted(wanted - seen)
    # Deep mode roundtrips nested bodies: generator expressions on every version,
    # list/set/dict comprehensions only where they are not inlined (3.11).
    assert "<genexpr>" in nested_names
    comprehensions = {"<listcomp>", "<setcomp>", "<dictcomp>"}
    if real_opcode("LOAD_FAST_AND_CLEAR"):
        assert not comprehensions & nested_names
    else:
        assert comprehensions <= nested_names
