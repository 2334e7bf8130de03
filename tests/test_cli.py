"""The command line: ``bytegraph explain|dump SCRIPT [--function NAME] [-- ARGS]``.

The command runs in a subprocess (``python -m bytegraph`` and the installed
``bytegraph`` script) with a hard timeout, on small scripts written to
``tmp_path``. Each script checks its own results against eager (it computes
both and asserts they are equal), so a wrong compiled result fails the run.
Variants that only change what is compiled run ``cli.main`` in this process.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest

from bytegraph.inspect import cli

TIMEOUT = 240

BREAKING = textwrap.dedent('''
    import sys
    import torch

    def helper(t):
        print("in helper")
        return t - 1

    def f(x):
        y = helper(x + 1)
        return y.relu() * 2

    def eager(x):
        return ((x + 1) - 1).relu() * 2

    if __name__ == "__main__":
        print("argv", sys.argv[1:])
        for size in (3, 4):
            x = torch.randn(size)
            assert torch.equal(f(x), eager(x))
''')

SELF_COMPILING = textwrap.dedent('''
    import torch
    import bytegraph

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            y = self.lin(x)
            if y.sum() > 0:
                return y.relu()
            return y.sin()

    net = Net()
    compiled = bytegraph.compile(net, backend="eager")
    x = torch.ones(2, 4)
    assert torch.equal(compiled(x), net(x))
''')


def write(tmp_path, text: str, name: str = "script.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def line_in(path: str, text: str) -> int:
    (line,) = [i + 1 for i, source in enumerate(open(path).read().splitlines()) if text in source]
    return line


def bytegraph_cmd(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bytegraph", *args], capture_output=True, text=True,
        timeout=TIMEOUT, cwd=cwd,
    )


def test_explain_a_named_function(tmp_path) -> None:
    script = write(tmp_path, BREAKING)
    html = tmp_path / "report.html"
    done = bytegraph_cmd("explain", script, "--function", "f", "--html", str(html),
                         "--", "--lr", "3")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "argv ['--lr', '3']" in out  # the script's own arguments and output
    report = out[out.index("=== bytegraph explain"):]
    assert out[:out.index("=== bytegraph explain")].count("in helper") == 2
    assert "Graph count: " in report and "Graph break count: " in report
    # The break: reason, the user's file:line and source line, the inlining chain, a hint.
    print_line, call_line = line_in(script, 'print("in helper")'), line_in(script, "helper(x + 1)")
    assert "call of builtins.print" in report
    assert f"at {script}:{print_line} in helper" in report
    assert 'print("in helper")' in report
    assert f"inlined from {script}:{call_line} in f" in report
    assert "hint: " in report
    # Graphs as code, guards per entry, recompiles with the failing guard, time.
    assert "def forward(self, x):" in report and "add = x + 1" in report
    assert "Guards of cache entry 0 (f, " in report
    assert "x.shape == (3,)" in report
    assert "Recompiles:" in report
    assert f"f ({script}:{line_in(script, 'def f(x)')}): guard failed: x.shape == (3,)" in report
    assert "Trace time: " in report
    assert f"HTML report: {html}" in out and html.read_text().startswith("<!DOCTYPE html>")
    assert done.stderr == ""


def test_explain_reports_what_the_script_compiles_itself(tmp_path) -> None:
    script = write(tmp_path, SELF_COMPILING)
    done = bytegraph_cmd("explain", script)
    assert done.returncode == 0, done.stderr
    assert "Graph count: 2" in done.stdout
    assert "Graph break count: 1" in done.stdout
    assert f"{script}:{line_in(script, 'if y.sum() > 0')} in forward" in done.stdout
    assert "data_dependent]" in done.stdout


@pytest.mark.parametrize("case", ["no script", "no such name", "script raises", "usage"])
def test_mistakes_are_one_line_on_stderr(tmp_path, case) -> None:
    script = write(tmp_path, BREAKING)
    args = {
        "no script": ["explain", str(tmp_path / "missing.py")],
        "no such name": ["explain", script, "--function", "nope"],
        "script raises": ["dump", "bad.py", "--out", str(tmp_path / "d")],  # relative path
        "usage": ["explain"],
    }[case]
    write(tmp_path, "import torch\n\nraise ValueError('boom')\n", "bad.py")
    done = bytegraph_cmd(*args, cwd=tmp_path)
    assert done.returncode == (2 if case == "usage" else 1)
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
    expected = {
        "no script": "no such script", "no such name": "defines no 'nope' at module level",
        "script raises": f"the script raised ValueError: boom ({tmp_path / 'bad.py'}:3)",
        "usage": "error:",
    }[case]
    assert expected in done.stderr


def test_help(tmp_path) -> None:
    installed = os.path.join(os.path.dirname(sys.executable), "bytegraph")
    command = [installed] if os.path.exists(installed) else [sys.executable, "-m", "bytegraph"]
    for sub in ([], ["explain"], ["dump"]):
        done = subprocess.run([*command, *sub, "--help"], capture_output=True, text=True,
                              timeout=TIMEOUT)
        assert done.returncode == 0, done.stderr
        assert "usage: bytegraph" in done.stdout
    assert "--function NAME" in done.stdout and "--out DIR" in done.stdout


def test_dump_writes_a_file_per_compiled_frame(tmp_path) -> None:
    script = write(tmp_path, BREAKING)
    out = tmp_path / "dump"
    done = bytegraph_cmd("dump", script, "--out", str(out), "--function", "f")
    assert done.returncode == 0, done.stderr
    files = sorted(os.listdir(out))
    # f, helper (compiled at the call that breaks), and the resume function of each.
    # NNN_<qualname>.py; "f'" stands for a resume function of f (its index varies by version).
    parts = [name[4:].removesuffix(".py").partition("._resume_at_") for name in files]
    stems = [function + ("'" if index else "") for function, _, index in parts]
    assert sorted(stems) == ["f", "f'", "helper", "helper'"], files
    assert f"wrote 4 files to {out}" in done.stdout
    for name in files:
        ast.parse((out / name).read_text())


# --- in this process: what --function can name ------------------------------------------------


def run_main(args: list[str], capsys) -> tuple[int, str, str]:
    status = cli.main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_a_class_method_and_a_module_class(tmp_path, capsys) -> None:
    text = SELF_COMPILING.replace('compiled = bytegraph.compile(net, backend="eager")',
                                  "compiled = net")
    script = write(tmp_path, text)
    for name in ("Net.forward", "Net"):
        status, out, err = run_main(["explain", script, "--function", name], capsys)
        assert status == 0, err
        assert "Graph count: 2" in out and "Graph break count: 1" in out


def test_a_module_instance(tmp_path, capsys) -> None:
    text = SELF_COMPILING.replace('compiled = bytegraph.compile(net, backend="eager")',
                                  "compiled = net")
    script = write(tmp_path, text)
    status, out, err = run_main(["explain", script, "--function", "net"], capsys)
    assert status == 0, err
    assert "Graph count: 2" in out


def test_a_name_never_called_or_nothing_compiled(tmp_path, capsys) -> None:
    script = write(tmp_path, "import torch\n\ndef f(x):\n    return x + 1\n")
    status, _, err = run_main(["explain", script, "--function", "f"], capsys)
    assert status == 1 and err == "bytegraph: error: f was never called while the script ran\n"
    status, _, err = run_main(["explain", script], capsys)
    assert status == 1 and "the script compiled nothing" in err
    status, _, err = run_main(["explain", script, "--function", "torch"], capsys)
    assert status == 1 and "torch is a module, not a function" in err


def test_the_script_runs_as_main_with_its_arguments(tmp_path, capsys) -> None:
    script = write(tmp_path, textwrap.dedent('''
        import sys
        import torch
        import bytegraph

        def double(x):
            return x * 2

        if __name__ == "__main__":
            assert sys.argv == [__file__, "a", "--b"], sys.argv
            f = bytegraph.compile(double, backend="eager")
            assert torch.equal(f(torch.ones(2)), torch.full((2,), 2.0))
            sys.exit(0)
    '''))
    saved_argv = list(sys.argv)
    status, out, err = run_main(["explain", script, "--", "a", "--b"], capsys)
    assert status == 0, err
    assert "Graph count: 1" in out and "Op count: 1" in out
    assert sys.argv == saved_argv and sys.modules["__main__"].__name__ == "__main__"


def test_the_readme_example(capsys) -> None:
    """docs/seeing_inside.md's command: see_inside.py, its model inlined, two breaks, recompiles."""
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "see_inside.py")
    status, out, err = run_main(["explain", example, "--function", "step"], capsys)
    assert status == 0, err
    assert out.startswith("batch of 4\nbatch of 4\nbatch of 6\n")  # the script's own output
    assert "Graph count: 6" in out and "Graph break count: 4" in out
    assert "torch._C._nn.linear, Tensor.relu" in out
    assert "Recompiles:" in out
