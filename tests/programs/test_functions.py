"""Calls into user Python, inlined into one graph: eager vs compiled.

Arguments bound every way CPython binds them (positional, keyword,
defaults, keyword-only, ``*args``/``**kwargs`` through CALL_FUNCTION_EX,
DICT_MERGE, LIST_EXTEND and BUILD_MAP), nested functions and closures
(MAKE_FUNCTION, MAKE_CELL, LOAD_CLOSURE, LOAD_DEREF, STORE_DEREF,
COPY_FREE_VARS, ``nonlocal`` inside inlined inner functions), lambdas,
``functools.partial``, ``functools.wraps`` decorators, recursion up to
``config.inline_depth_limit`` (and past it, where the answer must still be
eager's), comprehensions, generator expressions and generator functions.
"""

from __future__ import annotations

import functools

import pytest
import torch
from _harness import Corpus, check_program, opnames, randn

from bytegraph import config
from bytegraph.bytecode.compat import HAS_KW_NAMES

corpus = Corpus()
add = corpus.add


def x3() -> tuple:
    return (randn(3),)


def x3y3() -> tuple:
    return (randn(3), randn(3))


# --- helpers the programs call (module level: read through globals) ------------------------


def affine(x, w, b):
    return x * w + b


def scaled(x, scale=2.0, shift=0.0):
    return x * scale + shift


def kw_only(x, *, power, bias=1.0):
    return x**power + bias


def pos_only(x, y, /, z=0.5):
    return x - y * z


def gather_args(*args):
    total = args[0]
    for a in args[1:]:
        total = total + a
    return total, len(args)


def gather_kwargs(x, **kwargs):
    for name in sorted(kwargs):
        x = x * kwargs[name] if name.startswith("m") else x + kwargs[name]
    return x


def everything(a, b=2, *rest, c, d=4, **extra):
    out = a * b + c * d
    for r in rest:
        out = out - r
    for k, v in extra.items():
        out = out + v * len(k)
    return out


def two_results(x):
    return x.sin(), x.cos()


def make_scaler(factor):
    def scale(x):
        return x * factor

    return scale


def make_counter():
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        return x + count

    return bump


SCALE_BY_3 = make_scaler(3.0)
PARTIAL_SCALED = functools.partial(scaled, scale=5.0)
PARTIAL_AFFINE = functools.partial(affine, w=2.0)
OPS = {"relu": torch.relu, "twice": make_scaler(2.0)}


def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1

    return wrapper


def repeat(times):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(x):
            for _ in range(times):
                x = fn(x)
            return x

        return wrapper

    return decorate


@logged
def logged_square(x):
    return x * x


@logged
@repeat(3)
def logged_repeated_double(x):
    return x * 2


def factorial_scale(x, n):
    if n <= 1:
        return x
    return factorial_scale(x * n, n - 1)


def fib(x, n):
    if n < 2:
        return x * n
    return fib(x, n - 1) + fib(x, n - 2)


def depth_sum(x, n):
    if n == 0:
        return x
    return depth_sum(x + 1, n - 1)


def squares(xs):
    for x in xs:
        yield x * x


def chained(xs, ys):
    yield from xs
    yield from squares(ys)


def logging_range(log, n):
    for i in range(n):
        log.append(i)
        yield i


def reads_state(d):
    for _ in range(3):
        yield d["v"]


def echo():
    received = yield "ready"
    while received is not None:
        received = yield received * 2


def running_total(xs):
    total = 0
    for x in xs:
        yield x
        total = total + x
    return total


def guarded_items(log, xs):
    try:
        yield from xs
    finally:
        log.append("closed")


def delegate_with_result(xs):
    total = yield from running_total(xs)
    yield total * 10


# --- argument binding --------------------------------------------------------------------


@add(x3)
def call_positional(x):
    return affine(x, 2.0, 1.0)


@add(x3)
def call_keywords(x):
    return affine(b=1.0, x=x, w=3.0), affine(x, b=0.5, w=2.0)


@add(x3)
def call_defaults(x):
    return scaled(x), scaled(x, 3.0), scaled(x, shift=1.0)


@add(x3)
def call_keyword_only(x):
    return kw_only(x, power=2), kw_only(x, bias=0.0, power=3)


@add(x3y3)
def call_positional_only(x, y):
    return pos_only(x, y), pos_only(y, x, 2.0)


@add(x3y3)
def call_varargs(x, y):
    total, n = gather_args(x, y, x)
    return total * n


@add(x3)
def call_varkwargs(x):
    return gather_kwargs(x, add1=1.0, mul2=2.0, add3=x)


@add(x3y3)
def call_star_args(x, y):
    args = [x, y]
    return gather_args(*args), affine(*(x, 2.0), *[y])


