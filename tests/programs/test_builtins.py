"""Builtins corpus: builtin functions, the operator and math modules, string
formatting, and Python scalars mixed into tensor code.

Every program must compile to one graph, match eager exactly (outputs and
mutated inputs, see ``_exact.py``), and hit the cache on a second call.
"""

# The corpus spells things the way the linter would rewrite them on purpose:
# getattr with a constant name, type(3), %-formatting, str.format, ``[] is not []``.
# ruff: noqa: B009, UP003, UP031, UP032, F632

from __future__ import annotations

import collections
import collections.abc as cabc
import functools
import math
import operator

import pytest
import torch
from _exact import assert_exact, check_exact
from _harness import Corpus, randn

import bytegraph

CORPUS = Corpus()
program = CORPUS.add

Point = collections.namedtuple("Point", "x y")


# --- introspection ----------------------------------------------------------------------


@program(lambda: (randn(4, 3),))
def len_of_everything(x):
    sizes = (len(x), len([1, 2]), len((1,)), len({"a": 1}), len({1, 2, 3}), len("abcd"),
             len(range(2, 9, 3)), len(x.shape), len({}.keys()), len(b"xy"))
    return x * sum(sizes), sizes


@program(lambda: (randn(2), 3, 1.5))
def isinstance_checks(x, n, f):
    checks = (
        isinstance(x, torch.Tensor), isinstance(n, int), isinstance(f, (int, float)),
        isinstance([x], list), isinstance((x,), tuple), isinstance({}, dict),
        isinstance(Point(1, 2), tuple), isinstance(True, int), isinstance(n, str),
        isinstance(x.shape, tuple), isinstance({1}, set), isinstance(None, type(None)),
        isinstance(x, (list, torch.Tensor)),
    )
    return x * sum(checks), checks


@program(lambda: (randn(2),))
def issubclass_and_type(x):
    checks = (issubclass(bool, int), issubclass(Point, tuple), issubclass(int, (str, float)),
              type(x) is torch.Tensor, type(3) is int, type([]) is list, type(x.shape),
              type(Point(1, 2)) is Point, type(x.dtype) is torch.dtype)
    return x * 2, checks


@program(lambda: (randn(2),))
def getattr_hasattr_callable(x):
    p = Point(x, 2)
    checks = (
        getattr(p, "y"), getattr(x, "ndim"), getattr(math, "pi"), getattr(p, "z", None),
        hasattr(p, "x"), hasattr(p, "nope"), hasattr(x, "shape"), hasattr("s", "upper"),
        callable(len), callable(3), callable(lambda: 1), callable(Point), callable(x.add),
        callable(torch.relu), callable("s"),
    )
    return getattr(p, "x") * 2 + getattr(x, "T"), checks


# --- iteration ----------------------------------------------------------------------------


@program(lambda: (randn(2), 4))
def range_variants(x, n):
    total = x
    for i in range(n):
        total = total + i
    r = range(1, 10, 3)
    return total, list(r), r[1], r[-1], list(reversed(range(n))), 7 in r, list(range(5)[1:3])


@program(lambda: (randn(3, 2),))
def enumerate_with_start(x):
    out = []
    for i, row in enumerate(x, 1):
        out.append(row * i)
    pairs = list(enumerate("ab", start=5))
    return torch.stack(out), pairs, list(enumerate([]))


@program(lambda: (randn(3), randn(3), randn(3)))
def zip_variants(a, b, c):
    sums = [p + q + r for p, q, r in zip([a, b], [b, c], [c, a])]
    short = list(zip([1, 2, 3], "ab"))
    matrix = [[1, 2, 3], [4, 5, 6]]
    transposed = list(zip(*matrix))
    strict = list(zip((a,), (b,), strict=True))
    return sums, short, transposed, strict, list(zip())


@program(lambda: (randn(3), randn(3)))
def map_variants(a, b):
    doubled = list(map(lambda t: t * 2, [a, b]))
    added = list(map(operator.add, [a, b], [b, a]))
    lengths = list(map(len, ["a", "bb", "ccc"]))
    strs = list(map(str, range(3)))
    return doubled, added, lengths, strs


