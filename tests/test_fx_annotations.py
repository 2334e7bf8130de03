"""``torch.fx.traceback.annotate`` in the trace (variables/fx_annotations.py).

The nodes recorded inside the block carry the annotation in ``meta["custom"]``
(nested blocks merge, the outer one is restored on exit), the program computes
what eager computes, and a graph break inside the block leaves torch's
``current_meta`` as eager leaves it.
"""

from __future__ import annotations

import torch
import torch.fx.traceback as fx_traceback

import bytegraph
from tests.test_higher_order import Counting


def annotated(x):
    y = x + 1
    with fx_traceback.annotate({"stage": 1}):
        y = y * 2
        with fx_traceback.annotate({"inner": True}):
            y = y.sin()
        y = y - 3
    return y.cos()


def test_nodes_inside_the_block_carry_the_annotation() -> None:
    counting = Counting("eager")
    x = torch.randn(4)
    out = bytegraph.compile(annotated, backend=counting, fullgraph=True)(x)
    torch.testing.assert_close(out, annotated(x))
    (gm,) = counting.graphs
    custom = [n.meta.get("custom") for n in gm.graph.nodes
              if n.op in ("call_function", "call_method")]
    assert custom == [
        None, {"stage": 1}, {"stage": 1, "inner": True}, {"stage": 1}, None,
    ]


def break_inside(x):
    with fx_traceback.annotate({"stage": 1}):
        y = x + 1
        bytegraph.graph_break()
        y = y * 2
    return y, fx_traceback.current_meta.get("custom")


def test_a_break_inside_the_block() -> None:
    counting = Counting("eager")
    x = torch.randn(4)
    out, custom = bytegraph.compile(break_inside, backend=counting)(x)
    expected, expected_custom = break_inside(x)
    torch.testing.assert_close(out, expected)
    assert custom == expected_custom and "custom" not in fx_traceback.current_meta
    first = [n.meta.get("custom") for n in counting.graphs[0].graph.nodes
             if n.op in ("call_function", "call_method")]
    assert first == [{"stage": 1}]
