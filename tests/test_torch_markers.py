"""The markers written for torch.compile, under bytegraph and torch.compile side by side.

Each test runs the same program eagerly, under ``bytegraph.compile`` and under
``torch.compile`` (both with a counting backend) and asserts equal outputs and
state, and the same graphs (bytegraph_torch_markers.py reads what torch's
markers leave on the objects).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo  # the user's import: the markers below live there

import bytegraph


class Graphs:
    """A counting backend that also counts how often its graphs run."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []
        self.runs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> object:
        self.graphs.append(gm)

        def run(*args: object) -> object:
            self.runs += 1
            return gm.forward(*args)

        return run

    def targets(self) -> list[list[object]]:
        return [
            [_name(n.target) for n in gm.graph.nodes if n.op in ("call_function", "call_method")]
            for gm in self.graphs
        ]


def _name(target: object) -> object:
    """An op as both systems record it: torch's graphs name ``torch.sin`` where bytegraph's
    call the ``sin`` method, so both become the name."""
    return getattr(target, "__name__", target)


def both(fn, **options):
    """``fn`` compiled by bytegraph and by torch.compile, each with its own Graphs."""
    torch._dynamo.reset()
    bg, tc = Graphs(), Graphs()
    return (
        (bytegraph.compile(fn, backend=bg, **options), bg),
        (torch.compile(fn, backend=tc, **options), tc),
    )


def same(actual, expected) -> None:
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


@pytest.fixture(autouse=True)
def default_stance():
    yield
    torch.compiler.set_stance("default")
    torch._dynamo.reset()


# --- disable --------------------------------------------------------------------------------

CALLS: list = []


def _double(t):
    CALLS.append(torch.compiler.is_compiling())
    return t * 2


DISABLED = {
    "compiler.disable decorator": torch.compiler.disable(_double),
    "compiler.disable(reason=)": torch.compiler.disable(_double, reason="not traceable"),
    "_dynamo.disable": torch._dynamo.disable(_double),
    "_dynamo.disable(recursive=False)": torch._dynamo.disable(_double, recursive=False),
}


@pytest.mark.parametrize("form", DISABLED)
def test_disabled_call_is_one_clean_break(form) -> None:
    disabled = DISABLED[form]

    def f(x):
        y = x + 1
        z = disabled(y)
        return z - 1

    CALLS.clear()
    x = torch.randn(3)
    expected = f(x)
    for compiled, graphs in both(f):
        same(compiled(x), expected)
        assert graphs.targets() == [["add"], ["sub"]]  # the mul runs as Python
    assert CALLS == [False] * 3  # eager, bytegraph, torch.compile: never traced
    out = bytegraph.explain(f)(x)
    (brk,) = out.breaks
    assert "_double is disabled" in brk.reason and "torch.compiler.disable" in brk.reason
    if "reason" in form:
        assert "not traceable" in brk.reason
    with pytest.raises(bytegraph.Unsupported, match="_double is disabled"):
        bytegraph.compile(f, backend="eager", fullgraph=True)(x)


def _cos(t):
    CALLS.append(torch.compiler.is_compiling())
    return t.cos()


@torch.compiler.disable(recursive=False)
def _skipped_frame(t):
    CALLS.append(("own frame", torch.compiler.is_compiling()))
    return _cos(t) + 1


@torch.compiler.disable
def _skipped_tree(t):
    CALLS.append(("own frame", torch.compiler.is_compiling()))
    return _cos(t) + 1


@pytest.mark.parametrize("disabled", [_skipped_frame, _skipped_tree], ids=["frame", "tree"])
def test_non_recursive_disable_compiles_what_the_function_calls(disabled) -> None:
    def f(x):
        return disabled(x.sin()).exp()

    x = torch.randn(3)
    CALLS.clear()
    expected = f(x)
    recursive = disabled is _skipped_tree
    for compiled, graphs in both(f):
        CALLS.clear()
        same(compiled(x), expected)
        # The function's own frame runs as Python; with recursive=False its callee
        # is compiled (a graph of its own), as torch's frame hook compiles it.
        assert CALLS == [("own frame", False), not recursive]
        assert graphs.targets() == (
            [["sin"], ["exp"]] if recursive else [["sin"], ["cos"], ["exp"]]
        )


