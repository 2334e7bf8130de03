"""Real models under bytegraph and torch.compile, side by side in one process.

Each model (Hugging Face tiny configs with random weights, and torch.nn models
written here; inference in eval mode under ``torch.no_grad()``, training in
train mode with dropout and a backward outside the compiled call) is compiled
by both systems with a counting backend that runs each graph as it is (like
``backend="eager"``). The table shows, per system:

- graphs: the graphs the backend received on the first call;
- breaks: graph breaks, from ``bytegraph.explain`` and ``torch._dynamo.explain``;
- ops: fx call nodes (call_function, call_method, call_module) in those graphs;
- first: compile + first call after a reset, in ms;
- call: the ratio of steady-state call times, bytegraph / torch.compile
  (best of 7 timeit-style rounds; below 1 means bytegraph's call is cheaper);
- same: outputs (and, for training, parameter gradients) equal to eager's
  under the same seed, within float tolerance.

No downloads: Hugging Face models are built from configs (``HF_HUB_OFFLINE=1``).

With ``--inductor`` the table is the steady state with ``backend="inductor"``
instead: both systems compile each model with Inductor (a backend that counts the
graphs and hands each to ``compile_fx``, as the "inductor" backend of either does),
the outputs are compared with eager's (Inductor's float tolerance; training rows
with Inductor's ``fallback_random``, so that dropout draws what eager draws), and each
compiled call is timed as the median of 21 interleaved rounds, one thread
(``--cpu-time``: this thread's CPU time, for a shared machine).

Run: ``python bench/models.py [--only NAME,...] [--reorderable-logging] [--inductor]``
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")

import torch  # noqa: E402
from torch import nn  # noqa: E402

import bytegraph  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_compile  # noqa: E402
from bench_compile import (  # noqa: E402
    median_call_times,
    per_call_times,
    print_table,
    ratio,
    warm_up,
)

from bench.plain_models import SmallCNN, mlp  # noqa: E402
from bench.zoo_worker import CountingBackend, tensors  # noqa: E402

# -- models -----------------------------------------------------------------------------


def _hf():
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


def gpt2() -> nn.Module:
    t = _hf()
    return t.GPT2LMHeadModel(t.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100))


def bert() -> nn.Module:
    t = _hf()
    return t.BertModel(t.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=128, vocab_size=100))


def llama() -> nn.Module:
    t = _hf()
    return t.LlamaForCausalLM(t.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100,
    ))


def t5_encoder() -> nn.Module:
    t = _hf()
    return t.T5EncoderModel(t.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                       num_heads=4, vocab_size=100))


def distilbert() -> nn.Module:
    t = _hf()
    return t.DistilBertModel(t.DistilBertConfig(dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                                vocab_size=100))


def vit() -> nn.Module:
    t = _hf()
    return t.ViTModel(t.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, image_size=32, patch_size=8))


class LSTMTagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True, dropout=0.1)
        self.out = nn.Linear(32, 5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embed(ids))
        return self.out(hidden).log_softmax(-1)


def transformer_encoder() -> nn.Module:
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


class ResidualBlock(nn.Module):
    """A ResNet basic block and a classifier, written out."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = torch.relu(out + x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(out, 1), 1))


