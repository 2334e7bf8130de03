"""collections.defaultdict, OrderedDict and Counter in traced code: eager vs compiled.

defaultdict with every kind of factory (a builtin type, a lambda, a user
class, a closure that makes tensors and logs each call), missing keys made
in the trace or in an input (replayed on the caller's object), returned;
OrderedDict's order-aware methods, equality and ``|``; Counter built from
iterables, generators and mappings, its missing key 0, arithmetic, in-place
operators, update/subtract, most_common, elements. One graph each, as
torch.compile; the outputs, their types and every input after the call
compared with eager.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, defaultdict

import pytest
import torch
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add


def t3() -> tuple:
    return (randn(3),)


class Box:
    def __init__(self):
        self.items = []


# -- defaultdict ---------------------------------------------------------------------------


@add(t3)
def defaultdict_of_list_and_int(x):
    d = defaultdict(list)
    d["a"].append(x)
    d["b"].append(x + 1)
    d["a"].append(x * 2)
    n = defaultdict(int)
    for k in "abca":
        n[k] += 1
    return d, n, x * n["a"], "zz" in n, len(n)


@add(t3)
def defaultdict_of_lambda_and_user_class(x):
    z = defaultdict(lambda: x * 0)
    z[1] += x
    boxes = defaultdict(Box)
    boxes["a"].items.append(x)
    return z[1] + z[2], len(z), boxes["a"].items[0] + 1, list(boxes)


@add(t3)
def factory_closure_runs_once_per_missing_key(x):
    made = []

    def factory():
        made.append(len(made))
        return x * 0 + len(made)

    d = defaultdict(factory)
    a, b, a2 = d["a"], d["b"], d["a"]
    return a + b + a2, made, list(d), d.get("c"), "c" in d, made


@add(t3)
def defaultdict_methods(x):
    d = defaultdict(list)
    d.setdefault("a", []).append(x)
    c = d.copy()
    c["b"].append(1)
    m = d.__missing__("m")
    return (d["a"][0] * 2, type(c) is defaultdict, len(d), len(c), m, d.default_factory is list,
            dict(d.items()) == {"a": [x], "m": []})


@add(t3)
def defaultdict_without_factory_raises(x):
    d = defaultdict(None, {"a": 1})
    try:
        d["b"]
    except KeyError as e:
        return x + 1, e.args
    return x


@add(t3)
def defaultdict_or_keeps_its_type(x):
    a = {"z": 1} | defaultdict(list, {"y": [x]})
    b = defaultdict(int) | {"q": 1}
    b |= {"r": 2}
    return x + 1, type(a), a.default_factory, type(b), b["nope"], b


@add(t3)
def nested_defaultdicts(x):
    d = defaultdict(lambda: defaultdict(int))
    d["a"]["b"] += 1
    d["a"]["c"] += 2
    return x * d["a"]["c"], {k: dict(v) for k, v in d.items()}, d


@add(lambda: (randn(3), defaultdict(list, {"a": [1]})))
def input_defaultdict_gets_new_keys(x, d):
    d["a"].append(2)
    d["b"].append(3)
    return x + len(d)


@add(lambda: (randn(3), defaultdict(int)))
def input_defaultdict_of_int(x, d):
    d["k"] += 1
    return x * d["k"], d["missing"]


@add(lambda: (randn(3), defaultdict(list)))
def input_defaultdict_holds_tensors(x, d):
    d["t"].append(x * 2)
    return d["t"][0] + 1


# -- OrderedDict ---------------------------------------------------------------------------


@add(t3)
def ordered_dict_move_to_end_and_popitem(x):
    d = OrderedDict(a=1, b=2, c=3)
    d.move_to_end("a")
    d.move_to_end("c", last=False)
    k, v = d.popitem(last=False)
    k2, v2 = d.popitem()
    return x * v + v2, list(d), k, k2


@add(t3)
def ordered_dict_equality_is_order_sensitive(x):
    a, b = OrderedDict(a=1, b=2), OrderedDict(b=2, a=1)
    return x + 1, a == b, a != b, dict(a) == dict(b), a == dict(b), dict(b) == a


@add(t3)
def ordered_dict_reversed_and_views(x):
    d = OrderedDict.fromkeys("abc", 0)
    d.move_to_end("b")
    return (x + 1, list(reversed(d)), list(reversed(d.items())), list(reversed(d.values())),
            list(d.keys()), d == OrderedDict.fromkeys("acb", 0))


@add(t3)
def ordered_dict_or(x):
    d = OrderedDict(a=1) | {"b": 2}
    e = {"z": 0} | OrderedDict(a=1)
    d |= {"c": 3}
    return x * len(d), d, type(e), e


@add(lambda: (randn(3), OrderedDict(a=1, b=2)))
def input_ordered_dict_reordered(x, d):
    d.move_to_end("a")
    d["c"] = 3
    d.popitem(last=False)
    return x + len(d)


# -- Counter -------------------------------------------------------------------------------


@add(t3)
def counter_from_a_string(x):
    c = Counter("abracadabra")
    return x * c["a"], c.most_common(2), c.most_common(), c["z"], len(c), "z" in c


@add(t3)
def counter_from_a_generator_reads_it_lazily(x):
    log = []

    def gen():
        for k in "abca":
            log.append(k)
            yield k

    c = Counter(gen())
    return x * c["a"], log, c


@add(t3)
def counter_from_mapping_and_keywords(x):
    c = Counter({"a": 2, "b": 0})
    c["c"] += 1
    del c["b"]
    k = Counter(a=1, b=2)
    return x * c["a"], c, k, c.copy(), type(c.copy())


@add(t3)
def counter_arithmetic(x):
    c = Counter(a=3, b=1) + Counter(a=1, c=2)
    d = Counter(a=3, b=1) - Counter(a=1, b=2)
    u = Counter(a=1) | Counter(a=3, b=1)
    i = Counter(a=2, b=1) & Counter(a=1)
    return x * c["a"], c, d, u, i, +Counter(a=-1, b=2), -Counter(a=-1)


@add(t3)
def counter_inplace_operators(x):
    c = Counter(a=1)
    d = c
    c += Counter(a=2, b=-1)
    c -= Counter(a=1)
    c |= Counter(q=4)
    c &= Counter(q=2, a=9)
    return x * c["a"], c, d is c


@add(t3)
def counter_update_subtract_elements(x):
    c = Counter([1, 2, 2])
    c.update([2, 3])
    c.update({1: 5})
    c.update(z=2)
    c.subtract({3: 2})
    c.subtract([1])
    return x + c[1], c, sorted(c.elements(), key=str), c.total()


@add(t3)
def counter_comparisons(x):
    a, b = Counter("aab"), Counter({"b": 1, "a": 2})
    c = a.copy()
    c.update(z=2)
    return x + 1, a == b, a != c, a <= c, c >= a, a < a, a == Counter()


@add(t3)
def counter_holding_tensors(x):
    c = Counter()
    c["t"] = x
    c["t"] += 1
    for k in [1, 2, 1]:
        c[k] += 1
    return c["t"] * 2, c["missing"], c[1]


@add(lambda: (randn(3), Counter("aab")))
def input_counter_read(x, c):
    return x * c["a"] + c["zz"], c.most_common(1), sorted(c.elements())


@pytest.mark.parametrize("prog", list(corpus), ids=lambda p: p.name)
def test_collections_program(prog, differential, counting_backend) -> None:
    check_program(prog, differential, counting_backend)


def test_input_counter_changed_stays_correct(differential) -> None:
    """The contents of a dict subclass from the frame are read-only in the trace: a
    change is a break, and the caller's Counter ends as eager leaves it."""

    def bump(x, c):
        c["a"] += 1
        c.update("bb")
        return x * c["a"]

    compiled = differential.compile(bump)
    differential.check(bump, compiled, (torch.ones(2), Counter("aab")))


def test_returned_collections_keep_type_and_factory(counting_backend) -> None:
    def make(x):
        d = defaultdict(list)
        d[1].append(x + 1)
        return d, OrderedDict(b=1, a=2), Counter("hello")

    d, o, c = bytegraph.compile(make, backend=counting_backend, fullgraph=True)(torch.ones(2))
    assert type(d) is defaultdict and d.default_factory is list and d[2] == []
    assert type(o) is OrderedDict and list(o) == ["b", "a"]
    assert type(c) is Counter and c == Counter("hello") and c["zz"] == 0
    assert counting_backend.calls == 1
