"""Inside a worker process: replay a test, and run one program on the three systems.

A test file is executed as a fresh module for every replay (``load``), so eager,
bytegraph and torch.compile each get their own globals, closures and inputs,
built by the same code under the same seeds. ``discover`` replays a test once,
eagerly, and returns the calls worth a program each (the first call of each
distinct signature, ``MAX_PER_TEST`` at most). ``run_program`` replays up to
that call three times and runs the captured function: eagerly, through
``bytegraph.compile`` and through ``torch.compile``, both with a counting eager
backend, and compares each compiled run with eager (``compare.classify``).
Each system's outcome is sent as soon as it is known (``send``), so a hang or a
crash loses only the systems still to come.
"""

from __future__ import annotations

import ast
import contextlib
import io
import linecache
import os
import random
import sys
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from bench.dynamo_corpus import compare, shim, source

PACKAGE = "dynamo_corpus_tests"
MAX_PER_TEST = 5
_CODE: dict[tuple[str, str], Any] = {}


class GraphCounter:
    """The counting eager backend: counts graphs, runs each as it is."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
        self.graphs += 1
        return gm.forward


def filename_of(file: str) -> str:
    return f"<dynamo_corpus>/test/dynamo/{file}.py"


class _DropAsserts(ast.NodeTransformer):
    """The test's own ``assert`` statements (on Dynamo's counters) become ``pass``.

    Only the test method's own statements: functions and classes defined inside it
    are the programs, and keep theirs, as does a ``make_dynamo_test`` method (the
    method itself is the program).
    """

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:  # noqa: N802
        return node

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815
    visit_ClassDef = visit_FunctionDef  # noqa: N815
    visit_Lambda = visit_FunctionDef  # noqa: N815

    def visit_Assert(self, node: ast.Assert) -> ast.AST:  # noqa: N802
        return ast.copy_location(ast.Pass(), node)


def without_asserts(tree: ast.Module) -> ast.Module:
    """``tree`` with the asserts of every test method's body dropped."""
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef):
            for method in cls.body:
                if (isinstance(method, ast.FunctionDef) and method.name.startswith("test_")
                        and not any("make_dynamo_test" in ast.unparse(d)
                                    for d in method.decorator_list)):
                    method.body = [_DropAsserts().visit(statement) for statement in method.body]
    return tree


def load(file: str, src: str) -> types.ModuleType:
    """A fresh module executing ``file`` (and, first, the files it imports from its package)."""
    shim.install()
    package = sys.modules.get(PACKAGE)
    if package is None:
        package = types.ModuleType(PACKAGE)
        package.__path__ = []
        sys.modules[PACKAGE] = package
    for dependency in source.DEPENDS.get(file, ()):
        setattr(package, dependency, load(dependency, src))
    if (src, file) not in _CODE:
        text = shim.adapt(source.read(file, src))
        name = filename_of(file)
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        _CODE[src, file] = compile(without_asserts(ast.parse(text)), name, "exec")
    module = types.ModuleType(f"{PACKAGE}.{file}")
    module.__file__ = filename_of(file)
    module.__package__ = PACKAGE
    sys.modules[module.__name__] = module
    exec(_CODE[src, file], module.__dict__)  # noqa: S102  (the corpus program)
    return module


def replay(ref: source.TestRef, stop_at: int | None) -> tuple[Any, Any, Any]:
    """(captured call or None, recorder, module) after running test ``ref`` up to ``stop_at``."""
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    module = load(ref.file, ref.src)
    case = getattr(module, ref.cls)(ref.name)
    recorder = shim.Recorder(stop_at)
    shim.ACTIVE.append(recorder)
    real_compile, torch.compile = torch.compile, shim.compile_stub  # the newer files' spelling
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the test's own prints
            case.setUp()
            getattr(case, ref.name)()
    except shim.Captured as captured:
        return captured, recorder, module
    finally:
        shim.ACTIVE.pop()
        torch.compile = real_compile
        torch.set_grad_enabled(True)
    return None, recorder, module


def discover(ref: source.TestRef) -> dict[str, Any]:
    """The call indices of ``ref`` to run as programs, or why there are none."""
    try:
        _, recorder, _ = replay(ref, None)
    except Exception as exc:  # noqa: BLE001  (the replay's failure is the skip reason)
        reason = f"replay: {type(exc).__name__}: {str(exc)[:120]}"
        if isinstance(exc, shim.NeedsDynamo):
            reason = f"needs dynamo: {str(exc)[:80]}"
        return {"calls": [], "skip": reason}
    seen: set[str] = set()
    calls = []
    for index, (_, signature) in enumerate(recorder.calls):
        if signature not in seen and len(calls) < MAX_PER_TEST:
            seen.add(signature)
            calls.append(index)
    return {"calls": calls, "skip": None if calls else "no optimized call"}


