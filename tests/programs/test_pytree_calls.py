"""``torch.utils._pytree`` calls in the trace: eager vs compiled, one graph each.

The modelled functions (tree_flatten, tree_unflatten, tree_map, tree_map_only,
tree_leaves, tree_structure, tree_flatten_with_path) over dicts, lists, tuples,
named tuples, torch.return_types and None leaves; a TreeSpec that escapes must equal
eager's; a user-registered node type, which the model leaves alone, still
breaks and gives eager's result.
"""

from __future__ import annotations

from collections import OrderedDict, namedtuple

import pytest
import torch
import torch.utils._pytree as pytree
from _harness import Corpus, check_program, randn

import bytegraph

corpus = Corpus()
add = corpus.add
Pair = namedtuple("Pair", "left right")


def x3() -> tuple:
    return (randn(3),)


def xy() -> tuple:
    return (randn(3), randn(2, 3))


@add(x3)
def tree_map_dict_of_lists(x):
    return pytree.tree_map(lambda t: t + 1, {"a": x, "b": [x, x * 2]})


@add(xy)
def tree_map_mixed_leaves(x, y):
    tree = {"t": (x, 3, None), "n": Pair(y, "s"), "o": OrderedDict(k=[y.sum()])}
    return pytree.tree_map(lambda v: v * 2 if isinstance(v, torch.Tensor) else v, tree)


@add(xy)
def tree_map_two_trees(x, y):
    return pytree.tree_map(lambda a, b: a + b, [x, {"k": y}], [x.cos(), {"k": y.sin()}])


@add(xy)
def tree_map_prefix_tree(x, y):
    # The second tree has a list where the first has a leaf: the whole list is passed.
    return pytree.tree_map(lambda a, b: a * len(b), [x, y], [[1, 2], (3,)])


@add(xy)
def flatten_then_unflatten(x, y):
    leaves, spec = pytree.tree_flatten({"a": (x, None), "b": Pair(y, 2), "c": []})
    doubled = [v * 2 if isinstance(v, torch.Tensor) else v for v in leaves]
    return pytree.tree_unflatten(doubled, spec), spec.num_leaves, len(leaves)


@add(xy)
def spec_escapes(x, y):
    leaves, spec = pytree.tree_flatten([x, {"k": (y, 1)}])
    return leaves[0] + 1, spec


@add(x3)
def structure_of_leaf(x):
    return pytree.tree_structure(x), pytree.tree_structure({"a": x}), x.sin()


@add(xy)
def spec_identity(x, y):
    leaf_a, leaf_b = pytree.tree_structure(x), pytree.tree_structure(y)
    node_a, node_b = pytree.tree_structure([x]), pytree.tree_structure([y])
    return x + 1, leaf_a is leaf_b, node_a is node_b, node_a == node_b, leaf_a is node_a


@add(xy)
def leaves_and_map_only(x, y):
    leaves = pytree.tree_leaves([x, {"k": y}, (1, "s")])
    mapped = pytree.tree_map_only(torch.Tensor, lambda t: t.exp(), (x, 1, [y, "s"]))
    return leaves, mapped


@add(xy)
def map_only_with_predicate_and_is_leaf(x, y):
    picked = pytree.tree_map_only(lambda v: isinstance(v, int), lambda v: v + 10, [1, x, (2,)])
    whole = pytree.tree_map(lambda v: len(v) if isinstance(v, tuple) else v * 3,
                            [x, (y, y)], is_leaf=lambda v: isinstance(v, tuple))
    return picked, whole


@add(xy)
def flatten_with_path(x, y):
    pairs, spec = pytree.tree_flatten_with_path({"a": [x, Pair(y, 1)]})
    keys = [tuple(k.key if hasattr(k, "key") else k.idx if hasattr(k, "idx") else k.name
                  for k in path) for path, _ in pairs]
    return keys, [leaf * 2 for _, leaf in pairs], spec


@add(xy)
def unflatten_method_and_return_types(x, y):
    leaves, spec = pytree.tree_flatten((y.max(dim=0), x))
    rebuilt = spec.unflatten([leaves[0] * 2, leaves[1], x + 1])
    return rebuilt, spec.is_leaf(), pytree.tree_map(lambda v: v, {"s": (y.shape[0],)})


@add(xy, graphs=2)
def tree_map_over_size_breaks(x, y):
    out = pytree.tree_map(lambda v: v * 2, {"s": y.shape, "x": x.cos()})
    return out, out["x"].sin()


@pytest.mark.parametrize("prog", corpus, ids=lambda p: p.name)
def test_pytree_program(prog, differential, counting_backend):
    check_program(prog, differential, counting_backend)


def test_spec_from_the_frame(differential, counting_backend):
    spec = pytree.tree_structure({"a": 0, "b": [0, 0]})

    def unflatten(x, spec):
        return pytree.tree_unflatten([x, x + 1, x * 2], spec)

    compiled = differential.compile(unflatten)
    differential.check(unflatten, compiled, (randn(3), spec))
    assert counting_backend.calls == 1


def test_escaped_spec_is_fresh_each_call():
    def f(x):
        return pytree.tree_structure([x, (x,)]), x + 1

    compiled = bytegraph.compile(f, backend="eager")
    first, second = compiled(randn(2))[0], compiled(randn(2))[0]
    assert first == f(randn(2))[0] and first is not second
    assert first.children()[1] == pytree.tree_structure((0,))


class Registered:
    def __init__(self, a, b):
        self.a, self.b = a, b


pytree.register_pytree_node(
    Registered,
    lambda r: ([r.a, r.b], None),
    lambda leaves, _: Registered(*leaves),
)


def test_registered_type_breaks_with_eager_result(counting_backend):
    def f(x):
        out = pytree.tree_map(lambda t: t + 1, {"r": Registered(x, x * 2)})
        return out["r"].a, out["r"].b

    report = bytegraph.explain(f)(randn(3))
    assert any("registered type" in b.reason for b in report.break_reasons), str(report)
    x = randn(3)
    compiled = bytegraph.compile(f, backend=counting_backend)
    for got, want in zip(compiled(x), f(x)):
        assert torch.equal(got, want)


def test_registering_a_type_later_retraces():
    class Later:
        def __init__(self, v):
            self.v = v

    def f(x, obj):
        return pytree.tree_leaves([x * 2, obj])

    compiled = bytegraph.compile(f, backend="eager")
    x, obj = randn(2), Later(3)
    assert len(compiled(x, obj)) == 2
    pytree.register_pytree_node(Later, lambda o: ([o.v], None), lambda vs, _: Later(*vs))
    try:
        got, want = compiled(x, obj), f(x, obj)
        assert len(got) == len(want) == 2 and got[1] == want[1] == 3
    finally:
        pytree._deregister_pytree_node(Later)
