"""itertools in traced code (variables/itertools*.py): eager vs compiled.

Every iterator type of the module, made in the trace and consumed there (one
graph, as torch.compile), fed by generators that log each item they produce
(so the log shows whether compiled code read its sources exactly as far, and
in the same order, as eager), and escaping the trace (returned, stored in an
input, live at a graph break): the escaped iterator must yield what eager's
yields, from the same sources.
"""

from __future__ import annotations

import itertools
import operator

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


def logged(log, values):
    """A generator that records each value as it produces it, and its end."""
    for v in values:
        log.append(v)
        yield v
    log.append("end")


@add(t3)
def chain_of_lists_and_tuples(x):
    out = x
    for v in itertools.chain([1, 2], (3,), [x]):
        out = out + v
    return out


@add(t3)
def chain_from_iterable(x):
    return sum(itertools.chain.from_iterable([[x, x], [x * 2], []]))


@add(t3_log)
def chain_of_generators_is_lazy(x, log):
    out = []
    for v in itertools.chain(logged(log, [1, 2]), logged(log, [3])):
        log.append(("body", v))
        out.append(x * v)
    return out


@add(t3)
def product_and_repeat(x):
    a = [x * i + j for i, j in itertools.product([1, 2], [3, 4])]
    b = [i * j for i, j in itertools.product([1, 2], repeat=2)]
    return a, b, list(itertools.product())


@add(t3)
def combinatorics(x):
    c = [x * a + b for a, b in itertools.combinations([1, 2, 3], 2)]
    r = list(itertools.combinations_with_replacement("ab", 2))
    p = list(itertools.permutations([1, 2, 3]))
    p2 = list(itertools.permutations(range(4), 2))
    return c, r, p, p2, list(itertools.combinations([1], 2))


@add(t3)
def count_and_next(x):
    c = itertools.count(2, 3)
    f = itertools.count(0.5, 0.25)
    return x * next(c) + next(c), next(f) + next(f) + next(f), next(c)


@add(t3)
def repeat_with_and_without_times(x):
    r = itertools.repeat(2)
    first = [next(r) for _ in range(3)]
    return list(itertools.repeat(x + 1, 3)), first, list(itertools.repeat(1, -2))


@add(t3)
def cycle_over_a_list(x):
    c = itertools.cycle([1, 2, 3])
    return [x * next(c) for _ in range(7)]


@add(t3_log)
def cycle_reads_its_source_once(x, log):
    c = itertools.cycle(logged(log, [1, 2]))
    return [x + next(c) for _ in range(5)]


@add(t3)
def accumulate_variants(x):
    a = list(itertools.accumulate([x, x, x]))
    b = list(itertools.accumulate([1, 2, 3], operator.mul, initial=x))
    c = list(itertools.accumulate([3, 1, 4], max))
    d = list(itertools.accumulate([], initial=5))
    return a, b, c, d


@add(t3_log)
def islice_reads_exactly_as_far(x, log):
    it = logged(log, range(10))
    out = [x * v for v in itertools.islice(it, 1, 6, 2)]
    return out, next(it), list(itertools.islice(itertools.count(), 3))


@add(t3_log)
def zip_longest_stops_calling_finished_sources(x, log):
    a = logged(log, [1, 2, 3])
    b = logged(log, ["x"])
    rows = list(itertools.zip_longest(a, b, fillvalue=x * 2))
    return rows, list(itertools.zip_longest()), list(itertools.zip_longest([1], [2, 3]))


@add(t3)
def starmap_and_compress(x):
    s = list(itertools.starmap(operator.mul, [(x, 2), (x, 3)]))
    c = [x * v for v in itertools.compress([1, 2, 3, 4], [1, 0, 1])]
    return s, c, list(itertools.starmap(pow, [[2, 3]]))


@add(t3)
def groupby_with_and_without_key(x):
    a = [(k, len(list(g))) for k, g in itertools.groupby([1, 1, 2, 3, 3], key=lambda v: v % 2)]
    b = [(k, list(g)) for k, g in itertools.groupby("aabccc")]
    return x + len(a), a, b


@add(t3)
def groupby_groups_expire(x):
    groups = list(itertools.groupby([1, 1, 2, 2, 2, 3]))
    first = [list(g) for _, g in groups]  # only the last group still yields
    g = itertools.groupby([5, 5, 6])
    key, group = next(g)
    head = next(group)
    rest = next(g)
    return x * key, head, first, rest[0], list(group), list(rest[1])


