"""The chapters' diagrams (``tools/diagrams.py``): the committed SVGs are what the generator
writes, each is a titled, described, scalable image, both variants exist, and every chapter
shows its pair in one figure with alt text."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tools import diagrams

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
SVG = "{http://www.w3.org/2000/svg}"
CHAPTERS = {  # page -> its diagram
    "ch1_lsa_is_gd.md": "ch1_prompt",
    "ch2_attention_alone.md": "ch2_linear",
    "ch3_glu_kernel.md": "ch3_glu",
    "ch4_block_size.md": "ch4_budget",
    "ch5_depth.md": "ch5_stack",
}
VARIANTS = [f"{name}_{palette.name}.svg" for name in diagrams.DIAGRAMS
            for palette in diagrams.PALETTES]


def test_committed_svgs_are_the_generators_output(tmp_path: Path) -> None:
    written = diagrams.write_all(tmp_path)
    assert sorted(path.name for path in written) == sorted(VARIANTS)
    committed = sorted(path.name for path in diagrams.OUT_DIR.glob("*.svg"))
    assert committed == sorted(VARIANTS), "run `python tools/diagrams.py`"
    stale = [path.name for path in written
             if path.read_bytes() != (diagrams.OUT_DIR / path.name).read_bytes()]
    assert not stale, f"book/diagrams is out of date ({stale}): run `python tools/diagrams.py`"


@pytest.mark.parametrize("file_name", VARIANTS)
def test_each_svg_is_a_titled_scalable_image(file_name: str) -> None:
    root = ET.parse(diagrams.OUT_DIR / file_name).getroot()
    assert root.tag == f"{SVG}svg"
    x0, y0, width, height = map(float, root.get("viewBox").split())
    assert (x0, y0, width) == (0, 0, diagrams.WIDTH) and height > 0
    assert root.find(f"{SVG}title").text.strip() and root.find(f"{SVG}desc").text.strip()
    assert root.get("role") == "img"
    # drawn with the system's fonts only, nothing fetched
    assert root.find(f".//{SVG}script") is None and root.find(f".//{SVG}image") is None
    assert "@font-face" not in (diagrams.OUT_DIR / file_name).read_text(encoding="utf-8")
    texts = root.findall(f".//{SVG}text")
    assert texts
    for text in texts:  # legible on a phone: large type, short rows, inside the viewBox
        assert int(text.get("font-size")) >= diagrams.SMALL
        assert len("".join(text.itertext())) <= diagrams.MAX_ROW_CHARS
        assert 0 <= float(text.get("x")) <= width and 0 <= float(text.get("y")) <= height


@pytest.mark.parametrize("name", list(diagrams.DIAGRAMS))
def test_the_variants_differ_in_colour_only(name: str) -> None:
    light, dark = (diagrams.render(name, palette) for palette in diagrams.PALETTES)
    assert light != dark
    colours = re.compile(r"#[0-9a-f]{6}")
    assert colours.sub("#", light) == colours.sub("#", dark)  # the same drawing


def test_a_bad_name_and_a_long_row_are_refused() -> None:
    with pytest.raises(ValueError, match="name: 'ch9'"):
        diagrams.render("ch9", diagrams.LIGHT)
    drawing = diagrams.Drawing(diagrams.LIGHT, 100, "t", "d")
    with pytest.raises(ValueError, match="content: 41 characters"):
        drawing.text(0, 0, "x" * 41)


FIGURE = re.compile(r"^:::\{figure\} diagrams/(?P<light>\S+)\n(?P<body>.*?)^:::$", re.M | re.S)


@pytest.mark.parametrize("page", list(CHAPTERS))
def test_each_chapter_shows_its_pair_in_one_figure_with_alt_text(page: str) -> None:
    name = CHAPTERS[page]
    figures = [match for match in FIGURE.finditer((BOOK / page).read_text(encoding="utf-8"))
               if match["light"].startswith(name)]
    assert len(figures) == 1, f"{page}: one figure of {name}"
    figure = figures[0]
    assert figure["light"] == f"{name}_light.svg"
    body = figure["body"]
    assert re.search(r"^:name: fig-ch\d-\S+$", body, re.M)
    assert re.search(r"^:class: nlicl-diagram-light$", body, re.M)
    assert re.search(r"^:figclass: nlicl-diagram$", body, re.M)
    assert f"```{{image}} diagrams/{name}_dark.svg\n" in body
    assert re.search(r"^:class: only-dark nlicl-diagram-dark$", body, re.M)
    alts = re.findall(r"^:alt: (.+)$", body, re.M)
    assert len(alts) == 2 and all(len(alt.split()) >= 10 for alt in alts)
    caption = body.split("\n\n")[1]
    assert "Look" in caption  # the caption says what to look for