class _WithDisabledMethod(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.seen: list = []

    @torch.compiler.disable
    def log_stats(self, t):
        self.seen.append((float(t.sum()), torch.compiler.is_compiling()))
        return t.abs()

    def forward(self, x):
        return self.log_stats(self.linear(x)).relu()


def test_disabled_method_of_a_module() -> None:
    model = _WithDisabledMethod()
    x = torch.randn(2, 4)
    expected = model(x)
    for compiled, graphs in both(model):
        model.seen.clear()
        same(compiled(x), expected)
        assert model.seen == [(pytest.approx(float(model.linear(x).sum())), False)]
        assert graphs.targets() == [["linear"], ["relu"]]
    (brk,) = bytegraph.explain(model)(x).breaks
    assert "log_stats is disabled by torch.compiler.disable" in brk.reason


class _Sine(torch.nn.Module):
    def forward(self, x):
        CALLS.append(torch.compiler.is_compiling())
        return x.sin()


@torch.compiler.disable
class _DisabledCosine(torch.nn.Module):
    def forward(self, x):
        CALLS.append(torch.compiler.is_compiling())
        return x.cos()


@pytest.mark.parametrize(
    "module, reason",
    [(torch.compiler.disable(_Sine()), "a _Sine module is disabled"),
     (_DisabledCosine(), "_wrapped_call_impl is disabled")],
    ids=["instance", "class"],
)
def test_disabled_module_is_one_clean_break(module, reason) -> None:
    def f(x):
        return module(x + 1) * 2

    x = torch.randn(3)
    CALLS.clear()
    expected = f(x)
    for compiled, graphs in both(f):
        same(compiled(x), expected)
        assert graphs.targets() == [["add"], ["mul"]]
    assert CALLS == [False] * 3
    (brk,) = bytegraph.explain(f)(x).breaks
    assert reason in brk.reason and "torch.compiler.disable" in brk.reason


def test_compiling_a_disabled_function_compiles_it_as_torch_compile_does() -> None:
    @torch.compiler.disable
    def g(x):
        return x.sin() * 2

    x = torch.randn(3)
    for compiled, graphs in both(g):
        same(compiled(x), g(x))
        assert graphs.targets() == [["sin", "mul"]]
    assert bytegraph.compile(g, backend="eager").fn is g._torchdynamo_orig_callable


def test_transformers_disabled_cache_update() -> None:
    """Hugging Face marks PagedAttentionCache.update with torch.compiler.disable; a stand-in
    cache (the block-table path: the kwargs filled in place) called from compiled code."""
    cache_module = pytest.importorskip("transformers.generation.continuous_batching.cache")

    class Allocator:
        layer_type, index = "full", 0

        def get_cache_for_block_table(self, layer_idx):
            return torch.zeros(2), torch.ones(2)

    class Cache:
        update = cache_module.PagedAttentionCache.update
        layer_to_allocator = {0: Allocator()}

    cache = Cache()

    def attend(q, k, v, kwargs):
        k, v = cache.update(k * 2, v * 2, 0, kwargs)
        return (q @ k.transpose(-1, -2)).softmax(-1) @ v

    def inputs():
        q, k, v = (torch.randn(1, 2, 3, 4) for _ in range(3))
        kwargs = {"cu_seq_lens_k": {"full": torch.tensor([0, 3])}, "max_length_k": {"full": 3},
                  "block_table": [torch.tensor([[0]])]}
        return q, k, v, kwargs

    torch.manual_seed(0)
    expected_args = inputs()
    expected = attend(*expected_args)
    for compiled, graphs in both(attend):
        torch.manual_seed(0)
        args = inputs()
        same(compiled(*args), expected)
        assert args[3]["cu_seq_lens_k"].dtype == torch.int32
        assert sorted(args[3]) == sorted(expected_args[3])
        assert len(graphs.graphs) == 2  # the scaling, then the attention
    (brk,) = bytegraph.explain(attend)(*inputs()).breaks
    assert "PagedAttentionCache.update is disabled by torch.compiler.disable" in brk.reason


# --- graph_break, allow_in_graph, assume_constant_result, is_compiling -------------------------


def test_dynamo_graph_break() -> None:
    def f(x):
        y = x.relu()
        torch._dynamo.graph_break()
        return y + 1

    x = torch.randn(4)
    for compiled, graphs in both(f):
        same(compiled(x), f(x))
        assert graphs.targets() == [["relu"], ["add"]]
    (brk,) = bytegraph.explain(f)(x).breaks
    assert brk.kind == "explicit" and "torch._dynamo.graph_break()" in brk.reason


@pytest.mark.parametrize("allow", [torch.compiler.allow_in_graph, torch._dynamo.allow_in_graph])
def test_allow_in_graph_is_one_node(allow) -> None:
    def fused(a, b):
        return a * b + a.sin()

    allow(fused)

    def f(x, y):
        return fused(x, y) + 1

    x, y = torch.randn(3), torch.randn(3)
    for compiled, graphs in both(f):
        same(compiled(x, y), f(x, y))
        assert graphs.targets() == [["fused", "add"]]


CONSTANT = [3]


@pytest.mark.parametrize(
    "marker", [torch.compiler.assume_constant_result, bytegraph.assume_constant_result],
    ids=["torch", "bytegraph"],
)
def test_assume_constant_result_is_evaluated_once_and_not_guarded(marker) -> None:
    @marker
    def scale(offset):
        return CONSTANT[0] + offset

    def f(x):
        return x * scale(1)

    x = torch.ones(2)
    CONSTANT[0] = 3
    systems = both(f)
    for compiled, graphs in systems:
        same(compiled(x), f(x))
        assert graphs.targets() == [["mul"]]
    CONSTANT[0] = 5  # assumed constant: neither system looks again (no guard, no recompile)
    for compiled, graphs in systems:
        same(compiled(x), x * 4)
        assert len(graphs.graphs) == 1


def test_is_compiling_while_traced_not_when_run() -> None:
    def f(x):
        a = 1 if torch.compiler.is_compiling() else 2
        b = 10 if torch._dynamo.is_compiling() else 20
        c = 100 if torch.compiler.is_dynamo_compiling() else 200
        return x + (a + b + c)

    x = torch.zeros(1)
    same(f(x), torch.tensor([222.0]))
    for compiled, graphs in both(f):
        same(compiled(x), torch.tensor([111.0]))
        assert len(graphs.graphs) == 1


# --- dimension marks --------------------------------------------------------------------------


def _scale(x):
    return x * 2


@pytest.mark.parametrize("mark", ["mark_dynamic", "maybe_mark_dynamic", "mark_unbacked"])
def test_marked_dynamic_dimension_makes_one_entry(mark) -> None:
    marker = getattr(torch._dynamo.decorators, mark)
    systems = both(_scale)
    for n in (4, 6, 8):
        x = torch.randn(n, 3)
        marker(x, 0)
        for compiled, _ in systems:
            same(compiled(x), x * 2)
    assert [len(graphs.graphs) for _, graphs in systems] == [1, 1]


def test_mark_dynamic_bounds_are_guarded() -> None:
    compiled = bytegraph.compile(_scale, backend=(graphs := Graphs()))
    for n, entries in ((4, 1), (6, 1), (12, 2)):  # 12 is out of the marked range
        x = torch.randn(n, 3)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=8)
        same(compiled(x), x * 2)
        assert len(graphs.graphs) == entries


