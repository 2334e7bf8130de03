"""The per-op shortcuts of graph building give what the plain paths give.

``SubgraphTracer.create_node`` makes a node bare and assigns its arguments after
(skipping fx's scan of the arguments for raw SymInts): the graph must be the one
``torch.fx.Graph.create_node`` builds, node for node (names, arguments, users,
input nodes, printed code). ``metadata._memo_key`` reads flat arguments without
picturing their containers: two calls share a key exactly when the general key
would let them.
"""

from __future__ import annotations

import operator
from typing import Any

import pytest
import torch
import torch.fx

from bytegraph.graph import metadata
from bytegraph.graph.subgraphs import SubgraphTracer


def _build(create: Any, graph: torch.fx.Graph) -> None:
    """The same calls, through ``create(kind, target, args, kwargs)``."""
    x, w = graph.placeholder("x"), graph.placeholder("w")
    y = create("call_function", operator.matmul, (x, w), {})
    z = create("call_function", torch.tanh, (y,), {})
    s = create("call_method", "sum", (z,), {"dim": 0, "keepdim": True})
    c = create("call_function", torch.cat, ([z, x, z],), {"dim": 1})
    m = create("call_function", torch.where, (y, z, x), {"out": None})
    n = create("call_function", torch.add, (c, s), {"alpha": 2})
    d = create("call_function", dict, (), {"a": n, "b": (x, [y, {"k": m}])})
    g = create("call_function", operator.getitem, (x, (slice(None, 1), 0)), {})
    e = create("call_method", "contiguous", (x,), {})
    graph.output((n, d, g, e, x))


def _named(value: Any) -> Any:
    """``value`` with each node replaced by its name, in a marked tuple: nodes of two
    graphs never compare equal."""
    return torch.fx.node.map_arg(value, lambda n: ("node", n.name))


def _picture(graph: torch.fx.Graph) -> list[tuple]:
    return [
        (
            node.name, node.op, node.target, _named(node.args), _named(dict(node.kwargs)),
            [u.name for u in node.users], [i.name for i in node.all_input_nodes],
        )
        for node in graph.nodes
    ]


def test_created_nodes_match_fx_create_node() -> None:
    tracer = SubgraphTracer()
    _build(tracer.create_node, tracer.graph)
    plain = torch.fx.Graph()
    _build(plain.create_node, plain)
    tracer.graph.lint()
    assert _picture(tracer.graph) == _picture(plain)
    assert tracer.graph.python_code("self").src == plain.python_code("self").src


def test_created_nodes_are_found_by_op() -> None:
    tracer = SubgraphTracer()
    _build(tracer.create_node, tracer.graph)
    found = tracer.graph.find_nodes(op="call_function", target=torch.tanh)
    assert [n.name for n in found] == ["tanh"]


def _meta(*shape: int, grad: bool = False) -> torch.Tensor:
    return torch.empty(shape, device=metadata.META, requires_grad=grad)


def _key(*args: Any, **kwargs: Any) -> tuple | None:
    return metadata._memo_key("call_function", torch.add, args, kwargs)


def test_memo_key_tells_apart_what_changes_results() -> None:
    base = _key(_meta(2, 3), 1.5)
    assert base is not None and base == _key(_meta(2, 3), 1.5)
    different = [
        _key(_meta(3, 2), 1.5), _key(_meta(2, 3).t().contiguous().t(), 1.5),
        _key(_meta(2, 3, grad=True), 1.5), _key(_meta(2, 3), 1), _key(_meta(2, 3), True),
        _key(_meta(2, 3), 2.5), _key(_meta(2, 3)), _key(_meta(2, 3), alpha=1.5),
        _key((_meta(2, 3),), 1.5), _key([_meta(2, 3)], 1.5), _key(_meta(2, 3), (1.5,)),
        _key(_meta(2, 3).to(torch.float64), 1.5),
    ]
    assert base not in different
    assert len(set(different)) == len(different)
    with torch.no_grad():
        assert _key(_meta(2, 3), 1.5) != base


def test_memo_key_follows_the_default_device() -> None:
    base = _key(_meta(2, 3), 1.5)
    with torch.device("meta"):
        assert _key(_meta(2, 3), 1.5) != base
    torch.set_default_device("meta")
    try:
        assert metadata.default_device() == torch.device("meta")
        assert _key(_meta(2, 3), 1.5) != base
    finally:
        torch.set_default_device(None)
    assert metadata.default_device() == torch.get_default_device()
    assert _key(_meta(2, 3), 1.5) == base


def test_memo_key_refuses_unhashable_and_unknown_leaves() -> None:
    assert _key(_meta(2), object()) is None
    assert _key(_meta(2), [object()]) is None
    assert metadata._memo_key("call_method", "add_", (_meta(2), 1), {}) is None


