"""fullgraph=True: one graph or an Unsupported error that points at the user's code.

The error is raised by the first break the trace meets, before anything of
the function has run (nothing is printed, nothing mutated). Its message
names the reason, the user's file:line (computed here with ``inspect``) and
the source line.
"""

from __future__ import annotations

import os

import pytest
import torch
from source_lines import line_of, source_of

import bytegraph
from bytegraph.catalogue import CATALOGUE

THIS_FILE = os.path.abspath(__file__)


def prints(x):
    y = x + 1
    print("should not run", y.shape)
    return y * 2


def two_breaks(x, out):
    out.append(1)
    y = x + 1
    bytegraph.graph_break()
    print("second")
    return y


def branches_on_data(x):
    y = x * 2
    if y.sum() > 0:
        return y
    return -y


def helper(t):
    bytegraph.graph_break()
    return t + 1


def calls_helper(x):
    return helper(x * 2)


def break_in_try(x):
    try:
        bytegraph.graph_break()
        y = x + 1
    except ValueError:
        y = x
    return y


def no_break(x, y):
    z = torch.relu(x @ y)
    return z.sum(dim=0) + 1


def raises(compiled, *args) -> bytegraph.Unsupported:
    with pytest.raises(bytegraph.Unsupported) as info:
        compiled(*args)
    return info.value


def test_print_raises_with_reason_and_place(capsys) -> None:
    compiled = bytegraph.compile(prints, backend="eager", fullgraph=True)
    err = raises(compiled, torch.randn(3))
    message = str(err)
    line = line_of(prints, "print(")
    assert err.kind == "unsupported_call" and err.entry.name == "print_or_logging"
    assert err.detail in message
    assert f"[{err.entry.id} print_or_logging]" in message
    assert f"{THIS_FILE}:{line}" in message
    assert source_of(prints, "print(") in message
    assert CATALOGUE["print_or_logging"].hint in message
    assert err.frames[0].lineno == line
    assert capsys.readouterr().out == ""  # nothing of the function ran


def test_first_break_is_the_one_reported() -> None:
    out: list = []
    compiled = bytegraph.compile(two_breaks, backend="eager", fullgraph=True)
    err = raises(compiled, torch.randn(3), out)
    assert err.kind == "explicit"
    assert f"{THIS_FILE}:{line_of(two_breaks, 'graph_break()')}" in str(err)
    assert "bytegraph.graph_break()" in str(err)
    assert out == []  # the append before the break was not replayed either


def test_data_dependent_branch_raises() -> None:
    compiled = bytegraph.compile(branches_on_data, backend="eager", fullgraph=True)
    err = raises(compiled, torch.randn(3))
    assert err.kind == "data_dependent" and err.entry.name == "data_dependent_branch"
    assert f"{THIS_FILE}:{line_of(branches_on_data, 'if y.sum()')}" in str(err)
    assert "if y.sum() > 0:" in str(err)


def test_break_in_helper_names_both_frames() -> None:
    compiled = bytegraph.compile(calls_helper, backend="eager", fullgraph=True)
    err = raises(compiled, torch.randn(3))
    message = str(err)
    inner = line_of(helper, "graph_break()")
    outer = line_of(calls_helper, "return helper(")
    assert [f.lineno for f in err.frames] == [inner, outer]
    assert f"{THIS_FILE}:{inner} in helper" in message
    assert f"{THIS_FILE}:{outer} in calls_helper" in message
    assert message.index(f":{inner} in helper") < message.index(f":{outer} in calls_helper")


def test_break_in_try_raises_too() -> None:
    """Without fullgraph this frame would run as Python; with it, it is an error."""
    compiled = bytegraph.compile(break_in_try, backend="eager", fullgraph=True)
    err = raises(compiled, torch.randn(3))
    assert err.kind == "explicit"
    assert f"{THIS_FILE}:{line_of(break_in_try, 'graph_break()')}" in str(err)


def test_error_every_call_never_a_silent_fallback() -> None:
    compiled = bytegraph.compile(prints, backend="eager", fullgraph=True)
    for _ in range(2):
        raises(compiled, torch.randn(3))


def test_without_fullgraph_the_same_program_runs(capsys) -> None:
    compiled = bytegraph.compile(prints, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), (x + 1) * 2, rtol=0, atol=0)
    assert capsys.readouterr().out == "should not run torch.Size([3])\n"


def test_no_break_compiles_one_graph(counting_backend) -> None:
    compiled = bytegraph.compile(no_break, backend=counting_backend, fullgraph=True)
    for _ in range(3):
        x, y = torch.randn(4, 5), torch.randn(5, 6)
        torch.testing.assert_close(compiled(x, y), no_break(x, y), rtol=0, atol=0)
    assert counting_backend.calls == 1


def test_module_with_fullgraph() -> None:
    class Breaks(torch.nn.Module):
        def forward(self, x):
            bytegraph.graph_break()
            return x + 1

    class Fine(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x).relu()

    err = raises(bytegraph.compile(Breaks(), backend="eager", fullgraph=True), torch.randn(3))
    assert f"{THIS_FILE}:{line_of(Breaks.forward, 'graph_break()')}" in str(err)
    fine = Fine()
    x = torch.randn(2, 3)
    torch.testing.assert_close(
        bytegraph.compile(fine, backend="eager", fullgraph=True)(x), fine(x), rtol=0, atol=0
    )
