"""The documentation is tested: README.md and docs/*.md, as docs/development.md describes.

- Every fenced ```python block runs, in page order, the blocks of one page sharing one
  namespace (a page reads as one session). What a block prints is compared with the
  ```text block that follows it after a line ``Output:``; a block that prints and has
  no such block fails, so no printed output goes unchecked. In the expected text,
  ``...`` matches anything (doctest's ELLIPSIS: times, file:line); trailing spaces and
  leading/trailing blank lines are ignored.
- A block that cannot run here (a GPU, a download, minutes) has the line
  ``<!-- not-run: reason -->`` right before its fence; NOT_RUN pins how many each page
  has, so they cannot grow silently.
- Every fence names its language, so a Python example cannot hide in a bare fence.
- Every relative link (and image) resolves to a file of the repository, and every
  ``#anchor`` to a heading of its page (GitHub's heading ids).
- docs/README.md lists every page of docs/.
"""

from __future__ import annotations

import contextlib
import dataclasses
import doctest
import io
import pathlib
import re
import types

import pytest

import bytegraph

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Python blocks marked <!-- not-run: ... --> per page (relative path): update with care.
NOT_RUN: dict[str, int] = {"docs/distributed.md": 1}

FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,})(?P<lang>[^`\s]*)\s*$")
NOT_RUN_MARK = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>\S.*?)\s*-->\s*$")
LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block: its language, body (indentation removed) and first body line (1-based)."""

    lang: str
    body: str
    line: int
    not_run: str | None = None  # the reason, for a block marked not-run
    output: str | None = None  # the expected output, for a python block followed by one


def split_page(text: str) -> tuple[list[Block], list[tuple[int, str]]]:
    """The page's fenced blocks (python ones with their Output block), and its prose lines."""
    lines = text.split("\n")
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        indent, start = len(match.group("indent")), i + 1
        closing = re.compile(
            rf"^\s*{match.group('ticks')}`*\s*$"
        )  # as long as the opening one, or longer
        end = start
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        assert end < len(lines), f"line {i + 1}: a fence that is never closed"
        body = "\n".join(line[indent:] for line in lines[start:end])
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        reason = NOT_RUN_MARK.match(previous)
        blocks.append(
            Block(match.group("lang"), body, start + 1, reason and reason.group("reason"))
        )
        i = end + 1
    return _pair_outputs(blocks, lines), prose


def _pair_outputs(blocks: list[Block], lines: list[str]) -> list[Block]:
    """Attach to each python block the text block after it that an ``Output:`` line introduces."""
    paired: list[Block] = []
    for block in blocks:
        if block.lang == "text" and paired and paired[-1].lang == "python":
            before = paired[-1]
            between = lines[before.line + before.body.count("\n") + 1 : block.line - 2]
            if [line.strip() for line in between if line.strip()] == ["Output:"]:
                paired[-1] = dataclasses.replace(before, output=block.body)
                continue
        paired.append(block)
    return paired


def github_anchor(title: str) -> str:
    """The id GitHub gives a heading: markup dropped, lower case, punctuation out, spaces to '-'."""
    title = LINK.sub(lambda m: m.group("text"), title).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def anchors(page: pathlib.Path) -> set[str]:
    """The heading ids of a markdown page (a repeated heading gets -1, -2... as on GitHub)."""
    ids: set[str] = set()
    counts: dict[str, int] = {}
    for _, line in split_page(page.read_text())[1]:
        match = HEADING.match(line)
        if match:
            anchor = github_anchor(match.group("title"))
            count = counts.get(anchor, 0)
            ids.add(f"{anchor}-{count}" if count else anchor)
            counts[anchor] = count + 1
    return ids


def relative(page: pathlib.Path) -> str:
    return page.relative_to(ROOT).as_posix() if ROOT in page.parents else page.name


def normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").split("\n")).strip("\n") + "\n"


def run_page(page: pathlib.Path) -> None:
    """Run the page's python blocks in one namespace, each one's output checked."""
    blocks, _ = split_page(page.read_text())
    namespace = types.ModuleType(f"docs_{page.stem}").__dict__
    checker = doctest.OutputChecker()
    for block in blocks:
        if block.lang != "python" or block.not_run is not None:
            continue
        # Compiled "from" the page, at its own line numbers: tracebacks and explain() name them.
        code = compile("\n" * (block.line - 1) + block.body, str(page), "exec")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, namespace)
        where = f"{relative(page)}:{block.line}"
        got = out.getvalue()
        if block.output is None:
            assert not got, f"{where} prints; add its output after a line 'Output:':\n{got}"
            continue
        want, got = normalise(block.output), normalise(got)
        assert checker.check_output(want, got, doctest.ELLIPSIS), (
            f"{where}: the printed output differs from the page's\n"
            f"--- page\n{want}--- printed\n{got}"
        )


