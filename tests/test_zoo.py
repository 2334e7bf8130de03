"""The transformers sweep (bench/zoo.py) on a few fast, diverse architectures, in this process.

Each architecture is built tiny from its default config (bench/zoo_models.py), run eagerly,
then under bytegraph and torch.compile (bench/zoo_worker.py). Asserted for bytegraph: it ran,
both calls equal to eager, nothing new traced on the identical second call, no internal error
fallen back from, and no more graphs than torch.compile (all eight: one graph each). One run
of the command line, with one worker process, checks the pool, the JSON and the printed report.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from bench.zoo import main  # noqa: E402
from bench.zoo_models import architectures, shrink, tiny_config  # noqa: E402
from bench.zoo_worker import measure_row  # noqa: E402

ARCHITECTURES = ["bert", "gpt2", "t5", "vit", "wav2vec2", "whisper", "mixtral", "clip"]


pytestmark = pytest.mark.usefixtures("quiet_transformers")


@pytest.fixture(scope="module")
def by_name():
    return {a.name: a for a in architectures()}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_bytegraph_equals_eager(name: str, by_name) -> None:
    import torch._dynamo

    try:
        row = measure_row(by_name[name])
    finally:
        torch._dynamo.reset()
    assert row["status"] == "built", row.get("reason")
    assert row["level"] == "tiny"
    bg, tc = row["bytegraph"], row["torch.compile"]
    assert bg["ran"], bg.get("error")
    assert bg["equal"], bg.get("mismatch")
    assert bg["second_graphs"] == 0
    assert not bg.get("warnings")  # no internal error fallen back from
    assert tc["ran"] and tc["equal"], tc
    assert bg["graphs"] <= tc["graphs"], bg["breaks"]


def test_shrink_keeps_heads_consistent() -> None:
    config = tiny_config("llama", "tiny")
    assert config.hidden_size % config.num_attention_heads == 0
    assert config.num_attention_heads % config.num_key_value_heads == 0
    assert config.head_dim == config.hidden_size // config.num_attention_heads
    assert config.num_hidden_layers == 2
    assert all(i < config.vocab_size for i in (config.bos_token_id, config.eos_token_id))
    default = tiny_config("llama", "default")
    shrink(default, widths=False)
    assert default.hidden_size == 4096 and default.num_hidden_layers == 2


def test_command_line_with_one_worker(tmp_path: Path, capsys) -> None:
    out = tmp_path / "zoo.json"
    main(["--only", "gpt2,dinat", "--jobs", "1", "--out", str(out), "--timeout", "300"])
    rows = {r["name"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["gpt2"]["bytegraph"]["equal"] and rows["gpt2"]["torch.compile"]["equal"]
    assert rows["dinat"]["status"] == "not built"  # needs the natten package
    printed = capsys.readouterr().out
    assert "runs, equal to eager" in printed and "not built (1)" in printed
