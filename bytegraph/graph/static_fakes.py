"""Fake example inputs for a static graph whose ops need a ShapeEnv to be traced again.

A static graph goes to its backend with real example inputs; AOTAutograd and
Inductor then make their own FakeTensorMode, without a ShapeEnv since
nothing is dynamic. A few higher-order ops cannot be traced that way: the
fake implementation of ``while_loop`` asks the mode's ShapeEnv to ignore the
unbacked sizes its body may create, and fails without one. For a graph that
holds such an op (at any depth of nested bodies), the backend gets fake
inputs of one FakeTensorMode with a ShapeEnv, every size static, under a
tracing context naming that mode: the way torch.compile hands every graph
over. Other static graphs keep the cheaper real inputs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx

NEEDS_SHAPE_ENV = (torch.ops.higher_order.while_loop,)


def needs_shape_env(gm: torch.fx.GraphModule) -> bool:
    """Whether ``gm`` or a body nested in it calls an op of ``NEEDS_SHAPE_ENV``."""
    return any(
        node.op == "call_function" and node.target in NEEDS_SHAPE_ENV
        for module in gm.modules() if isinstance(module, torch.fx.GraphModule)
        for node in module.graph.nodes
    )


@contextlib.contextmanager
def static_fake_inputs(examples: list[Any]) -> Iterator[list[Any]]:
    """``examples`` as static fake tensors of a mode with a ShapeEnv, under a tracing
    context naming that mode (where AOTAutograd and Inductor look for it)."""
    from torch._guards import TracingContext, tracing
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = [mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) else x
             for x in examples]
    with tracing(TracingContext(mode)):
        yield fakes
