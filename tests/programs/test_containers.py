"""Containers corpus: lists, tuples, dicts, OrderedDict, defaultdict, named tuples, sets.

Every program is a function taking tensors (and containers) that builds,
mutates, slices, unpacks and returns Python containers around tensor work.
Each must compile to one graph, match eager exactly (outputs and mutated
inputs, see ``_exact.py``), and hit the cache on a second call.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import typing
from collections import OrderedDict, defaultdict

import pytest
import torch
from _exact import assert_exact, check_exact
from _harness import Corpus, randn

import bytegraph

CORPUS = Corpus()
program = CORPUS.add

Point = collections.namedtuple("Point", ["x", "y"])
Triple = collections.namedtuple("Triple", "a b c", defaults=(10,))


class Pair(typing.NamedTuple):
    left: torch.Tensor
    right: torch.Tensor
    scale: float = 2.0

    def combined(self):
        return self.left * self.scale + self.right

    @property
    def total(self):
        return self.left.sum() + self.right.sum()


@dataclasses.dataclass
class Config:
    scale: float
    names: list
    bias: torch.Tensor
    extra: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Frozen:
    weight: torch.Tensor
    shape: tuple


class Stats(Point):
    """A named tuple subclass adding a method."""

    def norm(self):
        return (self.x**2 + self.y**2).sqrt()


# --- lists ---------------------------------------------------------------------------


@program(lambda: (randn(3),))
def list_append_extend_insert(x):
    xs = [x]
    xs.append(x * 2)
    xs.extend([x + 1, x - 1])
    xs.insert(1, x * 3)
    xs.insert(-1, x * 4)
    xs.insert(100, x * 5)
    return torch.stack(xs), len(xs)


@program(lambda: (randn(3),))
def list_pop_remove_clear(x):
    xs = [x, x + 1, x + 2, x + 3]
    last = xs.pop()
    first = xs.pop(0)
    ks = [3, 1, 4, 1, 5]
    ks.remove(1)
    gone = [x]
    gone.clear()
    return first * last, xs, ks, gone


@program(lambda: (randn(2),))
def list_index_count_reverse(x):
    ks = [3, 1, 4, 1, 5, 9, 2, 6]
    i = ks.index(4)
    j = ks.index(1, 2)
    n = ks.count(1)
    ks.reverse()
    return x * (i + j + n), ks


@program(lambda: (randn(2),))
def list_slicing(x):
    xs = [x * i for i in range(6)]
    return xs[1:4], xs[::2], xs[-2:], xs[::-1][0], xs[4:1:-1], xs[10:]


@program(lambda: (randn(2),))
def list_slice_assign_and_delete(x):
    xs = [x, x + 1, x + 2, x + 3, x + 4]
    xs[1:3] = [x * 10]
    del xs[0]
    del xs[::2]
    ks = list(range(8))
    ks[::3] = [-1, -2, -3]
    ks[2:5] = []
    return xs, ks


@program(lambda: (randn(2),))
def list_concat_and_repeat(x):
    a = [x, 1]
    b = a + [x * 2]
    c = [0] * 3 + 2 * [x]
    return b, c, [None] * 0


@program(lambda: (randn(2),))
def list_iadd_imul_keep_identity(x):
    a = [1]
    alias = a
    a += [2]
    a += (3,)
    a *= 2
    return x * len(alias), alias is a, alias


@program(lambda: (randn(3), [randn(3), randn(3)]))
def list_input_mutated(x, xs):
    xs.append(x * 2)
    xs[0] = xs[0] + 1
    xs.insert(0, x)
    return sum(xs)


@program(lambda: (randn(3), [randn(3)]))
def list_input_returned_after_append(x, xs):
    xs.append(x.relu())
    return xs


@program(lambda: (randn(2), [1, 2, 3]))
def list_input_of_ints_popped(x, ns):
    n = ns.pop()
    ns.extend([7, 8])
    return x * n, ns[-1]


@program(lambda: (randn(2),))
def list_copy_is_independent(x):
    xs = [x, x * 2]
    ys = xs.copy()
    ys.append(x * 3)
    zs = list(xs)
    zs.pop()
    return xs, ys, zs


@program(lambda: (randn(2),))
def list_of_lists_nested_mutation(x):
    grid = [[0] * 3 for _ in range(2)]
    grid[1][2] = 5
    grid[0].append(x)
    return grid, x * grid[1][2]


@program(lambda: (randn(2),))
def list_sort_variants(x):
    ks = [5, 2, 8, 1]
    ks.sort()
    pairs = [(3, "c"), (1, "a"), (2, "b"), (1, "z")]
    pairs.sort(key=lambda p: p[0])
    words = ["bb", "a", "ccc"]
    words.sort(key=len, reverse=True)
    return x * ks[0], ks, pairs, words


@program(lambda: (randn(2),))
def list_membership(x):
    names = ["relu", "gelu"]
    ks = [1, 2, 3]
    return x * (3 in ks), "gelu" in names, "tanh" not in names, [1] in [[1], 2]


@program(lambda: (randn(2),))
def sequence_comparisons(x):
    checks = (
        [1, 2] == [1, 2], [1, 2] < [1, 3], (1, 2) != [1, 2], (1, 2, 3) > (1, 2),
        [x, 1] == [x, 1], (x,) == (x,), [] < [0], (2,) <= (2,),
    )
    return x + sum(checks), checks


@program(lambda: (randn(2),))
def list_iterator_sees_appends(x):
    queue = [0]
    order = []
    for n in iter(queue):
        order.append(n)
        if n < 3:
            queue.append(n + 1)
    return x * len(order), order


@program(lambda: (randn(4, 3),))
def list_from_tensor_and_comprehension_filter(x):
    rows = list(x)
    kept = [r * 2 for i, r in enumerate(rows) if i % 2 == 0]
    return torch.stack(kept), len(rows)


@program(lambda: (randn(2),))
def reversed_list_removal_idiom(x):
    xs = [2, 1, 2, 3, 2]
    removed_order = []
    for v in reversed(xs):
        removed_order.append(v)
        if v == 2:
            xs.remove(v)
    seen = []
    for v in reversed(xs):
        seen.append(v)
        xs.append(0) if len(xs) < 4 else None
    return x * len(xs), xs, seen, removed_order


@program(lambda: (randn(2),))
def containers_compared_with_scalars(x):
    t = (x, 1)
    checks = (t == None, [x] != 3, {"k": x} == "k", t != (x, 2))  # noqa: E711
    return x * sum(checks), checks


# --- tuples ---------------------------------------------------------------------------


@program(lambda: (randn(3),))
def tuple_build_index_slice(x):
    t = (x, x + 1, x + 2, 7)
    return t[0] + t[-2], t[1:], t[::-1][0], t[3], len(t)


@program(lambda: (randn(3),))
def tuple_concat_repeat_count_index(x):
    t = (1, 2) + (3, 1)
    u = (x,) * 2
    return t, t.count(1), t.index(3), u, t * 0, x * t.index(2)


@program(lambda: (randn(4, 2),))
def unpack_sequence_nested(x):
    a, b = x.chunk(2)
    (p, q), r = (a, b), a * b
    first, second = [p.sum(), q.sum()]
    return p + q + r, first, second


@program(lambda: (randn(5, 2),))
def unpack_ex_starred(x):
    rows = list(x)
    a, *rest = rows
    *init, last = rows
    head, *middle, tail = rows
    one, *none = [x]
    return a, len(rest), torch.stack(init), last, head + tail, len(middle), none, one


@program(lambda: (randn(2),))
def unpack_ex_on_tuple_and_range(x):
    a, b, *c = range(5)
    *d, e = (1, 2, 3)
    f, *g, h, i = "wxyz"
    return x * (a + b + e), c, d, g, f + h + i


@program(lambda: (randn(2), randn(2)))
def swap_and_rotate(x, y):
    x, y = y, x
    a, b, c = x, y, x * y
    a, b, c = b, c, a
    return a, b, c


@program(lambda: (randn(3), (randn(3), (randn(3), 2))))
def nested_tuple_input(x, packed):
    t, (u, k) = packed
    return (x + t * u * k, (packed[0], k)), packed[1][1]


@program(lambda: (randn(2),))
def tuple_return_of_mixed_values(x):
    return x, (x * 2, None, "s", 1.5), [(), ((),)], {"k": (x,)}


# --- dicts -----------------------------------------------------------------------------


@program(lambda: (randn(3),))
def dict_build_get_setdefault(x):
    d = {"a": x, "b": x * 2}
    c = d.get("c", x * 3)
    e = d.get("e")
    s = d.setdefault("s", x + 1)
    s2 = d.setdefault("a", x - 100)
    return d, c, e, s, s2


@program(lambda: (randn(3),))
def dict_update_keys_values_items(x):
    d = {"w": x}
    d.update({"b": x + 1}, c=x + 2)
    d.update([("d", x + 3)])
    ks = list(d.keys())
    total = sum(d.values())
    pairs = [k + str(i) for i, (k, v) in enumerate(d.items())]
    return ks, total, pairs, len(d)


@program(lambda: (randn(3),))
def dict_pop_popitem_del(x):
    d = {"a": x, "b": x * 2, "c": x * 3, "d": x * 4}
    a = d.pop("a")
    z = d.pop("zz", x * 0)
    k, v = d.popitem()
    del d["b"]
    d["a"] = a
    return d, z, k, v


@program(lambda: (randn(3),))
def dict_comprehension_and_iteration_order(x):
    d = {i: x * i for i in range(4)}
    del d[1]
    d[1] = x
    d[0] = x * 100
    out = [k for k in d]
    return {f"k{k}": v for k, v in d.items() if k != 2}, out


@program(lambda: (randn(3), {"a": randn(3), "b": randn(3)}))
def dict_input_mutated(x, d):
    d["new"] = x * d["a"]
    d.pop("b")
    d["a"] += 1
    return d["new"].sum()


@program(lambda: (randn(3), {"w": randn(3)}))
def dict_input_returned(x, d):
    d.setdefault("bias", x * 2)
    return d


@program(lambda: (randn(2),))
def dict_views_are_live(x):
    d = {"a": 1}
    keys, values, items = d.keys(), d.values(), d.items()
    d["b"] = 2
    n = len(keys)
    del d["a"]
    return x * n, list(keys), list(values), list(items), "b" in keys, 2 in values


@program(lambda: (randn(2),))
def dict_merging(x):
    a = {"p": x, "q": 1}
    b = {"q": 2, "r": x * 2}
    merged = {**a, **b, "s": 3}
    union = a | b
    alias = a
    a |= {"t": 4}
    return merged, union, alias, a is alias


@program(lambda: (randn(2),))
def dict_constructors(x):
    keys = ["a", "b", "c"]
    d1 = dict(zip(keys, [x, x + 1, x + 2]))
    d2 = dict([("k", 1), ("j", 2)])
    d3 = dict(d1, extra=x * 5)
    d4 = dict.fromkeys(keys, 0)
    d5 = dict.fromkeys("xy")
    return d1, d2, d3, d4, d5, dict(), dict(a=1)


@program(lambda: (randn(2),))
def dict_equality_and_membership(x):
    a = {"k": 1, "j": 2}
    b = {"j": 2, "k": 1}
    checks = (a == b, a != {"k": 1}, "k" in a, "z" not in a, {} == {}, {"t": x} == {"t": x})
    return x + sum(checks), checks


@program(lambda: (randn(2),))
def dict_with_int_and_tuple_keys(x):
    d = {(0, 1): x, 2: x * 2, 2.5: "f", None: 0}
    d[(1, 0)] = x * 3
    return d[(0, 1)] + d[(1, 0)], d[2.5], d[None], list(d)


@program(lambda: (randn(2),))
def nested_dicts_and_lists(x):
    cfg = {"layers": [{"scale": 2}, {"scale": 3}], "name": "m"}
    cfg["layers"].append({"scale": 4})
    cfg["layers"][0]["scale"] = 5
    out = x
    for layer in cfg["layers"]:
        out = out * layer["scale"]
    return out, cfg


@program(lambda: (randn(2),))
def dict_updates_values_while_iterating(x):
    d = {"a": x, "b": x * 2, "c": x * 3}
    for k in d:
        d[k] = d[k] + 1
    seen = []
    for k, v in d.items():
        seen.append(v)
        if k == "a":
            d["c"] = v * 10  # a later step of this loop sees the new value
    values = list(d.values())
    return seen, values, list(reversed(d)), list(reversed(d.items()))


@program(lambda: (randn(2), {"w": randn(2), "b": randn(2)}))
def dict_input_iterated_and_scaled(x, params):
    for name in params:
        params[name] = params[name] * 0.5
    return sum(v.sum() for v in params.values()) + x


# --- OrderedDict and defaultdict ---------------------------------------------------------


@program(lambda: (randn(2),))
def ordered_dict_methods(x):
    od = OrderedDict()
    od["a"] = x
    od["b"] = x * 2
    od["c"] = x * 3
    od.move_to_end("a")
    od.move_to_end("c", last=False)
    first = od.popitem(last=False)
    last = od.popitem()
    od["z"] = 0
    return od, first, last, list(od)


@program(lambda: (randn(2), OrderedDict([("k", randn(2)), ("j", randn(2))])))
def ordered_dict_input_mutated(x, od):
    od["new"] = od["k"] + x
    od.move_to_end("k")
    return od["j"] * 2, list(od)


@program(lambda: (randn(2),))
def ordered_dict_equality_is_ordered(x):
    a = OrderedDict(p=1, q=2)
    b = OrderedDict(q=2, p=1)
    return x * (a == b), a == dict(b), OrderedDict(a) == a, a


@program(lambda: (randn(2),))
def defaultdict_list_grouping(x):
    groups = defaultdict(list)
    for i, word in enumerate(["ant", "bee", "ape", "cat", "bat"]):
        groups[word[0]].append(x * i)
    return groups, {k: len(v) for k, v in groups.items()}


@program(lambda: (randn(2),))
def defaultdict_int_counting(x):
    counts = defaultdict(int)
    for ch in "abracadabra":
        counts[ch] += 1
    missing = counts.get("z")
    return x * counts["a"], counts, missing, "z" in counts


@program(lambda: (randn(2),))
def defaultdict_constant_factory(x):
    d = defaultdict(lambda: 7)
    total = d["a"] + d["b"]
    d["c"] = 1
    plain = defaultdict(None, {"k": 1})
    return x * total, dict(d), len(d), plain.default_factory is None, plain["k"]


@program(lambda: (randn(2), defaultdict(list, {"a": [1]})))
def defaultdict_input_mutated(x, d):
    d["a"].append(2)
    d["b"].append(3)
    return x * len(d["a"]), d


@program(lambda: (randn(2),))
def defaultdict_returned(x):
    d = defaultdict(list)
    d["t"].append(x * 2)
    return d


# --- named tuples ------------------------------------------------------------------------


@program(lambda: (randn(3), randn(3)))
def namedtuple_construct_read_return(x, y):
    p = Point(x, y * 2)
    q = Point(y=x, x=y)
    return p, p.x + p.y, q, q[0] is y, isinstance(p, tuple), isinstance(p, Point)


@program(lambda: (Point(randn(3), randn(3)), 2))
def namedtuple_passed_in(p, k):
    a, b = p
    return Point(p.x * k, b - a), p.y, len(p), p[-1] is b


@program(lambda: (randn(2),))
def namedtuple_defaults_and_kwargs(x):
    t1 = Triple(x, 1)
    t2 = Triple(a=x, b=2, c=3)
    return t1, t2, t1.c * x, Triple._fields


@program(lambda: (randn(2), randn(2)))
def typing_namedtuple_methods(x, y):
    pair = Pair(x, y)
    pair3 = Pair(x, y, 3.0)
    return pair.combined(), pair3.combined(), pair.total, pair, pair.scale


@program(lambda: (randn(2), randn(2)))
def namedtuple_replace_asdict_make(x, y):
    p = Point(x, y)
    q = p._replace(y=x * 3)
    d = p._asdict()
    r = Point._make([y, x])
    return q, d, r, p._fields, p == Point(x, y)


@program(lambda: (Stats(randn(2), randn(2)),))
def namedtuple_subclass_method(s):
    return s.norm(), Stats(s.y, s.x).norm(), type(s) is Stats


@program(lambda: (randn(2), randn(2)))
def namedtuple_slicing_and_concat_are_tuples(x, y):
    p = Point(x, y)
    return p[:1], p + (3,), p * 2, tuple(p), list(p), x * 2


@program(lambda: (randn(3, 4),))
def torch_return_types_fields(x):
    m = x.max(dim=1)
    values, indices = x.min(dim=0)
    return m.values * 2, m.indices, values, indices, m[0] is m.values


# --- dataclass instances passed in (fields read, containers inside mutated) ---------------


@program(lambda: (randn(2), Config(2.0, ["a", "b"], randn(2), {"k": 1})))
def dataclass_fields_feed_containers(x, cfg):
    out = {name: x * cfg.scale + cfg.bias for name in cfg.names}
    cfg.names.append("c")
    cfg.extra["seen"] = len(out)
    return out, tuple(cfg.names), sorted(cfg.extra)


@program(lambda: (randn(3), Frozen(randn(3), (3, 1))))
def frozen_dataclass_fields(x, f):
    rows, cols = f.shape
    return (x * f.weight).view(rows, cols), [f.weight, x], f.shape[0] + 1


# --- sets --------------------------------------------------------------------------------


@program(lambda: (randn(2),))
def set_build_add_discard_remove(x):
    s = {3, 1, 2}
    s.add(5)
    s.add(1)
    s.discard(2)
    s.discard(100)
    s.remove(3)
    return x * len(s), s, sorted(s), 5 in s, 2 not in s


@program(lambda: (randn(2),))
def set_comprehension_and_update_opcodes(x):
    evens = {i * 2 for i in range(5) if i != 2}
    xs = [1, 2, 2, 3]
    merged = {*xs, 9, *evens}
    return x * len(merged), evens, merged


@program(lambda: (randn(2),))
def set_operators(x):
    a = {1, 2, 3, 4}
    b = {3, 4, 5}
    out = (a | b, a & b, a - b, a ^ b, b - a)
    checks = (a == {4, 3, 2, 1}, {1, 2} < a, a <= a, a > b, {3} <= b, a != b)
    return x + sum(checks), out, checks


@program(lambda: (randn(2),))
def set_methods(x):
    a = {"relu", "gelu", "tanh"}
    b = ["gelu", "silu"]
    out = (a.union(b), a.intersection(b), a.difference(b, ["tanh"]),
           a.symmetric_difference(b), a.issubset(["relu", "gelu", "tanh", "x"]),
           a.issuperset(["relu"]), a.isdisjoint(["nope"]), a.copy())
    return x * len(out[0]), out


@program(lambda: (randn(2),))
def set_inplace_updates(x):
    s = {1, 2, 3}
    alias = s
    s |= {4}
    s &= {1, 2, 4, 8}
    s -= {2}
    s ^= {9, 1}
    s.update([10], (11,))
    s.intersection_update(range(20))
    s.difference_update([11])
    s.symmetric_difference_update({10, 12})
    return x * len(s), s is alias, sorted(alias)


@program(lambda: (randn(2),))
def set_iteration_order_matches_eager(x):
    s = {17, 9, 1, 33, 25}
    s.discard(9)
    s.add(41)
    s |= {57, 8}
    order = list(s)
    first = next(iter(s))
    t = set()
    for k in (64, 0, 32, 16):
        t.add(k)
    colliding = [list({9, 1}), list({1, 9}), list({16, 8, 0}), str({24, 0})]
    return x * first, order, [k for k in t], tuple(sorted(t)), s, colliding


@program(lambda: (randn(2),))
def set_pop_follows_the_table(x):
    s = {40, 8, 24, 16}
    a = s.pop()
    b = s.pop()
    s.add(a)
    return x * a + b, s, s.pop()


@program(lambda: (randn(2), {"mean", "max"}))
def set_input_membership(x, modes):
    out = x
    if "mean" in modes:
        out = out * 2
    if "sum" in modes:
        out = out + 100
    return out, len(modes), "max" in modes, sorted(modes)


@program(lambda: (randn(2), {1, 2}))
def set_input_mutated(x, s):
    s.add(3)
    s.discard(1)
    s |= {7}
    return x * len(s), 3 in s


@program(lambda: (randn(2), {5, 6}))
def set_input_iterated_unchanged(x, s):
    return [x * k for k in s], list(s)


@program(lambda: (randn(2),))
def set_returned_and_frozensets(x):
    fs = frozenset([3, 1])
    s = set(fs) | {2}
    u = fs | {7}
    return s, fs, u, fs & {1}, frozenset(s), x * len(u), frozenset()


@program(lambda: (randn(2),))
def set_from_strings_dicts_and_ranges(x):
    a = set("hello")
    b = set({"k": 1, "j": 2})
    c = set(range(3, 7))
    d = set()
    return x * len(a), a, b, c, d, sorted(a)


@program(lambda: (randn(3),))
def constant_frozenset_membership(x):
    kind = "relu"
    if kind in {"relu", "gelu"}:
        x = x.relu()
    if 4 not in {1, 2, 3}:
        x = x + 1
    return x


@program(lambda: (randn(2),))
def set_iterated_in_loops(x):
    s = {"b", "a", "c"}
    out = []
    for k in s:
        out.append(k)
    total = x
    for i, k in enumerate(sorted(s)):
        total = total + i * len(k)
    return total, out, [k for k in s if k != "a"], list(zip(s, range(3)))


@program(lambda: (randn(2),))
def set_of_shape_values(x):
    dims = {d for d in x.unsqueeze(0).shape}
    return x * len(dims), sorted(dims), max(dims)


assert len(CORPUS) >= 60


@pytest.mark.parametrize("prog", list(CORPUS), ids=lambda p: p.name)
def test_program_matches_eager(prog, counting_backend) -> None:
    check_exact(prog.fn, prog.make_inputs, counting_backend)


# --- guards on container inputs: a changed container is a new trace, never a stale one ------


def _scaled_by_members(x, modes):
    out = x
    for m in sorted(modes, key=str):
        out = out * (m if isinstance(m, (int, float)) else len(m))
    return out, list(modes)


@pytest.mark.parametrize(
    "calls",
    [
        [{"ab", "c"}, {"ab", "c"}, {"ab"}, {"c", "ab", "d"}],
        [{1, 9}, {9, 1}, {1.0, 9}, {True, 9}],  # equal sets, other order or element types
        [frozenset({2, 3}), frozenset({2, 3}), frozenset({3, 4})],
    ],
    ids=["strings", "order_and_types", "frozensets"],
)
def test_set_inputs_are_guarded(calls, counting_backend) -> None:
    compiled = bytegraph.compile(_scaled_by_members, backend=counting_backend)
    for modes in calls:
        x = randn(2)
        expected = _scaled_by_members(x, set(modes) if type(modes) is set else modes)
        actual = compiled(x, modes)
        assert_exact(actual, expected)
        assert [type(m) for m in actual[1]] == [type(m) for m in expected[1]]


def _reads_containers(x, d, od, dd, nt):
    return x * d["k"] + len(od) + dd["z"] + nt.x, list(od), dd.default_factory


@pytest.mark.parametrize("change", ["dict_value", "od_order", "dd_factory", "nt_type"])
def test_mapping_and_namedtuple_inputs_are_guarded(change, counting_backend) -> None:
    compiled = bytegraph.compile(_reads_containers, backend=counting_backend)

    def inputs(variant: bool):
        d = {"k": 3 if variant and change == "dict_value" else 2}
        pairs = [("a", 2), ("b", 1)]
        od = OrderedDict(pairs[::-1] if variant and change == "od_order" else pairs)
        dd = defaultdict(float if variant and change == "dd_factory" else int)
        nt = Stats(5, 2) if variant and change == "nt_type" else Point(1, 2)
        return randn(2), d, od, dd, nt

    for variant in (False, True, False):
        args = inputs(variant)
        expected = _reads_containers(*copy.deepcopy(args))
        actual = compiled(*copy.deepcopy(args))
        assert_exact(actual, expected)
