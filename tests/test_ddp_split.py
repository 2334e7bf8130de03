"""graph/ddp.py without processes: the bucket splitter as a backend, in one process.

Under DDP the splitter is chosen by the active DDP module (tests/distributed);
here it is passed as the backend directly, with caps in bytes, so the cut,
the pieces' compilation and their autograd are checked fast: outputs and
every parameter's gradient equal to eager, and one piece per bucket that
DDP's own assignment (``torch.distributed._compute_bucket_assignment_by_size``,
parameters in reverse order) makes with the same caps.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import bytegraph
from bytegraph.graph.backends import lookup_backend
from bytegraph.graph.ddp import BucketSplitter

if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)


class Pieces:
    """A backend counting what it compiles, compiling with a named backend."""

    def __init__(self, name: str) -> None:
        self.inner = lookup_backend(name)
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)


def mlp(layers: int = 5, width: int = 32) -> torch.nn.Sequential:
    torch.manual_seed(0)
    parts: list[torch.nn.Module] = []
    for _ in range(layers):
        parts += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    return torch.nn.Sequential(*parts, torch.nn.Linear(width, 2))


def ddp_bucket_count(model: torch.nn.Module, caps: tuple[int, int]) -> int:
    params = list(reversed([p for p in model.parameters() if p.requires_grad]))
    buckets, _ = torch.distributed._compute_bucket_assignment_by_size(params, list(caps))
    return len(buckets)


def train_both(model_fn: Any, compiled_fn: Any, x: torch.Tensor) -> None:
    eager, compiled = model_fn(), compiled_fn()
    for step in range(2):
        inputs = x + step
        expected = eager(inputs).square().mean()
        actual = compiled(inputs).square().mean()
        expected.backward()
        actual.backward()
        assert torch.equal(actual, expected)
        for (name, p), q in zip(eager.named_parameters(), compiled.parameters(), strict=True):
            assert torch.equal(q.grad, p.grad), name


CAPS = (4300, 8600)  # a layer's weight and bias: 4224 bytes; the head's 264


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_one_piece_per_ddp_bucket_with_eager_gradients(backend):
    pieces = Pieces(backend)
    x = torch.randn(4, 32)
    train_both(mlp, lambda: bytegraph.compile(mlp(), backend=BucketSplitter(pieces, CAPS)), x)
    assert ddp_bucket_count(mlp(), CAPS) == 3
    assert len(pieces.graphs) == 3


def test_one_bucket_is_one_graph():
    pieces = Pieces("aot_eager")
    x = torch.randn(4, 32)
    caps = (10**9, 10**9)
    train_both(mlp, lambda: bytegraph.compile(mlp(), backend=BucketSplitter(pieces, caps)), x)
    assert len(pieces.graphs) == 1


class NoGradInside(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            scale = x.abs().mean()
        return self.net(x) * scale


def test_a_graph_switching_grad_mode_is_not_split():
    # A cut inside the no_grad region would compile its tail under the wrong mode.
    pieces = Pieces("aot_eager")
    x = torch.randn(4, 32)
    splitter = BucketSplitter(pieces, CAPS)
    train_both(NoGradInside, lambda: bytegraph.compile(NoGradInside(), backend=splitter), x)
    assert len(pieces.graphs) == 1


def test_a_dynamic_trace_is_not_split():
    pieces = Pieces("aot_eager")
    x = torch.randn(4, 32)
    splitter = BucketSplitter(pieces, CAPS)
    train_both(mlp, lambda: bytegraph.compile(mlp(), backend=splitter, dynamic=True), x)
    assert len(pieces.graphs) == 1
