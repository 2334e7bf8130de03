"""nn.Modules: parameters and buffers as graph inputs, inlined forwards, module state.

The corpus passes modules as arguments and compares the complete state after
two calls on each side (parameters, buffers, plain attributes, submodules:
``_state.check_state_program``). The tests after it compile whole modules
with ``bytegraph.compile(module)``: a 4-layer MLP and a small attention
block must be one graph, match eager (also their gradients under
``aot_eager``), and hit the cache; hooks run exactly as in eager.
"""

from __future__ import annotations

import copy
import dis
import math

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from _state import StateCorpus, check_state_program
from torch import nn

import bytegraph

corpus = StateCorpus()
add = corpus.add
HOOK_CALLS: list = []


class MLP(nn.Module):
    def __init__(self, width=64, depth=4):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(depth)])
        self.act = nn.ReLU()

    def forward(self, x):
        for layer in self.layers:
            x = self.act(layer(x))
        return x


class Attention(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        shape = (batch, length, self.heads, dim // self.heads)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(dim // self.heads)
        out = F.softmax(scores, dim=-1) @ v
        return x + self.proj(out.transpose(1, 2).reshape(batch, length, dim))


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if self.training:
            return self.lin(x) * 2
        return self.lin(x) - 1


class Counting(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        y = self.lin(x)
        self.last = y.detach()
        return y


class Running(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.mean = 0.9 * self.mean + 0.1 * x.mean(0)
        self.steps.add_(1)
        return x - self.mean


class InPlaceBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))

    def forward(self, x):
        self.acc.mul_(0.5).add_(x.sum(0))
        return x * self.acc


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Derived(Base):
    def forward(self, x):
        return super().forward(x).relu() + 1


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(4, 4)
        self.first = self.shared
        self.blocks = [self.shared, nn.Linear(4, 4)]  # a plain list attribute

    def forward(self, x):
        return self.blocks[1](self.first(self.shared(x)))


class Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})

    def forward(self, x):
        out = {name: head(x) for name, head in self.heads.items()}
        out["sum"] = sum(self.heads[k](x).sum() for k in self.heads)
        return out


class Indexed(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        y = self.layers[-1](self.layers[0](x))
        for i, layer in enumerate(self.layers):
            y = y + layer(x) * i
        return y, len(self.layers)


class Deleting(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scratch = 1.0

    def forward(self, x):
        y = self.lin(x) * self.scratch
        del self.scratch
        self.note = hasattr(self, "scratch")
        return y


def hook(module, args, output):
    HOOK_CALLS.append(type(module).__name__)


def x4() -> torch.Tensor:
    return torch.randn(2, 4)


def with_hook() -> tuple:
    lin = nn.Linear(4, 4)
    lin.register_forward_hook(hook)
    return (x4(), lin)


def submodule_with_hook() -> tuple:
    seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    seq[1].register_forward_hook(hook)
    return (x4(), seq)


@add(lambda: (torch.randn(8, 64), MLP()))
def mlp_from_module_list(x, model):
    return model(x)


@add(lambda: (torch.randn(2, 5, 32), Attention()))
def attention_block(x, model):
    return model(x)


@add(lambda: (x4(), nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4), nn.LayerNorm(4))))
def sequential_stack(x, model):
    return model(x)


@add(lambda: (x4(), Branchy()))
def training_branch(x, model):
    return model(x)


@add(lambda: (x4(), Branchy().eval()))
def eval_branch(x, model):
    return model(x)


@add(lambda: (x4(), Counting()))
def plain_attributes_written_in_forward(x, model):
    return model(x) + model(x)


@add(lambda: (x4(), Running()))
def buffer_reassigned_and_updated_in_place(x, model):
    return model(x)


@add(lambda: (x4(), InPlaceBuffer()))
def buffer_mutated_in_place(x, model):
    model(x)
    return model(x)


@add(lambda: (x4(), Derived()))
def super_forward(x, model):
    return model(x)


@add(lambda: (x4(), Tied()))
def tied_and_listed_submodules(x, model):
    return model(x)


@add(lambda: (x4(), Named()))
def module_dict_items_and_keys(x, model):
    return model(x)


@add(lambda: (x4(), Indexed()))
def module_list_index_len_enumerate(x, model):
    return model(x)


@add(lambda: (x4(), Deleting()))
def plain_attribute_deleted(x, model):
    return model(x)


@add(lambda: (torch.randn(2, 3, 8, 8), nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))))
def batch_norm_training_updates_running_stats(x, model):
    return model(x)


@add(lambda: (torch.randn(2, 3, 8, 8), nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval()))
def batch_norm_eval(x, model):
    return model(x)


@add(lambda: (torch.tensor([[1, 2], [3, 0]]), nn.Embedding(5, 4), nn.Dropout(0.5).eval()))
def embedding_and_eval_dropout(idx, embed, drop):
    return drop(embed(idx))


@add(lambda: (x4(), nn.Linear(4, 4)))
def module_attributes_read_in_function(x, lin):
    return x @ lin.weight.T + lin.bias * lin.in_features