@add(t3_log)
def pairwise_of_a_generator(x, log):
    return [a * b * x for a, b in itertools.pairwise(logged(log, [1, 2, 3]))], list(
        itertools.pairwise([1]))


@add(t3_log)
def takewhile_dropwhile_filterfalse(x, log):
    t = [x * v for v in itertools.takewhile(lambda v: v < 3, logged(log, [1, 2, 3, 1]))]
    d = [x * v for v in itertools.dropwhile(lambda v: v < 3, [1, 2, 3, 1])]
    f = [x * v for v in itertools.filterfalse(lambda v: v % 2, [1, 2, 3, 4])]
    n = list(itertools.filterfalse(None, [0, 1, "", "a"]))
    return t, d, f, n


@add(t3_log)
def tee_shares_one_read(x, log):
    a, b = itertools.tee(logged(log, [1, 2, 3]))
    first = next(a)
    both = [x * v for v in b]
    c, d, e = itertools.tee(a, 3)
    return first, both, list(c), list(d), list(e), itertools.tee([1], 0)


@add(t3_log)
def nested_itertools_order(x, log):
    src = itertools.chain(logged(log, [1, 2]), itertools.repeat(7, 2))
    pairs = zip(itertools.islice(src, 3), itertools.count(10))
    return [x * a + b for a, b in itertools.accumulate(pairs, lambda s, p: (s[0] + p[0], p[1]))]


def raising(log):
    log.append("raising")
    yield 1
    raise ValueError("boom")


@add(t3_log)
def a_raising_source_finishes_zip_longest(x, log):
    out = []
    for make in (lambda it: itertools.zip_longest(it, [7, 8, 9]), itertools.pairwise,
                 lambda it: itertools.islice(it, 4)):
        it = make(raising(log))
        try:
            for v in it:
                out.append(v)
        except ValueError as e:
            out.append(str(e))
        out.append([v for v in it])  # CPython's zip_longest is finished: no (None, 8)
    return x + 1, out


class LoggedBag:
    """A user iterable whose ``__iter__`` is a generator: each item logged as it is made."""

    def __init__(self, log):
        self.log = log

    def __iter__(self):
        for v in range(5):
            self.log.append(v)
            yield v


@add(t3_log)
def user_iterable_read_lazily(x, log):
    bag = LoggedBag(log)
    head = [x * v for v in itertools.islice(bag, 2)]
    pairs = [x + a for a, _ in zip(bag, range(2))]
    for v in bag:
        if v == 1:
            break
    log.append("end")
    return head, pairs, list(itertools.chain(bag, [9]))


@add(t3)
def unpacking_and_builtins(x):
    a, b, c = itertools.islice(itertools.cycle([x, 1]), 3)
    return a + b + c, sorted(itertools.chain([3, 1], [2])), sum(itertools.repeat(2, 4)), any(
        itertools.repeat(0, 3)), max(itertools.chain([1], [5, 2]))


@add(t3)
def isinstance_of_itertools_types(x):
    c = itertools.chain()
    return x + 1, isinstance(c, itertools.chain), type(itertools.count()) is itertools.count


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_itertools_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


# -- escapes: the iterator leaves the trace and must go on as eager's does ----------------


def _escape_programs():
    def count_returned(x):
        c = itertools.count(5, 2)
        return x * next(c), c

    def float_count_returned(x):
        c = itertools.count(0.1, 0.2)
        next(c), next(c)
        return x + 1, c

    def repeat_returned(x):
        r = itertools.repeat(3, 4)
        return x * next(r), r, itertools.repeat(x)

    def cycle_after_first_pass(x):
        c = itertools.cycle([1, 2, 3])
        return x * sum(next(c) for _ in range(4)), c

    def cycle_not_started(x):
        return x + 1, itertools.cycle([4, 5])

    def chain_half_read(x):
        c = itertools.chain([1, 2], [3], (4, 5))
        next(c), next(c)
        return x * next(c), c

    def islice_half_read(x):
        s = itertools.islice(itertools.count(), 2, 11, 3)
        return x * next(s), s

    def accumulate_half_read(x):
        a = itertools.accumulate([1, 2, 3, 4], initial=10)
        b = itertools.accumulate([1, 2, 3], operator.mul)
        next(a), next(a), next(b)
        return x + 1, a, b, itertools.accumulate([7], initial=1)

    def pairwise_half_read(x):
        p = itertools.pairwise([1, 2, 3, 4])
        return x * next(p)[0], p

    def zip_longest_half_read(x):
        z = itertools.zip_longest([1], [2, 3, 4], fillvalue=0)
        next(z), next(z)
        return x + 1, z

    def takewhile_dropwhile_escape(x):
        t = itertools.takewhile(lambda v: v < 2, [1, 2, 3])
        d = itertools.dropwhile(lambda v: v < 2, [1, 2, 3, 0])
        list(t), next(d)
        return x + 1, t, d

    def product_half_read(x):
        p = itertools.product([1, 2], "ab")
        next(p)
        return x + 1, p

    def map_of_count(x):
        return x + 1, itertools.starmap(operator.add, zip(itertools.count(), [5, 6, 7]))

    return [count_returned, float_count_returned, repeat_returned, cycle_after_first_pass,
            cycle_not_started, chain_half_read, islice_half_read, accumulate_half_read,
            pairwise_half_read, zip_longest_half_read, takewhile_dropwhile_escape,
            product_half_read, map_of_count]


