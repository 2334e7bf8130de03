"""The transformers sweep's other two modes: a training step, and ``generate()``.

``--train``: every tenth architecture of the sweep (bench/zoo.py's list, sorted by name),
built as the sweep builds it (bench/zoo_models.py, bench/zoo_worker.py ``prepare``), in
train mode with dropout: one forward, a loss (the sum of the floating outputs), a backward,
under eager, bytegraph and torch.compile on copies of one model, each seeded alike. Equal:
outputs and every parameter's gradient ``assert_close`` to eager's. Graphs: what the
counting backend received on that step.

``--generate``: ten decoder language models (their ``...ForCausalLM`` class, tiny config),
``generate()`` greedy with the KV cache for 8 new tokens, the model's ``forward`` compiled
(as users compile it for generation). Equal: the tokens are eager's. Graphs: every graph the
backend received over the whole generation (the prefill, the first decoding step, then one
entry for every later step once the cache length is symbolic).

Each model runs in a subprocess of its own with a hard timeout (``--timeout``), so a crash or a
hang is one failed row. Run: ``python bench/zoo_modes.py --train|--generate [--only a,b]
[--out FILE.json]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy  # noqa: E402
import torch  # noqa: E402

from bench.zoo_models import architectures, tiny_config  # noqa: E402
from bench.zoo_worker import (  # noqa: E402
    SYSTEMS,
    CountingBackend,
    NotBuilt,
    describe,
    prepare,
    same,
    setup_process,
    tensors,
)

GENERATE_MODELS = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma2", "phi",
                   "opt", "gpt_neox")
NEW_TOKENS = 8


def _compiler(system: str) -> Any:
    if system == "bytegraph":
        import bytegraph

        bytegraph.reset()
        return bytegraph.compile
    import torch._dynamo

    torch._dynamo.reset()
    return torch.compile


# -- a training step ---------------------------------------------------------------------------


def _step(model: torch.nn.Module, call: Any, inputs: dict[str, Any]) -> list[torch.Tensor]:
    """Outputs and parameter gradients of one seeded forward and backward."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(1)
    random.seed(1)
    numpy.random.seed(1)  # wav2vec2's SpecAugment masks draw from numpy in train mode
    outputs = [t for t in tensors(call(**inputs)) if t.is_floating_point()]
    loss = sum(t.float().sum() for t in outputs if t.requires_grad)
    if isinstance(loss, torch.Tensor):
        loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return [t.detach().clone() for t in outputs] + [g.clone() for g in grads]


def train_row(name: str) -> dict[str, Any]:
    arch = next(a for a in architectures() if a.name == name)
    row: dict[str, Any] = {"name": name, "family": arch.family}
    try:
        prepared = prepare(arch)
    except NotBuilt as error:
        return {**row, "status": "not built", "reason": str(error)[:300]}
    base = prepared.model.train()
    expected = _step(base, base, prepared.inputs)
    row["status"] = "built"
    for system in SYSTEMS:
        model = copy.deepcopy(base)
        backend = CountingBackend()
        result: dict[str, Any] = {"ran": False}
        try:
            compiled = _compiler(system)(model, backend=backend)
            actual = _step(model, compiled, prepared.inputs)
            result.update(ran=True, graphs=len(backend.graphs), ops=backend.ops)
            mismatch = same(actual, expected, rtol=1e-4, atol=1e-5)  # gradients too
            result["equal"] = mismatch is None
            if mismatch:
                result["mismatch"] = mismatch
        except Exception as error:  # noqa: BLE001  (a failed system is a row field)
            result["error"] = describe(error)
        row[system] = result
    return row


# -- generate() --------------------------------------------------------------------------------