@pytest.fixture
def memoizing_every_op(monkeypatch) -> None:
    """An empty memo that keeps every op, however fast its meta kernel."""
    monkeypatch.setattr(metadata, "_memo", {})
    monkeypatch.setattr(metadata, "_worth_memoizing", {})
    monkeypatch.setattr(metadata, "_MEMO_THRESHOLD_SECONDS", -1.0)


def _doubled_rows(t: torch.Tensor) -> torch.Tensor:
    """An op of the user's: its metadata may change when the user redefines it."""
    return torch.cat([t, t])


@pytest.mark.usefixtures("memoizing_every_op")
def test_reset_drops_the_memo_of_user_ops_and_keeps_torchs() -> None:
    import bytegraph

    x = _meta(3, 4)
    layer_norm = torch.nn.functional.layer_norm
    metadata.run("call_function", layer_norm, (x, (4,)), {})
    metadata.run("call_function", _doubled_rows, (x,), {})
    metadata.run("call_method", "sum", (x, 0), {})
    assert len(metadata._memo) == 3
    bytegraph.reset()
    assert sorted(str(key[1]) for key in metadata._memo) == sorted([str(layer_norm), "sum"])
    assert set(metadata._worth_memoizing) == {("call_function", layer_norm), ("call_method", "sum")}
    # Operators: aten and prims are torch's; any other namespace is a library's.
    assert metadata._owned_by_torch(torch.ops.aten.add.Tensor)
    assert metadata._owned_by_torch(torch.ops.prims.add.default)
    assert not metadata._owned_by_torch(torch.ops._c10d_functional.all_reduce.default)


@pytest.mark.usefixtures("memoizing_every_op")
def test_a_full_memo_is_emptied(monkeypatch) -> None:
    monkeypatch.setattr(metadata, "_MEMO_LIMIT", 2)
    for rows in (1, 2, 3):
        metadata.run("call_function", _doubled_rows, (_meta(rows, 4),), {})
    assert len(metadata._memo) == 1


def _sliced_product(t: torch.Tensor) -> tuple[torch.Tensor, None]:
    """A view of a tensor the op makes inside, and a None (as multi_head_attention_forward's
    ``(attn_output, None)``)."""
    return (t * 2)[1:, 2:].t(), None


def _split_product(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (t * 2).split(2)


def _own_slice(t: torch.Tensor) -> torch.Tensor:
    return t[1:]


@pytest.mark.usefixtures("memoizing_every_op")
@pytest.mark.parametrize("grad", [False, True])
def test_a_view_of_a_tensor_made_inside_is_memoized_with_its_layout(grad) -> None:
    x = _meta(4, 6, grad=grad) * 1  # not a leaf when it requires grad
    first, none = metadata.run("call_function", _sliced_product, (x,), {})
    assert none is None and len(metadata._memo) == 1
    hit, none = metadata.run("call_function", _sliced_product, (x,), {})
    assert hit is not first and none is None
    assert metadata.spec_of(hit) == metadata.spec_of(first)  # shape, strides, offset, grad
    hit.add_(1)  # in-place stays legal, as on eager's view


@pytest.mark.usefixtures("memoizing_every_op")
def test_views_autograd_tells_apart_or_of_an_input_are_not_memoized() -> None:
    x = _meta(4, 6, grad=True) * 1
    parts = metadata.run("call_function", _split_product, (x,), {})
    with pytest.raises(RuntimeError, match="view"):  # eager refuses it, and so must a hit
        parts[0].add_(1)
    metadata.run("call_function", _own_slice, (x,), {})
    assert metadata._memo == {}


@pytest.mark.usefixtures("memoizing_every_op")
def test_the_memo_tells_a_real_tensor_from_a_meta_one() -> None:
    """``torch.div(n, w) - 1`` of two ints is a real 0-d tensor with data (a later view
    reads its value: Hugging Face's LED). After the same op on a meta tensor of the same
    metadata (another model, earlier in the process), the memo must not answer it."""
    on_meta = torch.empty((), dtype=torch.int64, device=metadata.META)
    assert metadata.run("call_function", operator.sub, (on_meta, 1), {}).is_meta
    real = torch.div(12, 4, rounding_mode="trunc")
    result = metadata.run("call_function", operator.sub, (real, 1), {})
    assert not result.is_meta and result.item() == 2
    # Its value decides a size: never a key, so another value is never answered by it.
    x = _meta(2, 3)
    for n in (2, 3):
        made = metadata.run("call_method", "new_zeros", (x, (4, torch.tensor(n))), {})
        assert made.shape == (4, n)