@add(x3)
def call_star_star_kwargs(x):
    opts = {"scale": 4.0, "shift": 2.0}
    more = {"shift": -1.0}
    return scaled(x, **opts), scaled(x, **more, scale=0.5), scaled(**{"x": x})


@add(x3y3)
def call_star_and_star_star(x, y):
    args = (x,)
    kw = {"c": y}
    return everything(*args, 3, 5.0, 6.0, **kw, d=2, e=x, **{"ff": 1.0})


@add(x3)
def call_merged_kwargs(x):
    a = {"scale": 2.0}
    b = {"shift": 3.0}
    return scaled(x, **a, **b)


@add(lambda: (randn(3), (1.0, 2.0), {"shift": 0.5}))
def call_with_argument_containers(x, args, kwargs):
    return scaled(x, *args), scaled(x, **kwargs)


@add(lambda: (randn(3), affine))
def function_passed_as_argument(x, fn):
    return fn(x, 2.0, 3.0)


@add(x3)
def functions_from_a_global_dict(x):
    return OPS["twice"](OPS["relu"](x))


@add(x3)
def unpack_returned_tuple(x):
    s, c = two_results(x)
    return s * c


@add(x3)
def bound_tensor_method_through_getattr(x):
    name = "mul"
    op = getattr(x, name)
    return op(2) + getattr(torch, "s" + "in")(x)


# --- nested functions and closures ---------------------------------------------------------


@add(x3)
def nested_reads_outer_local(x):
    k = 3.0

    def inner(y):
        return y * k

    return inner(x) + inner(x * 2)


@add(x3)
def nested_nonlocal_counter(x):
    calls = 0

    def step(y):
        nonlocal calls
        calls += 1
        return y * calls

    x = step(x)
    x = step(x)
    return x, calls


@add(x3)
def outer_rebinds_cell_after_def(x):
    k = 1.0

    def inner(y):
        return y + k

    a = inner(x)
    k = 10.0
    return a, inner(x)


@add(x3y3)
def closure_over_tensor(x, y):
    def add_y(z):
        return z + y

    return add_y(x) * add_y(x)


@add(x3)
def three_level_nonlocal(x):
    total = 0

    def middle(y):
        def innermost(z):
            nonlocal total
            total += 2
            return z * total

        return innermost(y) + innermost(y)

    return middle(x), total


@add(x3)
def closures_in_loop_bind_late(x):
    fns = []
    for i in range(3):
        fns.append(lambda y: y * i)  # noqa: B023 (late binding is the point)
    return [f(x) for f in fns]


@add(x3)
def closures_with_default_bind_early(x):
    fns = [lambda y, i=i: y * i for i in range(3)]
    return [f(x) for f in fns]


@add(x3)
def module_level_closure(x):
    return SCALE_BY_3(x) + make_scaler(0.5)(x)


@add(x3)
def nested_function_returned_and_called(x):
    def make(k):
        def f(y):
            return y - k

        return f

    return make(1.0)(x), make(2.0)(x)


@add(x3)
def recursive_nested_function(x):
    def halve(y, n):
        if n == 0:
            return y
        return halve(y / 2, n - 1)

    return halve(x, 3)


@add(x3)
def closure_cell_shared_by_two_functions(x):
    state = 1.0

    def get():
        return state

    def put(v):
        nonlocal state
        state = v

    put(4.0)
    a = x * get()
    put(get() + 1)
    return a, x * get()


@add(lambda: (randn(3), None))
def functions_are_true(x, callback):
    callback = callback or (lambda y: y * 3)
    local = functools.partial(scaled, shift=1.0)
    if callback and local and affine:
        x = callback(x)
    return local(x)


@add(x3)
def nested_function_attributes(x):
    def inner():
        pass

    return x * len(inner.__name__), inner.__qualname__, inner.__module__


# --- lambdas, partial, wraps ---------------------------------------------------------------


@add(x3)
def lambda_called(x):
    double = lambda y: y * 2  # noqa: E731
    return double(x) + (lambda y, k=3: y * k)(x)


@add(lambda: (randn(3), {"b": 2.0, "a": 1.0, "c": 3.0}))
def sorted_with_key_lambda(x, weights):
    order = sorted(weights.items(), key=lambda kv: kv[1], reverse=True)
    for _, w in order:
        x = x * w + 1
    return x


@add(lambda: ([randn(3), randn(3), randn(3)],))
def map_and_filter_with_lambdas(xs):
    doubled = list(map(lambda t: t * 2, xs))
    firsts = list(filter(lambda t: t is not xs[1], xs))
    return doubled, len(firsts)


@add(x3)
def global_partial(x):
    return PARTIAL_SCALED(x), PARTIAL_AFFINE(x, b=1.0)


