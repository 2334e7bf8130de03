"""A Hugging Face model trained with activation checkpointing, compiled whole.

``gradient_checkpointing_enable()`` makes every GPT-2 block call
``torch.utils.checkpoint.checkpoint(partial(forward, ...), use_reentrant=False)``
and hooks the embedding (``enable_input_require_grads``). Compiled with
``fullgraph=True`` in training mode, the step is one graph whose blocks are
``tag_activation_checkpoint`` calls; loss and every parameter's gradient match
eager. Dropout is 0 so that eager and compiled draw no random numbers.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

import bytegraph
from bytegraph.graph.backends import lookup_backend

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")


def checkpointed_gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_embd=64, n_layer=2, n_head=4, vocab_size=100,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the alias is deprecated in v5
        model.gradient_checkpointing_enable()
    return model.train()


def training_loss(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=ids, use_cache=False).logits
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())


def _gradients(model: torch.nn.Module, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad()
    loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_gpt2_gradient_checkpointing_one_graph(backend: str) -> None:
    model = checkpointed_gpt2()
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    graphs: list[torch.fx.GraphModule] = []
    real = lookup_backend(backend)

    def counting(gm, example_inputs):
        graphs.append(gm)
        return real(gm, example_inputs)

    compiled = bytegraph.compile(training_loss, backend=counting, fullgraph=True)
    loss = compiled(model, ids)
    grads = _gradients(model, loss)
    expected_loss = training_loss(model, ids)
    expected = _gradients(model, expected_loss)
    assert len(graphs) == 1
    targets = [n.target for n in graphs[0].graph.nodes]
    assert targets.count(torch.ops.higher_order.tag_activation_checkpoint) == 2  # one per block
    torch.testing.assert_close(loss, expected_loss)
    for name, grad in expected.items():
        torch.testing.assert_close(grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


# -- selective activation checkpointing: a policy saves matmuls, recomputes the rest -------------
POLICY_CALLS: list = []


def save_matmuls(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    POLICY_CALLS.append(op)
    if op in (torch.ops.aten.mm.default, torch.ops.aten.bmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


def selectively_checkpointed_llama() -> torch.nn.Module:
    import functools

    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    context_fn = functools.partial(create_selective_checkpoint_contexts, save_matmuls)
    model.gradient_checkpointing_enable(
        gradient_checkpointing_kwargs={"use_reentrant": False, "context_fn": context_fn})
    return model.train()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_llama_selective_activation_checkpointing_one_graph(backend: str) -> None:
    model = selectively_checkpointed_llama()
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    graphs: list[torch.fx.GraphModule] = []
    real = lookup_backend(backend)

    def counting(gm, example_inputs):
        graphs.append(gm)
        return real(gm, example_inputs)

    def step(m):
        out = m(input_ids=ids, labels=ids)
        return out.loss, _gradients(model, out.loss)

    expected_loss, expected = step(model)
    POLICY_CALLS.clear()
    loss, grads = step(bytegraph.compile(model, backend=counting, fullgraph=True))
    assert len(graphs) == 1
    targets = [n.target for n in graphs[0].graph.nodes]
    assert targets.count(torch.ops.higher_order.tag_activation_checkpoint) == 2
    assert POLICY_CALLS, "the policy was not consulted: checkpointing was not selective"
    torch.testing.assert_close(loss, expected_loss)
    for name, grad in expected.items():
        torch.testing.assert_close(grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)