@add(lambda: (x4(), nn.Linear(4, 4)))
def module_hasattr_getattr(x, lin):
    scale = getattr(lin, "scale", 2.0)
    return lin(x) * scale + hasattr(lin, "weight") + hasattr(lin, "nothing")


@add(with_hook, graphs=1, globals_=("HOOK_CALLS",), fullgraph=False)
def hooked_module_runs_hooks_once(x, lin):
    return lin(x) * 2


@add(submodule_with_hook, graphs=1, globals_=("HOOK_CALLS",), fullgraph=False)
def hooked_submodule_runs_hooks_once(x, seq):
    return seq(x) + 1


PROGRAMS = corpus.programs
assert len(PROGRAMS) >= 20


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_module_program(prog, counting_backend) -> None:
    check_state_program(prog, counting_backend)


# -- whole modules through bytegraph.compile ---------------------------------------------------


@pytest.mark.parametrize(
    "make, shape", [(MLP, (8, 64)), (Attention, (2, 5, 32))], ids=["mlp", "attention"]
)
def test_compiled_module_is_one_graph(make, shape, counting_backend) -> None:
    model = make()
    compiled = bytegraph.compile(copy.deepcopy(model), backend=counting_backend)
    for _ in range(2):
        x = torch.randn(*shape)
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counting_backend.calls == 1
    assert len(compiled._compiled_forward.entries) == 1
    placeholders = [n for n in counting_backend.graphs[0].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 1 + len(list(model.parameters()))


class WeightNormConv(nn.Module):
    """wav2vec2's positional convolution: a weight_norm parametrization, whose
    ``ParametrizationList.forward`` asks ``hasattr(self, "1")`` (a name that is no
    identifier) for a second parametrization."""

    def __init__(self) -> None:
        super().__init__()
        conv = nn.Conv1d(4, 4, 3, padding=1)
        self.conv = nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)

    def forward(self, x):
        return torch.relu(self.conv(x))


def test_parametrized_module_is_one_graph(counting_backend) -> None:
    model = WeightNormConv()
    compiled = bytegraph.compile(copy.deepcopy(model), backend=counting_backend, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2, 4, 6)
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counting_backend.calls == 1


def test_attribute_names_that_are_no_identifiers(counting_backend) -> None:
    """``getattr(obj, "1")`` and ``hasattr(obj, "a-b")`` on a frame object and on a
    module: read through ``object.__getattribute__`` in guards and generated code."""

    class Holder:
        pass

    holder, module = Holder(), nn.Linear(2, 2)
    setattr(holder, "1", 3.0)
    setattr(module, "a-b", 2.0)

    def f(x):
        return (x * getattr(holder, "1") + getattr(module, "a-b"), hasattr(holder, "2"),
                hasattr(module, "a-b"), getattr(module, "c d", None))

    compiled = bytegraph.compile(f, backend=counting_backend, fullgraph=True)
    x = torch.randn(2)
    assert compiled(x)[1:] == f(x)[1:] and torch.equal(compiled(x)[0], f(x)[0])
    setattr(holder, "1", 5.0)  # the guards see the change: a new entry, eager's value
    torch.testing.assert_close(compiled(x)[0], f(x)[0], rtol=0, atol=0)
    assert counting_backend.calls == 2