@add(x3)
def partial_made_in_trace(x):
    p = functools.partial(scaled, shift=3.0)
    q = functools.partial(p, scale=0.5)
    return p(x), q(x), p(x, 4.0)


@add(x3)
def partial_of_lambda_and_attributes(x):
    p = functools.partial(lambda a, b: a - b, x)
    return p(1.0), p.args[0] is x


@add(x3)
def wraps_decorated_function(x):
    return logged_square(x)


@add(x3)
def stacked_wraps_decorators(x):
    return logged_repeated_double(x)


@add(x3)
def wrapped_attribute(x):
    return logged_square.__wrapped__(x)


# --- recursion --------------------------------------------------------------------------


@add(lambda: (randn(3), 5))
def recursion_factorial(x, n):
    return factorial_scale(x, n)


@add(lambda: (randn(3), 5))
def recursion_tree(x, n):
    return fib(x, n)


@add(lambda: (randn(3),))
def recursion_near_depth_limit(x):
    return depth_sum(x, config.inline_depth_limit - 2)


# --- comprehensions and generators ------------------------------------------------------


@add(lambda: ([randn(3), randn(3), randn(3)],))
def list_comprehension(xs):
    return [x * i for i, x in enumerate(xs)]


@add(lambda: ([randn(3), randn(3), randn(3), randn(3)],))
def list_comprehension_with_condition(xs):
    return [x + 1 for i, x in enumerate(xs) if i % 2 == 0]


@add(lambda: (randn(3),))
def nested_list_comprehension(x):
    return [[x * i + j for j in range(2)] for i in range(3)]


@add(lambda: ({"a": randn(3), "b": randn(3)},))
def dict_comprehension(d):
    return {k: v * 2 for k, v in d.items() if k != "z"}


@add(lambda: ([randn(3), randn(3)], 2.0))
def comprehension_reads_closure_and_args(xs, s):
    bias = xs[0]
    return [x * s + bias for x in xs]


@add(lambda: ([randn(3), randn(3), randn(3)],))
def generator_expression_sum(xs):
    return sum(x * x for x in xs), sum((x for x in xs), torch.zeros(3))


@add(lambda: ([randn(2, 3), randn(2, 3)],))
def generator_expression_into_torch(xs):
    return torch.stack(tuple(x.relu() for x in xs)), torch.cat([x.t() for x in xs])


@add(lambda: ([randn(3), randn(3)],))
def any_all_over_generators(xs):
    if all(x.shape == (3,) for x in xs) and not any(x.dtype == torch.int64 for x in xs):
        return xs[0] + xs[1]
    return xs[0]


@add(lambda: ([randn(3), randn(3)],))
def generator_function(xs):
    out = []
    for sq in squares(xs):
        out.append(sq + 1)
    return out


@add(lambda: ([randn(3)], [randn(3), randn(3)]))
def generator_yield_from(xs, ys):
    return list(chained(xs, ys))


@add(lambda: ([randn(3), randn(3)],))
def generator_consumed_by_next(xs):
    gen = squares(xs)
    first = next(gen)
    return first, list(gen)


@add(lambda: (randn(3), [10]))
def generator_interleaves_with_consumer(x, log):
    """The body runs only when asked: its appends interleave with the loop's."""
    for i in logging_range(log, 3):
        log.append(-i)
        x = x + i
    return x


@add(lambda: (randn(3), []))
def generator_abandoned_early(x, log):
    for i in logging_range(log, 5):
        if i == 1:
            break
        x = x * 2
    return x


@add(x3)
def generator_reads_state_the_consumer_changes(x):
    d = {"v": 1}
    out = []
    for v in reads_state(d):
        out.append(x * v)
        d["v"] = v + 1
    return out


@add(x3)
def generator_send(x):
    g = echo()
    first = next(g)
    return first, g.send(x), g.send(3)


@add(lambda: ([randn(3), randn(3)],))
def yield_from_result_value(xs):
    return list(delegate_with_result(xs))


@add(lambda: ([randn(3), randn(3)], []))
def generator_with_finally_consumed(xs, log):
    out = [x * 2 for x in guarded_items(log, xs)]
    log.append("after")
    return out


# --- the tests -------------------------------------------------------------------------------


