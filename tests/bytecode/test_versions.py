"""The bytecode layer stays torch-free and decodes correctly on CPython 3.11, 3.12, 3.13.

Each test runs ``probe_decode.py`` in a subprocess: under this venv's python
(whichever supported version it is) to prove that importing ``bytegraph.bytecode``
(instructions, compat, stack_effects, assemble) pulls in no torch, and under the
pyenv interpreter of every supported version (which have no torch) to check that
``decode`` resolves jump targets (FOR_ITER's past the END_FOR ``dis`` names, from
3.12 on) and the exception table of a loop with try/except, that ``compat``'s
facts agree with that interpreter's ``dis`` and compiler, and that a few hundred
stdlib code objects decode.

A machine without those interpreters skips their tests with a reason naming
what was looked for; set ``BYTEGRAPH_REQUIRE_PYTHONS=1`` to make that a failure.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bytegraph.bytecode import compat

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("probe_decode.py")
PYENV_ROOT = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
REQUIRE_PYTHONS = os.environ.get("BYTEGRAPH_REQUIRE_PYTHONS") == "1"


def find_python(major: int, minor: int) -> str | None:
    """An interpreter that really is CPython ``major.minor``, or None."""
    candidates = sorted(glob.glob(str(PYENV_ROOT / f"versions/{major}.{minor}.*/bin/python")))
    on_path = shutil.which(f"python{major}.{minor}")
    if on_path:
        candidates.append(on_path)
    for candidate in candidates:
        try:
            out = subprocess.run(
                [candidate, "-c", "import sys; print(*sys.version_info[:2])"],
                capture_output=True, text=True, timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.split() == [str(major), str(minor)]:
            return candidate
    return None


def other_python(major: int, minor: int) -> Any:
    """A pytest param carrying the interpreter, skipped (with why) if there is none."""
    path = find_python(major, minor)
    absent = pytest.mark.skipif(
        path is None and not REQUIRE_PYTHONS,
        reason=(
            f"CPython {major}.{minor} interpreter absent: looked for "
            f"{PYENV_ROOT}/versions/{major}.{minor}.*/bin/python and python{major}.{minor} "
            "on PATH (set BYTEGRAPH_REQUIRE_PYTHONS=1 to fail instead)"
        ),
    )
    return pytest.param((major, minor), path, id=f"py{major}.{minor}", marks=[absent])


@functools.cache
def run_probe(python: str) -> dict[str, Any]:
    out = subprocess.run(
        [python, str(PROBE), str(REPO)], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert out.returncode == 0, f"probe failed under {python}:\n{out.stderr}"
    return json.loads(out.stdout)


def test_bytecode_layer_imports_without_torch() -> None:
    facts = run_probe(sys.executable)
    assert tuple(facts["version"]) == sys.version_info[:2]
    assert tuple(facts["version"]) in compat.SUPPORTED_VERSIONS
    assert facts["loaded"] == [
        "assemble", "compat", "depth", "encode", "instructions", "stack_effects"
    ]
    assert not facts["bytegraph_init_ran"], "the probe must not run bytegraph/__init__.py"
    assert not facts["torch_imported"], "bytegraph.bytecode must not import torch"


@pytest.mark.parametrize(
    ("version", "python"), [other_python(*version) for version in compat.SUPPORTED_VERSIONS]
)
def test_decode_under_other_python(version: tuple[int, int], python: str | None) -> None:
    assert python is not None, f"CPython {version} required (BYTEGRAPH_REQUIRE_PYTHONS=1)"
    facts = run_probe(python)
    assert tuple(facts["version"]) == version
    assert not facts["torch_imported"]
    # The bare interpreters may lack the ``bytecode`` package (then no ``assemble``).
    assert {"compat", "instructions", "stack_effects"} <= set(facts["loaded"])
    check_loop_with_try(facts, version)
    check_compat(facts)
    check_stdlib(facts)


def test_decode_under_this_python() -> None:
    """The same checks in this venv, so the probe's assertions are exercised here too."""
    facts = run_probe(sys.executable)
    check_loop_with_try(facts, sys.version_info[:2])
    check_compat(facts)
    check_stdlib(facts)


# What an exhausted FOR_ITER skips past the instruction ``dis`` names as its target.
FOR_ITER_SKIPS = {(3, 11): [], (3, 12): ["END_FOR"], (3, 13): ["END_FOR", "POP_TOP"]}


