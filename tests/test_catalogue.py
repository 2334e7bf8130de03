"""The graph-break catalogue: every raise site names an entry, and the docs page lists them all."""

from __future__ import annotations

import ast
import pathlib

import pytest
import torch

import bytegraph
from bytegraph.catalogue import CATALOGUE, FAMILIES, render_markdown
from bytegraph.exc import InternalError, Unsupported

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "bytegraph"


def _raise_sites() -> list[tuple[str, int, ast.expr | None]]:
    """(file, line, first argument) of every ``Unsupported(...)`` call in bytegraph/."""
    sites = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name == "Unsupported":
                first = node.args[0] if node.args else None
                sites.append((str(path.relative_to(ROOT)), node.lineno, first))
    return sites


def _copies_an_entry(arg: ast.expr) -> bool:
    """``Unsupported(self.entry.name, ...)``: a located copy of a break already made."""
    return isinstance(arg, ast.Attribute) and arg.attr == "name" and (
        isinstance(arg.value, ast.Attribute) and arg.value.attr == "entry"
    )


def test_every_raise_site_names_a_catalogue_entry() -> None:
    sites = _raise_sites()
    assert len(sites) > 300  # the scan sees the package's raise sites
    wrong = []
    for where, line, first in sites:
        if first is not None and _copies_an_entry(first):
            continue
        if not (isinstance(first, ast.Constant) and first.value in CATALOGUE):
            text = ast.unparse(first) if first is not None else "(no argument)"
            wrong.append(f"{where}:{line}: Unsupported({text}, ...)")
    assert not wrong, "raise sites that name no specific catalogue entry:\n" + "\n".join(wrong)


def test_every_entry_has_a_raise_site() -> None:
    named = {
        first.value for _, _, first in _raise_sites()
        if isinstance(first, ast.Constant)
    }
    assert sorted(set(CATALOGUE) - named) == []


def test_entries_are_well_formed() -> None:
    ids = [e.id for e in CATALOGUE.values()]
    assert len(set(ids)) == len(ids)
    for entry in CATALOGUE.values():
        assert entry.family in FAMILIES
        assert entry.id[0] == "B" and len(entry.id) == 4 and entry.id[1:].isdigit()
        assert entry.explanation and entry.hint
        assert not entry.explanation.endswith(".") and not entry.hint.endswith(".")
    assert 30 <= len(CATALOGUE) <= 80
    assert {e.family for e in CATALOGUE.values()} == set(FAMILIES)


def test_docs_page_is_generated_from_the_catalogue() -> None:
    page = (ROOT / "docs" / "graph_breaks.md").read_text()
    assert page == render_markdown(), "regenerate it: python docs/make_graph_breaks.py"
    for entry in CATALOGUE.values():
        assert f"### {entry.id} `{entry.name}`" in page


def test_entry_carries_its_family_as_kind() -> None:
    error = Unsupported("item_call", "x.item()")
    assert error.kind == "data_dependent"
    assert error.entry is CATALOGUE["item_call"]
    assert error.hint == CATALOGUE["item_call"].hint
    assert "[B202 item_call]" in str(error)
    located = error.with_frames(())
    assert located.entry is error.entry


def test_family_name_still_accepted_unknown_name_refused() -> None:
    assert Unsupported("data_dependent", "legacy").kind == "data_dependent"
    with pytest.raises(InternalError, match="unknown graph-break entry"):
        Unsupported("no_such_entry", "x")


def _items(x):
    return x * x.sum().item()


def _branches(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def _tolist(x):
    return x.tolist()


def _nonzero(x):
    return torch.nonzero(x) + 1


@pytest.mark.parametrize(
    ("fn", "entry"),
    [
        (_items, "item_call"),
        (_branches, "data_dependent_branch"),
        (_tolist, "tolist_call"),
        (_nonzero, "dynamic_output_shape"),
    ],
)
def test_data_dependent_breaks_name_their_entry(fn, entry) -> None:
    x = torch.randn(4)
    # fullgraph=True would capture .item() and nonzero (torch.compile's unbacked semantics):
    # the break is read from the entry. The program still means what eager means.
    compiled = bytegraph.compile(fn, backend="eager")
    expected = fn(x)
    got = compiled(x)
    reason = compiled.entries[0].breaks[0]
    assert reason.entry.name == entry
    assert reason.kind == "data_dependent"
    if isinstance(expected, torch.Tensor):
        assert torch.equal(got, expected)
    else:
        assert got == expected
    assert bytegraph.explain(fn)(x).graph_break_count >= 1
