"""Where the corpus comes from: Dynamo's public test files, read from a git snapshot.

The programs are not committed (they are PyTorch's code): they are read at run
time from a snapshot of https://github.com/pytorch/torchdynamo (BSD-3-Clause,
Copyright (c) Facebook, Inc. and its affiliates), the repository Dynamo lived in
before it moved into PyTorch, at ``SNAPSHOT_COMMIT``, its last commit holding the
test suite (``test/dynamo/``). Get one with ``git clone
https://github.com/pytorch/torchdynamo`` (or the session's ``fetch`` tool) and
pass its git directory as ``--source`` (default: ``$DYNAMO_CORPUS_SOURCE``, then
the path below).

This module lists the test methods of each file (``TestRef``), with the family
each belongs to and the reason a test is left out without running it (it needs
CUDA, distribution, or Dynamo's internals).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import os
import re
import subprocess
from pathlib import Path

SNAPSHOT_COMMIT = "482320b384bc0e872f9ba967b1a9b252cb3cd364"
DEFAULT_SOURCE = "/work/.mirror/pytorch+torchdynamo/repo"
# Files written after Dynamo moved into PyTorch (generators, sets, exceptions, dicts,
# context managers), partly
# transcribed from pytorch/pytorch's test/dynamo into this directory (not committed).
DEFAULT_NEWER = "/work/dynamo_corpus_src"
NEWER_FILES = {
    "test_generator": "generators",
    "test_sets": "sets",
    "test_exceptions": "exceptions",
    "test_dicts": "dicts",
    "test_ctx_manager": "ctx_manager",
}

# test file -> family of its programs when their content says nothing more specific
FILES = {
    "test_functions": "functions",
    "test_misc": "misc",
    "test_repros": "repros",
    "test_modules": "modules",
    "test_subgraphs": "subgraphs",
    "test_global": "globals",
    "test_unspec": "unspec",
    "test_skip_non_tensor": "misc",
    "test_python_autograd": "autograd",
    "test_aot_autograd": "autograd",
    "test_verify_correctness": "misc",
    "test_nops": "misc",
    "test_model_output": "modules",
}
# modules a test file imports from its own package (``from . import test_functions``)
DEPENDS = {
    "test_modules": ("test_functions",),
    "test_global": ("test_global_declaration",),
    "test_unspec": ("test_modules", "test_functions", "test_repros"),
}

# Content markers, most specific first: the first that matches a test names its family.
FAMILY_MARKERS = (
    ("numpy", re.compile(r"\bnp\.|\bnumpy\b")),
    ("itertools", re.compile(r"\bitertools\.")),
    ("generators", re.compile(r"\byield\b")),
    ("ctx_manager", re.compile(r"\bwith (?!self\.assert|torchdynamo|patch)|contextlib|__enter__")),
    ("exceptions", re.compile(r"\braise\b|\btry:")),
    ("sets", re.compile(r"\bset\(|\bfrozenset\b")),
    ("dicts", re.compile(r"\bdict\(|OrderedDict|defaultdict|\.items\(\)|\.keys\(\)")),
    ("lists", re.compile(r"\.append\(|\.extend\(|\.pop\(|\blist\(")),
)

# Static reasons to leave a test out, checked on its source text in this order.
SKIP_MARKERS = (
    ("cuda", re.compile(r"cuda|requires_cuda")),
    ("distributed", re.compile(r"torch\.distributed|\bdist\.|DistributedDataParallel")),
    ("export", re.compile(r"torchdynamo\.export|\bexport\(")),
    ("dynamo internals", re.compile(
        r"bytecode_transformation|convert_frame|eval_frame|mutation_guard|GenerationTracker|"
        r"torchdynamo\.variables|debug_utils|guards|_eval_frame|set_eval_frame|"
        r"torchdynamo\.optimizations|is_aot_autograd_safe_to_run"
    )),
    ("optimize as context manager", re.compile(r"with torchdynamo\.(optimize|run)")),
    ("onnx", re.compile(r"onnx")),
    ("transformers", re.compile(r"transformers|torchvision|torchrec|timm")),
)


@dataclasses.dataclass(frozen=True)
class TestRef:
    """One test method of one file: the replay target."""

    file: str  # "test_misc"
    cls: str
    name: str
    family: str
    skip: str | None  # why it is left out, or None
    src: str  # where the file is read from (``read``)


def source_dir() -> str:
    return os.environ.get("DYNAMO_CORPUS_SOURCE", DEFAULT_SOURCE)


def newer_dir() -> str:
    return os.environ.get("DYNAMO_CORPUS_SOURCE_NEWER", DEFAULT_NEWER)


@functools.cache
def read(file: str, source: str) -> str:
    """The text of ``test/dynamo/<file>.py`` in the snapshot (a git dir or a checkout)."""
    path = Path(source) / "test" / "dynamo" / f"{file}.py"
    if path.exists():
        return path.read_text()
    if (Path(source) / "test").exists():  # a checkout without this file
        return ""
    try:
        return subprocess.run(
            ["git", "--git-dir", source, "show", f"{SNAPSHOT_COMMIT}:test/dynamo/{file}.py"],
            check=True, capture_output=True, text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(
            f"cannot read test/dynamo/{file}.py from {source!r} at {SNAPSHOT_COMMIT[:12]}: "
            "clone https://github.com/pytorch/torchdynamo and pass its .git as --source "
            "(or set DYNAMO_CORPUS_SOURCE)"
        ) from exc


def family_of(text: str, file: str) -> str:
    if file in NEWER_FILES:  # a file of one subject: its family
        return NEWER_FILES[file]
    for family, marker in FAMILY_MARKERS:
        if marker.search(text):
            return family
    if file == "test_misc" and re.search(r"nn\.Module|torch\.nn\.", text):
        return "modules"
    return FILES[file]


def skip_reason(text: str) -> str | None:
    for reason, marker in SKIP_MARKERS:
        if marker.search(text):
            return reason
    return None


def _methods(classes: dict[str, ast.ClassDef], node: ast.ClassDef) -> list[ast.FunctionDef]:
    """The ``test_*`` methods of ``node``, its own and those of its bases in the same file."""
    found: dict[str, ast.FunctionDef] = {}
    for base in reversed(node.bases):
        if isinstance(base, ast.Name) and base.id in classes:
            found.update((m.name, m) for m in _methods(classes, classes[base.id]))
    found.update(
        (item.name, item) for item in node.body
        if isinstance(item, ast.FunctionDef) and item.name.startswith("test_")
    )
    return list(found.values())


def tests(file: str, source: str) -> list[TestRef]:
    """Every ``test_*`` method of every test class of ``file``, in source order."""
    from bench.dynamo_corpus.shim import adapt

    text = read(file, source)
    lines = adapt(text).splitlines()
    tree = ast.parse(text)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    refs = []
    for node in classes.values():
        if node.name.startswith("_"):  # a base holding tests for its subclasses
            continue
        for item in _methods(classes, node):
            first = min([d.lineno for d in item.decorator_list] + [item.lineno])
            body = "\n".join(lines[first - 1:item.end_lineno])
            refs.append(TestRef(
                file, node.name, item.name, family_of(body, file), skip_reason(body), source
            ))
    return refs


def all_tests(source: str, newer: str | None = None) -> list[TestRef]:
    """The tests of the torchdynamo snapshot, then those of the newer files, if present."""
    refs = [ref for file in FILES for ref in tests(file, source)]
    if newer and (Path(newer) / "test" / "dynamo").is_dir():
        refs += [ref for file in NEWER_FILES for ref in tests(file, newer)]
    return refs