@pytest.fixture
def fresh_bytegraph():
    """Each page starts from empty caches, and its config changes are undone."""
    saved = {
        name: value
        for name, value in vars(bytegraph.config).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and not callable(value)
    }
    bytegraph.reset()
    yield
    for name, value in saved.items():
        setattr(bytegraph.config, name, value)
    bytegraph.reset()


@pytest.mark.parametrize("page", PAGES, ids=relative)
def test_python_examples_run_and_print_what_the_page_shows(
    page: pathlib.Path, fresh_bytegraph
) -> None:
    run_page(page)


def test_not_run_blocks_are_counted() -> None:
    found: dict[str, int] = {}
    for page in PAGES:
        for block in split_page(page.read_text())[0]:
            if block.not_run is not None:
                assert block.lang == "python", (
                    f"{relative(page)}:{block.line}: not-run marks a python block"
                )
                found[relative(page)] = found.get(relative(page), 0) + 1
    assert found == NOT_RUN, (
        "a python block was marked not-run or unmarked: update NOT_RUN deliberately"
    )


def test_every_fence_names_its_language() -> None:
    bare = [
        f"{relative(page)}:{block.line - 1}"
        for page in PAGES
        for block in split_page(page.read_text())[0]
        if not block.lang
    ]
    assert not bare, f"fences without a language (python, sh, text...): {bare}"


def test_links_and_anchors_resolve() -> None:
    broken = []
    for page in PAGES:
        for number, line in split_page(page.read_text())[1]:
            for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                target = match.group("target")
                if re.match(r"^[a-z]+:", target):  # https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                goal = (page.parent / path).resolve() if path else page
                if not goal.exists() or ROOT not in goal.parents and goal != ROOT:
                    broken.append(f"{relative(page)}:{number}: {target} (no such file)")
                elif anchor and (goal.suffix != ".md" or anchor not in anchors(goal)):
                    broken.append(f"{relative(page)}:{number}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    listed = {match.group("target").partition("#")[0] for match in LINK.finditer(index)}
    pages = {page.name for page in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages <= listed, f"docs/README.md does not list {sorted(pages - listed)}"


def test_the_checks_can_fail(tmp_path: pathlib.Path) -> None:
    """The parser sees a not-run mark, an Output block, a wrong output and a broken anchor."""
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n## Two words\n\n"
        "<!-- not-run: needs a GPU -->\n```python\nraise SystemExit\n```\n\n"
        "```python\nprint(1 + 1)\n```\n\nOutput:\n\n```text\n3\n```\n"
    )
    blocks, _ = split_page(page.read_text())
    assert [(b.lang, b.not_run, b.output) for b in blocks] == [
        ("python", "needs a GPU", None),
        ("python", None, "3"),
    ]
    with pytest.raises(AssertionError, match="differs from the page's"):
        run_page(page)
    page.write_text("```python\nprint('unchecked')\n```\n")
    with pytest.raises(AssertionError, match="prints; add its output"):
        run_page(page)
    page.write_text("# A page\n\n## Two words\n\n## Two words\n")
    assert anchors(page) == {"a-page", "two-words", "two-words-1"}
    assert (
        github_anchor("The switch: `torch.compile` on bytegraph")
        == "the-switch-torchcompile-on-bytegraph"
    )


def test_the_readme_stays_a_front_page() -> None:
    """What bytegraph is, the Quick start, one example, the figures, links: the rest is in docs/."""
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move the details to a page of docs/"
