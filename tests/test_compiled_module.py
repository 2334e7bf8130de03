"""A compiled module behaves like torch.compile's OptimizedModule where users rely on it.

Each test does the same thing to a module compiled by bytegraph and to one
compiled by torch.compile (both ``backend="eager"``), each over its own copy
of one module, and compares what they show: state_dict keys and values,
parameters, training mode, device/dtype moves, hooks and their order,
pickling, deepcopy, attribute forwarding, repr.
"""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch

import bytegraph
from bytegraph.compiled_module import CompiledModule
from tests.conftest import CountingBackend


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)
        self.norm = torch.nn.BatchNorm1d(4)

    def forward(self, x):
        return torch.relu(self.norm(self.lin(x)))


def make() -> Net:
    torch.manual_seed(0)
    return Net()


def both(backend="eager") -> tuple[Net, torch.nn.Module, Net, torch.nn.Module]:
    """(module, bytegraph's compiled module, its twin, torch.compile's compiled twin)."""
    ours, theirs = make(), make()
    return (
        ours, bytegraph.compile(ours, backend=backend),
        theirs, torch.compile(theirs, backend="eager"),
    )


def same_state(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_state_dict_has_torchs_keys() -> None:
    _, compiled, _, torch_compiled = both()
    same_state(compiled.state_dict(), torch_compiled.state_dict())
    assert next(iter(compiled.state_dict())) == "_orig_mod.lin.weight"


def test_load_state_dict_takes_prefixed_and_inner_keys() -> None:
    """torch's wrapper loads only its own ``_orig_mod.`` keys; bytegraph's also loads the
    original module's keys (a checkpoint saved from the uncompiled model)."""
    module, compiled, twin, torch_compiled = both()
    source = Net()
    with torch.no_grad():
        for p in source.parameters():
            p.add_(1.0)
    source.norm.running_mean.fill_(0.5)
    prefixed = {f"_orig_mod.{k}": v for k, v in source.state_dict().items()}

    assert str(compiled.load_state_dict(prefixed)) == str(torch_compiled.load_state_dict(prefixed))
    same_state(module.state_dict(), source.state_dict())
    same_state(twin.state_dict(), source.state_dict())

    fresh, fresh_compiled = make(), None
    fresh_compiled = bytegraph.compile(fresh, backend="eager")
    result = fresh_compiled.load_state_dict(source.state_dict())
    assert (result.missing_keys, result.unexpected_keys) == ([], [])
    same_state(fresh.state_dict(), source.state_dict())
    with pytest.raises(RuntimeError, match="Missing key"):
        torch.compile(make(), backend="eager").load_state_dict(source.state_dict())

    with pytest.raises(RuntimeError) as ours:
        compiled.load_state_dict({"_orig_mod.lin.weight": source.lin.weight})
    with pytest.raises(RuntimeError) as theirs:
        torch_compiled.load_state_dict({"_orig_mod.lin.weight": source.lin.weight})
    assert str(ours.value).split(":", 1)[1] == str(theirs.value).split(":", 1)[1]


def test_parameters_and_buffers_are_the_originals() -> None:
    module, compiled, _, torch_compiled = both()
    names = [n for n, _ in compiled.named_parameters()]
    assert names == [n for n, _ in torch_compiled.named_parameters()]
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in module.parameters()]
    assert [n for n, _ in compiled.named_buffers()] == [
        n for n, _ in torch_compiled.named_buffers()
    ]
    assert compiled._orig_mod is module
    assert [n for n, _ in compiled.named_children()] == ["_orig_mod"]


def test_train_and_eval_are_seen_by_both() -> None:
    module, compiled, twin, torch_compiled = both()
    for step in ("eval", "train", "inner eval", "inner train", "train(False)"):
        for wrapper, original in ((compiled, module), (torch_compiled, twin)):
            if step == "eval":
                wrapper.eval()
            elif step == "train":
                wrapper.train()
            elif step == "inner eval":
                original.eval()
            elif step == "inner train":
                original.train()
            else:
                wrapper.train(False)
        assert compiled.training == torch_compiled.training == module.training, step
        assert module.norm.training == twin.norm.training, step


def test_the_mode_the_original_is_in_is_what_runs() -> None:
    module, compiled, twin, torch_compiled = both()
    eager = make()
    x = torch.randn(5, 3)
    for mode in (False, True, False):
        module.train(mode)
        twin.train(mode)
        expected = eager.train(mode)(x)
        torch.testing.assert_close(compiled(x), expected, rtol=0, atol=0)
        torch.testing.assert_close(torch_compiled(x), expected, rtol=0, atol=0)
    same_state(module.state_dict(), eager.state_dict())  # running stats updated alike
    same_state(twin.state_dict(), eager.state_dict())