def check_compat(facts: dict[str, Any]) -> None:
    """``compat``'s facts, as imported by the probed interpreter, against its own ``dis``."""
    facts_of = facts["compat"]
    real = facts["real_opcodes"]
    version = tuple(facts["version"])
    assert facts_of["PY_VERSION"] == facts["version"]
    assert [tuple(v) for v in facts_of["SUPPORTED_VERSIONS"]] == list(compat.SUPPORTED_VERSIONS)
    assert version in compat.SUPPORTED_VERSIONS
    assert facts_of["HAS_PRECALL"] == real["PRECALL"], "compat disagrees with dis.opmap"
    assert facts_of["LOAD_ATTR_METHOD_BIT"] == (not real["LOAD_METHOD"])
    assert facts_of["HAS_KW_NAMES"] == real["KW_NAMES"] == (not real["CALL_KW"])
    assert facts_of["MAKE_FUNCTION_HAS_FLAGS"] == (not real["SET_FUNCTION_ATTRIBUTE"])
    assert facts_of["HAS_LOAD_CLOSURE"] == real["LOAD_CLOSURE"]
    assert facts_of["FOR_ITER_TARGET_SKIP"] == len(FOR_ITER_SKIPS[version])
    assert real["END_FOR"] == (version >= (3, 12))
    # ``f()`` of a local: where the compiler puts the NULL is what NULL_BEFORE_CALLABLE says.
    null_first = ["PUSH_NULL", "LOAD_FAST"]
    call = facts["call_local"]
    assert (null_first in [call[i : i + 2] for i in range(len(call))]) == (
        facts_of["NULL_BEFORE_CALLABLE"]
    ), call
    assert "PUSH_NULL" in call


def check_stdlib(facts: dict[str, Any]) -> None:
    stdlib = facts["stdlib"]
    assert stdlib["decoded"] > 300
    assert stdlib["failures"] == []
    assert stdlib["unresolved"] == [], "jumps disagree with dis's is_jump_target"
    assert stdlib["misplaced"] == [], "a jump's target is not the instruction dis names"
    # Every loop of the corpus lands the same way past dis's target.
    assert stdlib["for_iter_skips"] == [FOR_ITER_SKIPS[tuple(facts["version"])]]
    assert stdlib["overlapping"] == [], "exception table entries overlap after conversion"


def check_loop_with_try(facts: dict[str, Any], version: tuple[int, int]) -> None:
    """``probe_decode.loop_with_try``: a for loop whose body is a try/except."""
    decoded = facts["loop_with_try"]
    insts = decoded["instructions"]
    opnames = [inst["opname"] for inst in insts]
    assert "CACHE" not in opnames
    assert [inst["index"] for inst in insts] == list(range(len(insts)))

    (for_iter,) = [i for i, name in enumerate(opnames) if name == "FOR_ITER"]
    # An exhausted loop lands on ``return total`` on every version; ``dis`` names
    # 3.12+'s END_FOR (and 3.13's POP_TOP after it) in between, which CPython skips.
    loop_end = insts[insts[for_iter]["target"]]
    assert (loop_end["opname"], loop_end["argval"]) == ("LOAD_FAST", "total")
    assert opnames[loop_end["index"] + 1] == "RETURN_VALUE"
    (named,) = [inst for inst in insts if inst["offset"] == insts[for_iter]["argval"]]
    assert named["is_jump_target"]
    assert opnames[named["index"] : loop_end["index"]] == FOR_ITER_SKIPS[version]
    back_edges = [inst for inst in insts if inst["opname"] == "JUMP_BACKWARD"]
    # The loop's own back edge and the one leaving the except clause.
    assert len(back_edges) == 2
    assert all(inst["target"] == for_iter for inst in back_edges)
    assert insts[for_iter]["is_jump_target"]

    try_line = decoded["firstlineno"] + facts["try_body_line_offset"]
    # The loop's back edge carries the last body line too, but is outside the try.
    body = [
        inst["index"] for inst in insts
        if inst["lineno"] == try_line and inst["opname"] != "JUMP_BACKWARD"
    ]
    table = decoded["exception_table"]
    start, end, target, depth, lasti = table[0]
    # The first entry covers exactly the try body and lands on the handler.
    assert (start, end) == (body[0], body[-1])
    assert opnames[target] == "PUSH_EXC_INFO"
    assert insts[target + 1]["argval"] == "ZeroDivisionError"
    assert (depth, lasti) == (1, False)
    # The handler itself is covered by a cleanup entry that re-raises with lasti.
    cleanup = [entry for entry in table[1:] if entry[0] <= target <= entry[1]]
    assert len(cleanup) == 1 and cleanup[0][4] is True
    assert opnames[cleanup[0][2]] == "COPY"

    handler_for = decoded["handler_for"]
    assert all(handler_for[i] == target for i in body)
    assert handler_for[for_iter] is None
    assert handler_for[0] is None


def test_an_unsupported_interpreter_gets_one_line_naming_the_supported_ones(monkeypatch) -> None:
    from bytegraph.bytecode import compat

    monkeypatch.setattr(compat, "PY_VERSION", (3, 14))
    with pytest.raises(RuntimeError) as info:
        compat.check_supported()
    message = str(info.value)
    assert "\n" not in message
    assert "3.11, 3.12, 3.13" in message and "this is 3.14" in message
    monkeypatch.setattr(compat, "PY_VERSION", sys.version_info[:2])
    compat.check_supported()  # the running interpreter is supported
