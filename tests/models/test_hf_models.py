"""Real Hugging Face models, built from tiny local configs, compiled whole.

No downloads: every model is made from a config with random weights. Each
test runs the model eagerly and compiled on the same inputs and asserts

* the same result, exactly: the ModelOutput's class, keys, items and
  attributes, and every object inside it (GPT-2's DynamicCache and its
  layers), tensors compared with ``torch.equal`` (the counting backend runs
  the captured graphs as they are, like backend="eager");
* at most the graph count noted per model, after one call; the second call
  traces nothing new.

What it took (bytegraph/variables/): configs define ``__getattribute__`` and
``__setattr__`` (custom_attrs.py), ModelOutputs are OrderedDict subclasses
that are also dataclasses (user_dicts.py), ``deprecate_kwarg`` compares enum
members (enums.py), the cache iterates a ``collections.abc.Sequence`` whose
end is an IndexError (raising.py), ``apply_chunking_to_forward`` counts a
callback's parameters (signatures.py), Llama's attention reads
``os.environ`` (environ.py), and functions import ``torch`` inside (IMPORT_NAME
of a module already imported). ``torch.compiler.is_compiling()``
is True while bytegraph traces, so the libraries take their compiler path.
"""

from __future__ import annotations

import os

import pytest
import torch

import bytegraph

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")


@pytest.fixture(autouse=True)
def _quiet_transformers():
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # tiny vocabularies trip a config warning
    yield
    transformers.logging.set_verbosity(verbosity)


def bert():
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        vocab_size=100,
    )
    return transformers.BertModel(config)


def gpt2():
    config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100)
    return transformers.GPT2LMHeadModel(config)


def distilbert():
    config = transformers.DistilBertConfig(
        dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=100
    )
    return transformers.DistilBertModel(config)


def t5_encoder():
    config = transformers.T5Config(
        d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=100
    )
    return transformers.T5EncoderModel(config)


def llama(**options):
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100, **options,
    )
    return transformers.LlamaForCausalLM(config)


def llama_eager_attention():
    """The attention function comes from a ``collections.abc.Mapping`` registry whose
    ``__getitem__`` raises KeyError for a miss, caught by ``Mapping.get``."""
    return llama(attn_implementation="eager")


# model -> the most graphs one call may take. Every one is a single graph: nothing
# breaks (explain() reports no break), with or without an attention mask.
MODELS = {"bert": (bert, 1), "gpt2": (gpt2, 1), "distilbert": (distilbert, 1),
          "t5_encoder": (t5_encoder, 1), "llama": (llama, 1),
          "llama_eager_attention": (llama_eager_attention, 1)}


def warm_up(model, inputs) -> None:
    """One eager call first: the first matmul of a process may round differently
    (measured: about 1 run in 30 under load, eager against eager), which would
    look like a compiled-vs-eager difference."""
    with torch.no_grad():
        model(**inputs)


