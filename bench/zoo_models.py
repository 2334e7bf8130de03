"""The architectures of the transformers sweep (bench/zoo.py): which, how small, which inputs.

Everything here is generic over transformers' auto mappings; nothing names a model:

- ``architectures()``: every ``model_type`` of ``MODEL_MAPPING_NAMES`` with its base model
  class (and, as a separate ``<type>:causal-lm`` variant, ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``)
  and its family, derived from the task mappings the type appears in.
- ``tiny_config(model_type, level)``: ``CONFIG_MAPPING[model_type]()`` with its size attributes
  shrunk (width, layers, heads, feed-forward, vocabulary, positions, images, experts, convolution
  channels), recursing into every sub-config. Level ``"tiny"`` shrinks everything;
  ``"layers"`` only cuts layers, per-layer lists, experts and the image size (for configs whose
  widths are tied together in ways a table cannot know); ``"default"`` is the config as it comes.
- ``candidate_inputs(model, config)``: input sets for ``model.forward``, from its signature and
  ``main_input_name`` (token ids with a padded row, images, audio samples or features, decoder
  ids, ``use_cache=False``), most complete first; the worker keeps the first that runs eagerly.

The only model knowledge is ``INPUT_HINTS`` below: shapes the config does not spell out.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Iterator
from typing import Any

import torch

WIDTH, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 64, 2, 4, 2, 16, 128, 128
BATCH, SEQ, DECODER_SEQ, IMAGE, PATCH, AUDIO_SAMPLES = 2, 12, 6, 64, 8, 4000

# attribute -> the most it may be (an int attribute is shrunk to min(value, cap)).
WIDTHS = ("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "model_dim", "n_embed",
          "word_embed_proj_dim", "decoder_hidden_size", "encoder_hidden_size", "projection_dim",
          "text_embed_dim", "vision_embed_dim", "out_hidden_size", "projector_hidden_size",
          "embedding_size", "d_embed", "hidden_dim", "emb_dim")
LAYER_COUNTS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
                "decoder_layers", "num_encoder_layers", "num_decoder_layers", "depth",
                "num_blocks", "n_dec_layers", "n_enc_layers")
HEAD_COUNTS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
               "decoder_attention_heads", "attention_heads")
KV_HEAD_COUNTS = ("num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num")
CAPS: dict[str, int] = {
    **dict.fromkeys(("intermediate_size", "ffn_dim", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim",
                     "n_inner", "decoder_intermediate_size", "mlp_dim", "ffn_hidden_size",
                     "d_inner"), FFN),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size",
                     "shared_intermediate_size"), FFN // 2),
    **dict.fromkeys(("head_dim", "d_kv", "kv_channels", "d_head", "attention_head_dim"),
                    HEAD_DIM),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "max_target_positions",
                     "max_seq_len", "context_length"), 128),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"),
                    4),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "top_k", "n_shared_experts", "moe_k"),
                    2),
    "vocab_size": VOCAB, "vocab_size_per_layer_input": VOCAB, "hidden_size_per_layer_input": 16,
    "image_size": IMAGE, "patch_size": PATCH,
    "num_conv_pos_embeddings": 16, "classifier_proj_size": 32, "max_source_positions": 32,
    "q_lora_rank": 32, "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": HEAD_DIM, "qk_head_dim": HEAD_DIM, "sliding_window": 8, "rotary_dim": 8,
    # state-space layers: heads x head size = expand x width
    "num_queries": 16, "window_size": 2,  # at most the tiny image's tokens in every stage
    "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_state": 16, "state_size": 16,
}
# float multipliers of channel counts and depths (EfficientNet-likes)
FLOAT_CAPS = {"width_coefficient": 0.25, "depth_coefficient": 0.25}
# list attributes: each element shrunk (channel lists) or cut (stage depths)
LIST_CAPS = {"conv_dim": 32, "hidden_sizes": 32, "embed_dims": 32, "tdnn_dim": 32,
             "depths": 1, "neck_hidden_sizes": 32, "embed_dim": 32, "num_heads": 2,
             "dims": 32, "encoder_in_channels": 32}
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
               "num_experts_per_tok", "moe_topk", "n_shared_experts", "moe_k")

# Shapes a config does not spell out (documented, generic by input name):
INPUT_HINTS = {
    # audio features come (batch, features, frames) for conv front ends (Whisper-like, where
    # the frame count is twice max_source_positions) or (batch, frames, features)
    "input_features_frames": 64,
    # raw audio: a mono waveform (batch, samples), or (batch, channels, samples) for codecs
    "input_values_samples": AUDIO_SAMPLES,
}
# Required-or-asked-for inputs named by the forward signature, not by a config (LayoutLM-likes
# and Bros ask for word boxes): name -> maker(generator).
EXTRA_INPUTS = {
    "bbox": lambda g: torch.sort(torch.randint(0, 1000, (BATCH, SEQ, 2, 2), generator=g),
                                 dim=2).values.reshape(BATCH, SEQ, 4),  # x0 y0 x1 y1
}

# Families, in order of precedence: the first whose mappings name the type.
FAMILY_MAPPINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("multimodal", ("IMAGE_TEXT_TO_TEXT", "VISUAL_QUESTION_ANSWERING", "MULTIMODAL_LM",
                    "ZERO_SHOT_IMAGE_CLASSIFICATION", "ZERO_SHOT_OBJECT_DETECTION",
                    "DOCUMENT_QUESTION_ANSWERING", "VISION_2_SEQ", "RETRIEVAL")),
    ("audio", ("AUDIO_CLASSIFICATION", "CTC", "AUDIO_XVECTOR", "AUDIO_FRAME_CLASSIFICATION",
               "SPEECH_SEQ_2_SEQ", "TEXT_TO_SPECTROGRAM", "TEXT_TO_WAVEFORM", "RNNT", "TDT")),
    ("encoder-decoder", ("SEQ_TO_SEQ_CAUSAL_LM",)),
    ("encoder", ("MASKED_LM",)),  # before causal LM: BERT-likes also have a *LMHeadModel
    ("decoder LM", ("CAUSAL_LM",)),
    ("vision", ("IMAGE_CLASSIFICATION", "IMAGE", "BACKBONE", "OBJECT_DETECTION",
                "SEMANTIC_SEGMENTATION", "INSTANCE_SEGMENTATION", "UNIVERSAL_SEGMENTATION",
                "DEPTH_ESTIMATION", "MASKED_IMAGE_MODELING", "VIDEO_CLASSIFICATION",
                "IMAGE_TO_IMAGE", "KEYPOINT_DETECTION", "MASK_GENERATION", "IMAGE_SEGMENTATION",
                "CAUSAL_IMAGE_MODELING", "KEYPOINT_MATCHING", "POSE_ESTIMATION")),
    ("encoder", ("MASKED_LM", "SEQUENCE_CLASSIFICATION", "TOKEN_CLASSIFICATION",
                 "QUESTION_ANSWERING", "MULTIPLE_CHOICE", "TEXT_ENCODING", "PRETRAINING")),
)


@dataclasses.dataclass(frozen=True)
class Architecture:
    name: str  # the model_type, with ":causal-lm" for that variant
    model_type: str
    class_name: str
    family: str


def _mapping(task: str) -> dict[str, Any]:
    from transformers.models.auto import modeling_auto

    name = f"MODEL_FOR_{task}_MAPPING_NAMES" if task else "MODEL_MAPPING_NAMES"
    return getattr(modeling_auto, name, {})


def family_of(model_type: str) -> str:
    """The first family whose task mappings name the type. A type in none (a sub-model such as
    ``qwen3_vl_text`` or ``clip_vision_model``) takes the family of the longest type its name
    extends (``qwen3_vl``, ``clip``); failing that its default config decides: a sampling rate
    is audio, an image size vision."""
    for family, tasks in FAMILY_MAPPINGS:
        if any(model_type in _mapping(task) for task in tasks):
            return family
    parts = re.split(r"[_-]", model_type)
    for end in range(len(parts) - 1, 0, -1):
        for sep in "_-":
            prefix = sep.join(parts[:end])
            if prefix in _mapping("") or prefix in _known_types():
                family = family_of(prefix)
                if family != "other":
                    return family
    return _family_from_config(model_type)


def _known_types() -> set[str]:
    from transformers.models.auto import modeling_auto

    return set(modeling_auto.MODEL_MAPPING_NAMES)


def _family_from_config(model_type: str) -> str:
    try:
        config = tiny_config(model_type, "default")
    except Exception:  # noqa: BLE001  (not built later, with the reason)
        return "other"
    if _find(config, "sampling_rate") is not None:
        return "audio"
    return "vision" if _find(config, "image_size") is not None else "other"


def _first(names: Any) -> str:
    return names if isinstance(names, str) else names[0]


def architectures(causal_lm: bool = False) -> list[Architecture]:
    """Every base model of the auto mappings, sorted by name; causal LMs as a variant."""
    from transformers.models.auto import modeling_auto

    found = [Architecture(t, t, _first(c), family_of(t))
             for t, c in modeling_auto.MODEL_MAPPING_NAMES.items()]
    if causal_lm:
        found += [Architecture(f"{t}:causal-lm", t, _first(c), family_of(t))
                  for t, c in modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()]
    return sorted(found, key=lambda a: a.name)


# -- tiny configs ---------------------------------------------------------------------------

LEVELS = ("tiny", "layers", "default")


def tiny_config(model_type: str, level: str) -> Any:
    from transformers import CONFIG_MAPPING

    config = CONFIG_MAPPING[model_type]()
    if level != "default":
        shrink(config, level == "tiny")
    return config


def sub_configs(config: Any) -> Iterator[Any]:
    from transformers import PretrainedConfig

    for value in list(vars(config).values()):
        if isinstance(value, PretrainedConfig):
            yield value


def shrink(config: Any, widths: bool) -> None:
    """Shrinks ``config`` in place (and its sub-configs); ``widths`` False cuts only depth."""
    for sub in sub_configs(config):
        shrink(sub, widths)
    attrs = vars(config)
    stages = {len(v) for k, v in attrs.items() if k in LIST_CAPS and isinstance(v, (list, tuple))}
    # a count equal to the length of a per-stage list (Swin's num_layers = len(depths)) is left
    layer_keys = [k for k in LAYER_COUNTS if _is_int(attrs.get(k)) and attrs[k] not in stages]
    layers_before = {k: attrs[k] for k in layer_keys}
    for key in layer_keys:
        _cap(config, key, LAYERS)
    _cut_per_layer_lists(config, set(layers_before.values()))
    for key in EXPERT_KEYS:
        _cap(config, key, CAPS[key])
    _cap(config, "image_size", IMAGE)  # untied from widths; a 600-pixel image is slow
    if not widths:
        return
    for key in WIDTHS:
        _cap(config, key, WIDTH)
    for key, cap in CAPS.items():
        _cap(config, key, cap)
    for key, limit in FLOAT_CAPS.items():
        if isinstance(attrs.get(key), float) and attrs[key] > limit:
            setattr(config, key, limit)
    _fix_heads(config)
    for key, cap in LIST_CAPS.items():
        value = attrs.get(key)
        if isinstance(value, (list, tuple)) and value and all(_is_int(v) for v in value):
            setattr(config, key, type(value)(min(v, cap) for v in value))
    _fix_token_ids(config)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _cap(config: Any, key: str, cap: int) -> None:
    value = vars(config).get(key)
    if _is_int(value) and value > cap:
        setattr(config, key, cap)
    elif isinstance(value, (list, tuple)) and len(value) == 2 and key == "image_size":
        setattr(config, key, type(value)(min(v, cap) for v in value))


def _cut_per_layer_lists(config: Any, layer_counts: set[int]) -> None:
    """Lists with one entry per layer (``layer_types``, ``mlp_only_layers``...) follow the cut."""
    for key, value in list(vars(config).items()):
        if isinstance(value, (list, tuple)) and len(value) in layer_counts and len(value) > LAYERS:
            if key in LIST_CAPS:
                continue
            setattr(config, key, type(value)(value[:LAYERS]))


def _fix_heads(config: Any) -> None:
    attrs = vars(config)
    width = next((attrs[k] for k in WIDTHS if _is_int(attrs.get(k))), None)
    for key in HEAD_COUNTS:
        heads = attrs.get(key)
        if _is_int(heads) and heads > HEADS:
            setattr(config, key, HEADS)
        if _is_int(heads) and width and width % attrs[key]:
            setattr(config, key, 1)
    heads = next((attrs[k] for k in HEAD_COUNTS if _is_int(attrs.get(k))), None)
    for key in KV_HEAD_COUNTS:
        kv = attrs.get(key)
        if _is_int(kv) and heads:
            setattr(config, key, heads if kv >= heads else min(KV_HEADS, heads) if kv > 1 else 1)
    if "head_dim" in attrs and (attrs["head_dim"] is None or _is_int(attrs["head_dim"])) \
            and width and heads:
        config.head_dim = width // heads
    if _is_int(attrs.get("head_dim")) and _is_int(attrs.get("qk_rope_head_dim")):
        config.head_dim = attrs["qk_rope_head_dim"]  # multi-head latent attention


def _fix_token_ids(config: Any) -> None:
    """Special token ids the vocabulary cut left outside it move to its top."""
    vocab = vars(config).get("vocab_size")
    if not _is_int(vocab):
        return
    spare = iter(range(vocab - 1, vocab // 2, -1))
    moved: dict[int, int] = {}

    def inside(token: int) -> int:
        if token < vocab:
            return token
        return moved.setdefault(token, next(spare))

    for key, value in list(vars(config).items()):
        if not (key.endswith("_token_id") or key.endswith("_token_index")):
            continue
        if _is_int(value):
            setattr(config, key, inside(value))
        elif isinstance(value, list) and all(_is_int(v) for v in value):
            setattr(config, key, [inside(v) for v in value])


def special_ids(config: Any) -> set[int]:
    """Every token id a config (or a sub-config) names: inputs avoid them."""
    ids: set[int] = set()
    for key, value in vars(config).items():
        if key.endswith("_token_id") or key.endswith("_token_index") or key.endswith("_id"):
            ids |= {value} if _is_int(value) else {v for v in value if _is_int(v)} \
                if isinstance(value, list) else set()
    for sub in sub_configs(config):
        ids |= special_ids(sub)
    return ids


# -- inputs ---------------------------------------------------------------------------------


def _find(config: Any, key: str) -> Any:
    """``key`` of the config or of its first sub-config that has it."""
    value = vars(config).get(key)
    if value is not None:
        return value
    for sub in sub_configs(config):
        found = _find(sub, key)
        if found is not None:
            return found
    return None


def token_ids(config: Any, length: int, generator: torch.Generator) -> torch.Tensor:
    vocab = _find(config, "vocab_size")
    vocab = vocab if _is_int(vocab) and vocab > 0 else VOCAB
    avoid = special_ids(config)
    allowed = torch.tensor([i for i in range(min(vocab, 1000)) if i not in avoid] or [0])
    return allowed[torch.randint(0, len(allowed), (BATCH, length), generator=generator)]


def _image_sides(config: Any) -> tuple[int, int]:
    side = _find(config, "image_size")
    if isinstance(side, (list, tuple)) and len(side) == 2 and all(_is_int(s) for s in side):
        return side[0], side[1]
    # no size in the config: big enough for five stride-2 stages of a convolutional backbone
    return (side, side) if _is_int(side) and side > 0 else (IMAGE * 2, IMAGE * 2)


def pixel_values(config: Any, generator: torch.Generator) -> torch.Tensor:
    channels = _find(config, "num_channels") or 3
    sides = _image_sides(config)
    frames = _find(config, "num_frames")
    shape = (BATCH, frames, channels, *sides) if _is_int(frames) else (BATCH, channels, *sides)
    return torch.randn(shape, generator=generator)


def _audio(config: Any, name: str, generator: torch.Generator) -> list[torch.Tensor]:
    if name == "input_values":
        samples = INPUT_HINTS["input_values_samples"]
        channels = _find(config, "audio_channels")
        shapes = [(BATCH, samples), (BATCH, 1, samples)]
        if _is_int(channels):
            shapes.insert(0, (BATCH, channels, samples))
        mels, frames = _find(config, "num_mel_bins"), _find(config, "max_length")
        if _is_int(mels) and _is_int(frames):  # a spectrogram (Audio Spectrogram Transformer)
            shapes.append((BATCH, frames, mels))
        return [torch.randn(s, generator=generator) for s in shapes]
    features = next((v for k in ("num_mel_bins", "feature_size", "input_feat_per_channel",
                                 "n_mels", "num_mel_filters")
                     if _is_int(v := _find(config, k))), 80)
    source = _find(config, "max_source_positions")
    frames = 2 * source if _is_int(source) else INPUT_HINTS["input_features_frames"]
    return [torch.randn(BATCH, features, frames, generator=generator),
            torch.randn(BATCH, frames, features, generator=generator)]


def _parameters(model: Any) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return {}


def candidate_inputs(model: Any, config: Any, seed: int = 0) -> list[dict[str, Any]]:
    """Input sets for ``model``, most complete first."""
    generator = torch.Generator().manual_seed(seed)
    params = _parameters(model)
    main = getattr(model, "main_input_name", "input_ids")
    common: dict[str, Any] = {}
    if "use_cache" in params:
        common["use_cache"] = False
    text: dict[str, Any] = {}
    if "input_ids" in params:
        text["input_ids"] = token_ids(config, SEQ, generator)
        if "attention_mask" in params:
            mask = torch.ones(BATCH, SEQ, dtype=torch.long)
            mask[1, SEQ - 4:] = 0
            text["attention_mask"] = mask
        text.update({k: make(generator) for k, make in EXTRA_INPUTS.items() if k in params})
    if "decoder_input_ids" in params and getattr(config, "is_encoder_decoder", False):
        text["decoder_input_ids"] = token_ids(config, DECODER_SEQ, generator)
    image = {"pixel_values": pixel_values(config, generator)} if "pixel_values" in params else {}
    audio = [{name: value} for name in ("input_values", "input_features") if name in params
             for value in _audio(config, name, generator)]
    if main in ("input_values", "input_features"):
        sets = [{**a, **_decoder_only(text)} for a in audio]
    elif main == "pixel_values":
        sets = [{**image, **text}, image] if text else [image]
    else:
        sets = [{**text, **image}, text] if image else [text]
        sets += [{**text, **a} for a in audio]
    return [{**s, **common} for s in sets if s]


def _decoder_only(text: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in text.items() if k.startswith("decoder_")}
