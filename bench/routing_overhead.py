"""Per-call cost of a routed call site (translate/routing.py, runtime.py).

Code bytegraph runs as Python calls user functions through ``route(callable)``;
this measures what that adds over calling the compiled wrapper directly, and
over plain eager, for a trivial function and for a builtin left as it is::

    python bench/routing_overhead.py
"""

from __future__ import annotations

import timeit

import torch

import bytegraph


def main() -> None:
    def callee(t):
        return t

    compiled = bytegraph.compile(callee, backend="eager")
    route = compiled.router.route
    x = torch.ones(1)
    compiled(x)
    number, repeat = 20_000, 7

    def best(fn) -> float:
        return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e9

    rows = [
        ("eager call", best(lambda: callee(x))),
        ("compiled wrapper, direct", best(lambda: compiled(x))),
        ("routed call site", best(lambda: route(callee)(x))),
        ("builtin abs, direct", best(lambda: abs(-1))),
        ("builtin abs, routed", best(lambda: route(abs)(-1))),
    ]
    print(f"{'call':28} {'ns per call':>12}")
    for name, ns in rows:
        print(f"{name:28} {ns:12.0f}")


if __name__ == "__main__":
    main()
