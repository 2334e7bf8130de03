"""Generators, contextlib and exceptions thrown into with-blocks: eager vs compiled.

Generators run lazily in the trace (variables/generators.py): ``next``,
``send``, ``throw``, ``close``, ``yield from``, PEP 479, try/except/finally in
their bodies, and exceptions they raise caught by the consumer. With-blocks
call ``__exit__`` traced when the body raises (WITH_EXCEPT_START in
translate/ops/context.py), so ``contextlib.contextmanager``, ``suppress``,
``nullcontext``, ``ExitStack`` and user classes that suppress compile with no
break. Every program does tensor work, so one graph means no break. The
programs' ``assert`` statements must compile as Python compiles them, so
pytest must not rewrite them: PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3),)


def t3_log() -> tuple:
    return (randn(3), [])


def xs3() -> tuple:
    return ([randn(3), randn(3), randn(3)],)


class AppError(ValueError):
    pass


# -- generators used by the programs ------------------------------------------------------


def squares(xs):
    for x in xs:
        yield x * x


def counted(n):
    for i in range(n):  # noqa: UP028  (a frame of its own, not delegation)
        yield i


def returns_total(xs):
    total = 0
    for x in xs:
        yield x
        total = total + x
    return total


def returns_label(x):
    yield x
    return "done"


def delegates(xs):
    total = yield from returns_total(xs)
    yield total * 10


def accumulator(x):
    total = x
    while True:
        received = yield total
        if received is None:
            return total
        total = total + received


def catches_value_error(x, log):
    while True:
        try:
            yield x
        except ValueError as e:
            log.append(("caught", e.args))
            x = x + 1


def with_finally(x, log):
    try:
        yield x
        yield x * 2
    finally:
        log.append("finally")


def raises_midway(x):
    yield x
    raise AppError("midway", 2)


def raises_stop_iteration(x):
    yield x
    raise StopIteration("inner")


def nested_next_exhausted(x):
    inner = iter([])
    yield x
    next(inner)  # a StopIteration inside a generator: RuntimeError (PEP 479)


def handles_inside(x, log):
    try:
        yield x
        raise KeyError("in body")
    except KeyError as e:
        log.append(e.args)
        yield x + 1
    yield x + 2


def yield_in_except(x):
    try:
        raise KeyError("held")
    except KeyError:
        yield x  # paused while handling: the consumer does not see it as its own


def sub_catches(x, log):
    try:
        yield x
    except KeyError:
        log.append("sub caught")
        return "sub result"
    yield x * 100


def outer_delegates(x, log):
    result = yield from sub_catches(x, log)
    log.append(("result", result))
    yield x - 1


def sub_with_finally(x, log):
    try:
        yield x
        yield x + 1
    finally:
        log.append("sub finally")


def outer_of_finally(x, log):
    try:
        yield from sub_with_finally(x, log)
    finally:
        log.append("outer finally")


def ignores_exit(x):
    try:
        yield x
    except GeneratorExit:
        pass
    yield x + 1  # after GeneratorExit: close() raises RuntimeError


@contextlib.contextmanager
def tracked(log, value=1):
    log.append("enter")
    try:
        yield value
    finally:
        log.append("exit")


@contextlib.contextmanager
def swallowing(log):
    try:
        yield
    except KeyError as e:
        log.append(("swallowed", e.args))


@contextlib.contextmanager
def plain(log):
    log.append("in")
    yield 2
    log.append("out")


@contextlib.contextmanager
def converting(log):
    try:
        yield
    except KeyError as e:
        raise AppError("converted") from e


@contextlib.contextmanager
def scaled(x):
    yield x * 2


class Swallow:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", kind, tb is None))
        return True


class OnlyKeyErrors:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return 3

    def __exit__(self, kind, value, tb):
        self.log.append("exit")
        return kind is not None and issubclass(kind, KeyError)


class Recorder:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(value.args if value is not None else None)
        return False


# -- generators consumed --------------------------------------------------------------------


@add(xs3)
def gen_in_for_loop(xs):
    total = xs[0] * 0
    for y in squares(xs):
        total = total + y
    return total


@add(xs3)
def gen_by_list(xs):
    return list(squares(xs))


@add(xs3)
def gen_by_sum(xs):
    return sum(squares(xs))


@add(xs3)
def gen_by_zip(xs):
    return [a + b for a, b in zip(squares(xs), xs)]


@add(xs3)
def genexpr_by_sum(xs):
    return sum(x * 2 for x in xs)


@add(xs3)
def genexpr_in_tuple(xs):
    return tuple(x.sin() for x in xs if x.shape[0] == 3)


@add(t3)
def genexpr_over_range(x):
    return sum(x * i for i in range(4))


@add(xs3)
def gen_loop_breaks_early(xs):
    out = []
    gen = squares(xs)
    for y in gen:
        out.append(y)
        break
    out.append(next(gen))
    return out


@add(xs3)
def gen_next_and_rest(xs):
    gen = squares(xs)
    first = next(gen)
    return first, list(gen)


@add(xs3)
def gen_dunder_next(xs):
    gen = squares(xs)
    return gen.__next__() + gen.__next__()


@add(t3)
def next_with_default_after_end(x):
    gen = counted(2)
    return x + next(gen), x + next(gen), next(gen, "end"), next(gen, None)


@add(t3)
def next_exhausted_caught(x):
    gen = counted(1)
    out = x + next(gen)
    try:
        next(gen)
    except StopIteration as e:
        return out * 2, e.args
    return out


@add(xs3)
def stop_iteration_carries_return_value(xs):
    gen = returns_total(xs[:2])
    a = next(gen)
    b = next(gen)
    try:
        next(gen)
    except StopIteration as e:
        return a + b, e.value, e.args[0]
    return a


@add(t3)
def stop_iteration_value_once(x):
    gen = returns_label(x)
    y = next(gen)
    try:
        next(gen)
    except StopIteration as first:
        try:
            next(gen)
        except StopIteration as second:
            return y * 2, first.value, second.value, second.args
    return y


@add(t3)
def generator_iter_is_itself(x):
    gen = counted(3)
    return x + sum(iter(gen)), iter(gen) is gen


@add(xs3)
def yield_from_result(xs):
    return list(delegates(xs))


@add(t3)
def yield_from_list(x):
    def chain(x):
        yield from [x, x + 1]
        yield from (x * 2, x * 3)

    return list(chain(x))


@add(t3)
def generator_reads_state_lazily(x):
    state = {"k": 1}

    def reader():
        for _ in range(3):
            yield x * state["k"]

    out = []
    for y in reader():
        out.append(y)
        state["k"] += 1
    return out


# -- send, throw, close ---------------------------------------------------------------------


@add(t3)
def send_values(x):
    gen = accumulator(x)
    first = next(gen)
    second = gen.send(x * 2)
    third = gen.send(1)
    return first, second, third


@add(t3)
def send_none_first(x):
    gen = accumulator(x)
    return gen.send(None) + 1


@add(t3)
def send_until_return(x):
    gen = accumulator(x)
    next(gen)
    gen.send(x)
    try:
        gen.send(None)
    except StopIteration as e:
        return e.value * 3
    return x


@add(t3)
def send_non_none_to_new_generator(x):
    gen = accumulator(x)
    try:
        gen.send(5)
    except TypeError as e:
        return x - 1, str(e)
    return x


@add(t3_log)
def throw_caught_inside(x, log):
    gen = catches_value_error(x, log)
    a = next(gen)
    b = gen.throw(ValueError("one"))
    c = gen.throw(ValueError, ValueError("two"))
    gen.close()
    return a, b, c


@add(t3_log)
def throw_not_caught_reaches_consumer(x, log):
    gen = catches_value_error(x, log)
    next(gen)
    try:
        gen.throw(KeyError("through"))
    except KeyError as e:
        log.append(e.args)
    return x * 2, next(gen, "finished")


@add(t3)
def throw_into_new_generator(x):
    gen = accumulator(x)
    try:
        gen.throw(AppError("early"))
    except AppError as e:
        return x + 1, e.args, next(gen, "closed")
    return x


@add(t3)
def throw_into_finished_generator(x):
    gen = counted(0)
    list(gen)
    try:
        gen.throw(KeyError("late"))
    except KeyError as e:
        return x + 2, e.args
    return x


@add(t3_log)
def throw_runs_finally(x, log):
    gen = with_finally(x, log)
    y = next(gen)
    try:
        gen.throw(AppError("stop"))
    except AppError:
        log.append("after")
    return y * 2


@add(t3_log)
def close_runs_finally(x, log):
    gen = with_finally(x, log)
    y = next(gen)
    gen.close()
    log.append("closed")
    return y + 1, next(gen, "done")


@add(t3)
def close_unstarted_and_finished(x):
    gen = counted(3)
    gen.close()
    done = counted(1)
    list(done)
    done.close()
    return x * 2, next(gen, "none"), gen.close()


@add(t3)
def close_ignored_raises_runtime_error(x):
    gen = ignores_exit(x)
    y = next(gen)
    try:
        gen.close()
    except RuntimeError as e:
        return y * 3, str(e)
    return y


@add(t3_log)
def throw_delegated_to_sub_generator(x, log):
    gen = outer_delegates(x, log)
    y = next(gen)
    z = gen.throw(KeyError("k"))
    return y, z


@add(t3_log)
def close_delegated_to_sub_generator(x, log):
    gen = outer_of_finally(x, log)
    y = next(gen)
    gen.close()
    return y * 2


@add(t3_log)
def throw_through_delegation_to_consumer(x, log):
    gen = outer_of_finally(x, log)
    next(gen)
    try:
        gen.throw(AppError("deep"))
    except AppError as e:
        log.append(e.args)
    return x + 5


# -- PEP 479, exceptions raised by generators ------------------------------------------------


@add(t3)
def pep479_stop_iteration_becomes_runtime_error(x):
    gen = raises_stop_iteration(x)
    y = next(gen)
    try:
        next(gen)
    except RuntimeError as e:
        cause = e.__cause__
        return y + 1, str(e), type(cause) is StopIteration, cause.args, e.__context__ is cause
    return y


@add(t3)
def pep479_from_a_nested_next(x):
    try:
        return list(nested_next_exhausted(x))
    except RuntimeError as e:
        return x * 2, str(e)


@add(t3)
def pep479_for_a_thrown_stop_iteration(x):
    gen = accumulator(x)
    next(gen)
    try:
        gen.throw(StopIteration("thrown"))
    except RuntimeError as e:
        return x - 3, e.__cause__.args
    return x


@add(t3)
def generator_raise_caught_around_next(x):
    gen = raises_midway(x)
    y = next(gen)
    try:
        next(gen)
    except AppError as e:
        return y * 2, e.args, next(gen, "gone")
    return y


@add(t3)
def generator_raise_caught_around_for(x):
    out = []
    try:
        for y in raises_midway(x):
            out.append(y + 1)
    except AppError as e:
        out.append(e.args)
    return out


@add(t3)
def generator_raise_caught_around_send(x):
    gen = raises_midway(x)
    gen.send(None)
    try:
        gen.send(4)
    except ValueError as e:
        return x + 7, type(e) is AppError
    return x


@add(t3)
def generator_raise_caught_in_helper(x):
    def consume(gen):
        try:
            return [y * 2 for y in gen]
        except AppError:
            return ["failed"]

    return consume(raises_midway(x)), x + 1


@add(t3)
def generator_raise_through_yield_from(x):
    def outer(x):
        yield from raises_midway(x)

    out = []
    try:
        for y in outer(x):
            out.append(y)
    except AppError as e:
        out.append(e.args)
    return out, x * 2


@add(t3_log)
def except_inside_generator(x, log):
    return list(handles_inside(x, log))


@add(t3)
def generator_handling_state_is_its_own(x):
    try:
        raise IndexError("outer")
    except IndexError as outer:
        gen = yield_in_except(x)
        y = next(gen)
        try:
            raise ValueError("consumer")
        except ValueError as e:
            return y * 2, e.__context__ is outer, next(gen, "end")
    return x


@add(t3)
def context_of_raise_inside_generator(x):
    def gen(x):
        yield x
        raise AppError("from gen")

    try:
        raise KeyError("consumer")
    except KeyError as outer:
        g = gen(x)
        next(g)
        try:
            next(g)
        except AppError as e:
            return x + 1, e.__context__ is outer
    return x


@add(t3)
def throw_into_generator_handling_chains_context(x):
    def gen(x):
        try:
            raise KeyError("held")
        except KeyError:
            try:
                yield x
            except ValueError as e:
                yield type(e.__context__) is KeyError, e.__context__.args

    g = gen(x)
    y = next(g)
    answer = g.throw(ValueError("thrown"))
    return y * 2, answer, next(g, "end")


@add(t3)
def throw_into_generator_not_handling_keeps_context(x):
    g = catches_value_error(x, [])
    next(g)
    try:
        raise IndexError("consumer")
    except IndexError:
        exc = ValueError("thrown")
        g.throw(exc)
    g.close()
    return x + 1, exc.__context__ is None


@add(t3_log)
def close_generator_paused_in_except(x, log):
    def gen(x):
        try:
            raise KeyError("held")
        except KeyError:
            try:
                yield x
            finally:
                log.append("closing")

    g = gen(x)
    y = next(g)
    g.close()
    return y * 5


@add(t3_log)
def finally_in_generator_consumed(x, log):
    out = [y + 1 for y in with_finally(x, log)]
    log.append("after")
    return out


@add(t3)
def generator_with_return_in_finally(x):
    def gen(x):
        try:
            yield x
            raise KeyError("dropped")
        finally:
            return "from finally"  # noqa: B012

    g = gen(x)
    y = next(g)
    try:
        next(g)
    except StopIteration as e:
        return y * 4, e.value
    return y


# -- contextlib ------------------------------------------------------------------------------


@add(t3_log)
def contextmanager_normal_exit(x, log):
    with tracked(log, 5) as v:
        y = x + v
    return y


@add(t3_log)
def contextmanager_without_try(x, log):
    with plain(log) as v:
        y = x * v
    return y


@add(t3_log)
def contextmanager_exception_runs_finally(x, log):
    try:
        with tracked(log):
            y = x * 2
            raise AppError("body", 1)
    except AppError as e:
        return y + 1, e.args
    return x


@add(t3_log)
def contextmanager_suppresses(x, log):
    with swallowing(log):
        x = x + 1
        raise KeyError("gone")
    return x * 2


@add(t3_log)
def contextmanager_does_not_suppress_other(x, log):
    try:
        with swallowing(log):
            x = x + 1
            raise IndexError("kept")
    except IndexError as e:
        return x * 3, e.args
    return x


@add(t3_log)
def contextmanager_converts_exception(x, log):
    try:
        with converting(log):
            x = x - 1
            raise KeyError("original")
    except AppError as e:
        return x, e.args, type(e.__cause__) is KeyError, e.__cause__.args
    return x


@add(t3)
def contextmanager_yields_tensor(x):
    with scaled(x) as y:
        z = y + 1
    return z


@add(t3_log)
def contextmanager_nested(x, log):
    with tracked(log, 1) as a, tracked(log, 2) as b:
        y = x * a + b
    return y


@add(t3_log)
def contextmanager_in_helper(x, log):
    def helper(x):
        with tracked(log):
            return x.cos()

    return helper(x) + 1


@add(t3_log)
def contextmanager_stop_iteration_in_body_not_swallowed(x, log):
    try:
        with tracked(log):
            next(iter([]))
    except StopIteration:
        log.append("StopIteration reached the caller")
    return x + 4


@add(t3_log)
def contextmanager_raise_in_nested_helper(x, log):
    def fails(y):
        raise AppError("helper", y.shape[0])

    try:
        with tracked(log):
            fails(x)
    except AppError as e:
        return x * 2, e.args
    return x


@add(t3)
def suppress_one_class(x):
    with contextlib.suppress(KeyError):
        x = x + 1
        raise KeyError("a")
    return x * 2


@add(t3)
def suppress_tuple_and_subclass(x):
    with contextlib.suppress(IndexError, ValueError):
        x = x + 1
        raise AppError("sub")
    return x * 2


@add(t3)
def suppress_no_exception(x):
    with contextlib.suppress(KeyError):
        x = x + 1
    return x * 2


@add(t3)
def suppress_not_matching(x):
    try:
        with contextlib.suppress(KeyError):
            x = x + 1
            raise IndexError("i")
    except IndexError as e:
        return x - 1, e.args
    return x


@add(t3)
def suppress_dict_lookup(x):
    d = {"a": 1}
    y = x
    with contextlib.suppress(KeyError):
        y = y + d["b"]
    return y + d["a"]


@add(t3)
def nullcontext_value(x):
    with contextlib.nullcontext(4) as v:
        y = x * v
    return y


@add(t3)
def nullcontext_lets_raise_through(x):
    try:
        with contextlib.nullcontext():
            raise KeyError("k")
    except KeyError:
        return x + 1
    return x


# -- user __exit__, nested with-blocks --------------------------------------------------------


@add(t3_log)
def user_exit_suppresses(x, log):
    with Swallow(log):
        x = x + 1
        raise AppError("swallowed")
    return x * 2


@add(t3_log)
def user_exit_sees_no_exception(x, log):
    with Swallow(log) as s:
        y = x + 1
    return y, s is not None


@add(t3_log)
def user_exit_suppresses_selectively(x, log):
    with OnlyKeyErrors(log) as three:
        x = x * three
        {}["missing"]
    try:
        with OnlyKeyErrors(log):
            raise IndexError("kept")
    except IndexError as e:
        return x, e.args
    return x


@add(t3_log)
def user_exit_reads_value(x, log):
    try:
        with Recorder(log):
            raise AppError("read", 3)
    except AppError:
        pass
    return x + 1


@add(t3_log)
def nested_with_inner_suppresses(x, log):
    with tracked(log, 1):
        with Swallow(log):
            x = x + 1
            raise KeyError("inner")
        x = x * 2
    return x


@add(t3_log)
def nested_with_outer_suppresses(x, log):
    with Swallow(log):
        with tracked(log):
            x = x + 1
            raise KeyError("through")
    return x * 3


@add(t3_log)
def with_in_loop_with_raises(x, log):
    for i in range(3):
        with contextlib.suppress(ValueError):
            x = x + i
            if i == 1:
                raise ValueError(i)
            x = x * 2
    return x


@add(t3_log)
def with_grad_mode_and_raise(x, log):
    try:
        with torch.no_grad():
            with Recorder(log):
                y = x * 2
                raise KeyError("k")
    except KeyError:
        return y + 1, torch.is_grad_enabled()
    return x


class Fails:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        raise AppError("from exit")


@add(t3_log)
def exit_raises_its_own(x, log):
    try:
        with Fails():
            raise KeyError("body")
    except AppError as e:
        return x * 2, type(e.__context__) is KeyError
    return x


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_generator_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def test_corpus_size() -> None:
    assert len(corpus) >= 60


# -- what stays a break (or runs as Python): the answer is still eager's -----------------------


def returns_generator_unconsumed(x):
    return squares([x, x + 1])


def returns_half_consumed(x):
    gen = squares([x, x + 1])
    return next(gen), gen


def takes_outside_generator(x, gen):
    return x + next(gen)


def abandons_paused_in_try(x, log):
    gen = with_finally(x, log)
    return next(gen) * 2


def test_generator_returned_out_matches_eager(differential) -> None:
    compiled = differential.compile(returns_generator_unconsumed)
    x = torch.randn(3)
    got, want = compiled(x), returns_generator_unconsumed(x)
    assert [torch.equal(a, b) for a, b in zip(got, want)] == [True, True]


def test_unstarted_generator_returned_is_made_again(differential, counting_backend) -> None:
    """It has run nothing, so the transformed code calls the generator function again
    on the same argument objects (``x + 1`` from the graph): one graph, no break."""
    compiled = differential.compile(returns_generator_unconsumed)
    x = torch.randn(3)
    gen = compiled(x)
    assert type(gen) is type(returns_generator_unconsumed(x))
    assert [torch.equal(a, b) for a, b in zip(gen, returns_generator_unconsumed(x))] == [True] * 2
    assert counting_backend.calls == 1
    assert not compiled.entries[0].breaks


def breaking_squares(items, log):
    for item in items:
        log.append(len(log))
        bytegraph.graph_break()
        yield item * item


def consumes_a_breaking_generator(x, log):
    y = x.exp()
    gen = breaking_squares([y, x], log)
    first = next(gen)
    return y + first, log


def test_break_inside_a_generator_body(differential, counting_backend) -> None:
    """The break comes inside the generator's body, before it started: the generator is
    made again in Python, and the caller's work before it is still a graph."""
    compiled = differential.compile(consumes_a_breaking_generator)
    differential.check(consumes_a_breaking_generator, compiled, (torch.randn(3), []))
    assert counting_backend.calls == 2  # exp before the break; the add in the resume


