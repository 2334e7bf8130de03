"""``bytegraph.compile`` takes torch.compile's signature and means the same by each argument.

Each test does what a user would do with torch.compile and with
bytegraph.compile in the same test, and compares: outputs with eager's,
graph counts with torch.compile's (a counting backend for each), errors with
torch's errors. Where bytegraph deliberately differs it says so: a
``mode``/``options`` given to a backend that cannot take them is an error
naming the option (torch's "eager" drops them with a log line).
"""

from __future__ import annotations

import functools
import inspect
import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch

import bytegraph
from bytegraph.api import CompiledFunction
from bytegraph.inspect import cli
from tests.conftest import CountingBackend


def f(x, y):
    return torch.sin(x) * y + 1


def inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(3, 4), torch.randn(3, 4)


def check_like_torch(compiled, torch_compiled, fn, args) -> None:
    """The same outputs from eager, bytegraph and torch.compile."""
    expected = fn(*args)
    torch.testing.assert_close(compiled(*args), expected, rtol=0, atol=0)
    torch.testing.assert_close(torch_compiled(*args), expected, rtol=0, atol=0)


# --- the signature ---------------------------------------------------------------------


def test_the_signature_is_torch_compiles() -> None:
    ours = inspect.signature(bytegraph.compile).parameters
    theirs = inspect.signature(torch.compile).parameters
    names = ["model", "fullgraph", "dynamic", "backend", "mode", "options", "disable"]
    assert list(ours) == names
    for name in names:
        assert ours[name].kind == theirs[name].kind, name
        if name != "backend":  # torch's None means its default backend, "inductor"
            assert ours[name].default == theirs[name].default, name
    assert ours["backend"].default == "inductor"


# --- fullgraph ---------------------------------------------------------------------------


def item_of_sum(x):
    return x + (x * 2).sum().item()


def nonzero_of(x):
    return torch.nonzero(x) * 2


@pytest.mark.parametrize("fn", [item_of_sum, nonzero_of], ids=lambda fn: fn.__name__)
def test_fullgraph_keeps_data_dependent_values_in_the_graph_as_torch_does(fn) -> None:
    """torch.compile(fullgraph=True) opts into unbacked semantics (capture_scalar_outputs
    and capture_dynamic_output_shape_ops): one graph, where without fullgraph it breaks."""
    ours, theirs = CountingBackend(), CountingBackend()
    compiled = bytegraph.compile(fn, fullgraph=True, backend=ours)
    torch_compiled = torch.compile(fn, fullgraph=True, backend=theirs)
    x = torch.tensor([1.0, 0.0, 2.0])
    check_like_torch(compiled, torch_compiled, fn, (x,))
    assert ours.calls == theirs.calls == 1
    assert not bytegraph.config.capture_scalar_outputs  # the switches were for that trace
    assert not bytegraph.config.capture_dynamic_output_shape_ops
    broken = bytegraph.compile(fn, backend="eager")
    torch.testing.assert_close(broken(x), fn(x), rtol=0, atol=0)
    assert broken.entries[0].breaks


def test_fullgraph_still_refuses_a_branch_on_a_data_dependent_value() -> None:
    def branchy(x):
        if (x * 2).sum().item() > 1:
            return x + 1
        return x - 1

    with pytest.raises(Exception, match="data-dependent"):
        torch.compile(branchy, fullgraph=True, backend="eager")(torch.ones(3))
    with pytest.raises(bytegraph.Unsupported, match="only the tensor's data decides"):
        bytegraph.compile(branchy, fullgraph=True, backend="eager")(torch.ones(3))


# --- mode and options ------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"mode": "max-autotune", "options": {}},
        {"mode": "fast"},
        {"options": {"max_autotune": "yes"}},
    ],
    ids=["mode and options", "unknown mode", "option of the wrong type"],
)
def test_bad_mode_or_options_raise_torchs_error(arguments) -> None:
    with pytest.raises(RuntimeError) as theirs:
        torch.compile(f, **arguments)
    with pytest.raises(RuntimeError) as ours:
        bytegraph.compile(f, **arguments)
    assert str(ours.value) == str(theirs.value)


def test_an_unknown_option_is_named_with_close_matches() -> None:
    with pytest.raises(RuntimeError) as theirs:
        torch.compile(f, options={"max_autotun": True})
    with pytest.raises(RuntimeError) as ours:
        bytegraph.compile(f, options={"max_autotun": True})
    prefix = "Unexpected optimization option max_autotun"
    assert str(theirs.value).startswith(prefix)
    assert str(ours.value).startswith(prefix)
    assert "max_autotune" in str(ours.value)
    assert "\n" not in str(ours.value) and len(str(ours.value)) < 200  # torch lists ~500 names


