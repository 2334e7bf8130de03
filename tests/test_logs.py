"""Logging: each artifact is the ``logging`` logger ``bytegraph.<artifact>``.

``set_logs(spec)`` and ``BYTEGRAPH_LOGS=spec`` take the same spec
(``"graph_breaks,+guards"``: ``+`` means DEBUG); an unknown artifact is a
ValueError naming it; nothing is logged while an artifact is off, and a call
that hits the cache logs nothing at all. Each test leaves every artifact
off (``set_logs()``).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from source_lines import line_of

import bytegraph
from bytegraph.logs import ARTIFACTS

THIS_FILE = os.path.abspath(__file__)


@pytest.fixture(autouse=True)
def logs_off():
    bytegraph.set_logs()
    yield
    bytegraph.set_logs()


def records(caplog, artifact: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == f"bytegraph.{artifact}"]


def bytegraph_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("bytegraph")]


def add_mul(x):
    y = x + 1
    return y * 2


def with_print(x):
    y = x + 1
    print("logged break", y.shape)
    return y * 2


def scaled(x, n):
    return x * n


# --- each artifact ----------------------------------------------------------------------


def test_bytecode(caplog) -> None:
    bytegraph.set_logs("bytecode")
    bytegraph.compile(add_mul, backend="eager")(torch.randn(3))
    messages = [r.getMessage() for r in records(caplog, "bytecode")]
    assert all(r.levelno == logging.INFO for r in records(caplog, "bytecode"))
    assert any("LOAD_FAST" in m and "x" in m for m in messages), messages
    assert any("BINARY_OP" in m for m in messages)
    assert any("RETURN_VALUE" in m for m in messages)
    assert not any("stack=" in m for m in messages)  # the stack only at DEBUG


def test_bytecode_debug_shows_the_stack(caplog) -> None:
    bytegraph.set_logs("+bytecode")
    assert logging.getLogger("bytegraph.bytecode").getEffectiveLevel() == logging.DEBUG
    bytegraph.compile(add_mul, backend="eager")(torch.randn(3))
    messages = [r.getMessage() for r in records(caplog, "bytecode")]
    assert any("stack=" in m for m in messages), messages


def test_graph_code(caplog) -> None:
    bytegraph.set_logs("graph_code")
    bytegraph.compile(add_mul, backend="eager")(torch.randn(3))
    (record,) = records(caplog, "graph_code")
    message = record.getMessage()
    assert "add_mul" in message
    assert "def forward" in message
    assert "add" in message and "mul" in message


def test_graph_code_one_record_per_graph(caplog) -> None:
    bytegraph.set_logs("graph_code")
    bytegraph.compile(with_print, backend="eager")(torch.randn(3))
    assert len(records(caplog, "graph_code")) == 2  # before and after the print


def test_guards(caplog) -> None:
    bytegraph.set_logs("guards")
    bytegraph.compile(add_mul, backend="eager")(torch.randn(3, 5))
    (record,) = records(caplog, "guards")
    message = record.getMessage()
    assert "add_mul" in message
    assert "x" in message and "(3, 5)" in message


def test_graph_breaks(caplog, capsys) -> None:
    bytegraph.set_logs("graph_breaks")
    bytegraph.compile(with_print, backend="eager")(torch.randn(3))
    (record,) = records(caplog, "graph_breaks")
    message = record.getMessage()
    assert "with_print" in message
    line = line_of(with_print, "print(\"logged")
    assert f"{THIS_FILE}:{line}" in message
    assert 'print("logged break", y.shape)' in message
    assert capsys.readouterr().out == "logged break torch.Size([3])\n"


def test_recompiles_names_the_guard_and_the_value(caplog) -> None:
    bytegraph.set_logs("recompiles")
    compiled = bytegraph.compile(add_mul, backend="eager")
    compiled(torch.randn(3))
    assert records(caplog, "recompiles") == []  # the first compile is no recompile
    compiled(torch.randn(7))
    (record,) = records(caplog, "recompiles")
    message = record.getMessage()
    assert "add_mul" in message
    assert "x.shape" in message and "(3,)" in message  # the guard that failed
    assert "7" in message.split("guard failed:")[1].split("(3,)")[1]  # the value that failed


def test_recompiles_on_a_constant(caplog) -> None:
    bytegraph.set_logs("recompiles")
    compiled = bytegraph.compile(scaled, backend="eager")
    compiled(torch.randn(3), 2)
    compiled(torch.randn(3), 5)
    (record,) = records(caplog, "recompiles")
    message = record.getMessage()
    assert "n" in message and "2" in message and "5" in message


def test_output_code(caplog) -> None:
    bytegraph.set_logs("output_code")
    bytegraph.compile(with_print, backend="eager")(torch.randn(3))
    messages = [r.getMessage() for r in records(caplog, "output_code")]
    assert len(messages) == 2  # the function's transformed code and its resume function's
    assert all("with_print" in m for m in messages)
    assert all("RETURN_VALUE" in m for m in messages)
    assert any("resume" in m for m in messages)


# --- the spec -----------------------------------------------------------------------------


def test_spec_levels() -> None:
    bytegraph.set_logs("graph_breaks,+guards")
    assert logging.getLogger("bytegraph.graph_breaks").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("bytegraph.guards").getEffectiveLevel() == logging.DEBUG
    for other in set(ARTIFACTS) - {"graph_breaks", "guards"}:
        assert not logging.getLogger(f"bytegraph.{other}").isEnabledFor(logging.INFO), other


def test_spec_with_spaces_and_keywords() -> None:
    bytegraph.set_logs(" guards , +recompiles ")
    assert logging.getLogger("bytegraph.guards").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("bytegraph.recompiles").getEffectiveLevel() == logging.DEBUG
    bytegraph.set_logs(output_code=True, bytecode=logging.DEBUG)
    assert logging.getLogger("bytegraph.output_code").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("bytegraph.bytecode").getEffectiveLevel() == logging.DEBUG
    assert not logging.getLogger("bytegraph.guards").isEnabledFor(logging.INFO)


def test_only_the_named_artifacts_log(caplog) -> None:
    bytegraph.set_logs("graph_breaks")
    bytegraph.compile(with_print, backend="eager")(torch.randn(3))
    assert {r.name for r in bytegraph_records(caplog)} == {"bytegraph.graph_breaks"}


@pytest.mark.parametrize("spec", ["nope", "guards,nope", "+nope"])
def test_unknown_artifact_is_a_value_error(spec: str) -> None:
    with pytest.raises(ValueError, match="nope") as info:
        bytegraph.set_logs(spec)
    assert "guards" in str(info.value)  # the message lists the valid names


def test_unknown_keyword_artifact_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="nope"):
        bytegraph.set_logs(nope=True)


def test_nothing_logged_when_off(caplog, capsys) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger takes anything that reaches it
    compiled = bytegraph.compile(with_print, backend="eager")
    compiled(torch.randn(3))
    compiled(torch.randn(4))  # a recompile
    assert bytegraph_records(caplog) == []
    assert "bytegraph" not in capsys.readouterr().err


def test_cached_calls_log_nothing(caplog) -> None:
    bytegraph.set_logs(",".join(f"+{a}" for a in ARTIFACTS))
    compiled = bytegraph.compile(with_print, backend="eager")
    x = torch.randn(3)
    compiled(x)
    assert bytegraph_records(caplog)
    caplog.clear()
    compiled(x)
    compiled(torch.randn(3))
    assert bytegraph_records(caplog) == []


def test_set_logs_off_turns_everything_off(caplog) -> None:
    bytegraph.set_logs(",".join(ARTIFACTS))
    bytegraph.set_logs()
    bytegraph.compile(with_print, backend="eager")(torch.randn(3))
    assert bytegraph_records(caplog) == []


# --- BYTEGRAPH_LOGS ------------------------------------------------------------------------

_SCRIPT = textwrap.dedent(
    """
    import logging, torch, bytegraph
    print("levels", [logging.getLogger(f"bytegraph.{a}").getEffectiveLevel()
                     for a in ("graph_breaks", "guards", "bytecode")])
    def f(x):
        y = x + 1
        print("printed by f")
        return y * 2
    bytegraph.compile(f, backend="eager")(torch.randn(3))
    """
)


def run_script(logs: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "BYTEGRAPH_LOGS"}
    if logs is not None:
        env["BYTEGRAPH_LOGS"] = logs
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )


def test_environment_variable() -> None:
    done = run_script("graph_breaks,+guards")
    assert done.returncode == 0, done.stderr
    assert f"levels {[logging.INFO, logging.DEBUG, logging.WARNING]}" in done.stdout
    assert "printed by f" in done.stdout
    assert "[bytegraph.graph_breaks]" in done.stderr
    assert "[bytegraph.guards]" in done.stderr
    assert "[bytegraph.bytecode]" not in done.stderr


def test_environment_variable_unset_logs_nothing() -> None:
    done = run_script(None)
    assert done.returncode == 0, done.stderr
    assert "[bytegraph." not in done.stderr


def test_environment_variable_unknown_artifact() -> None:
    done = run_script("graph_breaks,nope")
    assert done.returncode != 0
    assert "ValueError" in done.stderr and "nope" in done.stderr


def test_root_logger_at_debug_does_not_turn_artifacts_on() -> None:
    """An application's logging.basicConfig(level=DEBUG) must not enable bytegraph's artifacts."""
    script = "import logging\nlogging.basicConfig(level=logging.DEBUG)\n" + _SCRIPT
    env = {k: v for k, v in os.environ.items() if k != "BYTEGRAPH_LOGS"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "printed by f" in done.stdout
    assert "bytegraph." not in done.stderr, done.stderr