def test_half_consumed_generator_returned_matches_eager(differential) -> None:
    compiled = differential.compile(returns_half_consumed)
    x = torch.randn(3)
    (a, gen_a), (b, gen_b) = compiled(x), returns_half_consumed(x)
    assert torch.equal(a, b)
    assert [torch.equal(p, q) for p, q in zip(gen_a, gen_b)] == [True]


def test_generator_passed_in_matches_eager(differential) -> None:
    compiled = differential.compile(takes_outside_generator)
    x = torch.randn(3)
    got = compiled(x, iter([x * 2, x * 3]))
    assert torch.equal(got, takes_outside_generator(x, iter([x * 2, x * 3])))
    got = compiled(x, squares([x]))
    assert torch.equal(got, takes_outside_generator(x, squares([x])))


def test_generator_abandoned_in_try_matches_eager(differential) -> None:
    compiled = differential.compile(abandons_paused_in_try)
    x = torch.randn(3)
    eager_log, compiled_log = [], []
    assert torch.equal(compiled(x, compiled_log), abandons_paused_in_try(x, eager_log))
    assert compiled_log == eager_log


def extend_from_raising_generator(x, log):
    try:
        log.extend(raises_midway(x))  # eager keeps the item before the raise
    except AppError:
        log.append("raised")
    return x * 2


