"""nn.Modules constructed inside the trace (variables/made_modules.py).

The corpus builds modules in the compiled function (torch's activations,
losses, containers, and user modules with plain attributes, submodules and
buffers), uses them, and sometimes lets them escape (returned, stored on an
input, live at a graph break). ``_state.check_state_program`` compares the
complete state on both sides, so an escaped module is compared by type and
``__dict__`` (member dicts, hook tables, ``training``) with the one eager
built. The tests after it cover what draws random numbers (``nn.Linear``'s
initialisation is a graph break, eager's generator use intact; dropout in
training mode is in the graph) and hooks registered on a module made here.
"""

from __future__ import annotations

import pytest
import torch
from _state import StateCorpus, check_state_program
from torch import nn

import bytegraph

corpus = StateCorpus()
add = corpus.add


def x34():
    return (torch.randn(3, 4),)


def logits_labels():
    return (torch.randn(5, 7), torch.tensor([0, 3, 6, 1, 2]))


class Scale(nn.Module):
    def __init__(self, k, act=None):
        super().__init__()
        self.k = k
        self.act = act if act is not None else nn.Tanh()

    def forward(self, x):
        return self.act(x) * self.k


class Shifted(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.register_buffer("shift", torch.arange(width, dtype=torch.float32))
        self.register_buffer("scratch", torch.zeros(width), persistent=False)

    def forward(self, x):
        return x + self.shift + self.scratch


class Holder:
    def __init__(self):
        self.module = None


@add(x34)
def relu_made_and_called(x):
    return nn.ReLU()(x) + 1


@add(logits_labels)
def cross_entropy_made_and_called(logits, labels):
    return nn.CrossEntropyLoss()(logits, labels) * 2


@add(logits_labels)
def losses_with_options(logits, labels):
    ce = nn.CrossEntropyLoss(reduction="sum", label_smoothing=0.1)(logits, labels)
    nll = nn.NLLLoss(ignore_index=3)(torch.log_softmax(logits, -1), labels)
    return ce, nll, nn.MSELoss()(logits, logits.flip(0))


@add(x34)
def parameterless_modules(x):
    y = nn.Identity()(x)
    y = nn.GELU(approximate="tanh")(y) + nn.SiLU()(y)
    y = nn.Softmax(dim=-1)(y)
    return nn.Flatten(0)(y), nn.Dropout(0.5).eval()(y)


@add(x34)
def module_attributes_read(x):
    softmax = nn.Softmax(dim=1)
    leaky = nn.LeakyReLU(0.2)
    return softmax(x) * softmax.dim, leaky(x) + leaky.negative_slope, softmax.training


@add(x34)
def sequential_made_here(x):
    block = nn.Sequential(nn.ReLU(), nn.Dropout(0.1).eval(), nn.Softmax(-1))
    return block(x), len(block), block[0](x - 1)


@add(x34)
def user_module_with_submodule(x):
    return Scale(3.0)(x) + Scale(0.5, nn.Sigmoid())(x)


@add(x34)
def user_module_with_buffers(x):
    m = Shifted(4)
    return m(x) * m.shift


@add(x34)
def made_module_escapes(x):
    m = Scale(2.0)
    return m(x), m


@add(x34)
def made_module_with_buffers_escapes(x):
    m = Shifted(4)
    return m(x), m


@add(x34)
def made_module_eval_escapes(x):
    m = nn.Sequential(nn.Dropout(0.3), Scale(2.0)).eval()
    return m(x), m, m.training, m[1].training


@add(lambda: (torch.randn(3, 4), Holder()))
def made_module_stored_on_input(x, holder):
    holder.module = nn.ReLU()
    return holder.module(x) * 2


@add(lambda: (torch.randn(3, 4), nn.Linear(4, 4)))
def made_container_holds_an_input_module(x, lin):
    return nn.Sequential(lin, nn.ReLU())(x)


@add(x34, graphs=1, fullgraph=False)
def made_module_live_at_a_break(x):
    m = Scale(2.0)
    bytegraph.graph_break()
    return m(x)


class Talky(nn.Module):
    def forward(self, x):
        y = x * 2
        bytegraph.graph_break()
        return y + 1


@add(x34, graphs=3, fullgraph=False)
def break_inside_a_made_module_forward(x):
    m = Talky()
    return m(x) - 1, m


@add(x34)
def made_module_plain_attribute_changed(x):
    m = Scale(2.0)
    m.k = m.k + 1
    m.act = nn.ReLU()
    return m(x), m


PROGRAMS = corpus.programs


@pytest.mark.parametrize("prog", PROGRAMS, ids=lambda p: p.name)
def test_made_module_program(prog, counting_backend) -> None:
    check_state_program(prog, counting_backend)


# -- random numbers, hooks -----------------------------------------------------------


def _linear_made_here(x):
    layer = nn.Linear(4, 2)
    return layer(x).relu() + torch.rand(2), layer


def test_parameter_made_here_breaks_and_keeps_the_generator(counting_backend) -> None:
    """nn.Linear's __init__ creates parameters: the construction runs in Python (a
    break, as for torch.compile) and draws the same numbers as eager, in order."""
    x = torch.randn(3, 4)
    torch.manual_seed(7)
    expected, expected_layer = _linear_made_here(x)
    after = torch.rand(3)
    compiled = bytegraph.compile(_linear_made_here, backend=counting_backend)
    torch.manual_seed(7)
    actual, layer = compiled(x)
    assert torch.equal(torch.rand(3), after)
    assert torch.equal(actual, expected)
    assert torch.equal(layer.weight, expected_layer.weight)
    assert type(layer.weight) is nn.Parameter
    assert counting_backend.calls == 1  # the call and what follows it


def _dropout_training(x):
    return nn.Dropout(0.5)(x) * 2


def test_dropout_made_in_training_mode_draws_as_eager(counting_backend) -> None:
    x = torch.ones(64)
    torch.manual_seed(3)
    expected = _dropout_training(x)
    compiled = bytegraph.compile(_dropout_training, backend=counting_backend)
    torch.manual_seed(3)
    assert torch.equal(compiled(x), expected)
    assert counting_backend.calls == 1


CALLS: list = []


def _hooked(x):
    m = nn.ReLU()
    m.register_forward_hook(lambda mod, args, out: CALLS.append(out.sum().item()))
    return m(x) + 1


def test_hook_registered_on_a_made_module_runs(counting_backend) -> None:
    x = torch.randn(3, 4)
    expected = _hooked(x)
    eager_calls = list(CALLS)
    CALLS.clear()
    actual = bytegraph.compile(_hooked, backend=counting_backend)(x)
    assert torch.equal(actual, expected)
    assert CALLS == eager_calls
    CALLS.clear()


class GeluInForward(nn.Module):
    def forward(self, x):
        return nn.GELU(approximate="tanh")(x) * 2


def test_module_made_after_torch_compile_patched_module_init(counting_backend) -> None:
    """Once torch.compile has run in the process, ``nn.Module.__init__`` is its wrapper
    that tags each new module (torch._dynamo.mutation_guard): the trace inlines the
    wrapped method (it broke at ``GenerationTracker.tag`` in every model that builds a
    module in forward, in a process that had used torch.compile)."""
    from torch._dynamo.mutation_guard import install_generation_tagging_init

    install_generation_tagging_init()  # what torch.compile does on its first call
    assert nn.Module.__init__.__name__ == "patched_init"
    model = GeluInForward()
    compiled = bytegraph.compile(model, backend=counting_backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counting_backend.calls == 1