@program(lambda: (randn(3),))
def map_is_lazy(x):
    calls = []

    def record(k):
        calls.append(k)
        return k * 2

    m = map(record, [1, 2, 3])
    before = len(calls)
    first = next(m)
    middle = len(calls)
    rest = list(m)
    return x * first, before, middle, rest, calls


@program(lambda: (randn(3),))
def filter_variants(x):
    evens = list(filter(lambda k: k % 2 == 0, range(7)))
    truthy = list(filter(None, [0, 1, "", "a", None, 2]))
    return x * len(evens), evens, truthy


@program(lambda: (randn(3),))
def iter_and_next(x):
    it = iter([x, x * 2, x * 3])
    a = next(it)
    b = next(it)
    rest = list(it)
    done = next(it, None)
    gen = (k * k for k in range(3))
    return a + b, rest, done, next(gen), list(gen)


@program(lambda: (randn(3),))
def reversed_variants(x):
    rows = [x, x + 1, x + 2]
    d = {"a": 1, "b": 2}
    return list(reversed(rows)), list(reversed((1, 2, 3))), list(reversed(d)), list(reversed("ab"))


# --- reductions --------------------------------------------------------------------------


@program(lambda: (randn(2), 3))
def min_max_variants(x, n):
    words = ["pear", "fig", "banana", "kiwi"]
    out = (
        max(n, 5), min(n, 2, 7), max([3, 9, 1]), min((4.5, 2.5)), max(words, key=len),
        min(words, key=len), max([], default=-1), max("abc"), min(x.shape), max(2, 2.0),
        min([(2, "b"), (1, "z"), (1, "a")]),
    )
    return x * out[0], out


@program(lambda: (randn(2), randn(2), randn(2)))
def min_max_pick_items_by_key(a, b, c):
    named = {"a": 3, "b": 9, "c": 1}
    best = max(named, key=named.get)
    tensors = [a, b, c]
    widest = max(tensors, key=lambda t: t.shape[0])
    return best, widest is a, widest * 2


@program(lambda: (randn(3), -2))
def abs_and_round(x, n):
    vals = (abs(n), abs(-2.5), abs(True), round(2.567, 2), round(2.5), round(3.5), round(7, -1),
            round(-0.5))
    return abs(x - 1), vals, x * abs(n)


@program(lambda: (randn(3), randn(3), randn(3)))
def sum_variants(a, b, c):
    ints = sum([1, 2, 3])
    floats = sum([0.1, 0.2, 0.3])
    tensors = sum([a, b, c])
    started = sum([a, b], c * 10)
    gen = sum(k * k for k in range(4))
    return tensors, started, ints, floats, gen, sum([], 5)


@program(lambda: (randn(3), [randn(2), randn(2)]))
def any_all_variants(x, xs):
    checks = (
        any([0, 0, 1]), all([1, 2, 0]), any([]), all([]),
        all(isinstance(t, torch.Tensor) for t in xs), any(t.dim() > 1 for t in xs),
        any(k > 2 for k in range(5)), all(c.isalpha() for c in "abc"),
    )
    return x * sum(checks), checks


@program(lambda: (randn(2),))
def sorted_variants(x):
    d = {"b": 2, "a": 3, "c": 1}
    out = (
        sorted([3, 1, 2]), sorted("bca"), sorted(d), sorted(d.items()),
        sorted(d, key=d.get), sorted(d.items(), key=lambda kv: kv[1], reverse=True),
        sorted([(1, "b"), (1, "a"), (0, "z")]), sorted({5, 3, 9}, reverse=True),
        sorted(["bb", "a", "ccc", "dd"], key=len),
    )
    return x * out[0][0], out


@program(lambda: (randn(2),))
def functools_reduce(x):
    shape = (2, 3, 4)
    numel = functools.reduce(operator.mul, shape)
    started = functools.reduce(operator.add, [x, x, x], x * 10)
    return x * numel, started, functools.reduce(lambda a, b: a + b, "xyz")


# --- conversions and formatting ------------------------------------------------------------