def _inputs(padded: bool) -> dict[str, torch.Tensor]:
    ids = torch.randint(0, 100, (2, 8))
    if not padded:
        return {"input_ids": ids}
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def assert_same_output(actual, expected, path: str = "output") -> None:
    """Equal values of equal types, all the way down (objects compared by their __dict__)."""
    assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, path
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad"
        assert torch.equal(actual, expected), f"{path}: values differ"
    elif isinstance(expected, dict):
        assert list(actual.keys()) == list(expected.keys()), f"{path}: keys differ"
        for key in expected:
            assert_same_output(dict.__getitem__(actual, key), dict.__getitem__(expected, key),
                               f"{path}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: length differs"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_output(a, e, f"{path}[{i}]")
    elif hasattr(expected, "__dict__") and not isinstance(expected, type):
        assert_same_output(vars(actual), vars(expected), f"{path}.__dict__")
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
    if isinstance(expected, dict) and hasattr(expected, "__dict__"):  # a ModelOutput
        assert_same_output(vars(actual), vars(expected), f"{path}.__dict__")


@pytest.mark.parametrize("padded", [False, True], ids=["no_mask", "padding_mask"])
@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_eager(name, padded, counting_backend) -> None:
    make, max_graphs = MODELS[name]
    model = make().eval()
    compiled = bytegraph.compile(model, backend=counting_backend)
    inputs = _inputs(padded)
    warm_up(model, inputs)
    with torch.no_grad():
        expected = model(**inputs)
        actual = compiled(**inputs)
        assert_same_output(actual, expected)
        graphs = counting_backend.calls
        assert 1 <= graphs <= max_graphs
        other = _inputs(padded)  # new values, same shapes: the same cache entry
        assert_same_output(compiled(**other), model(**other))
    assert counting_backend.calls == graphs, "the second call traced again"


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_explain_reports_no_break(name) -> None:
    model = MODELS[name][0]().eval()
    with torch.no_grad():
        report = bytegraph.explain(model)(**_inputs(padded=True))
    assert report.graph_break_count == 0, str(report)
    assert report.graph_count == 1


# (model, extra call arguments, most graphs, why)
VARIANTS = {
    "gpt2_labels": (gpt2, {"labels": True}, 2,
                    "the loss_function property logs a warning: a logger call breaks, unless "
                    "config.reorderable_logging (test_gpt2_labels_warning_once_deferred)"),
    "gpt2_no_cache": (gpt2, {"use_cache": False}, 1, "nothing breaks"),
    "gpt2_tuple": (gpt2, {"return_dict": False}, 1, "nothing breaks"),
    "bert_tuple": (bert, {"return_dict": False}, 1, "nothing breaks"),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_call_variants_match_eager(name, counting_backend) -> None:
    make, extra, max_graphs, _why = VARIANTS[name]
    extra = dict(extra)
    model = make().eval()
    compiled = bytegraph.compile(model, backend=counting_backend)
    inputs = _inputs(padded=True)
    if extra.pop("labels", None):
        extra = {**extra, "labels": inputs["input_ids"]}
    warm_up(model, inputs)
    with torch.no_grad():
        assert_same_output(compiled(**inputs, **extra), model(**inputs, **extra))
        graphs = counting_backend.calls
        assert 1 <= graphs <= max_graphs
        assert_same_output(compiled(**inputs, **extra), model(**inputs, **extra))
    assert counting_backend.calls == graphs


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_training_mode_dropout_matches_eager(name, counting_backend) -> None:
    """Dropout draws from the global generator in the same order in the graph."""
    model = MODELS[name][0]().train()
    compiled = bytegraph.compile(model, backend=counting_backend)
    inputs = _inputs(padded=True)
    warm_up(model, inputs)
    torch.manual_seed(1)
    expected = model(**inputs)
    torch.manual_seed(1)
    actual = compiled(**inputs)
    key = "logits" if "logits" in expected else "last_hidden_state"
    assert torch.equal(actual[key], expected[key])
    assert counting_backend.calls == 1


def _loss_and_grads(model, call, inputs):
    model.zero_grad(set_to_none=True)
    output = call(**inputs)
    key = "logits" if "logits" in output else "last_hidden_state"
    output[key].square().mean().backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    return output[key].detach(), grads


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_gradients_match_eager(name, backend) -> None:
    model = MODELS[name][0]().eval()
    inputs = _inputs(padded=True)
    warm_up(model, inputs)
    expected, expected_grads = _loss_and_grads(model, model, inputs)
    compiled = bytegraph.compile(model, backend=backend)
    actual, grads = _loss_and_grads(model, compiled, inputs)
    if backend == "eager":  # the graph runs the very same ops
        assert torch.equal(actual, expected)
        for name_, grad in expected_grads.items():
            assert_same_output(grads[name_], grad, f"grad of {name_}")
        return
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    for name_, grad in expected_grads.items():
        # AOTAutograd gives parameters that reach only an unused output (BERT's
        # pooler) a zero gradient where eager leaves None.
        if grad is None:
            assert grads[name_] is None or not grads[name_].any(), name_
            continue
        torch.testing.assert_close(grads[name_], grad, rtol=1e-4, atol=1e-6, msg=name_)


def test_gpt2_labels_warning_once_deferred(monkeypatch, counting_backend) -> None:
    """``config.reorderable_logging``: the loss property's ``logger.warning_once``
    (an lru_cache-wrapped Logger attribute) runs after the graph: one graph, and
    the same record as eager's, emitted once."""
    import logging

    monkeypatch.setattr(bytegraph.config, "reorderable_logging", True)
    transformers.logging.set_verbosity_warning()
    seen: list[tuple[str, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelname, record.getMessage()))

    keep = Keep()
    hf_logger = logging.getLogger("transformers")
    hf_logger.addHandler(keep)
    try:
        model = gpt2().eval()
        inputs = _inputs(padded=True)
        inputs["labels"] = inputs["input_ids"]
        warm_up(model, {k: v for k, v in inputs.items() if k != "labels"})
        compiled = bytegraph.compile(model, backend=counting_backend)
        with torch.no_grad():
            logging.Logger.warning_once.cache_clear()
            seen.clear()
            expected = model(**inputs)
            expected_records = list(seen)
            logging.Logger.warning_once.cache_clear()
            seen.clear()
            actual = compiled(**inputs)
            assert seen == expected_records and len(seen) == 1, seen
            assert_same_output(actual, expected)
            seen.clear()
            assert_same_output(compiled(**inputs), model(**inputs))
            assert seen == [], "warning_once warned twice"
    finally:
        hf_logger.removeHandler(keep)
    assert counting_backend.calls == 1
    with torch.no_grad():
        report = bytegraph.explain(model)(**inputs)
    assert report.graph_break_count == 0, str(report)


def test_gpt2_over_sequence_lengths_compiles_at_most_twice(counting_backend) -> None:
    """Automatic dynamic shapes: the second length makes the sequence dimension
    size-generic, and that entry serves every later length, equal to eager."""
    model = gpt2().eval()
    compiled = bytegraph.compile(model, backend=counting_backend)
    for length in (5, 6, 9, 17, 40):
        ids = torch.randint(0, 100, (2, length))
        with torch.no_grad():
            assert_same_output(compiled(input_ids=ids), model(input_ids=ids))
    assert counting_backend.calls <= 2
    assert len(compiled._compiled_forward.entries) <= 2


def greedy_decode(model, ids, steps):
    """Prefill, then ``steps`` decode steps, each calling ``model`` with the newest token
    and the cache (``past_key_values``, ``use_cache=True``); every step's logits."""
    logits, past, token = [], None, ids
    with torch.no_grad():
        for _ in range(steps + 1):
            out = model(input_ids=token, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits.append(out.logits[:, -1])
            token = out.logits[:, -1].argmax(-1, keepdim=True)
    return logits


def test_gpt2_kv_cache_decode_loop_compiles_at_most_twice(counting_backend) -> None:
    """The cache grows by one position a step: its tensors are read through the cache
    object (``past_key_values.layers[0].keys``), and the second length makes their
    sequence dimension dynamic like an argument's, so the loop compiles twice."""
    model = gpt2().eval()
    compiled = bytegraph.compile(model, backend=counting_backend)
    ids = torch.randint(0, 100, (2, 5))
    greedy_decode(compiled, ids, 0)  # the prefill: no cache yet, an entry of its own
    prefill, prefill_graphs = len(compiled._compiled_forward.entries), counting_backend.calls
    got, want = greedy_decode(compiled, ids, 20), greedy_decode(model, ids, 20)
    for step, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, msg=lambda m, step=step: f"step {step}: {m}")
    assert len(compiled._compiled_forward.entries) - prefill <= 2
    assert counting_backend.calls - prefill_graphs <= 2


def greedy_decode_from_ids(model, ids, steps):
    """Like ``greedy_decode``, but each step appends the new token to ``ids`` and feeds
    ``ids[:, -1:]`` as generation loops do: shape (2, 1) every step, its stride (n, 1)
    and storage offset growing with ``ids``."""
    logits, past = [], None
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        for _ in range(steps):
            past = out.past_key_values
            logits.append(out.logits[:, -1])
            ids = torch.cat([ids, out.logits[:, -1].argmax(-1, keepdim=True)], 1)
            out = model(input_ids=ids[:, -1:], past_key_values=past, use_cache=True)
        logits.append(out.logits[:, -1])
    return logits


def test_gpt2_decode_loop_over_a_slice_of_ids_compiles_at_most_three_times(
    counting_backend,
) -> None:
    """The prefill; the first step, where the token's stride changed (5 -> 6): a dynamic
    stride; the second, where the cache's length changed: a dynamic sequence dimension.
    That entry serves every later step (it recompiled each step when strides were
    always static)."""
    model = gpt2().eval()
    compiled = bytegraph.compile(model, backend=counting_backend)
    ids = torch.randint(0, 100, (2, 5))
    got, want = greedy_decode_from_ids(compiled, ids, 20), greedy_decode_from_ids(model, ids, 20)
    for step, (g, w) in enumerate(zip(got, want)):
        torch.testing.assert_close(g, w, msg=lambda m, step=step: f"step {step}: {m}")
    assert len(compiled._compiled_forward.entries) <= 3
    assert counting_backend.calls <= 3