def _drained(value):
    """An iterator as its type and first items; other values as they are."""
    if isinstance(value, tuple):
        return tuple(_drained(v) for v in value)
    if hasattr(value, "__next__"):
        return type(value), list(itertools.islice(value, 12))
    return value


@pytest.mark.parametrize("fn", _escape_programs(), ids=lambda f: f.__name__)
def test_escaping_iterator_goes_on_as_eager(fn, differential, counting_backend) -> None:
    x = torch.randn(3)
    expected = _drained(fn(x.clone()))
    actual = _drained(bytegraph.compile(fn, backend=counting_backend, fullgraph=True)(x.clone()))
    assert repr(actual) == repr(expected)
    assert counting_backend.calls == 1


def test_iterator_live_across_a_graph_break(differential, counting_backend) -> None:
    def across(x, items):
        c = itertools.count(3)
        s = itertools.islice(itertools.chain(items, [5, 6]), 1, 5)
        a = x * next(c) + next(s)
        bytegraph.graph_break()
        return a + next(c) + next(s), list(s), next(c)

    compiled = differential.compile(across)
    differential.check(across, compiled, (torch.ones(2), [1, 2, 3]))
    # The resume function receives the rebuilt iterators as real objects from its
    # frame, which stay with Python: each ``next`` there is a break of its own.
    assert counting_backend.calls == 3


def test_iterator_stored_in_an_input(differential) -> None:
    def store(x, d):
        c = itertools.count(7)
        d["it"] = c
        return x * next(c)

    x, eager_d, compiled_d = torch.ones(2), {}, {}
    expected = store(x, eager_d)
    actual = bytegraph.compile(store, backend="eager", fullgraph=True)(x, compiled_d)
    assert torch.equal(actual, expected)
    assert next(compiled_d["it"]) == next(eager_d["it"])


def test_cycle_halfway_through_its_first_pass_breaks(differential, counting_backend) -> None:
    def escape(x, log):
        c = itertools.cycle(logged(log, [1, 2, 3]))
        return x * next(c), c

    x = torch.ones(2)
    eager_log, compiled_log = [], []
    expected = _drained(escape(x, eager_log))
    actual = _drained(bytegraph.compile(escape, backend=counting_backend)(x, compiled_log))
    assert repr(actual) == repr(expected) and compiled_log == eager_log
    with pytest.raises(bytegraph.Unsupported, match="cycle"):
        bytegraph.compile(escape, backend="eager", fullgraph=True)(x, [])


def test_groupby_and_tee_escapes_break(differential) -> None:
    def escape(x):
        g = itertools.groupby([1, 1, 2])
        return x + 1, g

    compiled = differential.compile(escape)
    assert _drained(compiled(torch.ones(2))[1])[1][0][0] == 1
    with pytest.raises(bytegraph.Unsupported):
        bytegraph.compile(escape, backend="eager", fullgraph=True)(torch.ones(2))


def test_input_iterator_left_as_eager_leaves_it(differential) -> None:
    def consume(x, it):
        return [x * v for v in itertools.islice(it, 2)]

    for make in (lambda: iter([1, 2, 3, 4]), lambda: itertools.count(3)):
        eager_it, compiled_it = make(), make()
        expected = consume(torch.ones(2), eager_it)
        actual = differential.compile(consume)(torch.ones(2), compiled_it)
        assert all(torch.equal(a, e) for a, e in zip(actual, expected, strict=True))
        assert next(compiled_it) == next(eager_it)


def test_infinite_iterator_consumed_whole_is_refused() -> None:
    def forever(x):
        return x + len(list(itertools.count()))

    with pytest.raises(bytegraph.Unsupported, match="over"):
        bytegraph.compile(forever, backend="eager", fullgraph=True)(torch.ones(2))