@pytest.mark.parametrize(
    "arguments",
    [
        {"mode": "max-autotune"},
        {"mode": "reduce-overhead"},
        {"options": {"max_autotune": True, "triton.cudagraphs": False}},
        {"options": {"max-autotune": True}},  # torch reads '-' as '_' in option names
    ],
    ids=repr,
)
def test_mode_and_options_become_the_inductor_config_torch_compile_makes(arguments) -> None:
    from bytegraph.graph import backend_options

    mode, options = arguments.get("mode"), arguments.get("options")
    expected = torch._TorchCompileInductorWrapper(mode, options, None).config
    compiled = bytegraph.compile(f, **arguments)
    backend = compiled.backend
    assert isinstance(backend, backend_options.InductorBackend)
    assert backend.config_patches == expected


def test_default_mode_and_no_options_is_plain_inductor() -> None:
    from bytegraph.graph.backends import inductor

    assert bytegraph.compile(f).backend is inductor
    assert bytegraph.compile(f, mode="default").backend is inductor
    assert bytegraph.compile(f, options={}).backend is inductor


def test_inductor_config_is_patched_around_each_compile_only(monkeypatch) -> None:
    """Each graph reaches compile_fx with the patches (compile_fx applies them to its own
    compile); Inductor's global config is never changed."""
    import torch._inductor.compile_fx as compile_fx_module
    from torch._inductor import config

    handed: list[dict] = []

    def spy(gm, example_inputs, config_patches=None):
        handed.append(config_patches)
        return gm.forward

    monkeypatch.setattr(compile_fx_module, "compile_fx", spy)
    before = config.get_config_copy()
    compiled = bytegraph.compile(f, mode="max-autotune-no-cudagraphs")
    args = inputs()
    torch.testing.assert_close(compiled(*args), f(*args), rtol=0, atol=0)
    assert handed == [torch._inductor.list_mode_options("max-autotune-no-cudagraphs")]
    assert config.get_config_copy() == before


def test_inductor_with_a_mode_runs_like_torch_compile() -> None:
    """One real Inductor compile each (small, pointwise: no autotuning); on CPU torch's
    reduce-overhead skips CUDA graphs, and so does Inductor under bytegraph."""
    def g(x):
        return torch.sin(x) * 2 + 1

    x = torch.randn(8)
    compiled = bytegraph.compile(g, mode="reduce-overhead")
    torch_compiled = torch.compile(g, mode="reduce-overhead")
    torch.testing.assert_close(compiled(x), g(x))
    torch.testing.assert_close(torch_compiled(x), g(x))
    assert len(compiled.entries) == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("arguments", [{"mode": "max-autotune"}, {"options": {"x": 1}}], ids=repr)
def test_mode_or_options_for_a_backend_without_them_is_an_error_naming_it(
    backend, arguments
) -> None:
    """torch's eager backend logs "ignoring extra kwargs" and drops them: bytegraph refuses,
    since the user asked for something that would not happen."""
    with pytest.raises(ValueError) as info:
        bytegraph.compile(f, backend=backend, **arguments)
    message = str(info.value)
    (keyword,) = arguments
    assert f"{keyword}=" in message and repr(backend) in message and "\n" not in message


def test_a_backend_that_takes_mode_and_options_gets_them_as_torch_passes_them() -> None:
    class KeywordBackend(CountingBackend):
        def __init__(self) -> None:
            super().__init__()
            self.keywords: list[dict] = []

        def __call__(self, gm, example_inputs, **keywords):
            self.keywords.append(keywords)
            return super().__call__(gm, example_inputs)

    for arguments in ({"options": {"a": 1}}, {"mode": "max-autotune"}, {"mode": "default"}):
        ours, theirs = KeywordBackend(), KeywordBackend()
        compiled = bytegraph.compile(f, backend=ours, **arguments)
        torch_compiled = torch.compile(f, backend=theirs, **arguments)
        check_like_torch(compiled, torch_compiled, f, inputs())
        assert ours.keywords == theirs.keywords, arguments
        assert ours.calls == theirs.calls == 1


