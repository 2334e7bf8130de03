"""bytegraph in one page: the graph it captures, the guards it installs, the result.

Run: ``python examples/demo.py``
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

# Before torch: importing it on a machine without NumPy warns, and the demo should read cleanly.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402

import bytegraph  # noqa: E402


def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = x + y
    z = z * 2
    return z


def scaled_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    # q.shape[-1] is known while tracing, so the scale becomes a constant in the graph
    # and the shape becomes a guard: another width compiles a second entry.
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1)


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 72 - len(title)))


def show(fn: Callable[..., torch.Tensor], *args: torch.Tensor) -> None:
    compiled = bytegraph.compile(fn, backend="eager")
    result = compiled(*args)
    expected = fn(*args)
    entry = compiled.entries[0]
    section(f"{fn.__name__}: captured FX graph ({len(entry.graphs)} graph)")
    for gm in entry.graphs:
        print(gm.code.strip())
    section(f"{fn.__name__}: guards (all must hold to reuse the graph)")
    print(entry.guard)
    section(f"{fn.__name__}: eager vs compiled")
    print("eager:\n", expected, sep="")
    print("compiled:\n", result, sep="")
    print("same:", torch.equal(result, expected))


def main() -> None:
    torch.manual_seed(0)
    show(f, torch.ones(4, 4), torch.arange(16.0).reshape(4, 4))
    show(scaled_scores, torch.randn(3, 4), torch.randn(3, 4))

    section("scaled_scores: a new shape fails a guard and compiles a second entry")
    compiled = bytegraph.compile(scaled_scores, backend="eager")
    for width in (4, 4, 8):
        compiled(torch.randn(3, width), torch.randn(3, width))
        print(f"called with width {width}: {len(compiled.entries)} cache entries")


if __name__ == "__main__":
    main()