@program(lambda: (randn(2), 7, 2.5))
def scalar_conversions(x, n, f):
    out = (int(f), int("12"), int(-3.9), float(n), float("1.5"), bool(0), bool([1]),
           bool(""), int(True), complex(1, 2), int("ff", 16), float("inf") > 1e308)
    return x * int(f) + float(n), out


@program(lambda: (randn(2), 3))
def str_and_repr(x, n):
    parts = (str(n), repr("q"), str([1, "a"]), str((1,)), str(None), repr(2.5), str(x.shape),
             str(x.dtype), ascii("é"), str({"k": 1}), format(3.14159, ".2f"), format(n, "03d"))
    return x * len(parts), parts


@program(lambda: (randn(2), 3, 0.125, "relu"))
def f_strings(x, n, f, name):
    a = f"{name}_{n}"
    b = f"{f:.2f}|{n:>4}|{n:<3}|{name!r}|{name:^8}"
    c = f"{n * 2}-{[n, f]}-{x.shape[0]}-{x.dtype}"
    d = f"{f!s:>10}{n:x}{n:#b}"
    return x * n, a, b, c, d


@program(lambda: (randn(2), 5))
def str_format_and_percent(x, n):
    a = "{}-{}".format("p", n)
    b = "{name}:{val:.1f}".format(name="k", val=n / 3)
    c = "%d items, %s, %.3f" % (n, "ok", 1 / 3)
    d = "%(k)s=%(v)d" % {"k": "size", "v": n}
    e = "%5.1f%%" % 12.345
    return x * n, a, b, c, d, e


@program(lambda: (randn(2),))
def str_methods(x):
    s = "  Hello, World  "
    out = (s.strip(), s.lower(), s.upper(), s.split(","), "a.b.c".split(".", 1),
           ",".join(["x", "y", "z"]), "-".join(str(i) for i in range(3)),
           "model.layer1".startswith("model"), "w.bias".endswith(".bias"),
           "aXbXc".replace("X", "_"), "abc".find("c"), "a b".title(), "7".zfill(3),
           "key=val".partition("="), "abc"[::-1], "ab" * 2, "a" + "b", "b" in "abc",
           "x{}".format(1), s.count("l"), "abc".index("b"), "AbC".isupper())
    return x * len(out), out


@program(lambda: (randn(2),))
def string_keys_built_in_a_loop(x):
    d = {}
    for i in range(3):
        d[f"layer{i}.weight"] = x * i
    names = [k.split(".")[0] for k in d]
    return d, names, "layer2.weight" in d


# --- operator and math modules ---------------------------------------------------------------


@program(lambda: (randn(3), randn(3)))
def operator_functions_on_tensors(a, b):
    return (operator.add(a, b), operator.mul(a, 2), operator.sub(b, a), operator.neg(a),
            operator.truediv(a, 4), operator.pow(b, 2), operator.abs(a), operator.matmul(a, b),
            operator.getitem(a, 0), operator.lt(a, b))


@program(lambda: (randn(3),))
def operator_functions_on_python_values(x):
    out = (operator.add(2, 3), operator.mul("ab", 2), operator.floordiv(7, 2),
           operator.mod(7, 3), operator.truth([]), operator.not_(0), operator.contains([1, 2], 2),
           operator.concat([1], [2]), operator.getitem({"k": 5}, "k"), operator.index(4),
           operator.is_(None, None), operator.is_not(1, None), operator.countOf([1, 1, 2], 1))
    return x * out[0], out


@program(lambda: (randn(2), randn(2)))
def operator_getters(x, y):
    first = operator.itemgetter(0)
    pick = operator.itemgetter(1, 0)
    p = Point(x, y)
    geta = operator.attrgetter("x")
    shape_and_dtype = operator.attrgetter("shape", "dtype")
    up = operator.methodcaller("upper")
    split = operator.methodcaller("split", ",", maxsplit=1)
    view = operator.methodcaller("view", -1, 1)
    return (first([x, y]), pick((x, y)), geta(p) * 2, shape_and_dtype(x), up("abc"),
            split("a,b,c"), view(x), sorted([(2, "b"), (1, "a")], key=first))


