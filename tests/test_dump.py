"""The dump (``config.dump_dir``): one readable Python file per compiled frame and resume function.

Each program runs eager and compiled (``differential``) with the dump on, under
a ``Recording`` that says which functions compiled and which graphs they made;
the folder must hold exactly one file per compiled function (resume functions
included), each parsing with ``ast.parse``, naming the user's lines and
holding its graphs' code. Expected lines are computed with ``line_of``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
import torch
from source_lines import line_of, source_of

import bytegraph
from bytegraph.inspect.explain import graph_code, report_of
from bytegraph.inspect.recording import Recording

THIS_FILE = os.path.abspath(__file__)


def helper_prints(t):
    print("in helper")
    return t - 1


def calls_helper(x, n):
    y = helper_prints(x * 3)
    for _ in range(n):
        y = y.cos()
    bytegraph.graph_break()
    return y + n


def no_break(x):
    return x.sin() * 2


@pytest.fixture
def dump_dir(tmp_path, monkeypatch):
    folder = tmp_path / "dump"
    monkeypatch.setattr(bytegraph.config, "dump_dir", str(folder))
    return folder


def dumped(folder) -> dict[str, str]:
    return {name: (folder / name).read_text() for name in sorted(os.listdir(folder))}


def file_of(files: dict[str, str], function: str) -> str:
    """The file whose header names ``function`` (``f (file:line)`` or ``f: a resume...``)."""
    (text,) = [
        t for t in files.values()
        if t.split("\n", 1)[0].startswith((f"# bytegraph dump of {function} (",
                                           f"# bytegraph dump of {function}: "))
    ]
    return text


def listed(text: str, line: int, marker: str = "  ") -> str:
    """The source text the file lists at ``line`` with ``marker`` (``!!`` break, ``>>`` resume)."""
    prefix = f"#{marker}{line:5d} | "
    (found,) = [entry for entry in text.splitlines() if entry.startswith(prefix)]
    return found[len(prefix):].strip()


def run_recorded(differential, fn, *args):
    with Recording() as recording:
        compiled = differential.compile(fn)
        differential.check(fn, compiled, args)
    return report_of(recording)


def test_one_file_per_compiled_frame_and_resume_function(dump_dir, differential) -> None:
    report = run_recorded(differential, calls_helper, torch.randn(3), 2)
    files = dumped(dump_dir)
    functions = list(dict.fromkeys(e.function for e in report.entries))
    # calls_helper, its two resume functions, helper_prints (compiled at the call that
    # breaks) and its resume function.
    assert len(functions) == 5, functions
    assert len(files) == len(functions)
    for function in functions:
        stem = function.replace(".<resume at ", "._resume_at_").rstrip(">")
        assert sum(name.endswith(f"_{stem}.py") for name in files) == 1, (stem, list(files))
    for name, text in files.items():
        ast.parse(text, name)  # every file is Python
    assert all(text.count("# cache entry 0") == 1 for text in files.values())


def test_files_name_the_users_lines_and_hold_the_graph_code(dump_dir, differential) -> None:
    report = run_recorded(differential, calls_helper, torch.randn(3), 2)
    files = dumped(dump_dir)
    everything = "\n".join(files.values())
    # Every graph's code is in the file of the function that runs it.
    for i, graph in enumerate(report.graph_reports):
        owner = report.graph_owner(i)
        text = file_of(files, owner.function)
        body = "\n".join(f"    {line}" for line in graph_code(graph.graph).splitlines())
        assert body in text, (owner.function, body)
    root = next(t for n, t in files.items() if n.endswith("_calls_helper.py"))
    # The source it came from, numbered, and where the break happened (in the call).
    helper_line = line_of(calls_helper, "helper_prints(x * 3)")
    assert listed(root, helper_line, marker="!!") == source_of(calls_helper, "helper_prints(")
    print_line = line_of(helper_prints, "print(")
    assert (f"graph break at line {print_line} in helper_prints: print(\"in helper\"), "
            f"inlined from line {helper_line} in calls_helper") in root
    # Each guard names the user's line that read the value it checks.
    guard_lines = [line for line in root.splitlines() if "x.shape ==" in line]
    assert guard_lines and all(f"# line {helper_line} in calls_helper" in g for g in guard_lines)
    # A resume function's file says where it continues, and marks that line.
    loop_line = line_of(calls_helper, "for _ in range(n)")
    resume = next(t for t in files.values() if f"continuing at line {loop_line} " in t)
    assert listed(resume, loop_line, marker=">>") == source_of(calls_helper, "for _ in range")
    break_line = line_of(calls_helper, "graph_break()")
    assert listed(resume, break_line, marker="!!") == source_of(calls_helper, "graph_break()")
    assert "def ___guard_0(" in resume and "type(n) is int" in resume
    # The transformed function, decompiled, calls the compiled graph. depyf 0.20 cannot
    # decompile 3.13's calls (the NULL above the callable): there the file says so and
    # lists the bytecode, which stores the graph's outputs.
    if sys.version_info < (3, 13):
        assert "___graph_out = ___compiled_graph_0(" in everything
        assert "# ___compiled_graph_0 = " in everything
    else:
        assert "not decompiled: depyf cannot decompile it" in everything
        assert "STORE_FAST               1 (___graph_out)" in everything


def test_a_recompile_adds_a_section_to_the_same_file(dump_dir, differential) -> None:
    compiled = differential.compile(no_break, dynamic=False)
    differential.check(no_break, compiled, (torch.randn(3),))
    differential.check(no_break, compiled, (torch.randn(5),))
    (text,) = dumped(dump_dir).values()
    ast.parse(text)
    assert "# cache entry 0\n" in text and "# cache entry 1 (compiled because" in text
    assert "x.shape == (3,)" in text and "x.shape == (5,)" in text
    assert text.count("sin = x.sin()") == 2
    assert differential.backend.calls == 2


def test_code_depyf_cannot_decompile_is_written_as_its_listing(
    dump_dir, differential, monkeypatch
) -> None:
    depyf = pytest.importorskip("depyf")

    def refuse(code):
        raise RuntimeError("cannot do this one")

    monkeypatch.setattr(depyf, "decompile", refuse)
    compiled = differential.compile(no_break)
    differential.check(no_break, compiled, (torch.randn(3),))
    (text,) = dumped(dump_dir).values()
    ast.parse(text)
    assert "not decompiled: depyf cannot decompile it (RuntimeError: cannot do this one)" in text
    assert "LOAD_FAST" in text  # the dis listing, in comments
    assert "sin = x.sin()" in text


def test_a_dump_that_cannot_be_written_warns_and_the_program_runs(
    tmp_path, monkeypatch, differential
) -> None:
    blocked = tmp_path / "a_file"
    blocked.write_text("not a folder")
    monkeypatch.setattr(bytegraph.config, "dump_dir", str(blocked))
    compiled = differential.compile(no_break)
    with pytest.warns(UserWarning, match="could not write the dump"):
        differential.check(no_break, compiled, (torch.randn(3),))
    assert differential.backend.calls == 1


def test_nothing_is_written_without_a_dump_dir(tmp_path, monkeypatch, differential) -> None:
    monkeypatch.chdir(tmp_path)
    assert bytegraph.config.dump_dir is None
    compiled = differential.compile(calls_helper)
    differential.check(calls_helper, compiled, (torch.randn(3), 1))
    assert os.listdir(tmp_path) == []


def test_the_environment_variable_sets_the_dump_dir(tmp_path) -> None:
    folder = str(tmp_path / "from_env")
    program = (
        "import torch, bytegraph\n"
        "print(bytegraph.config.dump_dir)\n"
        "f = bytegraph.compile(lambda x: x.cos() + 1, backend='eager')\n"
        "assert torch.equal(f(torch.ones(2)), torch.ones(2).cos() + 1)\n"
    )
    env = dict(os.environ, BYTEGRAPH_DUMP=folder)
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == folder
    (name,) = os.listdir(folder)
    text = open(os.path.join(folder, name)).read()
    ast.parse(text)
    assert "cos = x.cos()" in text
