"""No bytegraph bug reaches the user, and threads share one cache safely.

A bug met while compiling (simulated here by making one stage of the
pipeline raise) leaves the function running as plain Python: the result is
eager's, one warning names the function, and the traceback goes to the
``internal`` log artifact. ``config.strict`` (on in this suite, through
conftest) raises ``InternalError`` instead. What is not a bug keeps its own
behaviour: ``Unsupported`` under fullgraph, a backend's failure, and a call
with arguments the function does not accept (eager's own TypeError).
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Iterator

import pytest
import torch

import bytegraph
from bytegraph.graph.output_graph import OutputGraph


def scaled_sum(x, n):
    return x * n + x.sum()


def with_default(x, y=1):
    return x + y


@pytest.fixture
def broken_graph_finish(monkeypatch) -> None:
    """Every trace that reaches ``finish_graph`` meets a bug there."""

    def finish_graph(self, outputs):
        raise RuntimeError("simulated bug in finish_graph")

    monkeypatch.setattr(OutputGraph, "finish_graph", finish_graph)


@pytest.fixture
def lenient(monkeypatch) -> Iterator[None]:
    """The user's default: internal errors fall back instead of raising."""
    monkeypatch.setattr(bytegraph.config, "strict", False)
    bytegraph.set_logs()
    yield
    bytegraph.set_logs()


def test_internal_error_runs_the_function_as_python(broken_graph_finish, lenient) -> None:
    compiled = bytegraph.compile(scaled_sum, backend="eager")
    x = torch.randn(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = compiled(x, 3)
        second = compiled(x + 1, 2)
    torch.testing.assert_close(first, scaled_sum(x, 3), rtol=0, atol=0)
    torch.testing.assert_close(second, scaled_sum(x + 1, 2), rtol=0, atol=0)
    (warning,) = caught  # one warning, not one per call
    message = str(warning.message)
    assert warning.filename == __file__, "the warning points at the user's call"
    assert "internal error while compiling scaled_sum" in message
    assert "RuntimeError: simulated bug in finish_graph" in message
    assert "BYTEGRAPH_LOGS=internal" in message
    assert compiled.entries == []


def test_internal_error_traceback_goes_to_the_internal_log(
    broken_graph_finish, lenient, caplog
) -> None:
    bytegraph.set_logs("internal")
    compiled = bytegraph.compile(scaled_sum, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with caplog.at_level(logging.INFO, logger="bytegraph.internal"):
            compiled(torch.randn(3), 2)
    (record,) = [r for r in caplog.records if r.name == "bytegraph.internal"]
    assert "scaled_sum" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError
    assert "finish_graph" in caplog.text  # the traceback itself


def test_strict_raises_internal_error_with_the_bug_as_cause(broken_graph_finish) -> None:
    assert bytegraph.config.strict, "conftest turns strict mode on for the suite"
    compiled = bytegraph.compile(scaled_sum, backend="eager")
    with pytest.raises(bytegraph.InternalError, match="scaled_sum") as info:
        compiled(torch.randn(3), 2)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_earlier_entries_keep_serving_after_an_internal_error(monkeypatch, lenient) -> None:
    compiled = bytegraph.compile(scaled_sum, backend="eager")
    compiled(torch.randn(3), 2)
    monkeypatch.setattr(OutputGraph, "finish_graph", lambda self, outputs: 1 / 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = torch.randn(5)  # a new shape: a miss that meets the bug
        torch.testing.assert_close(compiled(x, 2), scaled_sum(x, 2), rtol=0, atol=0)
    assert len(caught) == 1
    assert len(compiled.entries) == 1
    y = torch.randn(3)  # the first entry still serves its shape
    torch.testing.assert_close(compiled(y, 2), scaled_sum(y, 2), rtol=0, atol=0)


def test_user_errors_are_not_internal_errors(lenient) -> None:
    def fullgraph_break(x):
        print("a break")
        return x + 1

    with pytest.raises(bytegraph.Unsupported):
        bytegraph.compile(fullgraph_break, backend="eager", fullgraph=True)(torch.randn(2))

    def failing_backend(gm, example_inputs):
        raise ValueError("backend bug")

    with pytest.raises(bytegraph.BackendError, match="backend bug"):
        bytegraph.compile(scaled_sum, backend=failing_backend)(torch.randn(2), 1)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [((1, 2, 3), {}), ((), {}), ((torch.ones(1),), {"z": 1}), ((torch.ones(1),), {"x": 1})],
    ids=["too many", "missing", "unexpected keyword", "twice"],
)
def test_a_bad_call_raises_eagers_type_error(args, kwargs) -> None:
    compiled = bytegraph.compile(with_default, backend="eager")
    with pytest.raises(TypeError) as expected:
        with_default(*args, **kwargs)
    with pytest.raises(TypeError) as first:  # nothing is compiled yet
        compiled(*args, **kwargs)
    assert str(first.value) == str(expected.value)
    assert compiled.entries == []
    compiled(torch.ones(2))
    with pytest.raises(TypeError) as later:  # the entry's guard sees the call first
        compiled(*args, **kwargs)
    assert str(later.value) == str(expected.value)


def with_a_break(x, n):
    y = x * n
    bytegraph.graph_break()  # the resume function has a cache of its own, shared by threads
    return y + x.sum()


class Scale(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(1))

    def forward(self, x, n):
        return x * self.weight * n


def run_threads(compiled, reference, threads: int = 8, steps: int = 30) -> None:
    """Each thread calls ``compiled`` with changing shapes and ints, checking it against eager."""
    failures: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            for step in range(steps):
                x = torch.randn(1 + (seed + step) % 12)
                n = (seed * step) % 5
                torch.testing.assert_close(compiled(x, n), reference(x, n), rtol=0, atol=0)
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            failures.append(e)

    pool = [threading.Thread(target=worker, args=(seed,)) for seed in range(threads)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the recompile-limit warning
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(timeout=120)
    assert not any(t.is_alive() for t in pool), "a thread hung"
    assert failures == []


@pytest.mark.parametrize("fn", [scaled_sum, with_a_break])
def test_threads_never_outgrow_the_recompile_limit(fn) -> None:
    """Eight threads, changing shapes and ints: one lock keeps every cache consistent."""
    compiled = bytegraph.compile(fn, backend="eager")
    run_threads(compiled, fn)
    assert 1 < len(compiled.entries) <= bytegraph.config.recompile_limit
    for resume in compiled.resume_cache.values():
        assert len(resume.entries) <= bytegraph.config.recompile_limit


def test_threads_share_a_compiled_module() -> None:
    module = Scale()
    compiled = bytegraph.compile(module, backend="eager")
    with torch.no_grad():
        run_threads(compiled, module)
    assert 1 < len(compiled._compiled_forward.entries) <= bytegraph.config.recompile_limit