def test_a_backend_without_the_keyword_is_refused_at_compile() -> None:
    """torch fails at the first call, inside the backend; bytegraph says so at compile()."""
    backend = CountingBackend()
    with pytest.raises(ValueError, match=r"options=\{'a': 1\}.*CountingBackend"):
        bytegraph.compile(f, backend=backend, options={"a": 1})

    def takes_options(gm, example_inputs, options=None):
        return gm.forward

    with pytest.raises(ValueError, match="takes_options.*no mode="):
        bytegraph.compile(f, backend=takes_options, mode="max-autotune")
    compiled = bytegraph.compile(f, backend=takes_options, options={"a": 1})
    args = inputs()
    torch.testing.assert_close(compiled(*args), f(*args), rtol=0, atol=0)


def test_torch_compiles_own_option_keys() -> None:
    """guard_filter_fn drops guards under torch: bytegraph keeps them all (always correct) and
    says so; use_aoti (AOTInductor) is refused. Neither key is removed from the user's dict."""
    options = {"guard_filter_fn": lambda entries: [True for _ in entries]}
    with pytest.warns(UserWarning, match="guard_filter_fn"):
        compiled = bytegraph.compile(f, backend="eager", options=options)
    assert "guard_filter_fn" in options
    args = inputs()
    torch.testing.assert_close(compiled(*args), f(*args), rtol=0, atol=0)
    with pytest.raises(ValueError, match="use_aoti"):
        bytegraph.compile(f, options={"use_aoti": True})


# --- disable ---------------------------------------------------------------------------


def test_disable_returns_the_callable_unchanged() -> None:
    module = torch.nn.Linear(2, 2)
    for value in (f, module):
        assert torch.compile(value, disable=True) is value
        assert bytegraph.compile(value, disable=True) is value
        assert torch.compile(disable=True)(value) is value
        assert bytegraph.compile(disable=True, backend="eager")(value) is value


def test_disable_still_checks_the_backend_as_torch_does() -> None:
    with pytest.raises(Exception, match="no_such_backend"):
        torch.compile(f, backend="no_such_backend", disable=True)
    with pytest.raises(ValueError, match="no_such_backend"):
        bytegraph.compile(f, backend="no_such_backend", disable=True)


# --- any callable ----------------------------------------------------------------------


def test_a_builtin_is_called_as_is() -> None:
    ours, theirs = CountingBackend(), CountingBackend()
    compiled = bytegraph.compile(torch.sin, backend=ours)
    torch_compiled = torch.compile(torch.sin, backend=theirs)
    assert compiled is torch.sin
    check_like_torch(compiled, torch_compiled, torch.sin, (torch.randn(3),))
    assert ours.calls == 0  # nothing of it is Python code to trace


class Scaler:
    """A callable object with state its call reads and changes."""

    def __init__(self) -> None:
        self.scale = torch.tensor(2.0)
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return torch.relu(x) * self.scale


def test_a_callable_objects_call_is_compiled() -> None:
    ours, theirs = CountingBackend(), CountingBackend()
    eager_obj, our_obj, their_obj = Scaler(), Scaler(), Scaler()
    compiled = bytegraph.compile(our_obj, backend=ours)
    torch_compiled = torch.compile(their_obj, backend=theirs)
    x = torch.randn(5)
    for _ in range(2):
        expected = eager_obj(x)
        torch.testing.assert_close(compiled(x), expected, rtol=0, atol=0)
        torch.testing.assert_close(torch_compiled(x), expected, rtol=0, atol=0)
    assert our_obj.calls == their_obj.calls == eager_obj.calls == 2
    # torch guards on the counter's value (a second graph once it changes); bytegraph
    # only adds one to it, and needs no guard on it
    assert ours.calls == 1 <= theirs.calls


def test_a_partial_is_compiled_through_its_function() -> None:
    ours, theirs = CountingBackend(), CountingBackend()
    y = torch.randn(3, 4)
    partial = functools.partial(f, y=y)
    compiled = bytegraph.compile(partial, backend=ours)
    torch_compiled = torch.compile(partial, backend=theirs)
    assert isinstance(compiled, functools.partial) and compiled.keywords == {"y": y}
    check_like_torch(compiled, torch_compiled, partial, (torch.randn(3, 4),))
    assert ours.calls == theirs.calls == 1


