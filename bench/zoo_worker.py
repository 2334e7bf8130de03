"""One architecture of the transformers sweep, measured eager, under bytegraph and torch.compile.

``measure(arch, report)`` builds the model (bench/zoo_models.py: the first config level and
input set that run eagerly, twice with the same result), then compiles a fresh copy with each
system and a counting backend that runs each graph as it is, and reports one part of the row at
a time through ``report(key, value)``, so a parent that kills a hung worker keeps what finished.

Per system: ``graphs`` and ``ops`` (fx call nodes; ``ops_all`` with those of the subgraphs
installed in the graphs) on the first call, ``second_graphs`` (graphs
received on an identical second call: a recompile), ``equal`` (both calls' output tensors
``assert_close`` to eager's, seeded; ``mismatch`` says what differs), ``first_s`` (compile +
first call), ``error`` (type, first line, whether bytegraph raised it on purpose, and the
innermost frame) and, for bytegraph, the graph breaks (catalogue entry, reason, user frame, how
often) from a ``Recording`` of the same run, and its own warnings, if any (an internal error it
fell back from, the recompile limit).

``worker_main`` is the loop of one long-lived worker process (bench/zoo.py's pool).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import torch

from bench.counting import CountingBackend
from bench.zoo_models import LEVELS, Architecture, candidate_inputs, tiny_config

Report = Callable[[str, Any], None]
MAX_PARAMETERS = 80_000_000
SYSTEMS = ("bytegraph", "torch.compile")


class NotBuilt(Exception):
    """The architecture could not be built or run eagerly on CPU."""


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


def describe(error: BaseException) -> dict[str, Any]:
    """An exception as a row field: what, whose, where."""
    from bytegraph.exc import BytegraphError, InternalError, Unsupported

    kind = ("internal" if isinstance(error, InternalError) else
            "unsupported" if isinstance(error, Unsupported) else
            "bytegraph" if isinstance(error, BytegraphError) else "raised")
    frames = traceback.extract_tb(error.__traceback__)
    where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return {"type": type(error).__name__, "message": first_line(error), "kind": kind,
            "where": where}


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors of an output: tensors, tuples, lists, dicts and ModelOutputs."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    return []


def call(fn: Callable[..., Any], inputs: dict[str, Any]) -> list[torch.Tensor]:
    torch.manual_seed(1)
    with torch.no_grad():
        return [t.detach().clone() for t in tensors(fn(**inputs))]


def same(
    actual: list[torch.Tensor], expected: list[torch.Tensor], **tolerance: float
) -> str | None:
    """None when equal (``assert_close``, with ``tolerance`` if given); else what differs."""
    if len(actual) != len(expected):
        return f"{len(actual)} output tensors, eager has {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        try:
            torch.testing.assert_close(a, e, equal_nan=True, **tolerance)
        except AssertionError as error:
            return f"output {i}: {first_line(error)}"
    return None


@dataclasses.dataclass
class Prepared:
    model: torch.nn.Module
    inputs: dict[str, Any]
    expected: list[torch.Tensor]
    level: str


def prepare(arch: Architecture) -> Prepared:
    """The first (config level, input set) that builds and runs eagerly, deterministically."""
    import transformers

    try:
        cls = getattr(transformers, arch.class_name)
    except Exception as error:  # noqa: BLE001  (a missing optional dependency)
        raise NotBuilt(f"import: {first_line(error)}") from None
    tried: list[str] = []
    for level in LEVELS[:2]:
        try:
            config = tiny_config(arch.model_type, level)
            if (size := _meta_size(cls, config)) > MAX_PARAMETERS:
                tried.append(f"{level}: {size / 1e6:.0f}M parameters")
                continue
            torch.manual_seed(0)
            model = cls(config).eval()
        except Exception as error:  # noqa: BLE001
            tried.append(f"{level} build: {first_line(error)}")
            continue
        size = sum(p.numel() for p in model.parameters())
        if size > MAX_PARAMETERS:
            tried.append(f"{level}: {size / 1e6:.0f}M parameters")
            continue
        for inputs in candidate_inputs(model, config):
            try:
                expected = call(model, inputs)
                again = call(model, inputs)
            except Exception as error:  # noqa: BLE001
                tried.append(f"{level} {sorted(inputs)}: {first_line(error)}")
                continue
            if not expected:
                tried.append(f"{level} {sorted(inputs)}: no output tensors")
            elif (differs := same(again, expected)) is not None:
                tried.append(f"{level}: eager differs from itself ({differs})")
            else:
                return Prepared(model, inputs, expected, level)
    raise NotBuilt("; ".join(tried) or "no input set fits the forward signature")


def _meta_size(cls: Any, config: Any) -> int:
    """Parameters of the model built on the meta device (no memory); 0 if that fails."""
    try:
        with torch.device("meta"):
            return sum(p.numel() for p in cls(copy.deepcopy(config)).parameters())
    except Exception:  # noqa: BLE001  (built for real below, and measured there)
        return 0


def _compile_bytegraph(model: torch.nn.Module, backend: CountingBackend) -> Any:
    import bytegraph

    bytegraph.reset()
    return bytegraph.compile(model, backend=backend)


def _compile_torch(model: torch.nn.Module, backend: CountingBackend) -> Any:
    import torch._dynamo

    torch._dynamo.reset()
    return torch.compile(model, backend=backend)


def run_system(system: str, prepared: Prepared) -> dict[str, Any]:
    """Compile a copy, call it twice, compare both calls with eager."""
    from bytegraph.inspect.recording import Recording

    model = copy.deepcopy(prepared.model)  # compiling may set attributes
    backend = CountingBackend()
    compile_fn = _compile_bytegraph if system == "bytegraph" else _compile_torch
    row: dict[str, Any] = {"ran": False}
    recording = Recording()
    with warnings.catch_warnings(record=True) as caught, recording:
        warnings.simplefilter("always")
        started = time.perf_counter()
        try:
            compiled = compile_fn(model, backend)
            first = call(compiled, prepared.inputs)
            row["first_s"] = round(time.perf_counter() - started, 4)
            row["graphs"], row["ops"] = len(backend.graphs), backend.ops
            row["ops_all"] = backend.ops_all
            second = call(compiled, prepared.inputs)
        except Exception as error:  # noqa: BLE001  (recorded: the system failed on this model)
            row["error"] = describe(error)
            return _finish(system, row, recording, caught)
    row["ran"] = True
    row["second_graphs"] = len(backend.graphs) - row["graphs"]
    mismatch = same(first, prepared.expected) or same(second, prepared.expected)
    row["equal"] = mismatch is None
    if mismatch is not None:
        row["mismatch"] = mismatch
    return _finish(system, row, recording, caught)


def _finish(system: str, row: dict[str, Any], recording: Any, caught: list[Any]) -> dict:
    if system != "bytegraph":
        return row
    warned = sorted({first_line(w.message) for w in caught
                     if str(w.message).startswith("bytegraph")})
    if warned:  # an internal error it fell back from, the recompile limit
        row["warnings"] = warned
        row["internal_errors"] = sum("internal error" in w for w in warned)
    try:
        from bytegraph.inspect.explain import report_of

        report = report_of(recording)
        breaks: dict[tuple[str, str, str], int] = {}
        for b in report.breaks:  # the same break in every layer is one entry with a count
            key = _break(b)
            breaks[key] = breaks.get(key, 0) + 1
        row["breaks"] = [{"entry": e, "reason": r, "where": w, "count": n}
                         for (e, r, w), n in breaks.items()]
        row["break_count"] = len(report.breaks)
        row["recompiles"] = len(report.recompiles)
    except Exception as error:  # noqa: BLE001
        row["breaks_error"] = first_line(error)
    return row


def _break(report: Any) -> tuple[str, str, str]:
    frame = report.frames[0] if report.frames else None
    where = f"{os.path.basename(frame.filename)}:{frame.lineno} {frame.name}" if frame else ""
    return report.entry, report.reason[:400], where


def measure(arch: Architecture, report: Report, systems: tuple[str, ...] = SYSTEMS) -> None:
    """Reports ``status`` (built / not built), eager facts, then one entry per system."""
    started = time.perf_counter()
    try:
        prepared = prepare(arch)
    except NotBuilt as error:
        report("status", "not built")
        report("reason", str(error)[:300])
        return
    report("status", "built")
    report("level", prepared.level)
    report("inputs", {k: list(v.shape) if isinstance(v, torch.Tensor) else v
                      for k, v in prepared.inputs.items()})
    report("parameters", sum(p.numel() for p in prepared.model.parameters()))
    report("eager_s", round(time.perf_counter() - started, 4))
    for system in systems:
        report(system, run_system(system, prepared))


def measure_row(arch: Architecture, systems: tuple[str, ...] = SYSTEMS) -> dict[str, Any]:
    """``measure`` in this process, as one dict (the CI test's way in)."""
    row: dict[str, Any] = {"name": arch.name, "family": arch.family}
    measure(arch, row.__setitem__, systems)
    return row


def setup_process(threads: int = 1) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    torch.set_num_threads(threads)
    import importlib

    importlib.import_module("torch._dynamo")  # the sweep compares with it
    import transformers

    transformers.logging.set_verbosity_error()


def worker_main(conn: Connection, log: str, root: str) -> None:
    """Answers ``Architecture``s with ``("part", key, value)`` messages and ``("done",)``."""
    if root not in sys.path:
        sys.path.insert(0, root)
    with open(log, "ab") as sink:  # the models' prints and warnings
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
    setup_process()
    import bytegraph

    conn.send(("ready", bytegraph.__file__))
    while (task := conn.recv()) is not None:
        arch = Architecture(**task["arch"])
        print(f"== {arch.name}", flush=True)
        measure(arch, lambda key, value: conn.send(("part", key, value)), task["systems"])
        conn.send(("done",))