def test_mark_static_keeps_a_dimension_static_under_dynamic_true() -> None:
    systems = both(_scale, dynamic=True)
    for n in (4, 6, 8):
        x = torch.randn(n, 3)
        torch._dynamo.mark_static(x, 0)
        for compiled, _ in systems:
            same(compiled(x), x * 2)
    assert [len(graphs.graphs) for _, graphs in systems] == [3, 3]


# --- set_stance -------------------------------------------------------------------------------


def _add_one(x):
    return x + 1


def test_force_eager_runs_the_function_as_python() -> None:
    systems = both(_add_one)
    x = torch.ones(3)
    for compiled, graphs in systems:
        compiled(x)  # compiled and cached
        with torch.compiler.set_stance("force_eager"):
            same(compiled(x), x + 1)  # the cached entry is not used
            same(compiled(x.double()), x.double() + 1)  # nor is a new one made
        assert (len(graphs.graphs), graphs.runs) == (1, 1)
        torch.compiler.set_stance("force_eager")  # as a plain call
        same(compiled(x), x + 1)
        torch.compiler.set_stance("default")
        same(compiled(x), x + 1)
        assert (len(graphs.graphs), graphs.runs) == (1, 2)


def test_force_eager_as_a_decorator() -> None:
    systems = both(_add_one)

    @torch.compiler.set_stance("force_eager")
    def run_all(x):
        return [compiled(x) for compiled, _ in systems]

    x = torch.ones(2)
    for result in run_all(x):
        same(result, x + 1)
    assert [len(graphs.graphs) for _, graphs in systems] == [0, 0]
    for compiled, _ in systems:
        compiled(x)
    assert [len(graphs.graphs) for _, graphs in systems] == [1, 1]


def test_eager_on_recompile_uses_the_cache_and_never_compiles() -> None:
    systems = both(_add_one)
    x = torch.ones(3)
    for compiled, graphs in systems:
        compiled(x)
        with torch.compiler.set_stance("eager_on_recompile"):
            same(compiled(x), x + 1)
            same(compiled(x.double()), x.double() + 1)
        assert (len(graphs.graphs), graphs.runs) == (1, 2)


def test_fail_on_recompile_names_the_function_and_the_guard() -> None:
    x = torch.ones(3)
    for compiled, graphs in both(_add_one):
        with torch.compiler.set_stance("fail_on_recompile"):
            with pytest.raises(RuntimeError, match="fail_on_recompile.*'_add_one'"):
                compiled(x)  # torch fails on a first compile as well
        compiled(x)
        with torch.compiler.set_stance("fail_on_recompile"):
            same(compiled(x), x + 1)
            with pytest.raises(RuntimeError, match="(?s)_add_one.*dtype") as error:
                compiled(x.double())
        assert "line number" in str(error.value)
        assert len(graphs.graphs) == 1


def test_fail_on_recompile_fails_a_compiled_root_without_tensors_too() -> None:
    def count(n):
        return [i for i in range(n)]

    for compiled, _ in both(count):
        with torch.compiler.set_stance("fail_on_recompile"):
            with pytest.raises(RuntimeError, match="'count'"):
                compiled(3)
        assert compiled(3) == [0, 1, 2]


def test_stance_is_default_where_torch_dynamo_was_never_imported(monkeypatch) -> None:
    import sys

    from bytegraph import torch_markers

    monkeypatch.delitem(sys.modules, "torch._dynamo.eval_frame")
    monkeypatch.setattr(torch_markers, "WATCH", torch_markers.StanceWatch())
    assert torch_markers.current_stance() == "default"
    assert "torch._dynamo.eval_frame" not in sys.modules
