"""Where a piece of test source is: expected file:line values are computed, never typed."""

from __future__ import annotations

import inspect


def line_of(fn, text: str) -> int:
    """The line number, in its file, of the only line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, line in enumerate(lines) if text in line]
    assert len(hits) == 1, f"{text!r} is on lines {hits} of {fn.__name__}"
    return hits[0]


def source_of(fn, text: str) -> str:
    """The stripped source line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return lines[line_of(fn, text) - start].strip()
