"""Decode sample code under whatever interpreter runs this script; print JSON facts.

Run by ``test_versions.py`` as ``<python> probe_decode.py <repo root>`` under
CPython 3.11 (the venv), 3.12 and 3.13. It imports ``bytegraph.bytecode`` without
running ``bytegraph/__init__.py`` (which imports torch): a bare stand-in
``bytegraph`` package whose ``__path__`` is the real folder lets the normal
import system load the subpackage and nothing else. It needs only the stdlib,
plus the ``bytecode`` package for ``assemble`` when that is installed. The
assertions live in the test; this script only reports what it saw.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any


def load_bytecode_layer(repo: Path) -> dict[str, types.ModuleType]:
    """Import the modules of ``bytegraph/bytecode`` without ``bytegraph/__init__``."""
    stub = types.ModuleType("bytegraph")
    stub.__path__ = [str(repo / "bytegraph")]
    sys.modules["bytegraph"] = stub
    names = ["instructions", "compat"]
    if importlib.util.find_spec("bytecode") is not None:
        names.append("assemble")
    return {name: importlib.import_module(f"bytegraph.bytecode.{name}") for name in names}


def loop_with_try(xs: list[int]) -> int:
    total = 0
    for x in xs:
        try:
            total += 10 // x
        except ZeroDivisionError:
            total -= 1
    return total


# Line of ``total += 10 // x``, relative to the ``def`` line.
TRY_BODY_LINE_OFFSET = 4


def describe(decoded: Any) -> dict[str, Any]:
    """The decoded record as plain JSON."""
    return {
        "firstlineno": decoded.code.co_firstlineno,
        "instructions": [
            {
                "index": inst.index,
                "opname": inst.opname,
                "argval": inst.argval if isinstance(inst.argval, (int, str)) else None,
                "lineno": inst.lineno,
                "target": inst.target,
                "is_jump_target": inst.is_jump_target,
            }
            for inst in decoded.instructions
        ],
        "exception_table": [
            [e.start, e.end, e.target, e.depth, e.lasti] for e in decoded.exception_table
        ],
        "handler_for": [
            None if (e := decoded.handler_for(i)) is None else e.target
            for i in range(len(decoded.instructions))
        ],
    }


def iter_code(code: types.CodeType) -> Any:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from iter_code(const)


def decode_stdlib(instructions: types.ModuleType) -> dict[str, Any]:
    """Decode every code object of a few large stdlib modules.

    ``dis`` marks jump targets on its own (``is_jump_target``, from its label
    scan of the raw bytes), so a marked instruction that no decoded ``target``
    points at means a jump opcode was not resolved, and the reverse means one
    was resolved to the wrong place. (``dis`` does not mark exception handlers.)
    """
    decoded, failures, unresolved, overlapping = 0, [], [], []
    for name in ("argparse", "json.decoder", "dataclasses", "contextlib", "asyncio.tasks"):
        module = importlib.import_module(name)
        source = Path(module.__file__).read_text(encoding="utf-8")
        for code in iter_code(compile(source, module.__file__, "exec")):
            decoded += 1
            try:
                record = instructions.decode(code)
            except Exception as exc:  # reported, asserted on by the test
                failures.append(f"{name}:{code.co_name}: {type(exc).__name__}: {exc}")
                continue
            targets = {i.target for i in record.instructions if i.target is not None}
            marked = {i.index for i in record.instructions if i.is_jump_target}
            if targets != marked:
                unresolved.append(f"{name}:{code.co_name}: {sorted(targets ^ marked)}")
            # CPython writes the table sorted and without overlaps; an end index
            # converted off by one shows up as an overlap with the next entry.
            table = record.exception_table
            pairs = zip(table, table[1:], strict=False)
            if any(a.start > a.end or a.end >= b.start for a, b in pairs):
                overlapping.append(f"{name}:{code.co_name}")
    return {
        "decoded": decoded,
        "failures": failures[:5],
        "unresolved": unresolved[:5],
        "overlapping": overlapping[:5],
    }


def main() -> None:
    repo = Path(sys.argv[1])
    modules = load_bytecode_layer(repo)
    instructions, compat = modules["instructions"], modules["compat"]
    import dis

    facts = {
        "version": list(sys.version_info[:2]),
        "loaded": sorted(modules),
        "torch_imported": any(m == "torch" or m.startswith("torch.") for m in sys.modules),
        "bytegraph_init_ran": hasattr(sys.modules["bytegraph"], "compile"),
        "compat": {
            "PY_VERSION": list(compat.PY_VERSION),
            "HAS_PRECALL": compat.HAS_PRECALL,
            "dis_has_precall": "PRECALL" in dis.opmap,
        },
        "loop_with_try": describe(instructions.decode(loop_with_try.__code__)),
        "try_body_line_offset": TRY_BODY_LINE_OFFSET,
        "stdlib": decode_stdlib(instructions),
    }
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
