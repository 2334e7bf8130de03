"""What each rank runs in tests/distributed/test_collectives.py (imported by spawned ranks).

Every program runs eager and compiled on clones of the same inputs, on every
rank: the outputs and every input the program writes must be equal (bit for
bit: the sums of two ranks are a + b in any order; within
``torch.testing.assert_close``'s tolerances under Inductor, which fuses). A
scenario returns what the parent asserts on: the graphs compiled, the
collective ops in them, the break reasons under ``fullgraph=True``. These
must be the same on every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed import _functional_collectives as funcol
from world import run_named

import bytegraph
from bytegraph.graph.backends import lookup_backend

F = torch.ops._c10d_functional


class Recording:
    """A backend that keeps the collective ops of each graph it gets, then hands the graph
    to a named backend."""

    def __init__(self, name: str) -> None:
        self.inner = eliminating_dead_code if name == "dce" else lookup_backend(name)
        self.graphs: list[list[str]] = []
        self.all_kept = True

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        collectives = [
            n for n in gm.graph.nodes if n.op == "call_function" and "c10d" in str(n.target)
        ]
        self.graphs.append([str(n.target).split(".")[1] for n in collectives])
        # Each collective's waited result is a graph output: no backend drops it.
        waits = [n for n in collectives if "wait_tensor" in str(n.target)]
        self.all_kept = self.all_kept and all(
            any(u.op == "output" for u in n.users) for n in waits
        )
        return self.inner(gm, example_inputs)


def eliminating_dead_code(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    """A backend that drops the nodes no output needs, then runs the graph: fx thinks a
    functional collective pure (its wait is listed as side-effectful only once torch's
    _functional_collectives module is imported; this backend does not count on that)."""
    gm.graph.eliminate_dead_code(is_impure_node=_changes_state)
    gm.recompile()
    return gm.forward


def _changes_state(node: torch.fx.Node) -> bool:
    """fx's own rule, less the wait_tensor that torch lists as side-effectful once
    torch.distributed._functional_collectives is imported."""
    if node.target is F.wait_tensor.default:
        return False
    return node.is_impure()


# --- programs: captured -------------------------------------------------------------------


def reduce_then_add(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    dist.all_reduce(y)
    return y + 1


def reduce_input(x: torch.Tensor, op: Any) -> torch.Tensor:
    dist.all_reduce(x, op=op)
    return x * 2


def reduce_on_world(x: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(x, dist.ReduceOp.MAX, group=dist.group.WORLD)
    return x - 1


def reduce_on_group(x: torch.Tensor, group: Any) -> torch.Tensor:
    dist.all_reduce(x, op=dist.ReduceOp.SUM, group=group)
    return x * dist.get_world_size(group) + group.rank()


def gather_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    dist.all_gather_into_tensor(out, x * 3)
    return out.sum()


def gather_world_size(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(dist.get_world_size() * x.shape[0], dtype=x.dtype)
    dist.all_gather_into_tensor(out, x * 3)
    return out + dist.get_rank()


def reduce_scatter(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    dist.reduce_scatter_tensor(out, x * 3, op=dist.ReduceOp.SUM)
    return out * 2


def broadcast_input(x: torch.Tensor) -> torch.Tensor:
    dist.broadcast(x, src=1)
    return x + 1


def dead_reduce(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    dist.all_reduce(y)  # nothing reads y: the collective must still run on this rank
    return x + 1


def functional_reduce(x: torch.Tensor) -> torch.Tensor:
    return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1


def functional_others(x: torch.Tensor) -> torch.Tensor:
    group = dist.group.WORLD
    gathered = funcol.all_gather_single(x, 0, group)
    scattered = funcol.reduce_scatter_single(x * 2, "max", 0, group)
    return gathered.sum() + scattered.sum() + funcol.broadcast(x, 0, group)


def functional_ops(x: torch.Tensor) -> torch.Tensor:
    name = dist.group.WORLD.group_name
    issued = F.all_reduce(x * 2, "avg", name)
    return F.wait_tensor(issued) + 1


def reduce_then_index(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    y = x * 2
    dist.all_reduce(y)
    return y[index]  # out of range on rank 0: the graph raises after the collective


def reduce_if_initialized(x: torch.Tensor) -> torch.Tensor:
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(x)
    return x / dist.get_world_size()


# --- programs: refused (a break each) ----------------------------------------------------


def functional_group_none(x: torch.Tensor) -> torch.Tensor:
    return funcol.all_reduce(x, "sum", None) + 1


def reduce_maximum(x: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return x + 1


def reduce_async(x: torch.Tensor) -> torch.Tensor:
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    return x + 1


def gather_object(x: torch.Tensor) -> torch.Tensor:
    objects = [None] * dist.get_world_size()
    dist.all_gather_object(objects, {"rank": dist.get_rank()})
    return x + sum(o["rank"] for o in objects)


def send_recv(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    if dist.get_rank() == 0:
        dist.send(y, dst=1)
    else:
        dist.recv(y, src=0)
    return y + 1


def reduce_on_rank_list(x: torch.Tensor) -> torch.Tensor:
    return funcol.all_reduce(x, "sum", [0, 1]) + 1


def reduce_requires_grad(w: torch.Tensor) -> torch.Tensor:
    y = w * 2
    dist.all_reduce(y)
    return y + 1


# --- running them ------------------------------------------------------------------------


def assert_same(actual: Any, expected: Any, exact: bool, what: str) -> None:
    if exact:
        assert type(actual) is type(expected) or isinstance(actual, torch.Tensor), what
        assert torch.equal(torch.as_tensor(actual), torch.as_tensor(expected)), (
            f"{what}: {actual} != {expected}"
        )
    else:
        torch.testing.assert_close(actual, expected, msg=what)


def compare(
    rank: int, fn: Callable[..., Any], make_args: Callable[[int], tuple], backend_name: str,
    calls: int = 2,
) -> dict[str, Any]:
    """``fn`` eager and compiled, ``calls`` times on fresh inputs: outputs and the inputs
    after the call equal; the graphs and their collective ops."""
    backend = Recording(backend_name)
    compiled = bytegraph.compile(fn, backend=backend)
    exact = backend_name != "inductor"
    for call in range(calls):
        args = make_args(rank + 10 * call)
        eager_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        compiled_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        expected = fn(*eager_args)
        actual = compiled(*compiled_args)
        what = f"{fn.__name__} ({backend_name}), call {call}"
        assert_same(actual.detach(), expected.detach(), exact, what)
        for i, (a, e) in enumerate(zip(compiled_args, eager_args, strict=True)):
            if isinstance(e, torch.Tensor):
                assert_same(a.detach(), e.detach(), exact, f"{what}: argument {i} after")
    return {"graphs": backend.graphs}


def fullgraph_break(rank: int, fn: Callable[..., Any], make_args: Callable[[int], tuple]) -> str:
    """The break's catalogue name under fullgraph (raised while tracing, before any rank
    communicates), or "none"."""
    try:
        bytegraph.compile(fn, backend="eager", fullgraph=True)(*make_args(rank))
    except bytegraph.Unsupported as error:
        return error.entry.name
    return "none"


def vector(rank: int) -> tuple:
    return (torch.arange(4.0) + 10 * rank + 1,)


def vector_and_out(size: int) -> Callable[[int], tuple]:
    return lambda rank: (torch.arange(4.0) + 10 * rank + 1, torch.full((size,), -1.0))


def _captured(backend_name: str, names: list[str]) -> Callable[[int], dict[str, Any]]:
    def run(rank: int) -> dict[str, Any]:
        return {name: compare(rank, *CAPTURED[name], backend_name) for name in names}
    return run


def _reduce_ops(rank: int) -> dict[str, Any]:
    """One op after the other: each a new graph (the op is guarded by identity)."""
    backend = Recording("eager")
    compiled = bytegraph.compile(reduce_input, backend=backend)
    for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
        x = torch.arange(4.0) + 10 * rank + 1
        eager_x, compiled_x = x.clone(), x.clone()
        expected = reduce_input(eager_x, getattr(dist.ReduceOp, op))
        actual = compiled(compiled_x, getattr(dist.ReduceOp, op))
        assert torch.equal(actual, expected), op
        assert torch.equal(compiled_x, eager_x), f"{op}: input after the call"
    return {"graphs": backend.graphs}


def _on_group(rank: int) -> dict[str, Any]:
    group = dist.new_group([0, 1])
    return compare(rank, reduce_on_group, lambda r: (*vector(r), group), "eager")


def _dead_reduce_mixed(rank: int, backend_name: str) -> dict[str, Any]:
    """Rank 0 runs the compiled program and rank 1 eager: had rank 0's graph dropped the
    collective nothing reads, rank 1's all-reduce would pair with the check below."""
    backend = Recording(backend_name)
    x = torch.arange(4.0)
    if rank == 0:
        bytegraph.compile(dead_reduce, backend=backend)(x)
    else:
        dead_reduce(x)
    check = torch.full((4,), float(rank + 1))
    dist.all_reduce(check)
    assert torch.equal(check, torch.full((4,), 3.0)), f"check: {check}"
    if rank == 1:
        return {"graphs": [["all_reduce", "wait_tensor"]], "kept": True}
    return {"graphs": backend.graphs, "kept": backend.all_kept}