def generate_row(model_type: str) -> dict[str, Any]:
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    row: dict[str, Any] = {"name": model_type}
    cls = getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])
    config = tiny_config(model_type, "tiny")
    torch.manual_seed(0)
    base = cls(config).eval()
    vocab = min(config.get_text_config().vocab_size, 100)
    prompt = torch.randint(3, vocab, (1, 6), generator=torch.Generator().manual_seed(0))
    options = {"max_new_tokens": NEW_TOKENS, "min_new_tokens": NEW_TOKENS, "do_sample": False,
               "pad_token_id": 0}
    with torch.no_grad():
        expected = base.generate(prompt, **options)
    for system in SYSTEMS:
        model = copy.deepcopy(base)
        backend = CountingBackend()
        result: dict[str, Any] = {"ran": False}
        started = time.perf_counter()
        try:
            model.forward = _compiler(system)(model.forward, backend=backend)
            with torch.no_grad():
                tokens = model.generate(prompt, **options)
            result.update(ran=True, graphs=len(backend.graphs),
                          seconds=round(time.perf_counter() - started, 3),
                          equal=torch.equal(tokens, expected))
        except Exception as error:  # noqa: BLE001
            result["error"] = describe(error)
        row[system] = result
    return row


# -- the parent --------------------------------------------------------------------------------


def _run_one(mode: str, name: str, timeout: float) -> dict[str, Any]:
    command = [sys.executable, __file__, "--one", mode, name]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"name": name, "status": "timeout"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"name": name, "status": "crashed", "reason": tail[:300]}
    return json.loads(lines[-1])


def _names(mode: str, only: str) -> list[str]:
    if only:
        return [n.strip() for n in only.split(",") if n.strip()]
    if mode == "generate":
        return list(GENERATE_MODELS)
    return [a.name for a in sorted(architectures(), key=lambda a: a.name)][::10]


def report(mode: str, rows: list[dict[str, Any]]) -> None:
    built = [r for r in rows if all(s in r for s in SYSTEMS)]
    print(f"\n{mode}: {len(built)} of {len(rows)} models ran; graphs bg/tc, equal bg/tc")
    for r in rows:
        if r not in built:
            print(f"  {r['name']:28s} {r.get('status')}: {r.get('reason', '')[:100]}")
            continue
        cells = []
        for system in SYSTEMS:
            s = r[system]
            cells.append((s.get("graphs", "-"), "yes" if s.get("equal") else
                          s.get("mismatch") or (s.get("error") or {}).get("message", "NO")))
        (bg_graphs, bg_eq), (tc_graphs, tc_eq) = cells
        print(f"  {r['name']:28s} graphs {bg_graphs}/{tc_graphs}  equal {str(bg_eq)[:60]} / "
              f"{str(tc_eq)[:60]}")
    for system in SYSTEMS:
        equal = sum(1 for r in built if r[system].get("equal"))
        graphs = sum(r[system].get("graphs", 0) for r in built)
        single = sum(1 for r in built if r[system].get("graphs") == 1)
        one = f", one graph {single}" if mode == "train" else ""
        print(f"  {system}: equal to eager {equal}/{len(built)}, graphs {graphs}{one}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_mutually_exclusive_group(required=True)
    modes.add_argument("--train", action="store_true", help="a training step, every tenth model")
    modes.add_argument("--generate", action="store_true", help="generate() on ten decoder LMs")
    modes.add_argument("--one", nargs=2, metavar=("MODE", "NAME"), help=argparse.SUPPRESS)
    parser.add_argument("--only", default="", help="comma-separated names")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", default="")
    opts = parser.parse_args()
    if opts.one:
        setup_process()
        mode, name = opts.one
        row = train_row(name) if mode == "train" else generate_row(name)
        print(json.dumps(row))
        return
    mode = "train" if opts.train else "generate"
    started = time.perf_counter()
    rows = []
    for name in _names(mode, opts.only):
        rows.append(_run_one(mode, name, opts.timeout))
        print(f"[{len(rows)} {time.perf_counter() - started:.0f}s] {name}", flush=True)
    report(mode, rows)
    if opts.out:
        Path(opts.out).write_text(json.dumps({"mode": mode, "rows": rows}, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