def test_an_nn_module_class_is_compiled_in_place() -> None:
    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.cos(x) + 1

    backend = CountingBackend()
    assert bytegraph.compile(Net, backend=backend) is Net
    assert isinstance(Net.__dict__["forward"], CompiledFunction)
    x = torch.randn(3)
    torch.testing.assert_close(Net()(x), torch.cos(x) + 1, rtol=0, atol=0)
    assert backend.calls == 1
    # an instance of it compiled too: its forward compiled once, from the original
    instance = bytegraph.compile(Net(), backend=backend)
    assert not isinstance(instance._compiled_forward.fn, CompiledFunction)
    torch.testing.assert_close(instance(x), torch.cos(x) + 1, rtol=0, atol=0)
    assert backend.calls == 2


@pytest.mark.parametrize("bad", [42, "f", type(None)], ids=repr)
def test_what_cannot_be_compiled_is_refused_in_one_line(bad) -> None:
    with pytest.raises(TypeError) as info:
        bytegraph.compile(bad)
    assert "\n" not in str(info.value) and "function" in str(info.value)


# --- compiled callables, compiled again -------------------------------------------------


def test_a_bytegraph_compiled_function_compiled_again_is_compiled_once() -> None:
    """torch.compile of its own compiled function compiles the innermost function with the
    new backend; the first backend never runs. The same under bytegraph."""
    first, second = CountingBackend(), CountingBackend()
    torch_first, torch_second = CountingBackend(), CountingBackend()
    compiled = bytegraph.compile(bytegraph.compile(f, backend=first), backend=second)
    torch_compiled = torch.compile(torch.compile(f, backend=torch_first), backend=torch_second)
    assert isinstance(compiled, CompiledFunction) and compiled.fn is f
    check_like_torch(compiled, torch_compiled, f, inputs())
    assert (first.calls, second.calls) == (torch_first.calls, torch_second.calls) == (0, 1)


def test_a_torch_compiled_function_is_compiled_from_the_original() -> None:
    backend = CountingBackend()
    torch_compiled = torch.compile(f, backend="eager")
    compiled = bytegraph.compile(torch_compiled, backend=backend)
    assert isinstance(compiled, CompiledFunction) and compiled.fn is f
    args = inputs()
    torch.testing.assert_close(compiled(*args), f(*args), rtol=0, atol=0)
    assert backend.calls == 1 and compiled.entries[0].breaks == ()


def test_compiled_modules_are_compiled_from_the_original_module() -> None:
    module = torch.nn.Linear(4, 2)
    for wrapper in (torch.compile(module, backend="eager"), bytegraph.compile(module)):
        compiled = bytegraph.compile(wrapper, backend="eager")
        assert compiled._orig_mod is module
        x = torch.randn(3, 4)
        torch.testing.assert_close(compiled(x), module(x), rtol=0, atol=0)


def test_a_method_torch_compiled_in_its_class_is_compiled_from_the_original() -> None:
    class Doubler:
        @torch.compile(backend="eager")
        def run(self, x):
            return torch.sin(x) * 2

    backend = CountingBackend()
    obj = Doubler()
    compiled = bytegraph.compile(obj.run, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), torch.sin(x) * 2, rtol=0, atol=0)
    assert compiled.__self__ is obj
    assert compiled.__func__.fn is Doubler.run._torchdynamo_orig_callable
    assert backend.calls == 1 and compiled.__func__.entries[0].breaks == ()


def test_a_compiled_method_compiled_again() -> None:
    obj = Scaler()
    backend = CountingBackend()
    once = bytegraph.compile(obj.__call__, backend="eager")
    twice = bytegraph.compile(once, backend=backend)
    assert twice.__self__ is obj and twice.__func__.fn is Scaler.__call__
    x = torch.randn(3)
    torch.testing.assert_close(twice(x), torch.relu(x) * 2, rtol=0, atol=0)
    assert backend.calls == 1


# --- backends that packages register -----------------------------------------------------


@pytest.fixture
def installed_backend(tmp_path, monkeypatch):
    """A package ``fakebackendpkg`` registering ``fake_backend`` under torch's entry points,
    installed as a dist-info folder on sys.path."""
    (tmp_path / "fakebackendpkg.py").write_text(textwrap.dedent("""
        graphs = []

        def compile_graph(gm, example_inputs):
            graphs.append(gm)
            return gm.forward
    """))
    dist = tmp_path / "fakebackendpkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakebackendpkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[torch_dynamo_backends]\nfake_backend = fakebackendpkg:compile_graph\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("fakebackendpkg", None)


def test_a_backend_a_package_registers_is_found_by_name(installed_backend) -> None:
    compiled = bytegraph.compile(f, backend="fake_backend")
    args = inputs()
    torch.testing.assert_close(compiled(*args), f(*args), rtol=0, atol=0)
    assert len(sys.modules["fakebackendpkg"].graphs) == 1