def test_partial_consumer_of_raising_generator_matches_eager(differential) -> None:
    fn = extend_from_raising_generator
    differential.check(fn, differential.compile(fn), t3_log())


def escapes_from_generator(x):
    gen = raises_midway(x)
    next(gen)
    return next(gen)


def escapes_from_contextmanager(x, log):
    with tracked(log):
        y = x + 1
        raise AppError("out", 7)
    return y


def escapes_stop_iteration(x):
    gen = counted(0)
    return x + next(gen)


@pytest.mark.parametrize(
    ("fn", "make"),
    [(escapes_from_generator, t3), (escapes_from_contextmanager, t3_log),
     (escapes_stop_iteration, t3)],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_escaping_exception_matches_eager(fn, make, differential) -> None:
    args = make()
    with pytest.raises(Exception) as want:
        fn(*args)
    compiled_args = make()
    with pytest.raises(Exception) as got:
        differential.compile(fn)(*compiled_args)
    assert type(got.value) is type(want.value)
    assert got.value.args == want.value.args
    if len(args) > 1:
        assert compiled_args[1] == args[1]


# ExitStack: its callbacks in a collections.deque (variables/deques.py), wrappers made with
# types.MethodType or carrying ``__wrapped__``, and sys.exc_info() read in __exit__ (nothing
# handled by the caller: guarded).


def exit_stack_callbacks(x, log):
    with contextlib.ExitStack() as stack:
        stack.callback(log.append, "first")
        stack.callback(log.append, "second")
        y = x * 2
    return y


def exit_stack_enter_context(x, log):
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(tracked(log, 1))
        b = stack.enter_context(tracked(log, 2))
        y = x + a + b
    return y


def exit_stack_suppresses_through_context(x, log):
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.suppress(KeyError))
        x = x + 1
        raise KeyError("k")
    return x * 2


@pytest.mark.parametrize(
    "fn", [exit_stack_callbacks, exit_stack_enter_context, exit_stack_suppresses_through_context]
)
def test_exit_stack_matches_eager(fn, differential, counting_backend) -> None:
    differential.check(fn, differential.compile(fn), t3_log())
    assert counting_backend.calls == 1
    full = differential.compile(fn, backend="eager", fullgraph=True)
    differential.check(fn, full, t3_log())


def test_exit_stack_inside_a_caller_handler_is_left_to_python(differential) -> None:
    """Called while the caller handles an exception, sys.exc_info() in __exit__ is that
    exception, which the trace cannot know: the guard sends this call elsewhere."""
    compiled = differential.compile(exit_stack_callbacks)
    differential.check(exit_stack_callbacks, compiled, t3_log())
    try:
        raise RuntimeError("the caller's")
    except RuntimeError:
        differential.check(exit_stack_callbacks, compiled, t3_log())
    assert len(compiled.entries) == 2
