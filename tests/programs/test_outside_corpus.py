"""Programs of the classes PyTorch's Dynamo test suite exercises (test_functions.py), written fresh.

An outside corpus (the make_test programs of pytorch/pytorch's
test/dynamo/test_functions.py, plus variants of their inputs: requires_grad,
aliased, transposed, other shapes) was run differentially against bytegraph
and found no wrong result and no internal error. These programs keep the
same classes covered: dict views read after the dict changed, list and set
methods on constants next to tensor work, string and number folding,
closures that write cells, in-place writes through views, mutations of
inputs across a break. Expected values come from eager.
"""

from __future__ import annotations

import operator

import pytest
import torch

import bytegraph


def dict_views_after_mutation(x):
    d = {"a": x}
    keys, values, items = d.keys(), d.values(), d.items()
    d["b"] = x * 2
    del d["a"]
    return list(keys), [v + 1 for v in values], len(items)


def list_methods_on_constants(a, b):
    order = [3, 1, 2]
    order.sort(reverse=True)
    order.insert(1, 7)
    order.remove(3)
    at = order.index(2)
    order.reverse()
    return a * at + b * order.count(7), order


def slice_assign_tensors(a, b):
    items = [a, b, a + 1, b + 1]
    items[1:3] = [a * 2]
    items[::2] = [b, b]
    del items[0]
    return items


def min_max_with_key(a):
    ranks = {"p": 3, "q": 1, "r": 2}
    low = min(ranks, key=ranks.get)
    high = max(ranks.items(), key=operator.itemgetter(1))
    return a + ranks[low] + high[1], low, high


def closure_cell_writes(a, b):
    total = 0

    def add(v):
        nonlocal total
        total += v

    add(2)
    add(3)
    return a * total, total


def string_and_number_folding(a):
    name = "block_2.bias"
    label = "_".join(reversed(name.split("."))).upper().replace("_", "-")
    n = a.shape[0]
    numbers = (n // 3, -n % 3, divmod(n, 4), round(n / 3, 2), n.bit_length())
    return a + len(label), label, "%d-%.1f" % (n, 2.25), numbers  # noqa: UP031 (str % folds)


def range_slices(a):
    r = range(2, 20, 3)
    acc = a
    for i in reversed(r[1:4]):
        acc = acc + i
    return acc, list(r[::-2]), r.index(8), 11 in r


def inplace_through_views(a, b):
    c = a.clone()
    window = c[2:5]
    window.mul_(2)
    c[0] = b[0]
    a[1:3].add_(b[1:3])
    return c, window, a.sum()


def set_ops_on_constants(a):
    s = {1, 2, 3}
    s |= {4}
    s -= {1}
    s.discard(9)
    t = frozenset(s) ^ {2, 10}
    return a + len(s) + len(t), sorted(t)


def loop_break_continue_else(a, b):
    acc = a
    for i in range(6):
        if i == 1:
            continue
        if i == 4:
            break
        acc = acc + b * i
    else:
        acc = acc * 100
    return acc


ONE_GRAPH = [
    dict_views_after_mutation,
    list_methods_on_constants,
    slice_assign_tensors,
    min_max_with_key,
    closure_cell_writes,
    string_and_number_folding,
    range_slices,
    inplace_through_views,
    set_ops_on_constants,
    loop_break_continue_else,
]


def inputs_for(fn):
    return tuple(torch.randn(10, 10) for _ in range(fn.__code__.co_argcount))


@pytest.mark.parametrize("fn", ONE_GRAPH, ids=lambda f: f.__name__)
def test_one_graph(fn, differential, counting_backend):
    compiled = differential.compile(fn)
    differential.check(fn, compiled, inputs_for(fn))
    differential.check(fn, compiled, inputs_for(fn))  # the cached entry
    assert counting_backend.calls == 1


class Box:
    def __init__(self, t):
        self.t = t
        self.n = 0


def object_mutation_across_break(box, y):
    box.n += 1
    box.t = box.t + y
    bytegraph.graph_break()
    box.n += 1
    return box.t * box.n


def input_dict_mutation_across_break(d, y):
    d["c"] = d["a"] + y
    del d["b"]
    bytegraph.graph_break()
    d["a"] = d["c"] * 2
    return d


def input_list_mutation_across_break(items, y):
    items.append(y)
    items[0] = items[0] + 1
    bytegraph.graph_break()
    items.pop(1)
    return sum(items)


def test_object_mutation_across_break(differential, counting_backend):
    fn = object_mutation_across_break
    eager_box, compiled_box = Box(torch.ones(3)), Box(torch.ones(3))
    y = torch.randn(3)
    expected = fn(eager_box, y)
    actual = differential.compile(fn)(compiled_box, y)
    assert torch.equal(actual, expected)
    assert compiled_box.n == eager_box.n == 2
    assert torch.equal(compiled_box.t, eager_box.t)
    assert counting_backend.calls == 2


@pytest.mark.parametrize(
    "fn, make",
    [
        (input_dict_mutation_across_break, lambda: ({"a": torch.randn(3), "b": 2}, torch.randn(3))),
        (input_list_mutation_across_break, lambda: ([torch.randn(3)] * 2, torch.randn(3))),
    ],
    ids=["dict", "list"],
)
def test_input_mutation_across_break(fn, make, differential, counting_backend):
    compiled = differential.compile(fn)
    differential.check(fn, compiled, make())
    assert counting_backend.calls == 2