def _ids() -> dict[str, torch.Tensor]:
    ids = torch.randint(0, 100, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 12:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    make: Callable[[], nn.Module]
    inputs: Callable[[], dict[str, Any]]
    training: bool = False


MODELS = [
    Model("gpt2", gpt2, lambda: {**_ids(), "use_cache": False}),
    Model("gpt2 train labels", gpt2,
          lambda: {**(i := _ids()), "labels": i["input_ids"], "use_cache": False}, True),
    Model("bert", bert, _ids),
    Model("bert train", bert, _ids, True),
    Model("llama", llama, lambda: {**_ids(), "use_cache": False}),
    Model("t5 encoder", t5_encoder, _ids),
    Model("distilbert", distilbert, _ids),
    Model("vit", vit, lambda: {"pixel_values": torch.randn(2, 3, 32, 32)}),
    Model("mlp", mlp, lambda: {"input": torch.randn(8, 32)}),
    Model("mlp train", mlp, lambda: {"input": torch.randn(8, 32)}, True),
    Model("cnn", SmallCNN, lambda: {"x": torch.randn(2, 3, 16, 16)}),
    Model("cnn train", SmallCNN, lambda: {"x": torch.randn(2, 3, 16, 16)}, True),
    Model("lstm", LSTMTagger, lambda: {"ids": torch.randint(0, 50, (2, 12))}),
    Model("transformer encoder", transformer_encoder, lambda: {"src": torch.randn(2, 10, 32)}),
    Model("transformer encoder train", transformer_encoder,
          lambda: {"src": torch.randn(2, 10, 32)}, True),
    Model("resnet block", ResidualBlock, lambda: {"x": torch.randn(2, 3, 16, 16)}),
    Model("resnet block train", ResidualBlock, lambda: {"x": torch.randn(2, 3, 16, 16)}, True),
]

# -- the two systems --------------------------------------------------------------------


def _reset_dynamo() -> None:
    import torch._dynamo

    torch._dynamo.reset()


SYSTEMS: dict[str, tuple[Callable[[], None], Callable[..., Any]]] = {
    "bytegraph": (bytegraph.reset, bytegraph.compile),
    "torch.compile": (_reset_dynamo, torch.compile),
}


def count_breaks(system: str, module: nn.Module, inputs: dict[str, Any]) -> int:
    if system == "bytegraph":
        bytegraph.reset()
        return bytegraph.explain(module)(**inputs).graph_break_count
    import torch._dynamo

    torch._dynamo.reset()
    # With no graph at all (a module dynamo skips, such as nn.LSTM) it reports -1.
    return max(0, torch._dynamo.explain(module)(**inputs).graph_break_count)


# -- one model --------------------------------------------------------------------------


def _run(model: Model, module: nn.Module, call: Callable[..., Any], inputs: dict[str, Any]):
    """Outputs (and gradients when training) of one seeded call."""
    torch.manual_seed(1)
    if not model.training:
        with torch.no_grad():
            return tensors(call(**inputs))
    module.zero_grad(set_to_none=True)
    outputs = tensors(call(**inputs))
    sum(o.float().sum() for o in outputs if o.requires_grad).backward()
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    return [o.detach() for o in outputs] + grads


def _same(actual: list[torch.Tensor], expected: list[torch.Tensor]) -> bool:
    if len(actual) != len(expected):
        return False
    try:
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e)
    except AssertionError:
        return False
    return True


@dataclasses.dataclass
class Row:
    name: str
    graphs: dict[str, int] = dataclasses.field(default_factory=dict)
    breaks: dict[str, int] = dataclasses.field(default_factory=dict)
    ops: dict[str, int] = dataclasses.field(default_factory=dict)
    first: dict[str, float] = dataclasses.field(default_factory=dict)
    call: dict[str, float] = dataclasses.field(default_factory=dict)
    same: dict[str, bool] = dataclasses.field(default_factory=dict)


def measure(model: Model) -> Row:
    row = Row(model.name)
    torch.manual_seed(0)
    base = model.make().train(model.training)
    inputs = model.inputs()
    modules = {name: copy.deepcopy(base) for name in SYSTEMS}  # compiling may set attributes
    expected = _run(model, base, base, inputs)
    compiled = {}
    for name, (reset, compile_fn) in SYSTEMS.items():
        reset()
        backend = CountingBackend()
        gc.collect()
        start = time.perf_counter()
        compiled[name] = compile_fn(modules[name], backend=backend)
        actual = _run(model, modules[name], compiled[name], inputs)
        row.first[name] = time.perf_counter() - start
        row.graphs[name], row.ops[name] = len(backend.graphs), backend.ops
        row.same[name] = _same(actual, expected) and _same(
            _run(model, modules[name], compiled[name], inputs), expected
        )
    row.call = _call_times(model, compiled, inputs)
    for name in SYSTEMS:
        grad = torch.enable_grad() if model.training else torch.no_grad()
        with grad:
            row.breaks[name] = count_breaks(name, copy.deepcopy(base), inputs)
    return row


def _call_times(model: Model, compiled: dict[str, Any], inputs: dict[str, Any]):
    grad = torch.enable_grad() if model.training else torch.no_grad()
    with grad:
        calls = {name: (lambda fn=fn: fn(**inputs)) for name, fn in compiled.items()}
        return per_call_times(calls, ())


# -- steady state with Inductor -------------------------------------------------------


class InductorCounting:
    """Counts the graphs it gets and compiles each with Inductor's ``compile_fx``."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        from torch._inductor.compile_fx import compile_fx

        self.graphs += 1
        return compile_fx(gm, example_inputs)


def _close(actual: list[torch.Tensor], expected: list[torch.Tensor]) -> bool:
    """Equal within a tolerance for Inductor's reordered float reductions."""
    if len(actual) != len(expected):
        return False
    try:
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
    except AssertionError:
        return False
    return True


