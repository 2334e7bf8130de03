"""torch.nn's own transformer modules compiled whole: one graph, no break.

``nn.TransformerEncoderLayer``, ``nn.TransformerEncoder`` and
``nn.MultiheadAttention`` read global switches (the fast path, autocast),
walk their own module tree (``self.modules()``), call Python helpers of
``torch.nn.modules`` (``_check_arg_device``) and of ``torch.nn.functional``
(``F._canonical_mask``), and pick a fast or a slow path from the grad mode
and ``training``. Each test runs the module eagerly and compiled, seeded the
same before each run (dropout draws from the global generator), and asserts
one graph, no break in explain()'s report, equal outputs, and equal
gradients of every parameter and of the input under backend="eager" and
"aot_eager".
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

import bytegraph


def encoder_layer() -> nn.Module:
    return nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)


def encoder_layer_norm_first() -> nn.Module:
    return nn.TransformerEncoderLayer(
        d_model=16, nhead=4, dim_feedforward=32, batch_first=True, norm_first=True,
        activation="gelu",
    )


def encoder() -> nn.Module:
    return nn.TransformerEncoder(encoder_layer(), num_layers=2, enable_nested_tensor=False)


def encoder_nested() -> nn.Module:
    """enable_nested_tensor=True: the fast path would pack a padded batch."""
    return nn.TransformerEncoder(encoder_layer(), num_layers=2)


def attention() -> nn.Module:
    return nn.MultiheadAttention(16, 4, batch_first=True)


def _padding_mask() -> torch.Tensor:
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[1, 3:] = True
    return mask


# name -> (module factory, call arguments from the input x)
MODULES = {
    "encoder_layer": (encoder_layer, lambda x: ((x,), {})),
    "encoder_layer_padding": (
        encoder_layer, lambda x: ((x,), {"src_key_padding_mask": _padding_mask()})
    ),
    "encoder_layer_causal": (
        encoder_layer,
        lambda x: ((x,), {"src_mask": nn.Transformer.generate_square_subsequent_mask(5),
                          "is_causal": True}),
    ),
    "encoder_layer_norm_first": (encoder_layer_norm_first, lambda x: ((x,), {})),
    "encoder": (encoder, lambda x: ((x,), {})),
    "encoder_padding": (encoder, lambda x: ((x,), {"src_key_padding_mask": _padding_mask()})),
    "encoder_nested": (encoder_nested, lambda x: ((x,), {})),
    "attention": (attention, lambda x: ((x, x, x), {})),
    "attention_padding": (attention, lambda x: ((x, x, x), {"key_padding_mask": _padding_mask()})),
    "attention_no_weights": (attention, lambda x: ((x, x, x), {"need_weights": False})),
}
# train: dropout on; eval: the slow path (grad enabled); no_grad: eval under
# torch.no_grad(), where the modules take torch's fused fast path.
MODES = ("train", "eval", "no_grad")


def _call(module: nn.Module, x: torch.Tensor, name: str, seed: int):
    args, kwargs = MODULES[name][1](x)
    torch.manual_seed(seed)
    return module(*args, **kwargs)


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    assert value is None, type(value)
    return []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(MODULES))
def test_one_graph_no_break(name, mode) -> None:
    module = MODULES[name][0]().train(mode == "train")
    args, kwargs = MODULES[name][1](torch.randn(2, 5, 16))
    grad = torch.no_grad() if mode == "no_grad" else contextlib.nullcontext()
    with grad:
        report = bytegraph.explain(module)(*args, **kwargs)
    assert report.graph_break_count == 0, str(report)
    assert report.graph_count == 1, str(report)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(MODULES))
def test_outputs_match_eager(name, mode, counting_backend) -> None:
    module = MODULES[name][0]().train(mode == "train")
    compiled = bytegraph.compile(module, backend=counting_backend)
    grad = torch.no_grad() if mode == "no_grad" else contextlib.nullcontext()
    with grad:
        for seed in (1, 2):  # the second call: new random numbers, the same cache entry
            x = torch.randn(2, 5, 16)
            expected = _tensors(_call(module, x, name, seed))
            actual = _tensors(_call(compiled, x, name, seed))
            assert len(actual) == len(expected)
            for a, e in zip(actual, expected):
                assert torch.equal(a, e)
                assert a.requires_grad == e.requires_grad
    assert counting_backend.calls == 1


def _gradients(module: nn.Module, call, x: torch.Tensor) -> list[torch.Tensor]:
    module.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    outputs = _tensors(call(x))
    sum(out.sum() for out in outputs if out.requires_grad).backward()
    return [x.grad, *(p.grad for p in module.parameters())]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("name", ["encoder_layer", "encoder_padding", "attention_padding"])
def test_gradients_match_eager(name, mode, backend) -> None:
    module = MODULES[name][0]().train(mode == "train")
    compiled = bytegraph.compile(module, backend=backend)
    x = torch.randn(2, 5, 16)
    expected = _gradients(module, lambda t: _call(module, t, name, 7), x)
    actual = _gradients(module, lambda t: _call(compiled, t, name, 7), x)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if backend == "eager":
            assert torch.equal(a, e)
        else:  # AOTAutograd's decompositions may round differently
            torch.testing.assert_close(a, e)


def test_lstm_in_one_graph_and_its_weight_references_guarded(counting_backend) -> None:
    """nn.LSTM checks ``ref() is not weight`` over weak references to its weights: the
    trace reads each referent through ``ref()``, guarded the same object as the
    parameter, so replacing a weight recompiles and takes the path eager takes."""
    torch.manual_seed(0)
    lstm = nn.LSTM(8, 16, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    report = bytegraph.explain(lstm)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    compiled = bytegraph.compile(lstm, backend=counting_backend)
    with torch.no_grad():
        for _ in range(2):
            got, want = compiled(x), lstm(x)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1][0], want[1][0])
        assert counting_backend.calls == 1
        lstm.weight_hh_l0 = nn.Parameter(torch.randn(64, 16))  # its weak reference now stale
        got, want = compiled(x), lstm(x)
        assert torch.equal(got[0], want[0])
