"""Loggers obtained inline (``config.reorderable_logging``): ``logging.getLogger(name)``
written in the traced code, and the ``logging`` module functions, deferred like a
logger held in a variable.

Each program logs in the middle of tensor code. Eager and compiled give the same
result, the same stdout and the same records (level, logger, message), each
record exactly once per call and in the same order relative to prints; with the
switch on it is one graph. A call that needs a tensor's value still breaks and
logs the value the tensor has at that point.
"""

from __future__ import annotations

import logging
import warnings
from logging import warning as module_warning

import pytest
import torch

import bytegraph

NAME = "bytegraph.tests.inline"


@pytest.fixture
def reorderable(monkeypatch):
    monkeypatch.setattr(bytegraph.config, "reorderable_logging", True)


@pytest.fixture
def records():
    """Every record reaching the root logger, as (level, name, message)."""
    seen: list[tuple[int, str, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelno, record.name, record.getMessage()))

    root, handler = logging.getLogger(), Keep(level=logging.DEBUG)
    root.addHandler(handler)
    level, root.level = root.level, logging.INFO
    yield seen
    root.removeHandler(handler)
    root.setLevel(level)


def inline_get_logger(x):
    y = x.relu()
    logging.getLogger(NAME).warning("shape %s", tuple(y.shape))
    print("between")
    logging.getLogger(NAME).info("dtype=%s", y.dtype)
    return y * 2


def module_functions(x):
    y = x + 1
    logging.warning("root %d", y.dim())
    logging.debug("below the level")
    print("after root")
    logging.log(logging.ERROR, "numel %d", x.numel())
    module_warning("imported by name")
    return y.sin()


def root_and_named_by_module(x):
    logging.getLogger().error("root logger")
    y = x.cos()
    logging.getLogger(__name__).warning("module logger %s", [1, 2])
    logging.getLogger(name=NAME).critical("keyword name")
    return y


def inline_in_helper(x):
    def helper(t, tag):
        logging.getLogger(NAME).warning("helper %s", tag)
        return t * 3

    return helper(x, "a") + helper(x, "b")


def inline_in_loop(x):
    for i in range(3):
        x = x + i
        logging.getLogger(NAME).warning("step %d", i)
        print("printed", i)
    return x


PROGRAMS = {
    "inline_get_logger": inline_get_logger,
    "module_functions": module_functions,
    "root_and_named_by_module": root_and_named_by_module,
    "inline_in_helper": inline_in_helper,
    "inline_in_loop": inline_in_loop,
}


def _run(fn, x, capsys, records):
    capsys.readouterr()
    records.clear()
    result = fn(x)
    return result, capsys.readouterr().out, list(records)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_inline_logging_matches_eager(name, reorderable, capsys, records, counting_backend):
    fn = PROGRAMS[name]
    compiled = bytegraph.compile(fn, backend=counting_backend)
    x = torch.randn(3, 3)
    expected = _run(fn, x, capsys, records)
    assert expected[2], "the program logs nothing"
    for _ in range(2):  # the second call replays from the cache entry
        actual = _run(compiled, x, capsys, records)
        assert torch.equal(actual[0], expected[0])
        assert actual[1:] == expected[1:]
    assert counting_backend.calls == 1


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_one_graph_no_break(name, reorderable, capsys, records):
    report = bytegraph.explain(PROGRAMS[name])(torch.randn(3, 3))
    assert report.graph_count == 1, str(report)
    assert report.graph_break_count == 0, str(report)


def tensor_argument(x):
    y = x * 2
    logging.getLogger(NAME).warning("value %s", y)
    y.add_(1)
    return y


@pytest.mark.parametrize("switch", [True, False])
@pytest.mark.parametrize("fn", [tensor_argument, inline_get_logger, module_functions])
def test_breaks_log_once_with_eager_values(fn, switch, monkeypatch, capsys, records):
    """A tensor argument, or the switch off: a graph break, each record once."""
    monkeypatch.setattr(bytegraph.config, "reorderable_logging", switch)
    compiled = bytegraph.compile(fn, backend="eager")
    x = torch.randn(2)
    expected = _run(fn, x, capsys, records)
    actual = _run(compiled, x, capsys, records)
    assert torch.equal(actual[0], expected[0])
    assert actual[1:] == expected[1:]


def test_logger_state_change_inline_is_not_deferred(reorderable, records):
    """``getLogger(name).setLevel`` is not a log call: it runs at its place, in order."""
    def f(x):
        logging.getLogger(NAME).setLevel(logging.ERROR)
        logging.getLogger(NAME).warning("dropped: below the new level")
        logging.getLogger(NAME).setLevel(logging.NOTSET)
        logging.getLogger(NAME).warning("kept")
        return x + 1

    x = torch.randn(2)
    f(x)
    expected = list(records)
    records.clear()
    bytegraph.compile(f, backend="eager")(x)
    assert records == expected == [(logging.WARNING, NAME, "kept")]


def warns_inline(x):
    y = x + 1
    warnings.warn(f"shape {tuple(y.shape)}", UserWarning, stacklevel=1)
    return y * 2


def test_warnings_warn_breaks_and_warns_once(reorderable, counting_backend):
    """``warnings.warn`` is not deferred (its registry keys on the caller's line): a
    graph break around it, the warning issued once per call with eager's message."""
    compiled = bytegraph.compile(warns_inline, backend=counting_backend)
    x = torch.randn(3)
    for fn in (warns_inline, compiled, compiled):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert torch.equal(fn(x), (x + 1) * 2)
        assert [str(w.message) for w in caught] == ["shape (3,)"]
    assert counting_backend.calls == 2