def _raising_graph(rank: int) -> dict[str, Any]:
    """Rank 0's graph raises after its collective; eager's error comes out, and the graph
    is not run again as Python (which would all-reduce twice: the check below would pair
    with the second)."""
    backend = Recording("eager")
    compiled = bytegraph.compile(reduce_then_index, backend=backend)
    errors = []
    for fn in (reduce_then_index, compiled):
        try:
            fn(torch.ones(4), torch.tensor([7 if rank == 0 else 1]))
            errors.append("none")
        except IndexError as error:
            errors.append(type(error).__name__)
    check = torch.full((4,), float(rank + 1))
    dist.all_reduce(check)
    assert torch.equal(check, torch.full((4,), 3.0)), f"check: {check}"
    assert errors[0] == errors[1], errors
    return {"graphs": backend.graphs}


def _dynamic(rank: int, backend_name: str) -> dict[str, Any]:
    """Three sizes: the second call traces again with a dynamic size (the size changed),
    the third reuses that graph; the collectives are in both graphs."""
    found = {}
    for name, make_args in (
        ("reduce_then_add", lambda n: (torch.arange(float(n)) + rank,)),
        ("gather_into", lambda n: (torch.arange(float(n)) + rank, torch.zeros(2 * n))),
        ("reduce_scatter", lambda n: (torch.arange(float(n)) + rank, torch.zeros(n // 2))),
        ("functional_others", lambda n: (torch.arange(float(n)) + rank,)),
    ):
        fn = CAPTURED[name][0]
        # compare's seed is rank + 10 * call: the sizes, the same on every rank, 4, 6, 8
        sizes = lambda seed, m=make_args: m(4 + 2 * (seed // 10))  # noqa: E731
        found[name] = compare(rank, fn, sizes, backend_name, calls=3)
    return found


def _gradients(rank: int) -> dict[str, Any]:
    """An all-reduce of a tensor that requires grad: a break, and eager's gradients (autograd
    does not see eager's collective; a captured one would be differentiated: torch.compile
    2.13 gives twice eager's gradients here)."""
    backend = Recording("aot_eager")
    grads = []
    for fn in (reduce_requires_grad, bytegraph.compile(reduce_requires_grad, backend=backend)):
        w = (torch.arange(3.0) + rank).requires_grad_()
        fn(w).square().sum().backward()
        grads.append(w.grad)
    assert torch.equal(grads[1], grads[0]), grads
    return {"graphs": backend.graphs}


def _eagers_errors(rank: int) -> dict[str, Any]:
    """Calls eager refuses (funcol takes no group=None, gloo no MAX of complex numbers)
    raise eager's error compiled too. (An AVG of integers, also refused, is left out: eager's
    own error there leaves gloo's connection broken at times.)"""
    found = {}
    for name, fn, x in (
        ("functional_group_none", functional_group_none, torch.ones(4)),
        ("maximum_of_complex_numbers", reduce_maximum, torch.ones(4, dtype=torch.complex64)),
    ):
        errors = []
        for run in (fn, bytegraph.compile(fn, backend="eager")):
            try:
                run(x.clone())
                errors.append("none")
            except (ValueError, RuntimeError) as error:
                errors.append(type(error).__name__)
            dist.barrier()  # a failure the collective left for later would surface here
        found[name] = errors
    return found


def _refused(rank: int) -> dict[str, Any]:
    found = {}
    for name, (fn, make_args) in REFUSED.items():
        dist.barrier()
        result = compare(rank, fn, make_args, "eager", calls=1)
        found[name] = {**result, "fullgraph": fullgraph_break(rank, fn, make_args)}
    return found


CAPTURED: dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]] = {
    "reduce_then_add": (reduce_then_add, vector),
    "reduce_on_world": (reduce_on_world, vector),
    "gather_into": (gather_into, vector_and_out(8)),
    "gather_world_size": (gather_world_size, vector),
    "reduce_scatter": (reduce_scatter, vector_and_out(2)),
    "broadcast_input": (broadcast_input, vector),
    "functional_reduce": (functional_reduce, vector),
    "functional_others": (functional_others, vector),
    "functional_ops": (functional_ops, vector),
    "reduce_if_initialized": (reduce_if_initialized, vector),
}
REFUSED: dict[str, tuple[Callable[..., Any], Callable[[int], tuple]]] = {
    "reduce_async": (reduce_async, vector),
    "gather_object": (gather_object, vector),
    "send_recv": (send_recv, vector),
    "reduce_on_rank_list": (reduce_on_rank_list, vector),
    "reduce_requires_grad": (
        reduce_requires_grad, lambda rank: (torch.ones(4, requires_grad=True),)
    ),
}
SCENARIOS: dict[str, Callable[[int], dict[str, Any]]] = {
    "eager": _captured("eager", list(CAPTURED)),
    "aot_eager": _captured("aot_eager", list(CAPTURED)),
    "inductor": _captured("inductor", ["reduce_then_add", "gather_into", "functional_reduce"]),
    "reduce_ops": _reduce_ops,
    "on_group": _on_group,
    "dead_reduce_dce": lambda rank: _dead_reduce_mixed(rank, "dce"),
    "dead_reduce_inductor": lambda rank: _dead_reduce_mixed(rank, "inductor"),
    "raising_graph": _raising_graph,
    "dynamic_eager": lambda rank: _dynamic(rank, "eager"),
    "dynamic_aot_eager": lambda rank: _dynamic(rank, "aot_eager"),
    "gradients": _gradients,
    "eagers_errors": _eagers_errors,
    "refused": _refused,
}


def run_scenarios(rank: int, world_size: int, names: list[str]) -> dict[str, Any]:
    """Each named scenario's result, or ``{"error": traceback}`` (world.run_named)."""
    return run_named(SCENARIOS, rank, names)
