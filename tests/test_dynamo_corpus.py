"""The Dynamo-test corpus runner (bench/dynamo_corpus) on three programs of a fixture file.

The real corpus is read from a torchdynamo snapshot (not in the repository); the
fixture has the same shape, so the replay, the worker pool and the comparison
with eager run end to end here. ``classify`` is also checked to call a changed
mutated input wrong.
"""

from __future__ import annotations

from pathlib import Path

import torch

from bench.dynamo_corpus import compare
from bench.dynamo_corpus.run import main

FIXTURE = Path(__file__).resolve().parent.parent / "bench" / "dynamo_corpus" / "fixture"


def test_runner_on_three_programs(tmp_path: Path, capsys) -> None:
    import json

    out = tmp_path / "out.json"
    main([
        "--source", str(FIXTURE), "--newer", "", "--jobs", "1", "--timeout", "120",
        "--json", str(out),
    ])
    rows = {r["id"]: r for r in json.loads(out.read_text())["programs"]}
    assert sorted(rows) == [
        "test_functions::test_add", "test_functions::test_break",
        "test_functions::test_list_mutation",
    ]
    for row in rows.values():
        assert row["bytegraph"]["outcome"] == "pass", row
        assert row["torch"]["outcome"] == "pass", row
    assert rows["test_functions::test_add"]["bytegraph"]["graphs"] == 1
    assert rows["test_functions::test_break"]["torch"]["graphs"] == 2
    assert rows["test_functions::test_break"]["bytegraph"]["graphs"] == 2
    assert "unsupported" in rows["test_functions::test_break"]["bytegraph"]["break"]
    assert "tc>0 bg=0" in capsys.readouterr().out


def test_classify_sees_a_mutated_input() -> None:
    def world(value: float) -> compare.Observed:
        items = [torch.full((2,), value)]
        return compare.Observed(None, "", compare.normalize(((items,), {}, 1), {}, 0))

    assert compare.classify(world(1.0), world(1.0), lambda e: False)[0] == "pass"
    outcome, detail = compare.classify(world(1.0), world(2.0), lambda e: False)
    assert outcome == "wrong" and detail.startswith("args"), detail


def test_classify_counts_a_caught_internal_error() -> None:
    """With ``config.strict`` off bytegraph warns and falls back: still an internal error."""
    eager = compare.Observed(None, "", compare.normalize(((), {}, 1), {}, 0))
    warned = compare.Observed(
        None, "", eager.world,
        ("bytegraph: internal error while compiling f (x.py:1): KeyError: 'k'. "
         "It runs as plain Python from now on.",),
    )
    outcome, detail = compare.classify(eager, warned, lambda e: False)
    assert outcome == "internal" and detail.endswith("KeyError: 'k'"), detail
