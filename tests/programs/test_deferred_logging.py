"""Deferred logging (``config.reorderable_logging``): print and Logger calls on
constants run after the graph, in program order, instead of breaking it.

Each program prints or logs in the middle of tensor code. Run eagerly and
compiled with the switch on, it gives one graph, the same result, the same
captured stdout and the same log records (level, logger, message); with the
switch off it breaks as before. A call that needs a tensor's value, or that
reads state the replay would not have (``exc_info``, ``file=``), still breaks.
"""

from __future__ import annotations

import logging

import pytest
import torch

import bytegraph

logger = logging.getLogger("bytegraph.tests.deferred")


@pytest.fixture
def reorderable(monkeypatch):
    monkeypatch.setattr(bytegraph.config, "reorderable_logging", True)


@pytest.fixture
def records():
    """The records ``logger`` emits, as (level, name, message)."""
    seen: list[tuple[int, str, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelno, record.name, record.getMessage()))

    handler = Keep(level=logging.DEBUG)
    logger.addHandler(handler)
    level, logger.level = logger.level, logging.INFO
    yield seen
    logger.removeHandler(handler)
    logger.setLevel(level)


def print_shapes(x):
    y = x.relu()
    print("shape", y.shape, "dtype", y.dtype, sep="|")
    z = y @ y.T
    print(f"rows={z.shape[0]}", end="!\n")
    return z + 1


def log_levels(x):
    y = x * 2
    logger.info("scaled %s", tuple(y.shape))
    logger.debug("not shown: below the level")
    y = y.sin()
    logger.warning("dtype=%s", y.dtype)
    logger.log(logging.ERROR, "numel %d", x.numel())
    return y.sum()


def print_and_log_interleaved(x):
    print("first")
    logger.warning("second")
    y = x + 1
    print("third", [1, 2], {"k": (3,)})
    logger.error("fourth %s", y.dim())
    return y


def print_in_loop(x):
    for i in range(3):
        x = x * 2
        print("step", i)
    return x


def log_in_inlined_helper(x):
    def helper(t, name):
        logger.warning("helper %s got %s", name, t.shape)
        return t.cos()

    return helper(x, "a") + helper(x + 1, "b")


PROGRAMS = {
    "print_shapes": print_shapes,
    "log_levels": log_levels,
    "print_and_log_interleaved": print_and_log_interleaved,
    "print_in_loop": print_in_loop,
    "log_in_inlined_helper": log_in_inlined_helper,
}


def _run(fn, x, capsys, records):
    capsys.readouterr()
    records.clear()
    result = fn(x)
    return result, capsys.readouterr().out, list(records)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_deferred_calls_match_eager(name, reorderable, capsys, records, counting_backend):
    fn = PROGRAMS[name]
    compiled = bytegraph.compile(fn, backend=counting_backend)
    x = torch.randn(3, 3)
    expected = _run(fn, x, capsys, records)
    for _ in range(2):  # the second call replays from the cache entry
        actual = _run(compiled, x, capsys, records)
        assert torch.equal(actual[0], expected[0])
        assert actual[1:] == expected[1:]
    assert counting_backend.calls == 1


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_switch_on_gives_one_graph_no_break(name, reorderable, capsys):
    report = bytegraph.explain(PROGRAMS[name])(torch.randn(3, 3))
    assert report.graph_count == 1, str(report)
    assert report.graph_break_count == 0, str(report)


@pytest.mark.parametrize("name", ["print_shapes", "log_levels"])
def test_switch_off_breaks(name, capsys, records):
    assert bytegraph.config.reorderable_logging is False
    report = bytegraph.explain(PROGRAMS[name])(torch.randn(3, 3))
    assert report.graph_break_count >= 1


def print_tensor(x):
    y = x + 1
    print(y)  # needs the values
    return y * 2


def print_to_file(x, sink):
    y = x + 1
    print("to a file", file=sink)
    return y * 2


def log_exc_info(x):
    y = x + 1
    try:
        raise ValueError("boom")
    except ValueError:
        logger.error("failed", exc_info=True)  # the replay has no exception handled
    return y * 2


def log_exception(x):
    y = x + 1
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")
    return y * 2


def log_tensor_value(x):
    y = x + 1
    logger.warning("max %s", y.max())
    return y * 2


class Sink:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)


@pytest.mark.parametrize("fn", [print_tensor, log_exc_info, log_exception, log_tensor_value])
def test_calls_needing_run_time_state_still_break(fn, reorderable, capsys, records):
    x = torch.randn(3)
    expected = _run(fn, x, capsys, records)
    report = bytegraph.explain(fn)(x.clone())
    assert report.graph_break_count >= 1, str(report)
    bytegraph.reset()
    actual = _run(bytegraph.compile(fn, backend="eager"), x, capsys, records)
    assert torch.equal(actual[0], expected[0])
    assert actual[1] == expected[1]
    assert [r[:2] for r in actual[2]] == [r[:2] for r in expected[2]]


def test_print_to_a_file_breaks(reorderable):
    eager_sink, compiled_sink = Sink(), Sink()
    x = torch.randn(3)
    expected = print_to_file(x, eager_sink)
    report = bytegraph.explain(print_to_file)(x, Sink())
    assert report.graph_break_count >= 1
    bytegraph.reset()
    actual = bytegraph.compile(print_to_file, backend="eager")(x, compiled_sink)
    assert torch.equal(actual, expected)
    assert compiled_sink.parts == eager_sink.parts


def print_around_break(x):
    print("before")
    y = x + 1
    bytegraph.graph_break()
    print("after")
    return y * 2


def test_deferred_print_keeps_its_place_before_a_break(reorderable, capsys):
    compiled = bytegraph.compile(print_around_break, backend="eager")
    compiled(torch.randn(3))
    assert capsys.readouterr().out == "before\nafter\n"


def mutate_then_print(x, box):
    box.append(1)
    print("len", len(box))
    box.append(2)
    print("len", len(box))
    return x + 1


def test_printed_values_are_those_of_their_moment(reorderable, capsys):
    compiled = bytegraph.compile(mutate_then_print, backend="eager")
    box: list[int] = []
    compiled(torch.randn(3), box)
    assert capsys.readouterr().out == "len 1\nlen 2\n"
    assert box == [1, 2]