def measure_inductor(model: Model) -> Row:
    """Graphs, outputs and the median steady-state call time, both systems on Inductor.

    Training rows run with Inductor's ``fallback_random``: its own random numbers differ
    from eager's, so a model with dropout matches eager only when the kernels draw from
    torch's generator, as eager does (for both systems alike).
    """
    from torch._inductor import config as inductor_config

    with inductor_config.patch(fallback_random=model.training):
        return _measure_inductor(model)


def _measure_inductor(model: Model) -> Row:
    row = Row(model.name)
    torch.manual_seed(0)
    base = model.make().train(model.training)
    inputs = model.inputs()
    expected = _run(model, base, base, inputs)
    compiled = {}
    for name, (reset, compile_fn) in SYSTEMS.items():
        reset()
        module = copy.deepcopy(base)
        backend = InductorCounting()
        compiled[name] = compile_fn(module, backend=backend)
        actual = _run(model, module, compiled[name], inputs)
        row.graphs[name] = backend.graphs
        row.same[name] = _close(actual, expected) and _close(
            _run(model, module, compiled[name], inputs), expected
        )
    grad = torch.enable_grad() if model.training else torch.no_grad()
    with grad:
        calls = {name: (lambda fn=fn: fn(**inputs)) for name, fn in compiled.items()}
        row.call = median_call_times(calls, ())
    return row


def report_inductor(rows: list[Row]) -> None:
    bg, tc = SYSTEMS
    print(f"\nbackend: Inductor (compile_fx); call = median of 21 rounds; ratio = {bg} / {tc}")
    print_table(
        ["model", "graphs bg/tc", f"{bg} call", f"{tc} call", "ratio", "same bg/tc"],
        [
            [r.name, f"{r.graphs[bg]} / {r.graphs[tc]}",
             f"{r.call[bg] * 1e6:.1f} us", f"{r.call[tc] * 1e6:.1f} us",
             ratio(r.call[bg], r.call[tc]).strip(),
             " / ".join("yes" if r.same[n] else "NO" for n in (bg, tc))]
            for r in rows
        ],
    )


# -- report ----------------------------------------------------------------------------


def report(rows: list[Row]) -> None:
    bg, tc = SYSTEMS
    headers = ["model", "graphs bg/tc", "breaks bg/tc", "ops bg/tc", "first ms bg/tc",
               "call ratio", "same bg/tc"]

    def pair(d: dict[str, Any], fmt: str = "{}") -> str:
        return f"{fmt.format(d[bg])} / {fmt.format(d[tc])}"

    table = [
        [r.name, pair(r.graphs), pair(r.breaks), pair(r.ops),
         pair({k: v * 1e3 for k, v in r.first.items()}, "{:.0f}"),
         ratio(r.call[bg], r.call[tc]).strip(),
         pair({k: "yes" if v else "NO" for k, v in r.same.items()})]
        for r in rows
    ]
    print(f"\nbg = bytegraph, tc = torch.compile; backend: a counting 'eager'; "
          f"call ratio = {bg} / {tc}")
    print_table(headers, table)
    ahead = [r.name for r in rows
             if r.ops[bg] >= r.ops[tc] and r.graphs[bg] <= max(r.graphs[tc], 1)]
    total = {name: sum(r.ops[name] for r in rows) for name in SYSTEMS}
    print(f"ops captured in all: {bg} {total[bg]}, {tc} {total[tc]} "
          f"({total[bg] / max(total[tc], 1):.2f}x); at least as many ops in no more graphs: "
          f"{len(ahead)} of {len(rows)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--reorderable-logging", action="store_true",
                        help="bytegraph.config.reorderable_logging = True")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--inductor", action="store_true",
                        help="steady-state call times with backend='inductor' instead")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this thread's CPU time (a shared machine)")
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    if opts.cpu_time:
        bench_compile.CLOCK[0] = time.thread_time
    bytegraph.config.reorderable_logging = opts.reorderable_logging
    print(f"torch {torch.__version__}, Python {platform.python_version()}, "
          f"{torch.get_num_threads()} threads, reorderable_logging={opts.reorderable_logging}")
    wanted = {n.strip() for n in opts.only.split(",") if n.strip()}
    start = time.perf_counter()
    warm_up()
    rows = []
    for model in MODELS:
        if wanted and model.name not in wanted:
            continue
        rows.append(measure_inductor(model) if opts.inductor else measure(model))
        print(f"  {model.name}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    (report_inductor if opts.inductor else report)(rows)
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
