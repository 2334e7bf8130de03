"""disable, allow_in_graph, disallow_in_graph and graph_break, eager vs compiled.

Markers are process-wide (by function identity); the ``markers_restored``
fixture puts the registries back after each test so a marked torch function
does not leak into other tests.
"""

from __future__ import annotations

import operator

import pytest
import torch

import bytegraph
from bytegraph import markers


@pytest.fixture(autouse=True)
def markers_restored():
    saved = [set(s) for s in (markers._disabled, markers._allowed, markers._disallowed)]
    yield
    for registry, old in zip((markers._disabled, markers._allowed, markers._disallowed), saved):
        registry.clear()
        registry.update(old)


def call_targets(gm: torch.fx.GraphModule) -> list:
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method")]


# --- disable ------------------------------------------------------------------------------

DISABLED_CALLS: list = []


@bytegraph.disable
def disabled_double(t):
    DISABLED_CALLS.append(type(t))  # runs in Python with the real tensor, once per call
    return t * 2


def uses_disabled(x):
    y = x + 1
    z = disabled_double(y)
    return z - 1


def test_disable_returns_the_function_itself() -> None:
    def f(x):
        return x + 1

    assert bytegraph.disable(f) is f
    assert bytegraph.compile(f, backend="eager") is f
    assert bytegraph.compile(backend="eager")(f) is f  # as a decorator with arguments


def test_disabled_call_is_a_break_and_runs_as_python(counting_backend) -> None:
    DISABLED_CALLS.clear()
    compiled = bytegraph.compile(uses_disabled, backend=counting_backend)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), uses_disabled(x), rtol=0, atol=0)
    # g1: add; disabled_double's mul runs in Python, in no graph; g2: sub.
    assert [call_targets(gm) for gm in counting_backend.graphs] == [[operator.add], [operator.sub]]
    assert DISABLED_CALLS == [torch.Tensor] * 6  # three eager calls, three compiled


def test_disabled_call_in_explain_and_fullgraph() -> None:
    out = bytegraph.explain(uses_disabled)(torch.randn(3))
    (brk,) = out.breaks
    assert brk.kind == "unsupported_call"
    assert "disabled_double" in brk.reason
    compiled = bytegraph.compile(uses_disabled, backend="eager", fullgraph=True)
    with pytest.raises(bytegraph.Unsupported, match="disabled_double"):
        compiled(torch.randn(3))


def test_disabled_function_is_never_traced_even_when_it_could_be(counting_backend) -> None:
    """Its callees run in Python too: the disabled body is not entered by the trace."""
    seen: list = []

    def inner(t):
        seen.append("inner")
        return t.cos()

    @bytegraph.disable
    def outer(t):
        return inner(t) + 1

    def f(x):
        return outer(x.sin()).exp()

    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
    assert seen == ["inner", "inner"]
    ops = [t for gm in counting_backend.graphs for t in call_targets(gm)]
    assert "cos" not in ops and torch.cos not in ops
    assert len(counting_backend.graphs) == 2  # sin; exp


# --- allow_in_graph -----------------------------------------------------------------------


@bytegraph.allow_in_graph
def fused(a, b):
    # Untraceable as bytecode (an import, a try block), fine as one opaque node.
    import math

    try:
        return a * b + torch.sin(a) * math.pi
    except RuntimeError:
        return a


def uses_fused(x, y):
    z = fused(x, y)
    return z + 1


def test_allow_in_graph_is_one_node(counting_backend) -> None:
    compiled = bytegraph.compile(uses_fused, backend=counting_backend)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    torch.testing.assert_close(compiled(x, y), uses_fused(x, y), rtol=0, atol=0)
    (gm,) = counting_backend.graphs
    targets = call_targets(gm)
    assert targets.count(fused) == 1
    assert targets == [fused, operator.add]  # the body's mul, sin, add are not traced
    compiled(torch.randn(3, 4), torch.randn(3, 4))
    assert len(counting_backend.graphs) == 1


def test_allow_in_graph_with_fullgraph() -> None:
    compiled = bytegraph.compile(uses_fused, backend="eager", fullgraph=True)
    x, y = torch.randn(2), torch.randn(2)
    torch.testing.assert_close(compiled(x, y), uses_fused(x, y), rtol=0, atol=0)


def test_allow_in_graph_returns_the_function_and_rejects_non_callables() -> None:
    def g(t):
        return t

    assert bytegraph.allow_in_graph(g) is g
    with pytest.raises(TypeError):
        bytegraph.allow_in_graph(3)
    with pytest.raises(TypeError):
        bytegraph.disallow_in_graph("torch.sin")


# --- disallow_in_graph --------------------------------------------------------------------


def uses_sin(x):
    y = x + 1
    z = torch.sin(y)
    return z * 2


def test_disallow_torch_function_breaks_at_it(counting_backend) -> None:
    bytegraph.disallow_in_graph(torch.sin)
    compiled = bytegraph.compile(uses_sin, backend=counting_backend)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), uses_sin(x), rtol=0, atol=0)
    # g1: add; sin runs in Python; g2: mul.
    assert [call_targets(gm) for gm in counting_backend.graphs] == [[operator.add], [operator.mul]]
    out = bytegraph.explain(uses_sin)(torch.randn(3))
    assert out.graph_break_count == 1
    assert out.breaks[0].kind == "unsupported_call"


def test_disallow_then_allow_again(counting_backend) -> None:
    bytegraph.disallow_in_graph(torch.sin)
    bytegraph.allow_in_graph(torch.sin)
    compiled = bytegraph.compile(uses_sin, backend=counting_backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), uses_sin(x), rtol=0, atol=0)
    assert len(counting_backend.graphs) == 1


def test_disallow_user_function(counting_backend) -> None:
    def helper(t):
        return t * 3

    def f(x):
        return helper(x + 1) - 1

    bytegraph.disallow_in_graph(helper)
    compiled = bytegraph.compile(f, backend=counting_backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
    assert [call_targets(gm) for gm in counting_backend.graphs] == [[operator.add], [operator.sub]]


# --- graph_break --------------------------------------------------------------------------


def test_graph_break_does_nothing_in_eager() -> None:
    assert bytegraph.graph_break() is None


def test_graph_break_splits_the_graph(counting_backend) -> None:
    from bytegraph import graph_break as split_here  # the same function under another name

    def f(x):
        y = x.relu()
        split_here()
        return y + 1

    compiled = bytegraph.compile(f, backend=counting_backend)
    for _ in range(2):
        x = torch.randn(4)
        torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
    assert [call_targets(gm) for gm in counting_backend.graphs] == [["relu"], [operator.add]]
    out = bytegraph.explain(f)(torch.randn(4))
    assert [b.kind for b in out.breaks] == ["explicit"]
