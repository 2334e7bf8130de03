"""The layers: the core never imports the inspection layer (bytegraph/inspect/), and it
tells that layer what happened only through bytegraph/events.py, never on a cache hit.

The core is every module of ``bytegraph/`` outside ``bytegraph/inspect/``, except the
package's two entry points: ``__init__.py`` (the public API, ``bytegraph.explain``
among it) and ``__main__.py`` (``python -m bytegraph`` runs the command line).
"""

from __future__ import annotations

import ast
import pathlib

import pytest
import torch

import bytegraph
from bytegraph import events

PACKAGE = pathlib.Path(bytegraph.__file__).parent
ENTRY_POINTS = {"__init__.py", "__main__.py"}
LAYER = "bytegraph.inspect"


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(source: str, name: str, is_package: bool = False) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``source`` (module ``name``), at the top or
    inside a function: ``import``, ``from ... import`` (relative ones resolved), and
    ``importlib.import_module`` / ``__import__`` with a constant name."""
    base = name if is_package else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                package = base
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                module = f"{package}.{module}" if module else package
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if called in ("import_module", "__import__") and isinstance(first, ast.Constant):
                found.append((node.lineno, str(first.value)))
    return found


def reaches_layer(module: str) -> bool:
    return module == LAYER or module.startswith(LAYER + ".")


def core_modules() -> list[pathlib.Path]:
    return sorted(
        path for path in PACKAGE.rglob("*.py")
        if "inspect" not in path.relative_to(PACKAGE).parts[:1]
        and path.relative_to(PACKAGE).as_posix() not in ENTRY_POINTS
    )


def test_the_core_never_imports_the_inspection_layer() -> None:
    modules = core_modules()
    assert len(modules) > 50 and PACKAGE / "api.py" in modules
    offending = [
        f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}"
        for path in modules
        for line, target in imported(
            path.read_text(), module_name(path), path.name == "__init__.py"
        )
        if reaches_layer(target)
    ]
    assert offending == []


@pytest.mark.parametrize("source", [
    "from bytegraph.inspect.dump import dump_entry",
    "from bytegraph.inspect import dump",
    "import bytegraph.inspect.structured_trace",
    "def f():\n    from bytegraph.inspect.explain import report_of",
    "def f():\n    from ..inspect import recording",
    "import importlib\nimportlib.import_module('bytegraph.inspect.cli')",
])
def test_the_check_sees_every_kind_of_import(source: str) -> None:
    # As the check reads bytegraph/translate/convert.py.
    found = imported(source, "bytegraph.translate.convert")
    assert any(reaches_layer(target) for _, target in found), found


def test_the_check_leaves_other_imports_alone() -> None:
    source = "import inspect\nfrom bytegraph import events\nfrom .resume import base_position"
    assert not any(reaches_layer(t) for _, t in imported(source, "bytegraph.translate.x"))


def every_event() -> list[events.Event]:
    return [e for e in vars(events).values() if isinstance(e, events.Event)]


def test_a_cache_hit_publishes_nothing() -> None:
    published: list[str] = []
    subscribers = []
    for event in every_event():
        def note(*args: object, _name: str = event.name) -> object:
            published.append(_name)
            return args[0] if _name == "wrap_backend" else None

        subscribers.append((event, note))
        event.subscribe(note)
    try:
        def f(x):
            return x.sin() + 1

        compiled = bytegraph.compile(f, backend="eager")
        x = torch.ones(3)
        assert torch.equal(compiled(x), f(x))
        assert {"wrap_backend", "root_compiled", "compile_started", "trace_started",
                "entry_made", "frame_compiled"} <= set(published)
        published.clear()
        assert torch.equal(compiled(x), f(x))
        assert torch.equal(compiled(torch.zeros(3)), f(torch.zeros(3)))
        assert published == []
        compiled(torch.ones(2, 2))  # a recompile
        assert "recompile" in published and "frame_compiled" in published
    finally:
        for event, note in subscribers:
            event.unsubscribe(note)


def test_unsubscribe_leaves_the_others() -> None:
    event = events.Event("probe")
    calls: list[str] = []

    def a(*_: object) -> None:
        calls.append("a")

    def b(*_: object) -> None:
        calls.append("b")

    event.subscribe(a)
    event.subscribe(b)
    event.unsubscribe(a)
    event.publish()
    assert calls == ["b"] and event.subscribers == (b,)
    assert events.Event("filter").apply(3) == 3