assert len(corpus) >= 40, len(corpus)


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_program_matches_eager(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


CALL_AND_CLOSURE_OPCODES = {
    "CALL_FUNCTION_EX", "DICT_MERGE", "LIST_EXTEND", "BUILD_MAP", "MAKE_FUNCTION",
    "MAKE_CELL", "LOAD_DEREF", "STORE_DEREF", "COPY_FREE_VARS",
    "RETURN_GENERATOR", "YIELD_VALUE", "GET_YIELD_FROM_ITER", "SEND",
    "JUMP_BACKWARD_NO_INTERRUPT",
    # keywords and closures: 3.13 has CALL_KW, SET_FUNCTION_ATTRIBUTE and no LOAD_CLOSURE
    *(["KW_NAMES", "LOAD_CLOSURE"] if HAS_KW_NAMES else ["CALL_KW", "SET_FUNCTION_ATTRIBUTE"]),
}


def test_call_and_closure_opcodes_are_exercised() -> None:
    helpers = [chained, make_counter, everything, delegate_with_result, echo]
    used = set().union(*(opnames(f) for f in [*helpers, *(p.fn for p in corpus)]))
    assert CALL_AND_CLOSURE_OPCODES <= used, sorted(CALL_AND_CLOSURE_OPCODES - used)


def test_recursion_deeper_than_the_limit_still_matches_eager(differential) -> None:
    def f(x):
        return depth_sum(x, config.inline_depth_limit + 8)

    compiled = differential.compile(f)
    for _ in range(2):
        out = differential.check(f, compiled, (randn(3),))
    assert out.shape == (3,)


def test_recursion_limit_is_the_config_value(differential, counting_backend) -> None:
    """Lowering the limit makes a recursion that fitted run in Python: same answer."""

    def f(x):
        return depth_sum(x, 6) * 2

    old = config.inline_depth_limit
    try:
        config.inline_depth_limit = 4
        differential.check(f, differential.compile(f), (randn(3),))
        with pytest.raises(Exception) as info:
            differential.compile(f, fullgraph=True)(randn(3))
        assert "depth" in str(info.value)
    finally:
        config.inline_depth_limit = old
    differential.check(f, differential.compile(f, fullgraph=True), (randn(3),))


def test_module_level_closure_state_is_updated_like_eager(differential, counting_backend) -> None:
    """``nonlocal count`` in a real closure: the cell write is replayed after the graph."""
    eager_bump, compiled_bump = make_counter(), make_counter()

    def run_eager(x):
        return eager_bump(x) * 2

    def run_compiled(x):
        return compiled_bump(x) * 2

    compiled = differential.compile(run_compiled)
    for _ in range(3):
        x = randn(3)
        torch.testing.assert_close(compiled(x), run_eager(x), rtol=0, atol=0)
        cells = (compiled_bump.__closure__[0], eager_bump.__closure__[0])
        assert cells[0].cell_contents == cells[1].cell_contents
    assert counting_backend.calls >= 1


def test_closure_factory_result_changes_recompile(differential, counting_backend) -> None:
    """A different closure (other cell contents) must not reuse the first trace."""

    def f(x, fn):
        return fn(x) + 1

    compiled = differential.compile(f)
    x = randn(3)
    differential.check(f, compiled, (x, make_scaler(2.0)))
    differential.check(f, compiled, (x, make_scaler(5.0)))
    assert counting_backend.calls == 2


def test_global_function_rebinding_recompiles(differential, counting_backend) -> None:
    def f(x):
        return SCALE_BY_3(x)

    compiled = differential.compile(f)
    differential.check(f, compiled, (randn(3),))
    saved = globals()["SCALE_BY_3"]
    try:
        globals()["SCALE_BY_3"] = make_scaler(7.0)
        differential.check(f, compiled, (randn(3),))
    finally:
        globals()["SCALE_BY_3"] = saved
    assert counting_backend.calls == 2


def test_compiling_a_wraps_decorated_function_directly(differential, counting_backend) -> None:
    """The wrapper's own signature is ``(*args, **kwargs)``, whatever ``__wrapped__`` says."""
    compiled = differential.compile(logged_square)
    differential.check(logged_square, compiled, x3())
    differential.check(logged_square, compiled, x3())
    assert counting_backend.calls == 1


def returns_from_inside_generator_loop(xs, log):
    for x in guarded_items(log, xs):
        return x * 2
    return None


def test_generator_abandoned_inside_try_finally_runs_like_eager(
    differential, counting_backend
) -> None:
    """The dropped generator's ``finally`` runs when it is collected, in eager and compiled."""
    compiled = differential.compile(returns_from_inside_generator_loop)
    for _ in range(2):
        differential.check(returns_from_inside_generator_loop, compiled, ([randn(3)], []))
    assert counting_backend.calls == 0, "the frame runs as Python"


def keywords_from_a_dict(**kwargs):
    return len(kwargs)


def test_non_string_keywords_raise_like_eager(differential) -> None:
    def f(x):
        return x * keywords_from_a_dict(**{1: 2})

    with pytest.raises(TypeError, match="keywords must be strings"):
        f(randn(3))
    with pytest.raises(TypeError, match="keywords must be strings"):
        differential.compile(f)(randn(3))
