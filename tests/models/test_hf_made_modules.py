"""Hugging Face code that builds nn.Modules inside ``forward`` (variables/made_modules.py).

``ACT2FN[name]`` constructs an activation module on every lookup, and the
heads compute their loss with ``CrossEntropyLoss()`` made in ``forward``.
Each was a graph break: DeBERTa-v2's classifier took 4 graphs, RoBERTa's
masked-LM training step 2. Both are one graph now, as under torch.compile
(1 graph each, measured with a counting backend on these configs), equal to
eager: outputs, and for the training step the loss and every gradient.
"""

from __future__ import annotations

import os

import pytest
import torch
from test_hf_models import assert_same_output, warm_up

import bytegraph

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("quiet_transformers")


def deberta_v2_classifier():
    """DeBERTa-v3's attention options; the pooler looks its activation up in ACT2FN
    in ``forward``, and so does the classifier head."""
    config = transformers.DebertaV2Config(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=100, max_position_embeddings=64, relative_attention=True,
        pos_att_type=["p2c", "c2p"], position_buckets=16, max_relative_positions=32,
        norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False,
        num_labels=3,
    )
    return transformers.DebertaV2ForSequenceClassification(config)


def roberta_masked_lm():
    config = transformers.RobertaConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=100, max_position_embeddings=64,
    )
    return transformers.RobertaForMaskedLM(config)


def _inputs() -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 100, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def test_deberta_v2_is_one_graph(counting_backend) -> None:
    model = deberta_v2_classifier().eval()
    compiled = bytegraph.compile(model, backend=counting_backend)
    inputs = _inputs()
    warm_up(model, inputs)
    with torch.no_grad():
        assert_same_output(compiled(**inputs), model(**inputs))
        assert counting_backend.calls == 1
        other = _inputs()
        assert_same_output(compiled(**other), model(**other))
        report = bytegraph.explain(model)(**inputs)
    assert counting_backend.calls == 1, "the second call traced again"
    assert report.graph_break_count == 0, str(report)


def test_deberta_v2_is_one_graph_after_torch_compile_ran(counting_backend) -> None:
    """torch.compile, once it has run in the process, wraps nn.Module.__init__; the
    modules DeBERTa builds in forward reach the wrapper by another path than a plain
    class lookup (3 graphs before: the wrapper's GenerationTracker.tag broke)."""
    from torch._dynamo.mutation_guard import install_generation_tagging_init

    install_generation_tagging_init()  # what torch.compile does on its first call
    test_deberta_v2_is_one_graph(counting_backend)


def _training_step(model, call, inputs):
    """Loss with labels in training mode (dropout on), backward; loss and gradients."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(5)
    output = call(**inputs)
    output.loss.backward()
    return output, {n: p.grad for n, p in model.named_parameters()}


def test_roberta_training_step_with_labels_is_one_graph(counting_backend) -> None:
    model = roberta_masked_lm().train()
    inputs = {**_inputs(), "labels": torch.randint(3, 100, (2, 8))}
    warm_up(model, {k: v for k, v in inputs.items() if k != "labels"})
    expected, expected_grads = _training_step(model, model, inputs)
    compiled = bytegraph.compile(model, backend=counting_backend)
    actual, grads = _training_step(model, compiled, inputs)
    assert counting_backend.calls == 1
    assert torch.equal(actual.loss, expected.loss)
    assert torch.equal(actual.logits, expected.logits)
    for name, grad in expected_grads.items():
        assert_same_output(grads[name], grad, f"grad of {name}")
    report = bytegraph.explain(model)(**inputs)
    assert report.graph_break_count == 0, str(report)


@pytest.mark.parametrize("name", ["gelu", "gelu_new", "relu", "silu", "tanh", "quick_gelu"])
def test_act2fn_lookup_in_the_trace(name, differential, counting_backend) -> None:
    from transformers.activations import ACT2FN

    def act(x):
        return ACT2FN[name](x) * 2

    compiled = differential.compile(act, fullgraph=True)
    differential.check(act, compiled, (torch.randn(3, 5),))
    assert counting_backend.calls == 1
