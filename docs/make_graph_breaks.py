"""Write docs/graph_breaks.md from the graph-break catalogue (bytegraph/catalogue.py).

    python docs/make_graph_breaks.py

tests/test_catalogue.py fails while the committed page differs from what this writes.
"""

from __future__ import annotations

import pathlib
import sys

PAGE = pathlib.Path(__file__).resolve().with_name("graph_breaks.md")

if __name__ == "__main__":
    sys.path.insert(0, str(PAGE.parent.parent))  # this checkout's bytegraph, not an installed one
    from bytegraph.catalogue import render_markdown

    PAGE.write_text(render_markdown())
    print(f"wrote {PAGE}")
