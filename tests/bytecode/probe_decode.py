"""Decode sample code under whatever interpreter runs this script; print JSON facts.

Run by ``test_versions.py`` as ``<python> probe_decode.py <repo root>`` under the
venv's python and under bare CPython 3.11, 3.12 and 3.13. It imports
``bytegraph.bytecode`` without running ``bytegraph/__init__.py`` (which imports
torch): a bare stand-in ``bytegraph`` package whose ``__path__`` is the real
folder lets the normal import system load the subpackage and nothing else. It
needs only the stdlib, plus the ``bytecode`` package for ``assemble`` when that
is installed. The assertions live in the test; this script only reports what it saw.
"""

from __future__ import annotations

import dis
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
    names = ["instructions", "compat", "stack_effects"]
    if importlib.util.find_spec("bytecode") is not None:
        names.append("assemble")
    return {name: importlib.import_module(f"bytegraph.bytecode.{name}") for name in names}


def loaded_layer_modules() -> list[str]:
    """The ``bytegraph.bytecode`` modules really imported (each may import others)."""
    prefix = "bytegraph.bytecode."
    return sorted(name.removeprefix(prefix) for name in sys.modules if name.startswith(prefix))


def real_opcode(name: str) -> bool:
    """Whether ``name`` can appear in a code object: 3.12+ ``dis.opmap`` also lists the
    compiler's pseudo-instructions (opcode 256 and up)."""
    return dis.opmap.get(name, 256) < 256


def call_local(f: Any) -> Any:
    return f()


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
                "offset": inst.offset,
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
    scan of the raw bytes), so a marked instruction that no jump names (its
    ``argval`` offset) means a jump opcode was not resolved, and the reverse
    means one was resolved to the wrong place. (``dis`` does not mark exception
    handlers.) A decoded ``target`` is the named instruction, except for FOR_ITER
    from 3.12 on, which lands past it: ``for_iter_skips`` lists the opnames
    between the two, as seen, for the test to check.
    """
    decoded, failures, unresolved, misplaced, overlapping = 0, [], [], [], []
    for_iter_skips: set[tuple[str, ...]] = set()
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
            insts = record.instructions
            jumps = [i for i in insts if i.target is not None]
            named = {i.index: record.offset_to_index[i.argval] for i in jumps}
            marked = {i.index for i in insts if i.is_jump_target}
            if set(named.values()) != marked:
                unresolved.append(f"{name}:{code.co_name}: {sorted(set(named.values()) ^ marked)}")
            for inst in jumps:
                if inst.opname == "FOR_ITER":
                    skipped = insts[named[inst.index] : inst.target]
                    for_iter_skips.add(tuple(i.opname for i in skipped))
                elif inst.target != named[inst.index]:
                    misplaced.append(f"{name}:{code.co_name}: {inst.opname} at {inst.index}")
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
        "misplaced": misplaced[:5],
        "for_iter_skips": sorted(for_iter_skips),
        "overlapping": overlapping[:5],
    }


def main() -> None:
    repo = Path(sys.argv[1])
    modules = load_bytecode_layer(repo)
    instructions, compat = modules["instructions"], modules["compat"]

    facts = {
        "version": list(sys.version_info[:2]),
        "loaded": loaded_layer_modules(),
        "torch_imported": any(m == "torch" or m.startswith("torch.") for m in sys.modules),
        "bytegraph_init_ran": hasattr(sys.modules["bytegraph"], "compile"),
        "compat": {
            name: getattr(compat, name)
            for name in (
                "PY_VERSION", "SUPPORTED_VERSIONS", "HAS_PRECALL", "NULL_BEFORE_CALLABLE",
                "LOAD_ATTR_METHOD_BIT", "HAS_KW_NAMES", "FOR_ITER_TARGET_SKIP",
                "MAKE_FUNCTION_HAS_FLAGS", "HAS_LOAD_CLOSURE",
            )
        },
        # What this interpreter's dis says, for the test to hold compat against.
        "real_opcodes": {
            name: real_opcode(name)
            for name in (
                "PRECALL", "LOAD_METHOD", "KW_NAMES", "CALL_KW", "END_FOR",
                "SET_FUNCTION_ATTRIBUTE", "LOAD_CLOSURE",
            )
        },
        "call_local": [
            inst.opname for inst in instructions.decode(call_local.__code__).instructions
        ],
        "loop_with_try": describe(instructions.decode(loop_with_try.__code__)),
        "try_body_line_offset": TRY_BODY_LINE_OFFSET,
        "stdlib": decode_stdlib(instructions),
    }
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