class TiedWithBuffer(nn.Module):
    """Tied weights, a None bias, a buffer and a submodule: what ``parameters()`` and
    ``named_buffers()`` walk (Hugging Face's ``self.dtype`` reads the first floating
    parameter this way in forward)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(5, 4)
        self.head = nn.Linear(4, 5, bias=False)
        self.head.weight = self.embed.weight
        self.norm = nn.LayerNorm(4)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        dtype = next(p.dtype for p in self.parameters() if p.is_floating_point())
        total = sum(p.sum() for p in self.parameters())
        names = [name for name, _ in self.named_parameters(prefix="m")]
        every = [name for name, _ in self.named_parameters(remove_duplicate=False)]
        own = [name for name, _ in self.named_parameters(recurse=False)]
        buffers = [name for name, _ in self.named_buffers()]
        return self.head(x.to(dtype)) * self.scale + total, names, every, own, buffers


def test_parameters_and_buffers_walked_in_forward(counting_backend) -> None:
    model = TiedWithBuffer()
    compiled = bytegraph.compile(copy.deepcopy(model), backend=counting_backend, fullgraph=True)
    x = torch.randn(3, 4)
    out, expected = compiled(x), model(x)
    torch.testing.assert_close(out[0], expected[0], rtol=0, atol=0)
    assert out[1:] == expected[1:]
    assert counting_backend.calls == 1
    untied = copy.deepcopy(model)
    untied.head.weight = nn.Parameter(untied.head.weight.detach().clone())
    compiled = bytegraph.compile(untied, backend=counting_backend)
    assert compiled(x)[1:] == untied(x)[1:]  # the tie is guarded: untied, a new entry
    assert counting_backend.calls == 2


class DropoutInTry(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.dropout = nn.Dropout(0.1)
        self.last = None

    def forward(self, x, index):
        try:
            return self.dropout(x).index_select(0, index)  # out of range: fails when run
        finally:
            self.last = index


def test_eval_mode_dropout_under_try_reruns_on_error(counting_backend) -> None:
    """Dropout in eval mode (``training=False``) draws nothing, so a graph with it can
    rerun as Python when it fails: the op under ``try`` stays in the graph."""
    model = DropoutInTry().eval()
    compiled = bytegraph.compile(copy.deepcopy(model), backend=counting_backend, fullgraph=True)
    x = torch.randn(3)
    good, bad = torch.tensor([1]), torch.tensor([7])
    torch.testing.assert_close(compiled(x, good), model(x, good))
    assert compiled.last is model.last is good
    with pytest.raises(IndexError):
        model(x, bad)
    with pytest.raises(IndexError):
        compiled(x, bad)
    assert compiled.last is model.last is bad  # the finally ran in both
    assert counting_backend.calls == 1


def test_parameters_load_through_shared_reads(counting_backend) -> None:
    """The transformed code reads ``self._modules['layers']._modules`` once for the 8
    parameters under it, not once per parameter; swapping a layer's weight between
    calls is still seen (the shared reads are made afresh on every call)."""
    model = MLP(width=8, depth=4)
    twin = copy.deepcopy(model)
    compiled = bytegraph.compile(twin, backend=counting_backend)
    x = torch.randn(2, 8)
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    (entry,) = compiled._compiled_forward.entries
    loads = [i.argval for i in dis.get_instructions(entry.run.__code__)]
    assert loads.count("layers") == 1, loads
    assert loads.count("_parameters") == 4, loads  # one per layer, shared by weight and bias
    for m in (model, twin):
        m.layers[2].weight = nn.Parameter(torch.full((8, 8), 0.5))
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counting_backend.calls == 1


@pytest.mark.parametrize(
    "make, shape", [(MLP, (8, 64)), (Attention, (2, 5, 32))], ids=["mlp", "attention"]
)
def test_compiled_module_gradients_with_aot_eager(make, shape) -> None:
    model = make()
    twin = copy.deepcopy(model)
    compiled = bytegraph.compile(twin, backend="aot_eager")
    x = torch.randn(*shape, requires_grad=True)
    x_twin = x.detach().clone().requires_grad_()
    model(x).square().sum().backward()
    compiled(x_twin).square().sum().backward()
    torch.testing.assert_close(x_twin.grad, x.grad)
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=lambda m, name=name: f"{name}: {m}")


def test_compiled_module_train_eval_switch(counting_backend) -> None:
    model = Branchy()
    compiled = bytegraph.compile(copy.deepcopy(model), backend=counting_backend)
    x = x4()
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    compiled.eval()
    model.eval()
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counting_backend.calls == 2  # self.training is guarded
    compiled.train()
    model.train()
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counting_backend.calls == 2  # the first entry applies again


def test_compiled_module_with_hooks_runs_them_once(counting_backend) -> None:
    calls = []
    model = MLP(width=8, depth=2)
    model.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    model.layers[0].register_forward_hook(lambda m, a, out: calls.append("inner"))
    compiled = bytegraph.compile(model, backend=counting_backend)
    x = torch.randn(2, 8)
    out = compiled(x)
    assert calls == ["pre", "inner"]
    calls.clear()
    torch.testing.assert_close(out, model(x), rtol=0, atol=0)
    assert calls == ["pre", "inner"]


def test_hook_registered_after_compiling_is_honoured(counting_backend) -> None:
    calls = []
    model = MLP(width=8, depth=2)
    compiled = bytegraph.compile(model, backend=counting_backend)
    x = torch.randn(2, 8)
    compiled(x)
    handle = model.layers[1].register_forward_hook(lambda m, a, out: calls.append("late"))
    try:
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
        assert calls == ["late", "late"]  # once compiled, once eager
    finally:
        handle.remove()
    global_handle = nn.modules.module.register_module_forward_hook(
        lambda m, a, out: calls.append("global")
    )
    try:
        calls.clear()
        compiled(x)
        assert calls == ["global"] * 5  # the MLP, two Linear, the ReLU called twice
    finally:
        global_handle.remove()


def test_compiled_module_exposes_the_original_attributes() -> None:
    model = MLP(width=8, depth=2)
    compiled = bytegraph.compile(model, backend="eager")
    assert compiled.layers is model.layers
    assert compiled.act is model.act
    assert compiled._orig_mod is model


def test_parameter_change_between_calls_is_seen(counting_backend) -> None:
    model = nn.Linear(4, 4)
    compiled = bytegraph.compile(model, backend=counting_backend)
    x = x4()
    compiled(x)
    with torch.no_grad():
        model.weight.mul_(2)
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    model.bias = None  # a parameter replaced by None: the guard on it fails
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counting_backend.calls == 2