def test_registered_backends_are_found_without_torch_dynamo(installed_backend, tmp_path) -> None:
    """In a fresh process: looking the name up imports neither torch._dynamo nor its
    backend registry (torch.compile's lookup imports both)."""
    code = textwrap.dedent("""
        import sys
        import bytegraph

        compiled = bytegraph.compile(lambda x: x + 1, backend="fake_backend")
        assert "fakebackendpkg" in sys.modules
        assert "torch._dynamo" not in sys.modules, "torch._dynamo was imported"
    """)
    path = os.pathsep.join([str(tmp_path), *sys.path])
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": path},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_a_backend_of_torchs_own_registry_is_taken_as_its_error_says() -> None:
    with pytest.raises(ValueError) as info:
        bytegraph.compile(f, backend="aot_eager_decomp_partition")
    fix = "backend=torch._dynamo.lookup_backend('aot_eager_decomp_partition')"
    assert fix in str(info.value) and "\n" not in str(info.value)
    import torch._dynamo  # the test, as the user would; bytegraph never imports it

    backend = torch._dynamo.lookup_backend("aot_eager_decomp_partition")
    compiled = bytegraph.compile(f, backend=backend)
    torch_compiled = torch.compile(f, backend="aot_eager_decomp_partition")
    check_like_torch(compiled, torch_compiled, f, inputs())
    assert len(compiled.entries) == 1


def test_an_unknown_backend_lists_the_registered_ones_too(installed_backend) -> None:
    with pytest.raises(ValueError) as info:
        bytegraph.compile(f, backend="no_such_backend")
    message = str(info.value)
    for name in ("no_such_backend", "eager", "aot_eager", "inductor", "fake_backend"):
        assert name in message


# --- the command line on a script that compiles its function itself -------------------------


@pytest.mark.parametrize(
    ("decorator", "compiling"),
    [
        ("@torch.compile(backend='eager')", ""),
        ("", "f = torch.compile(f, backend='eager')"),
        ("", "f = bytegraph.compile(f, backend='eager')\n"
             "g = bytegraph.compile(f, backend='eager')"),
        ("", "g = bytegraph.compile(f, backend='eager')"),
    ],
    ids=["@torch.compile", "torch.compile", "bytegraph.compile twice", "under another name"],
)
def test_explain_a_function_the_script_compiles_itself(
    tmp_path, capsys, decorator, compiling
) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import torch
        import bytegraph

        {decorator}
        def f(x):
            return torch.sin(x) + 1

        {compiling}
        h = globals().get("g", f)
        x = torch.randn(3)
        assert torch.equal(h(x), torch.sin(x) + 1)
    """).format(decorator=decorator, compiling=compiling))
    status = cli.main(["explain", str(script), "--function", "f"])
    out, err = capsys.readouterr()
    assert (status, err) == (0, "")
    assert "Graph count: 1\n" in out and "Graph break count: 0\n" in out


def _p0(): ...
def _p1(a): ...
def _p2(a, b=2): ...
def _p3(a, b=2, c=3): ...
def _p4(a, /, b, c=(1,)): ...
def _p5(a, *rest): ...
def _p6(a, *, k=1): ...
def _p7(a, **kw): ...
def _p8(a=None, b=None): ...


def _comprehension() -> types.FunctionType:
    """A generator expression's frame (3.11's list comprehensions' too): one argument,
    named ``.0`` (inspect: implicit0)."""
    code = next(c for c in (lambda xs: (x for x in xs)).__code__.co_consts
                if isinstance(c, types.CodeType))
    return types.FunctionType(code, {})


@pytest.mark.parametrize("count", range(5))
@pytest.mark.parametrize("fn", [_p0, _p1, _p2, _p3, _p4, _p5, _p6, _p7, _p8, _comprehension()],
                         ids=lambda f: f.__name__)
def test_positional_binding_is_inspects(fn, count) -> None:
    """bind_arguments' fast path for positional calls binds as inspect.signature does: the
    same locals in the same order, TypeError where inspect raises it."""
    from bytegraph.translate.convert import bind_arguments

    args = tuple(range(count))
    try:
        bound = inspect.signature(fn).bind(*args)
        bound.apply_defaults()
        want = list(bound.arguments.items())
    except TypeError:
        with pytest.raises(TypeError):
            bind_arguments(fn, args, {})
        return
    assert list(bind_arguments(fn, args, {}).items()) == want
