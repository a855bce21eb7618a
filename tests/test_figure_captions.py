"""Every figure of the book is numbered and captioned, and the prose names figures by number."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = Path(os.environ.get("NLICL_HTML_DIR", ROOT / "_build" / "html"))
CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
FRONT = re.compile(r"\A---\n(?P<yaml>.*?)^---\n", re.MULTILINE | re.DOTALL)
SHOW = re.compile(r"^\s*show\(", re.MULTILINE)
PAGES = sorted(p for p in (ROOT / "book").glob("*.md") if SHOW.search(p.read_text(encoding="utf-8")))


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_every_figure_cell_has_a_caption_and_a_name(path: Path):
    text = path.read_text(encoding="utf-8")
    names = []
    for match in CELL.finditer(text):
        front = FRONT.match(match["body"])
        code = match["body"][front.end():] if front else match["body"]
        if not SHOW.search(code):
            continue
        options = (yaml.safe_load(front["yaml"]) or {}) if front else {}
        figure = (options.get("mystnb") or {}).get("figure") or {}
        where = f"{path.name}: the cell {code.strip()[:60]!r}"
        # the caption is rendered without the kernel: no {eval}; one figure per cell
        assert str(figure.get("caption", "")).strip() and "{eval}" not in figure["caption"], where
        assert re.fullmatch(r"fig-[a-z0-9-]+", str(figure.get("name", ""))), where
        assert len(SHOW.findall(code)) == 1 and "display(" not in code, where
        names.append(figure["name"])
    assert names
    prose = CELL.sub("", text)
    assert not re.search(r"\bfigure (above|below)\b", prose, re.IGNORECASE), path.name


@pytest.mark.built
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_every_built_figure_sits_in_a_numbered_captioned_figure(page: Path):
    from bs4 import BeautifulSoup

    html = HTML_DIR / "book" / f"{page.stem}.html"
    if not html.exists():
        pytest.skip("the book is not built: run `make book`")
    plots = BeautifulSoup(html.read_text(encoding="utf-8"), "html.parser").select("div.nlicl-plotly")
    assert plots, f"{page.stem}.html has no figure"
    for plot in plots:
        figure = plot.find_parent("figure")
        caption = figure and figure.find("figcaption")
        text = " ".join(caption.get_text(" ").split()) if caption else ""
        assert re.match(r"Fig\. \d+(\.\d+)* ", text), (
            f"{page.stem}: the figure {plot.get('aria-label', '?')!r} is not in a numbered "
            f"<figure> with a caption: {text!r}")