def test_to_moves_the_original() -> None:
    module, compiled, twin, torch_compiled = both()
    assert compiled.to(torch.float64) is compiled
    assert torch_compiled.to(torch.float64) is torch_compiled
    assert module.lin.weight.dtype == twin.lin.weight.dtype == torch.float64
    x = torch.randn(2, 3, dtype=torch.float64)
    module.eval()
    twin.eval()
    torch.testing.assert_close(compiled(x), torch_compiled(x), rtol=0, atol=0)
    compiled.to("cpu").float()
    assert module.lin.weight.dtype == torch.float32


def test_hooks_on_the_wrapper_and_on_the_original_run_as_torchs() -> None:
    runs: dict[str, list[str]] = {"ours": [], "torch": []}
    x = torch.randn(2, 3)
    module, compiled, twin, torch_compiled = both()
    handles = []
    for key, wrapper, original in (("ours", compiled, module), ("torch", torch_compiled, twin)):
        log = runs[key]
        handles += [
            wrapper.register_forward_pre_hook(lambda m, args, log=log: log.append("wrapper pre")),
            wrapper.register_forward_hook(lambda m, a, out, log=log: log.append("wrapper post")),
            original.register_forward_pre_hook(lambda m, args, log=log: log.append("inner pre")),
            original.register_forward_hook(lambda m, a, out, log=log: log.append("inner post")),
        ]
    torch.testing.assert_close(compiled(x), torch_compiled(x), rtol=0, atol=0)
    assert runs["ours"] == runs["torch"]
    assert runs["ours"] == ["wrapper pre", "inner pre", "inner post", "wrapper post"]
    for handle in handles:
        handle.remove()
    runs["ours"].clear()
    compiled(x)
    assert runs["ours"] == []


def test_a_forward_hook_on_the_wrapper_can_change_the_output() -> None:
    module, compiled, twin, torch_compiled = both()
    for wrapper in (compiled, torch_compiled):
        wrapper.register_forward_hook(lambda m, args, out: out * 10)
    x = torch.randn(2, 3)
    expected = make()(x) * 10
    torch.testing.assert_close(compiled(x), expected, rtol=0, atol=0)
    torch.testing.assert_close(torch_compiled(x), expected, rtol=0, atol=0)
    assert isinstance(compiled, CompiledModule)


def test_without_wrapper_hooks_the_call_skips_nn_modules_call() -> None:
    """The call path of a wrapper without hooks of its own is CompiledModule.__call__, not
    nn.Module's hook machinery (its cost per call is what this keeps away)."""
    _, compiled, _, _ = both()
    assert type(compiled).__call__ is CompiledModule.__call__
    compiled.register_forward_hook(lambda m, args, out: None)
    assert type(compiled).__call__ is torch.nn.Module.__call__


def test_pickling_saves_the_original_and_compiles_it_again() -> None:
    module, compiled, _, torch_compiled = both(backend="eager")
    x = torch.randn(4, 3)
    compiled(x)
    for wrapper in (compiled, torch_compiled):
        loaded = pickle.loads(pickle.dumps(wrapper))
        assert type(loaded) is type(wrapper)
        assert type(loaded._orig_mod) is Net and loaded._orig_mod is not module
        same_state(loaded.state_dict(), wrapper.state_dict())
        loaded.eval()
        torch.testing.assert_close(loaded(x), loaded._orig_mod(x), rtol=0, atol=0)
    assert isinstance(pickle.loads(pickle.dumps(compiled))._compiled_forward.fn, type(Net.forward))
    pickle.dumps(module)  # calling the compiled module left nothing unpicklable on the original
    buffer = io.BytesIO()
    torch.save(compiled, buffer)
    buffer.seek(0)
    assert type(torch.load(buffer, weights_only=False)) is CompiledModule


def test_deepcopy_copies_the_module_and_keeps_the_backend() -> None:
    backend = CountingBackend()
    module = make().eval()
    compiled = bytegraph.compile(module, backend=backend)
    torch_copy = copy.deepcopy(torch.compile(module, backend="eager"))
    duplicate = copy.deepcopy(compiled)
    assert type(duplicate) is CompiledModule and type(torch_copy).__name__ == "OptimizedModule"
    assert duplicate._orig_mod is not module and torch_copy._orig_mod is not module
    assert duplicate.training is False
    with torch.no_grad():
        duplicate._orig_mod.lin.weight.add_(1.0)
    x = torch.randn(2, 3)
    torch.testing.assert_close(duplicate(x), duplicate._orig_mod(x), rtol=0, atol=0)
    torch.testing.assert_close(compiled(x), module(x), rtol=0, atol=0)
    assert backend.calls == 2  # each copy compiles its own module, with the same backend


def test_attributes_are_the_originals() -> None:
    module, compiled, twin, torch_compiled = both()
    for wrapper, original in ((compiled, module), (torch_compiled, twin)):
        wrapper.scale = 3
        assert original.scale == 3
        assert wrapper.lin is original.lin
        del wrapper.scale
        assert not hasattr(original, "scale")
    assert "lin" in dir(compiled) and "_orig_mod" in dir(compiled)


