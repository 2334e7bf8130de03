"""Exceptions raised by traced builtins and attribute lookups, caught in traced code.

Each program makes a builtin or a lookup fail where the outcome is certain from
constants (``1 / 0``, ``int("abc")``, ``[].index(3)``, ``obj.missing`` with the
absence guarded), catches it in the same frame or across an inlined helper,
and must compile to one graph with no break. The exception's ``str``,
``args`` and ``repr`` (and an AttributeError's ``name``/``obj``) are returned
and compared with eager: the messages are CPython's own, made by running the
builtin (or a stand-in of it) at trace time. Raises a builtin makes while
another builtin consumes it (``list(map(next, its))``) stay breaks.
PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import collections
import functools

import pytest
import torch
from _harness import Corpus, check_program, randn

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3),)


def caught(fn, *args):
    """(type name, args, str, repr) of what ``fn(*args)`` raised; None if it returned."""
    try:
        fn(*args)
    except Exception as e:
        return type(e).__name__, e.args, str(e), repr(e)
    return None


class Point:
    def __init__(self, x):
        self.x = x


def point() -> tuple:
    return (randn(3), Point(2.0))


# -- arithmetic on constants --------------------------------------------------------


@add(t3)
def true_division_by_zero(x):
    try:
        return x / (1 / 0)
    except ZeroDivisionError as e:
        return x + 1, str(e), e.args


@add(t3)
def floor_division_by_zero(x):
    n = 0
    try:
        return x * (7 // n)
    except ZeroDivisionError as e:
        return x - 1, str(e)


@add(t3)
def modulo_by_zero(x):
    try:
        return x * (7 % 0)
    except ZeroDivisionError as e:
        return x * 2, repr(e)


@add(t3)
def float_division_by_zero(x):
    try:
        return x * (2.5 / 0.0)
    except ZeroDivisionError as e:
        return x * 3, str(e)


@add(t3)
def divmod_by_zero(x):
    try:
        return divmod(5, 0), x
    except ZeroDivisionError as e:
        return x + 4, e.args


@add(t3)
def inplace_division_by_zero(x):
    n = 3
    try:
        n //= 0
    except ZeroDivisionError as e:
        return x + n, str(e)
    return x


@add(t3)
def zero_division_caught_as_arithmetic_error(x):
    try:
        return x / (1 % 0)
    except ArithmeticError as e:
        return x + 1, type(e) is ZeroDivisionError


@add(t3)
def division_in_a_loop_some_fail(x):
    out = []
    for d in (2, 0, 4, 0):
        try:
            out.append(8 / d)
        except ZeroDivisionError:
            out.append(None)
    return x + len(out), out


def ratio(a, b):
    return a / b


@add(t3)
def division_by_zero_in_a_helper(x):
    try:
        return x * ratio(1, 0)
    except ZeroDivisionError as e:
        return x - 5, str(e)


@add(t3)
def pow_of_zero_to_negative(x):
    try:
        return x * (0 ** -1)
    except ZeroDivisionError as e:
        return x + 2, str(e)


# -- argument checks of builtins ---------------------------------------------------------


@add(t3)
def int_of_bad_text(x):
    try:
        return x * int("abc")
    except ValueError as e:
        return x + 1, e.args, str(e)


@add(t3)
def float_of_bad_text(x):
    try:
        return x * float("x1")
    except ValueError as e:
        return x - 1, str(e)


@add(t3)
def int_with_a_bad_base(x):
    try:
        return x * int("12", 1)
    except ValueError as e:
        return x + 3, str(e)


@add(t3)
def str_plus_int(x):
    try:
        return "abc" + 1, x
    except TypeError as e:
        return x * 2, str(e)


@add(t3)
def int_plus_str(x):
    try:
        return 1 + "abc", x
    except TypeError as e:
        return x * 2, str(e)


@add(t3)
def len_of_an_int(x):
    try:
        return x * len(5)
    except TypeError as e:
        return x + 1, str(e)


@add(t3)
def ordering_int_and_str(x):
    try:
        return 1 < "a", x
    except TypeError as e:
        return x - 2, str(e)


@add(t3)
def max_of_nothing(x):
    try:
        return x * max([])
    except ValueError as e:
        return x + 1, str(e)


@add(t3)
def min_of_an_empty_tuple(x):
    try:
        return x * min(())
    except ValueError as e:
        return x + 1, e.args


@add(t3)
def reduce_of_nothing(x):
    try:
        return x * functools.reduce(lambda a, b: a + b, [])
    except TypeError as e:
        return x + 1, str(e)


@add(t3)
def chr_out_of_range(x):
    try:
        return chr(-1), x
    except ValueError as e:
        return x + 6, str(e)


@add(t3)
def str_index_of_a_missing_substring(x):
    try:
        return x * "abc".index("z")
    except ValueError as e:
        return x + 1, str(e)


@add(t3)
def constant_string_index_out_of_range(x):
    try:
        return "abc"[10], x
    except IndexError as e:
        return x + 1, str(e)


@add(t3)
def value_error_caught_as_exception(x):
    try:
        return x * int("nope")
    except Exception as e:
        return x + 1, isinstance(e, ValueError), str(e)


@add(t3)
def try_each_conversion(x):
    out = []
    for text in ("1", "x", "2.5", "3"):
        try:
            out.append(int(text))
        except ValueError:
            out.append(-1)
    return x + sum(out), out


def parse(text):
    return int(text)


@add(t3)
def conversion_error_from_a_helper(x):
    try:
        return x * parse("bad")
    except ValueError as e:
        return x - 1, e.args


# -- container methods ------------------------------------------------------------------


@add(t3)
def list_index_of_a_missing_value(x):
    items = [1, 2]
    try:
        return x * items.index(3)
    except ValueError as e:
        return x + 1, str(e)


@add(t3)
def tuple_index_of_a_missing_value(x):
    try:
        return x * (1, 2).index(7)
    except ValueError as e:
        return x + 1, str(e)


@add(lambda: (randn(3), [1, 2]))
def list_remove_of_a_missing_value(x, items):
    try:
        items.remove(9)
    except ValueError as e:
        return x + len(items), str(e)
    return x


@add(lambda: (randn(3), []))
def pop_from_an_empty_list(x, items):
    try:
        items.pop()
    except IndexError as e:
        return x + 1, str(e)
    return x


@add(lambda: (randn(3), [1, 2]))
def pop_index_out_of_range(x, items):
    try:
        items.pop(5)
    except IndexError as e:
        return x + len(items), str(e)
    return x


@add(lambda: (randn(3), {"a": 1}))
def dict_pop_of_a_missing_key(x, d):
    try:
        return x * d.pop("b")
    except KeyError as e:
        return x + d["a"], e.args, str(e)


@add(lambda: (randn(3), {"a": 1}))
def del_of_a_missing_key(x, d):
    try:
        del d["b"]
    except KeyError as e:
        return x + 1, repr(e), d
    return x


@add(lambda: (randn(3), [1, 2]))
def del_list_index_out_of_range(x, items):
    try:
        del items[7]
    except IndexError as e:
        return x + 1, str(e), items
    return x


@add(t3)
def set_remove_of_a_missing_element(x):
    s = {1, 2}
    try:
        s.remove(3)
    except KeyError as e:
        return x + len(s), e.args
    return x


@add(t3)
def pop_from_an_empty_set(x):
    s = set()
    try:
        s.pop()
    except KeyError as e:
        return x + 1, str(e)
    return x


@add(lambda: (randn(3), collections.OrderedDict(a=1)))
def ordered_dict_pop_missing(x, d):
    try:
        d.pop("z")
    except KeyError as e:
        return x + 1, e.args
    return x


@add(lambda: (randn(3), {"a": 1}))
def get_with_fallback_through_key_error(x, d):
    values = []
    for k in ("a", "b"):
        try:
            values.append(d.pop(k))
        except KeyError:
            values.append(0)
    return x + sum(values), values, d


# -- iterators and unpacking --------------------------------------------------------------


@add(t3)
def next_of_an_exhausted_list_iterator(x):
    it = iter([1])
    first = next(it)
    try:
        next(it)
    except StopIteration as e:
        return x + first, e.args
    return x


@add(t3)
def next_of_an_empty_tuple_iterator(x):
    try:
        next(iter(()))
    except StopIteration:
        return x * 2
    return x


@add(t3)
def next_of_an_exhausted_range_iterator(x):
    it = iter(range(2))
    total = next(it) + next(it)
    try:
        next(it)
    except StopIteration:
        total += 10
    return x + total


@add(lambda: (randn(3), {"a": 1}))
def next_of_an_exhausted_dict_iterator(x, d):
    it = iter(d)
    key = next(it)
    try:
        next(it)
    except StopIteration:
        return x + d[key], key
    return x


@add(t3)
def pull_until_stop_iteration(x):
    it = iter([1, 2, 3])
    total = 0
    while True:
        try:
            total += next(it)
        except StopIteration:
            break
    return x + total


@add(t3)
def unpack_too_many(x):
    try:
        a, b = (1, 2, 3)
    except ValueError as e:
        return x + 1, str(e)
    return x + a + b


@add(t3)
def unpack_too_few(x):
    values = [1]
    try:
        a, b = values
    except ValueError as e:
        return x + 1, str(e)
    return x + a + b


@add(t3)
def unpack_starred_too_few(x):
    try:
        a, b, *rest, c = [1, 2]
    except ValueError as e:
        return x + 1, str(e)
    return x + a + b + c + len(rest)


@add(t3)
def unpack_a_string(x):
    try:
        a, b = "abc"
    except ValueError as e:
        return x * 2, str(e)
    return x


@add(t3)
def unpack_a_tensor_of_the_wrong_length(x):
    try:
        a, b = x
    except ValueError as e:
        return x + 1, str(e)
    return a + b


@add(t3)
def unpack_in_a_loop_over_pairs(x):
    out = []
    for pair in [(1, 2), (3,), (4, 5)]:
        try:
            a, b = pair
            out.append(a + b)
        except ValueError:
            out.append(0)
    return x + sum(out), out


# -- attribute lookups ------------------------------------------------------------------


@add(point)
def missing_attribute_of_an_object(x, p):
    try:
        return x * p.y
    except AttributeError as e:
        return x * p.x, str(e), e.args, e.name, e.obj is p


@add(point)
def getattr_without_default(x, p):
    try:
        return x * getattr(p, "z")  # noqa: B009
    except AttributeError as e:
        return x + 1, str(e), e.name


@add(point)
def missing_method_call(x, p):
    try:
        return p.scale(x)
    except AttributeError as e:
        return x - p.x, str(e)


@add(t3)
def missing_attribute_of_a_class(x):
    try:
        return x * Point.origin
    except AttributeError as e:
        return x + 1, str(e)


@add(t3)
def missing_attribute_of_a_new_object(x):
    p = Point(3)
    try:
        return x * p.q
    except AttributeError as e:
        return x + p.x, str(e), e.obj is p


@add(t3)
def missing_attribute_of_an_int(x):
    try:
        return x * (5).size
    except AttributeError as e:
        return x + 1, str(e), e.name, e.obj


@add(t3)
def missing_attribute_of_none(x):
    value = None
    try:
        return value.shape, x
    except AttributeError as e:
        return x + 1, str(e)


@add(t3)
def missing_attribute_of_a_string(x):
    try:
        return "abc".upperr(), x
    except AttributeError as e:
        return x + 1, str(e)


@add(t3)
def attribute_after_delete(x):
    p = Point(2)
    del p.x
    try:
        return x * p.x
    except AttributeError as e:
        return x + 1, str(e)


def read_y(obj):
    return obj.y


@add(point)
def missing_attribute_in_a_helper(x, p):
    try:
        return x * read_y(p)
    except AttributeError as e:
        return x + 2, str(e)


@add(point)
def duck_typing_fallback(x, p):
    try:
        scale = p.scale
    except AttributeError:
        scale = 1.0
    return x * scale + p.x


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_builtin_raise_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def test_corpus_size() -> None:
    assert len(corpus) >= 50


# -- raises a builtin makes while another consumes it stay breaks --------------------------


def consumed_stop_iteration(x):
    return x + len(list(map(next, [iter([]), iter([1])])))


def defaulted_next_over_map(x):
    return x + next(map(next, [iter([])]), 5)


@pytest.mark.parametrize("fn", [consumed_stop_iteration, defaulted_next_over_map])
def test_a_builtin_catching_a_nested_raise_matches_eager(fn, differential) -> None:
    differential.check(fn, differential.compile(fn), (torch.ones(2),))


def test_a_class_attribute_added_later_is_seen(differential) -> None:
    class Late:
        pass

    def reads(x, obj):
        try:
            return x * obj.scale
        except AttributeError:
            return x - 1

    compiled = differential.compile(reads)
    differential.check(reads, compiled, (torch.ones(2), Late()))
    Late.scale = 3.0
    differential.check(reads, compiled, (torch.ones(2), Late()))


@pytest.mark.parametrize(
    ("fn", "args"),
    [(int, ("abc",)), (float, ("x",)), (len, (5,)), (divmod, (1, 0)), (max, ([],)),
     (chr, (-1,)), ("abc".index, ("z",))],
)
def test_messages_equal_eager(fn, args, differential) -> None:
    def probe(x):
        return x + 1, caught(fn, *args)

    differential.check(probe, differential.compile(probe), (torch.ones(2),))