def bytegraph_internal(error: BaseException) -> bool:
    import bytegraph

    root = os.path.dirname(bytegraph.__file__) + os.sep
    return isinstance(error, bytegraph.BytegraphError) or compare.owners(error, (root,))


def dynamo_internal(error: BaseException) -> bool:
    import torch._dynamo.exc

    root = os.path.dirname(torch._dynamo.__file__) + os.sep
    dynamo_error = isinstance(error, torch._dynamo.exc.TorchDynamoException)
    return dynamo_error or compare.owners(error, (root,))


Run = tuple[compare.Observed, int, str]  # what a system left, its graph count, its first break


def run_bytegraph(fn: Any, args: tuple, kwargs: dict, module: Any) -> Run:
    import bytegraph

    bytegraph.config.strict = False  # as users run it: an internal error falls back to Python
    bytegraph.reset()
    counter = GraphCounter()
    reason = ""
    try:
        from bytegraph.inspect.explain import report_of
        from bytegraph.inspect.recording import Recording
    except ImportError:  # an older bytegraph: no reasons
        observed = compare.observe(
            bytegraph.compile(fn, backend=counter), args, kwargs, vars(module), fn
        )
    else:
        with Recording() as recording:
            compiled = bytegraph.compile(fn, backend=counter)
            observed = compare.observe(compiled, args, kwargs, vars(module), fn)
        try:
            breaks = report_of(recording).breaks
            if breaks:
                reason = breaks[0].reason
                if breaks[0].ran_as_python:
                    reason += f" (frame ran as Python: {breaks[0].ran_as_python})"
        except Exception as exc:  # noqa: BLE001  (the report itself failed: say so)
            reason = f"<explain failed: {type(exc).__name__}: {exc}>"
    bytegraph.reset()
    return observed, counter.graphs, reason[:300]


def run_dynamo(fn: Any, args: tuple, kwargs: dict, module: Any) -> Run:
    import torch._dynamo

    torch._dynamo.reset()
    counter = GraphCounter()
    compiled = torch.compile(fn, backend=counter)
    observed = compare.observe(compiled, args, kwargs, vars(module), fn)
    torch._dynamo.reset()
    return observed, counter.graphs, ""


def nondeterministic(ref: source.TestRef, call: int, eager: compare.Observed) -> str:
    """Where a second eager replay differs from the first (ids, time, hash order), or ''."""
    captured, _, module = replay(ref, call)
    again = compare.observe(captured.fn, captured.args, captured.kwargs, vars(module))
    outcome, detail = compare.classify(eager, again, lambda error: False)
    return "" if outcome == "pass" else detail or outcome


SYSTEMS = {"bytegraph": run_bytegraph, "torch": run_dynamo}


def run_program(
    ref: source.TestRef, call: int, send: Callable[[str, dict], None]
) -> None:
    """Send ("eager", ...), then ("bytegraph", ...) and ("torch", ...) outcomes for one program."""
    try:
        captured, _, module = replay(ref, call)
        if captured is None:
            send("eager", {"outcome": "skip", "detail": "the replay no longer reaches the call"})
            return
        eager = compare.observe(captured.fn, captured.args, captured.kwargs, vars(module))
    except Exception as exc:  # noqa: BLE001
        send("eager", {"outcome": "skip", "detail": f"replay: {type(exc).__name__}: {exc}"[:200]})
        return
    if isinstance(eager.error, shim.NeedsDynamo):
        send("eager", {"outcome": "skip", "detail": f"needs dynamo: {eager.error}"[:200]})
        return
    unstable = nondeterministic(ref, call, eager)
    if unstable:
        send("eager", {"outcome": "skip", "detail": f"nondeterministic: {unstable}"[:200]})
        return
    raised = compare.describe(eager.error) if eager.error else ""
    send("eager", {"outcome": "pass", "detail": raised})
    for system, runner in SYSTEMS.items():
        internal = bytegraph_internal if system == "bytegraph" else dynamo_internal
        try:
            captured, _, module = replay(ref, call)
            observed, graphs, reason = runner(captured.fn, captured.args, captured.kwargs, module)
            outcome, detail = compare.classify(eager, observed, internal)
        except Exception as exc:  # noqa: BLE001  (raised outside the program's call)
            detail = f"harness: {type(exc).__name__}: {exc}"[:300]
            outcome, graphs, reason = "harness", 0, ""
        send(system, {"outcome": outcome, "detail": detail, "graphs": graphs, "break": reason})