def test_len_is_the_originals() -> None:
    sequential = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    assert len(bytegraph.compile(sequential, backend="eager")) == 2
    assert len(torch.compile(sequential, backend="eager")) == 2
    with pytest.raises(TypeError):
        len(bytegraph.compile(make(), backend="eager"))
    with pytest.raises(TypeError):
        len(torch.compile(make(), backend="eager"))


def test_truth_is_the_originals() -> None:
    """``if model:`` on torch's wrapper of a module without len() raises TypeError (its
    __len__ does); bytegraph's gives the original's truth, as eager does."""
    empty = torch.nn.Sequential()
    for module in (make(), empty, torch.nn.Sequential(torch.nn.ReLU())):
        assert bool(bytegraph.compile(module, backend="eager")) is bool(module)
    assert bool(torch.compile(empty, backend="eager")) is False
    with pytest.raises(TypeError):
        bool(torch.compile(make(), backend="eager"))


def test_repr_is_torchs_with_the_class_name() -> None:
    _, compiled, _, torch_compiled = both()
    assert repr(compiled).replace("CompiledModule", "OptimizedModule", 1) == repr(torch_compiled)


def test_a_global_module_hook_runs_as_in_eager() -> None:
    """A global forward hook runs once per module call, as in eager; torch's wrapper runs it
    for the wrapper too (and warns that it does)."""
    _, compiled, _, torch_compiled = both()
    eager = make()
    x = torch.randn(2, 3)
    seen: list[str] = []
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda m, args, out: seen.append(type(m).__name__)
    )
    try:
        expected = eager(x)
        eager_seen = list(seen)
        seen.clear()
        torch.testing.assert_close(compiled(x), expected, rtol=0, atol=0)
        ours = list(seen)
        seen.clear()
        with pytest.warns(UserWarning, match="global hooks"):
            torch_compiled(x)
    finally:
        handle.remove()
    assert eager_seen == ["Linear", "BatchNorm1d", "Net"]
    assert ours == eager_seen
    # (torch runs the hooks of the modules inside a frame it compiled earlier without them
    # only in some orders: its wrapper's extra call is what is compared)
    assert seen[-2:] == ["Net", "OptimizedModule"]


class Wrapper(torch.nn.Module):
    """What a wrapper module means in eager: the original as a submodule, called in forward."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        return self.inner(*args)


def test_full_backward_hooks_on_the_wrapper_and_the_original_run() -> None:
    """As on an eager wrapper module: the original's, then the wrapper's. torch's wrapper
    sends ``_is_full_backward_hook`` to the original, and its own hook never runs."""
    runs: dict[str, list[str]] = {}
    x = torch.randn(3, 3, requires_grad=True)
    kinds = {
        "eager": lambda m: Wrapper(m),
        "ours": lambda m: bytegraph.compile(m, backend="eager"),
        "torch": lambda m: torch.compile(m, backend="eager"),
    }
    for kind, wrap in kinds.items():
        module = make()
        wrapper = wrap(module)
        log = runs.setdefault(kind, [])
        wrapper.register_full_backward_hook(lambda m, gi, go, log=log: log.append("wrapper"))
        module.register_full_backward_hook(lambda m, gi, go, log=log: log.append("inner"))
        wrapper(x).sum().backward()
    assert runs["eager"] == ["inner", "wrapper"]
    assert runs["ours"] == runs["eager"]
    assert runs["torch"] == ["inner"]


def test_pickling_keeps_mode_and_options() -> None:
    compiled = bytegraph.compile(make(), mode="max-autotune-no-cudagraphs")
    loaded = pickle.loads(pickle.dumps(compiled))
    expected = torch._inductor.list_mode_options("max-autotune-no-cudagraphs")
    assert loaded._compiled_forward.backend.config_patches == expected


@pytest.mark.parametrize("owner", ["module", "global"])
@pytest.mark.parametrize("kind", ["forward_pre", "forward", "backward_pre", "backward"])
def test_has_hooks_sees_every_hook_dict(owner, kind) -> None:
    """The call path of a compiled module asks ``has_hooks`` first: a hook in any of the
    eight dicts (four of the module's, four global) is seen, and ``skip`` leaves out
    exactly the module's own dict of that name."""
    from torch.nn.modules import module as torch_module

    from bytegraph.variables.nn_module import has_hooks

    module = torch.nn.Linear(2, 2)
    assert not has_hooks(module)
    table = module if owner == "module" else torch_module
    hooks = getattr(table, f"_{'global_' if owner == 'global' else ''}{kind}_hooks")
    hooks[-1] = lambda *args: None
    try:
        assert has_hooks(module)
        skipped = has_hooks(module, skip=f"_{kind}_hooks")
        assert skipped is (owner == "global")
    finally:
        del hooks[-1]
    assert not has_hooks(module)
    bare = torch.nn.Linear.__new__(torch.nn.Linear)  # no nn.Module.__init__: no hook dicts
    assert not has_hooks(bare)
