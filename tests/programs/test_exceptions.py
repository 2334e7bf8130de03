"""Raising and catching in traced code (translate/ops/exceptions.py): eager vs compiled.

Each program raises and catches inside the compiled frame, or across inlined
helpers, and must compile to the graph count given with no break for the
raise. Messages, ``args``, ``__cause__``/``__context__`` and user attributes
are compared through what the programs return. An exception that escapes the
compiled frame is raised by the transformed code after the graph and the
side effects: same type, args, attributes, cause, context and state as
eager. The programs' ``assert`` statements must compile as Python compiles
them (LOAD_ASSERTION_ERROR), so pytest must not rewrite them:
PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import collections.abc

import pytest
import torch
from _harness import Corpus, check_program, randn

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3),)


class AppError(ValueError):
    pass


class DeepError(AppError):
    pass


class Registry(collections.abc.Mapping):
    """The Hugging Face registry pattern: ``__getitem__`` raises KeyError for a miss."""

    def __init__(self, funcs):
        self._funcs = funcs

    def __getitem__(self, key):
        return self._funcs[key]

    def __len__(self):
        return len(self._funcs)

    def __iter__(self):
        return iter(self._funcs)


class Strict(collections.abc.Mapping):
    def __init__(self, values):
        self._values = values

    def __getitem__(self, key):
        if key not in self._values:
            raise KeyError(key)
        return self._values[key]

    def __len__(self):
        return len(self._values)

    def __iter__(self):
        return iter(self._values)


def fails(kind):
    raise kind("from a helper")


def fails_deeper(x):
    return fails(KeyError) + x


def lookup(table, key):
    return table[key]


# -- one frame -------------------------------------------------------------------------


@add(t3)
def raise_and_catch(x):
    try:
        raise ValueError("bad", 3)
    except ValueError as e:
        return x + len(e.args), e.args, str(e)


@add(t3)
def raise_class_and_catch(x):
    try:
        raise KeyError
    except KeyError as e:
        return x * 2, e.args


@add(t3)
def except_tuple_as_e(x):
    try:
        raise IndexError("out")
    except (KeyError, IndexError) as e:
        return x - 1, str(e), type(e) is IndexError


@add(t3)
def first_matching_clause_wins(x):
    try:
        raise KeyError("k")
    except IndexError:
        return x
    except LookupError as e:
        return x + 10, repr(e.args)
    except KeyError:
        return x + 20


@add(t3)
def try_except_else_finally(x):
    log = []
    try:
        x = x + 1
    except KeyError:
        log.append("except")
    else:
        log.append("else")
    finally:
        log.append("finally")
    return x, log


@add(t3)
def finally_runs_on_a_caught_raise(x):
    log = []
    try:
        try:
            raise ValueError("v")
        finally:
            log.append("inner finally")
    except ValueError:
        log.append("caught")
    return x * 3, log


@add(t3)
def nested_try_reraise_to_outer(x):
    try:
        try:
            raise KeyError("a")
        except KeyError:
            x = x + 1
            raise
    except LookupError as e:
        return x, e.args


@add(t3)
def unmatched_inner_handler_passes_on(x):
    try:
        try:
            raise TypeError("t")
        except KeyError:
            return x
    except TypeError as e:
        return x + 5, str(e)


@add(t3)
def raise_from_caught_and_inspected(x):
    try:
        raise RuntimeError("outer") from KeyError("inner")
    except RuntimeError as e:
        cause = e.__cause__
        return x + 1, type(cause) is KeyError, cause.args, e.__suppress_context__


@add(t3)
def raise_from_none(x):
    try:
        try:
            raise KeyError("first")
        except KeyError:
            raise ValueError("second") from None
    except ValueError as e:
        return x * 2, e.__cause__ is None, e.__suppress_context__, e.__context__.args


@add(t3)
def context_set_while_handling(x):
    try:
        raise KeyError("a")
    except KeyError as first:
        try:
            raise ValueError("b")
        except ValueError as second:
            return x + 1, second.__context__ is first, second.__suppress_context__


@add(t3)
def user_exception_with_attributes(x):
    try:
        err = DeepError("deep", 2)
        err.detail = "extra"
        err.code = 7
        raise err
    except AppError as e:
        return x * e.code, e.detail, e.args, isinstance(e, ValueError)


@add(t3)
def user_exception_class_raised_bare(x):
    try:
        raise DeepError
    except (KeyError, AppError) as e:
        return x - 3, type(e) is DeepError, e.args


@add(t3)
def exception_name_unbound_after_handler(x):
    e = 5
    try:
        raise KeyError(1)
    except KeyError as e:  # noqa: F811, F841
        pass
    e = 6
    return x + e


@add(t3)
def raise_in_a_loop_caught_each_time(x):
    caught = []
    for i in range(3):
        try:
            if i % 2:
                raise ValueError(i)
            x = x + i
        except ValueError as e:
            caught.append(e.args[0])
    return x, caught


@add(t3)
def return_inside_try_with_finally(x):
    log = []
    try:
        return x + 1, log
    finally:
        log.append("finally")


# -- across frames -------------------------------------------------------------------------


@add(t3)
def helper_raise_caught_by_caller(x):
    try:
        fails(KeyError)
    except KeyError as e:
        return x * 2, e.args
    return x


@add(t3)
def raise_two_frames_deep(x):
    try:
        return fails_deeper(x)
    except LookupError as e:
        return x - 2, str(e)


@add(t3)
def helper_catches_its_own(x):
    def safe(v):
        try:
            return fails(ValueError)
        except ValueError:
            return v + 1

    return safe(x)


@add(lambda: (randn(3), {"a": 1}))
def dict_key_error_caught(x, d):
    try:
        return x + d["missing"]
    except KeyError as e:
        return x - 1, e.args, str(e)


@add(lambda: (randn(3), {"a": 1}))
def dict_key_error_in_a_helper(x, d):
    try:
        return lookup(d, "b")
    except KeyError as e:
        return x + lookup(d, "a"), e.args


@add(lambda: (randn(3), [1, 2]))
def list_index_error_caught(x, items):
    try:
        return x + items[5]
    except IndexError as e:
        return x * 4, str(e)


@add(lambda: (randn(3), Registry({"eager": 1.5})))
def mapping_get_on_a_key_error_getitem(x, registry):
    return x * registry.get("eager", 0.0) + registry.get("sdpa", 2.0)


@add(lambda: (randn(3), Strict({"a": 2})))
def mapping_get_on_a_raising_getitem(x, table):
    return x * table.get("a") + table.get("b", 3), "b" in table, "a" in table


@add(lambda: (randn(3), [0]))
def side_effects_before_a_caught_raise_stay(x, log):
    try:
        log.append(1)
        fails(ValueError)
        log.append(2)
    except ValueError:
        log.append(3)
    return x + len(log)


def reraise_handled():
    raise


def fails_with_finally(log):
    try:
        return fails(ValueError)
    finally:
        log.append("helper finally")


class RaisingProperty:
    @property
    def value(self):
        raise KeyError("property")


def key_fails(v):
    raise ValueError("key")


@add(t3)
def bare_raise_in_a_helper_reraises_the_callers(x):
    try:
        raise KeyError("outer")
    except KeyError:
        try:
            reraise_handled()
        except KeyError as e:
            return x + 1, e.args


@add(t3)
def raise_in_the_middle_of_an_expression(x):
    try:
        y = x + (1 + fails(ValueError))
    except ValueError:
        y = x - 5
    return y


@add(lambda: (randn(3), []))
def finally_of_a_middle_frame_runs(x, log):
    try:
        fails_with_finally(log)
    except ValueError as e:
        log.append(str(e))
    return x + len(log)


@add(t3)
def helper_raise_takes_the_callers_exception_as_context(x):
    try:
        raise KeyError("k")
    except KeyError as e:
        try:
            fails(ValueError)
        except ValueError as v:
            return x + 1, v.__context__ is e, v.__context__.args


@add(lambda: (randn(3), {"a": 1, "c": 3}))
def continue_from_an_except_with_finally_in_a_loop(x, d):
    out = []
    for k in ["a", "b", "c"]:
        try:
            out.append(d[k])
        except KeyError:
            out.append(-1)
            continue
        finally:
            out.append(0)
    return x + sum(out), out


@add(t3)
def caught_exception_raised_again(x):
    try:
        raise ValueError("a")
    except ValueError as e:
        saved = e
    try:
        raise saved
    except ValueError as again:
        return x + 1, again is saved, again.args


@add(t3)
def return_in_finally_swallows(x):
    try:
        try:
            raise KeyError("a")
        finally:
            return x + 1  # noqa: B012
    except KeyError:
        return x - 1


@add(t3)
def augmented_store_to_a_missing_key(x):
    d = {}
    try:
        d["k"] += 1
    except KeyError:
        d["k"] = 0
    return x + 1, d


@add(t3, graphs=0)  # OSError(errno, ...) picks its class in the constructor: refused
def oserror_with_an_errno_is_its_subclass(x):
    try:
        raise OSError(2, "missing")
    except FileNotFoundError as e:
        return x + 1, str(e)
    except OSError:
        return x - 1, None


@add(t3, graphs=0)
def property_raising_is_a_break(x):
    try:
        return RaisingProperty().value + x
    except KeyError as e:
        return x - 1, e.args


@add(t3, graphs=0)
def builtin_calling_a_raising_key_is_a_break(x):
    try:
        return sorted([3, 1], key=key_fails), x
    except ValueError as e:
        return x * 2, e.args


class Positive:
    def __init__(self, value):
        if value <= 0:
            raise ValueError(f"not positive: {value}")
        self.value = value


@add(t3)
def constructor_raise_caught_by_caller(x):
    made = []
    for v in (2, -1):
        try:
            made.append(Positive(v).value)
        except ValueError as e:
            made.append(str(e))
    return x + 1, made


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_exception_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


# -- exceptions that leave the compiled frame ---------------------------------------------------
#
# The trace ends at the raise: one graph for the work before it, the side effects
# replayed, then the transformed code raises the rebuilt exception (escapes.py).


def escapes(x, log):
    y = x * 2
    log.append("before")
    if y.shape[0] == 3:
        raise AppError("escaped", 4)
    return y


def escapes_from_helper(x, log):
    y = x.exp()
    log.append(y)
    return fails(KeyError) + y


def escapes_after_unmatched_handler(x, log):
    y = x.sin()
    try:
        raise KeyError("k")
    except ValueError:
        log.append("wrong")
    log.append(y)
    return x


def escapes_with_cause(x, log):
    y = x + 1
    try:
        log.append(y * 2)
        {}["missing"]
    except KeyError as e:
        raise AppError("wrapped") from e


def escapes_with_context(x, log):
    y = x.cos()
    try:
        raise KeyError("first")
    except KeyError:
        log.append(y)
        raise IndexError("second")  # noqa: B904 (the implicit __context__ is the point)


def escapes_from_none(x, log):
    log.append(x.abs())
    try:
        [1, 2][5]
    except IndexError:
        raise AppError(x.shape[0]) from None


def escapes_reraised(x, log):
    y = x - 1
    try:
        raise DeepError("deep", y.shape[0])
    except AppError as e:
        e.where = "handler"
        log.append(e.where)
        raise


def escapes_with_attributes(x, log):
    e = AppError("attrs")
    e.tensor_sum = 7
    log.append(x * 3)
    raise e


ESCAPING = [
    escapes, escapes_from_helper, escapes_after_unmatched_handler, escapes_with_cause,
    escapes_with_context, escapes_from_none, escapes_reraised, escapes_with_attributes,
]


def _raise_of(fn, x, log):
    with pytest.raises(BaseException) as info:
        fn(x, log)
    return info.value


def _same_exception(got, want, depth=0):
    assert type(got) is type(want)
    assert got.args == want.args and str(got) == str(want)
    assert {k: v for k, v in vars(got).items()} == {k: v for k, v in vars(want).items()}
    assert got.__suppress_context__ == want.__suppress_context__
    for link in ("__cause__", "__context__"):
        g, w = getattr(got, link), getattr(want, link)
        assert (g is None) == (w is None), link
        if w is not None and depth < 3:
            _same_exception(g, w, depth + 1)
            assert g.__traceback__ is not None  # a raised exception always has one


@pytest.mark.parametrize("fn", ESCAPING, ids=lambda f: f.__name__)
def test_escaping_exception_matches_eager(fn, differential, counting_backend) -> None:
    eager_log, compiled_log = [], []
    want = _raise_of(fn, torch.ones(3), eager_log)
    compiled = differential.compile(fn)
    got = _raise_of(compiled, torch.ones(3), compiled_log)
    _same_exception(got, want)
    assert len(compiled_log) == len(eager_log)
    for g, w in zip(compiled_log, eager_log):
        assert torch.equal(g, w) if isinstance(w, torch.Tensor) else g == w
    assert counting_backend.calls == 1, "the work before the raise is one graph, no break"
    full = differential.compile(fn, backend="eager", fullgraph=True)
    _same_exception(_raise_of(full, torch.ones(3), []), want)


def _last_entry(exc):
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb


def test_escaping_traceback_points_at_the_user_line(differential) -> None:
    compiled = differential.compile(escapes)
    entry = _last_entry(_raise_of(compiled, torch.ones(3), []))
    assert entry.tb_frame.f_code.co_filename == escapes.__code__.co_filename
    assert entry.tb_lineno == escapes.__code__.co_firstlineno + 4  # the raise statement


def test_escaping_from_a_helper_points_at_the_call(differential) -> None:
    compiled = differential.compile(escapes_from_helper)
    entry = _last_entry(_raise_of(compiled, torch.ones(3), []))
    assert entry.tb_lineno == escapes_from_helper.__code__.co_firstlineno + 3  # fails(...)


def test_escaping_inside_a_caller_handler_keeps_the_traced_context(differential) -> None:
    """The raise in the transformed code must not take the caller's exception as
    ``__context__`` when the trace knew it (CPython sets it at every raise)."""
    compiled = differential.compile(escapes_with_context)
    for run in (escapes_with_context, compiled):
        try:
            raise RuntimeError("the caller's")
        except RuntimeError:
            err = _raise_of(run, torch.ones(3), [])
        assert type(err.__context__) is KeyError, run
    try:
        raise RuntimeError("the caller's")
    except RuntimeError:
        want = _raise_of(escapes, torch.ones(3), [])
        got = _raise_of(differential.compile(escapes), torch.ones(3), [])
    assert type(want.__context__) is RuntimeError and type(got.__context__) is RuntimeError


def test_escape_then_normal_call(differential) -> None:
    compiled = differential.compile(escapes)
    with pytest.raises(AppError):
        compiled(torch.ones(3), [])
    differential.check(escapes, compiled, (torch.ones(2), []))


def test_caught_exception_returned_keeps_a_traceback(differential, counting_backend) -> None:
    def returns_it(x):
        try:
            raise KeyError("k")
        except KeyError as e:
            err = e
        return x + 1, err

    compiled = differential.compile(returns_it)
    out, err = compiled(torch.ones(2))
    assert err.__traceback__ is not None and err.args == ("k",)
    assert err.__traceback__.tb_lineno == returns_it.__code__.co_firstlineno + 2
    assert torch.equal(out, torch.ones(2) + 1)
    assert counting_backend.calls == 1


def test_stop_iteration_inside_a_protocol_stays_a_break(differential) -> None:
    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return self

        def __next__(self):
            if self.n == 0:
                raise StopIteration
            self.n -= 1
            return self.n

    def consume(x, it):
        return x + sum(it)

    compiled = differential.compile(consume)
    assert torch.equal(compiled(torch.ones(2), Countdown(3)), consume(torch.ones(2), Countdown(3)))


# -- asserts, with-blocks -------------------------------------------------------------------


def asserts_shape(x):
    assert x.shape[0] == 3, "three rows"
    return x * 2


def test_failing_assert_raises_as_eager(differential) -> None:
    compiled = differential.compile(asserts_shape)
    differential.check(asserts_shape, compiled, (torch.ones(3),))
    with pytest.raises(AssertionError, match="three rows"):
        compiled(torch.ones(2))


def test_caught_failing_assert_is_one_graph(differential, counting_backend) -> None:
    def checks(x):
        try:
            assert x.dim() == 2, ("not a matrix", x.dim())
        except AssertionError as e:
            return x + 1, e.args
        return x

    compiled = differential.compile(checks)
    differential.check(checks, compiled, (torch.ones(3),))
    assert counting_backend.calls == 1


def test_raise_through_a_with_block_matches_eager(differential) -> None:
    def through_no_grad(x, log):
        try:
            with torch.no_grad():
                y = x * 2
                log.append(torch.is_grad_enabled())
                raise KeyError("inside")
        except KeyError as e:
            log.append(torch.is_grad_enabled())
            return y + 1, e.args
        return y

    x = torch.ones(3, requires_grad=True)
    compiled = differential.compile(through_no_grad)
    differential.check(through_no_grad, compiled, (x, []))
    assert torch.is_grad_enabled()


def test_caught_exception_stored_in_an_input_matches_eager(differential) -> None:
    def stores(x, log):
        try:
            raise KeyError("a")
        except KeyError as e:
            log.append(e)  # a raised exception carries a traceback the trace cannot rebuild
        return x + 1

    eager_log, compiled_log = [], []
    expected = stores(torch.ones(2), eager_log)
    actual = differential.compile(stores)(torch.ones(2), compiled_log)
    assert torch.equal(actual, expected)
    [got], [want] = compiled_log, eager_log
    assert type(got) is type(want) and got.args == want.args
    assert got.__traceback__ is not None