@program(lambda: (randn(4, 16),))
def math_on_shapes(x):
    d = x.shape[-1]
    scale = 1.0 / math.sqrt(d)
    out = (math.ceil(2.1), math.floor(-2.1), math.log(8, 2), math.prod(x.shape), math.pi,
           math.isclose(0.1 + 0.2, 0.3), math.gcd(12, 18), math.inf > d, math.log2(d),
           math.exp(0), math.cos(0), math.trunc(-2.7), math.factorial(4), math.isfinite(1.0),
           math.hypot(3, 4), math.fabs(-2), math.copysign(1, -0.0), math.radians(180))
    return x * scale, out


@program(lambda: (randn(2),))
def unbound_methods_of_builtin_types(x):
    xs = [1]
    list.append(xs, 2)
    d = {"k": 1}
    out = (str.upper("a"), str.join("-", ["a", "b"]), dict.get(d, "k"), dict.get(d, "z", 0),
           list.index(xs, 2), tuple.count((1, 1), 1), str.split("a b"), int.__add__(2, 3))
    return x * len(xs), xs, out


# --- Python scalars in tensor code -------------------------------------------------------------


@program(lambda: (randn(3, 4), 3, 0.5))
def python_scalars_in_tensor_math(x, n, s):
    return x * 0.5, x + n, n * x, x / n, x**2, 2**x, x - s, s * x * n, x // 2, 1 - x, -x * n


