"""The HTML report (report_html.py): checked as drawn by a real browser.

The page is rendered by headless Chromium (Debian's ``chromium``; ``.ci/run``
installs it when it runs as root): ``--dump-dom`` gives the DOM the browser
built, which must show every graph as an SVG with its nodes and every break
at its line with its reason; ``--screenshot`` gives a PNG, decoded here with
zlib, which must not be blank. The SVG layout itself is checked without a
browser. Every program also runs eager, and its results are compared.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib

import pytest
import torch
from source_lines import line_of

import bytegraph
from bytegraph.inspect.explain import report_of
from bytegraph.inspect.recording import Recording
from bytegraph.inspect.report_html import graph_svg

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TIMEOUT = 120
SVG = "{http://www.w3.org/2000/svg}"


def helper_prints(t):
    print("in helper")
    return t.cos()


def program(x, out):
    y = helper_prints(x.sin() + 1)
    if y.sum() > 0:
        out.append(y * 2)
    else:
        out.append(y * 3)
    return y.relu()


def explained(x: torch.Tensor):
    """The report of one compiled call of ``program``; its results checked against eager."""
    eager_out: list = []
    expected = program(x.clone(), eager_out)
    compiled_out: list = []
    with Recording() as recording:
        result = bytegraph.compile(program, backend="eager")(x.clone(), compiled_out)
    assert torch.equal(result, expected)
    assert len(compiled_out) == 1 and torch.equal(compiled_out[0], eager_out[0])
    return report_of(recording)


def chromium(*args: str, tmp_path) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run installs "
                    "it when run as root)")
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True,
                          timeout=TIMEOUT)


def read_png(path) -> tuple[int, int, int, bytes]:
    """(width, height, bytes per pixel, unfiltered pixel rows) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, previous = bytearray(), bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, corner = previous[i], previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc
                                      else corner)) & 255
        rows += line
        previous = line
    return width, height, bpp, bytes(rows)


def test_the_browser_shows_graphs_and_breaks(tmp_path) -> None:
    report = explained(torch.randn(4))
    assert report.graph_count >= 3 and report.graph_break_count >= 2
    page = tmp_path / "report.html"
    page.write_text(report.to_html())
    done = chromium("--dump-dom", page.as_uri(), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    # Every graph drawn, with every one of its nodes.
    for i, gm in enumerate(report.graphs):
        match = re.search(rf'<svg class="fx-graph" data-graph="{i}".*?</svg>', dom, re.S)
        assert match, f"graph {i} not drawn"
        for node in gm.graph.nodes:
            assert f'data-node="{node.name}"' in match.group(0)
    assert dom.count('<svg class="fx-graph"') == report.graph_count
    # Every break marked at its line in the source, with its reason.
    this_file = os.path.abspath(__file__)
    assert f"{this_file}</div>" in dom
    print_line = line_of(helper_prints, "print(")
    branch_line = line_of(program, "if y.sum() > 0")
    for line in (print_line, branch_line):
        assert re.search(rf'<tr class="line [^"]*break[^"]*" data-line="{line}">', dom), line
    notes = re.findall(r'<tr class="note" data-line="(\d+)" data-kind="break"><td[^>]*>(.*?)</td>',
                       dom)
    by_line = {int(line): text for line, text in notes}
    assert "print" in by_line[print_line]
    assert "bool() of a tensor" in by_line[branch_line]
    for brk in report.breaks:
        assert brk.reason in html.unescape(dom)
    # Counted by their tags: this file's source is on the page too, with '<' escaped.
    assert dom.count('<li class="break-item"') == report.graph_break_count
    assert dom.count('<details class="guards"') == len(report.guards)


def test_the_screenshot_is_not_blank(tmp_path) -> None:
    report = explained(torch.randn(4))
    page = tmp_path / "report.html"
    page.write_text(report.to_html())
    shot = tmp_path / "shot.png"
    done = chromium(f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri(),
                    tmp_path=tmp_path)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    width, height, bpp, pixels = read_png(shot)
    assert (width, height) == (1200, 1600)
    colored = sum(
        1 for i in range(0, len(pixels), bpp * 7)  # every 7th pixel is enough
        if min(pixels[i:i + 3]) < 235
    )
    sampled = len(pixels) // (bpp * 7)
    assert colored / sampled > 0.03, colored / sampled
    # The break highlight (a light red row) is there.
    reds = sum(1 for i in range(0, len(pixels), bpp)
               if pixels[i] > 240 and 200 < pixels[i + 1] < 235 and 200 < pixels[i + 2] < 230)
    assert reds > 1000, reds


def test_graph_svg_draws_each_node_below_its_inputs() -> None:
    report = explained(torch.randn(3))
    gm = max(report.graphs, key=lambda g: len(g.graph.nodes))
    svg = ET.fromstring(graph_svg(gm, 7))
    assert svg.get("data-graph") == "7"
    tops = {}
    for group in svg.iter(f"{SVG}g"):
        rect = group.find(f"{SVG}rect")
        tops[group.get("data-node")] = float(rect.get("y"))
    assert list(tops) == [n.name for n in gm.graph.nodes]
    for node in gm.graph.nodes:
        for source in node.all_input_nodes:
            assert tops[source.name] < tops[node.name], (source.name, node.name)
    edges = sum(len(n.all_input_nodes) for n in gm.graph.nodes)
    assert len([p for p in svg.iter(f"{SVG}path") if p.get("class") == "edge"]) == edges


def test_to_html_is_one_self_contained_page() -> None:
    text = explained(torch.randn(3)).to_html()
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    # No script and nothing loaded: no tag has a src or href (the source shown on the page
    # has its '<' escaped, so only real tags match).
    assert "<script" not in text
    assert not re.search(r"<[a-zA-Z][^<>]*\s(src|href)=", text)