@program(lambda: (randn(6, 4),))
def view_with_sizes_from_shapes(x):
    b = x.shape[0]
    h = x.size(1) // 2
    y = x.view(b, -1)
    z = x.reshape(b // 2, -1, h)
    w = x.view(*x.shape[:-1], 2, h)
    return y, z, w, x.flatten(1).view(b * 4), z.shape, tuple(w.size())


@program(lambda: (randn(2, 3), 2, True, "mean", None))
def python_arguments_steer_the_trace(x, k, flag, mode, extra):
    y = x * k if flag else x
    if mode == "mean":
        y = y.mean(dim=-1)
    elif mode == "sum":
        y = y.sum(dim=-1)
    if extra is not None:
        y = y + extra
    return y, k > 1 and flag, mode.upper(), extra or "none"


@program(lambda: (randn(2), 9))
def divmod_pow_and_chained_comparisons(x, n):
    q, r = divmod(n, 4)
    out = (q, r, divmod(-7.5, 2), pow(2, 10), pow(2, -1), pow(3, 4, 5), 0 < n < 10,
           1 < n > 20, n == 9 == 9.0, not n, n and 0, n or 0, 3 if n > 5 else 4)
    return x * q + r, pow(x, 2), out


@program(lambda: (randn(5, 3),))
def shape_to_python_containers(x):
    dims = list(x.shape)
    dims.append(1)
    t = tuple(x.size())
    return x.reshape(dims), dims, t, max(x.shape), sum(x.shape), x.shape == (5, 3), x.numel()


@program(lambda: (randn(2),))
def nested_comprehensions_with_conditions(x):
    grid = [[i * j for j in range(3) if j != 1] for i in range(4) if i % 2 == 0]
    flat = [v for row in grid for v in row]
    lookup = {k: [x * k for _ in range(k)] for k in range(1, 3)}
    return x * sum(flat), grid, flat, lookup


@program(lambda: (randn(3), {"w": randn(3), "b": randn(3)}))
def enumerate_and_sorted_over_dict_items(x, params):
    out = x
    for i, (_name, p) in enumerate(sorted(params.items())):
        out = out + p * (i + 1)
    names = [name for name, _ in sorted(params.items())]
    return out, names


@program(lambda: (randn(2), [randn(2), randn(2), randn(2)]))
def builtins_over_tensor_lists(x, xs):
    total = sum(t * i for i, t in enumerate(xs))
    n = len(xs)
    last = xs[-1] if xs else x
    return total + x, n, last, [t.shape for t in xs], all(t.shape == x.shape for t in xs)


@program(lambda: (randn(2),))
def hash_and_identity_on_constants(x):
    a = (1, 2)
    checks = (hash("k") == hash("k"), hash(a) == hash((1, 2)), a is a, None is None,
              x is x, [] is not [])
    return x * sum(checks), checks


@program(lambda: (randn(2),))
def builtin_number_formatting(x):
    out = (bin(10), hex(255), oct(8), chr(97), ord("a"), format(1234567, ","),
           format(0.5, "%"), "{:e}".format(12345.678), round(1e-3, 5), int(1e3))
    return x * len(out), out


@program(lambda: (randn(2),))
def iterating_strings_and_bytes(x):
    letters = [c for c in "abc"]
    codes = [b for b in b"AB"]
    return x * len(letters), letters, codes, list("xy"), tuple(b"z")


@program(lambda: (randn(4),))
def conditional_expressions_on_constants(x):
    cfg = {"act": "gelu", "dropout": 0.0, "layers": 2}
    act = torch.relu if cfg["act"] == "relu" else torch.nn.functional.gelu
    y = act(x)
    if cfg["dropout"]:
        y = y * 0
    for _ in range(cfg["layers"]):
        y = y * 2
    return y, cfg.get("missing", "default")


@program(lambda: (randn(6, 4),))
def sizes_from_python_arithmetic(x):
    half = int(x.shape[0] / 2)
    quarter = math.floor(x.shape[1] * 0.5)
    shape = tuple(map(int, "3,8".split(",")))
    return x.view(half, -1), x.view(-1, quarter), x.reshape(shape), float(x.shape[1]) * x


@program(lambda: (randn(4, 3),))
def loops_over_len_and_range(x):
    rows = []
    for i in range(len(x)):
        if i % 2:
            rows.append(x[i] * i)
    acc = x.new_zeros(len(rows), x.shape[1])
    for j, r in enumerate(rows):
        acc[j] = r
    return acc, len(rows)


@program(lambda: (randn(2), [1, 2], {"k": 1}))
def truthiness_of_containers(x, xs, d):
    out = x
    if xs:
        out = out + 1
    if not d:
        out = out * 100
    if not []:
        out = out * 2
    if {} or ():
        out = out * 0
    return out, bool(xs), not d, bool(set()), bool(range(0))


@program(lambda: (randn(2),))
def strings_built_in_loops(x):
    name = ""
    for part in ["enc", "layer", "0"]:
        name += part + "."
    tag = "-".join(map(str, (1, 2, 3)))
    width = str(7).zfill(3)
    return x * len(name), name.rstrip("."), tag, width, name.split(".")[:-1]


@program(lambda: (randn(2),))
def collections_abc_checks(x):
    checks = (isinstance([], cabc.Sequence), isinstance({}, cabc.Mapping),
              isinstance((1,), cabc.Hashable), isinstance({1}, cabc.Set),
              isinstance(range(2), cabc.Iterable), isinstance("s", cabc.Sized))
    return x * sum(checks), checks


@program(lambda: (randn(2),))
def max_and_sorted_with_lambda_keys(x):
    scores = {"a": 0.5, "b": 0.9, "c": 0.1}
    best = max(range(5), key=lambda i: (i * 3) % 5)
    ranked = sorted(scores, key=lambda k: -scores[k])
    lowest = min(scores.items(), key=operator.itemgetter(1))
    return x * best, ranked, lowest


@program(lambda: (randn(3), randn(3)))
def zip_enumerate_dict_pipelines(a, b):
    names = ["first", "second"]
    table = {n: t * (i + 1) for i, (n, t) in enumerate(zip(names, [a, b]))}
    positions = dict(zip(table.keys(), range(10)))
    keyed = dict(enumerate(names, 1))
    return table, positions, keyed, list(zip(keyed, names))


@program(lambda: (randn(2, 3), 2))
def int_arguments_in_shapes_and_indices(x, k):
    y = x.repeat(k, 1)
    z = x[:, :k]
    w = torch.zeros(k, x.shape[1]) + x[k - 1]
    return y, z, w, y.shape[0] == 2 * k


@program(lambda: (randn(3),))
def bool_and_none_constants_in_math(x):
    flag = True
    nothing = None
    scale = 2 if nothing is None else 3
    return x * flag + scale, x * (not flag), x + int(flag), nothing is None


@program(lambda: (randn(2),))
def min_max_sum_over_generators_and_maps(x):
    lengths = map(len, ["ab", "c", "def"])
    biggest = max(lengths)
    total = sum(map(abs, [-1, 2, -3]))
    smallest = min(k * k - 4 * k for k in range(6))
    return x * (biggest + total + smallest), biggest, total, smallest


assert len(CORPUS) >= 50


@pytest.mark.parametrize("prog", list(CORPUS), ids=lambda p: p.name)
def test_program_matches_eager(prog, counting_backend) -> None:
    check_exact(prog.fn, prog.make_inputs, counting_backend)


# --- what must not be traced: eager semantics kept, errors included ----------------------
#
# Each of these either raises in eager (the compiled function must raise the same
# exception type) or needs a value unknown at trace time (the compiled function
# must still return eager's result). How many graphs they compile to is the
# graph-break machinery's business; a wrong answer is never acceptable.


def dict_resized_while_iterating(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    d = {"a": 1}
    for k in d:
        d[k + "!"] = 2
    return x


def set_resized_while_iterating(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    s = {1}
    for k in s:
        s.add(k + 1)
    return x


def any_with_two_arguments(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    return x * any([1], [2])


def len_of_an_iterator(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    return x * len(iter([1, 2]))


def reversed_of_a_set(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    return x, list(reversed({1, 2}))


def index_of_a_missing_value(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    return x * [1, 2].index(5)


def missing_dict_key(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    d = {"a": 1}
    return x * d["b"]


def zip_strict_of_unequal_lengths(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    return x, list(zip([1], [1, 2], strict=True))


def remove_of_a_missing_value(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    xs = [1]
    xs.remove(2)
    return x


def max_of_one_element_tensors(x):
    a, b = x[:1], x[1:2]
    return max(a, b) * 2, min([b, a]) + 1


def sorted_one_element_tensors(x):
    return sorted([x[1:2], x[:1], x[2:3]])


def set_of_tensors(x):
    s = {x, x * 2}
    return len(s), x in s


def str_and_int_of_tensors(x):
    return str(x[:1] * 0), int((x[:1] * 0 + 3).sum()), f"{(x * 0).sum():.1f}"


def tensor_membership_compares_values(x):
    y = x.clone()
    return y in [x[:1] * 0 + 5, y], x * 2


def print_keeps_its_output(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    print("value", 1 + 2)
    return x + 1


def unhashable_set_element(x):
    x = x * 2  # tensor work: a wrong trace would compile a graph
    return x, {[1]}


REFUSALS = [
    dict_resized_while_iterating, set_resized_while_iterating, any_with_two_arguments,
    len_of_an_iterator, reversed_of_a_set, index_of_a_missing_value, missing_dict_key,
    zip_strict_of_unequal_lengths, remove_of_a_missing_value, max_of_one_element_tensors,
    sorted_one_element_tensors, set_of_tensors, str_and_int_of_tensors,
    tensor_membership_compares_values, print_keeps_its_output, unhashable_set_element,
]


def _outcome(fn, x):
    try:
        return "returned", fn(x)
    except Exception as e:  # the program's own error, compared by type
        return "raised", type(e)


@pytest.mark.parametrize("fn", REFUSALS, ids=lambda f: f.__name__)
def test_untraceable_program_keeps_eager_semantics(fn, counting_backend, capsys) -> None:
    compiled = bytegraph.compile(fn, backend=counting_backend)
    for _ in range(2):
        x = torch.randn(3)
        eager_kind, eager_value = _outcome(fn, x.clone())
        eager_out = capsys.readouterr().out
        kind, value = _outcome(compiled, x.clone())
        assert capsys.readouterr().out == eager_out
        assert kind == eager_kind, f"eager {eager_kind} {eager_value}, compiled {kind} {value}"
        if kind == "raised":
            assert value is eager_value
        else:
            assert_exact(value, eager_value)
