"""The notebooks the built site offers, read where their readers read them.

Run after ``make book`` with ``make notebook-test``. Each page's downloadable notebook
(``_build/html/_sources/book/<page>.ipynb``) and each chapter's Colab copy
(``_build/html/_colab/book/<chapter>.ipynb``):

* hold plain Markdown a reader can read in a plain JupyterLab, in Colab or on GitHub: no
  ``{glue``, ``{eval}``, ``{prf:ref}``, ``{cite`` or other MyST role, no directive fence (an
  exercise's ``{exercise-start}``): the build replaced them by the values, theorem numbers,
  citations and headings the page shows (``tools/nlicl_plain.py``);
* (downloads) show each figure: a ``application/vnd.plotly.v1+json`` output, which JupyterLab
  draws, and HTML that draws where scripts run. The download rendered by nbconvert's HTML
  exporter (what "File > Save and export as HTML" and GitHub-like viewers do) is opened in
  headless Chromium, offline, and every figure must draw its traces;
* (Colab copies) install the library at the commit the site was built from, and the Colab
  button of each chapter opens its copy.

The Colab copies are run in a venv of Colab's versions by ``tests/test_colab.py``; the chapters
in Binder's environment by ``tests/test_binder.py``. ``NLICL_NOTEBOOKS=ch2,ch3`` restricts the
chapters.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html import unescape as html_unescape
from pathlib import Path

import nbformat
import pytest
from notebook_envs import load_tool

pytestmark = pytest.mark.built

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "_build" / "html"
SOURCES_DIR = HTML_DIR / "_sources"
COLAB_DIR = HTML_DIR / "_colab"
CHROMIUM = Path("/usr/bin/chromium")
PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"


load = load_tool  # tools/<name>.py as a module (tests/notebook_envs.py)


plain = load("nlicl_plain")


def selected(paths: list[Path]) -> list[Path]:
    chosen = {c.strip() for c in os.environ.get("NLICL_NOTEBOOKS", "").split(",") if c.strip()}
    return [p for p in paths if not chosen or p.stem.split("_")[0] in chosen]


DOWNLOADS = selected(sorted((SOURCES_DIR / "book").glob("*.ipynb")))
CHAPTERS = [p for p in DOWNLOADS if p.stem.startswith("ch")]
NOT_BUILT = f"the book is not built ({SOURCES_DIR} has no notebooks): run `make book`"


def markdown_leftovers(notebook: nbformat.NotebookNode) -> list[str]:
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            found += [f"cell {index}: {hit}" for hit in plain.leftovers(cell.source)]
            if cell.metadata.get("user_expressions"):
                found.append(f"cell {index}: user_expressions left in the metadata")
    return found


@pytest.mark.skipif(not DOWNLOADS, reason=NOT_BUILT)
@pytest.mark.parametrize("download", DOWNLOADS, ids=[p.stem for p in DOWNLOADS])
def test_download_and_colab_copy_read_as_plain_markdown(download: Path) -> None:
    notebook = nbformat.read(download, as_version=4)
    nbformat.validate(notebook)
    assert markdown_leftovers(notebook) == [], download.name
    copy = COLAB_DIR / "book" / download.name
    assert copy.exists(), f"{copy} is missing"
    assert markdown_leftovers(nbformat.read(copy, as_version=4)) == [], copy.name


@pytest.mark.skipif(not CHAPTERS, reason=NOT_BUILT)
@pytest.mark.parametrize("download", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_download_quotes_the_numbers_the_page_shows(download: Path) -> None:
    """The values in the download's text are the page's: every number the page's HTML shows
    in place of an ``{eval}`` appears in the download's text."""
    html = (HTML_DIR / "book" / download.with_suffix(".html").name).read_text(encoding="utf-8")
    text = "\n".join(c.source for c in nbformat.read(download, as_version=4).cells
                     if c.cell_type == "markdown")
    # MyST-NB writes an inline {eval} result as <span class="output text_plain">...</span>
    values = re.findall(r'<span class="output text_plain">([^<]*)</span>', html)
    assert values, f"{download.stem}: no evaluated value on the page"
    missing = [v for v in values if v.strip() and html_unescape(v) not in text]
    assert missing == [], f"{download.stem}: values on the page but not in the download"


def figure_outputs(notebook: nbformat.NotebookNode) -> list[dict]:
    return [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if o.get("metadata", {}).get("nlicl", {}).get("figure_id")]


@pytest.mark.skipif(not CHAPTERS, reason=NOT_BUILT)
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (make chromium)")
@pytest.mark.parametrize("download", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_downloaded_figures_draw_when_opened(download: Path, tmp_path: Path) -> None:
    """Each figure is plotly's own output (JupyterLab draws it), and the notebook as nbconvert's
    HTML exporter renders it draws every figure in Chromium, offline."""
    notebook = nbformat.read(download, as_version=4)
    figures = figure_outputs(notebook)
    assert figures, f"{download.stem} has no figure"
    for output in figures:
        spec = output["data"].get(PLOTLY_MIMETYPE)
        assert spec and len(spec["data"]) == output["metadata"]["nlicl"]["traces"], (
            f"{download.stem}: figure {output['metadata']['nlicl']['figure_id']} has no "
            "plotly output with its traces")
    html = tmp_path / f"{download.stem}.html"
    subprocess.run([sys.executable, "-m", "nbconvert", "--to", "html", "--output",
                    str(html.with_suffix("")), str(download)],
                   check=True, capture_output=True, timeout=300)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.route(re.compile(r"^https?://"), lambda route: route.abort())  # offline
        page.goto(html.as_uri(), wait_until="load")
        page.add_script_tag(path=str(ROOT / "tests" / "browser" / "page_checks.js"))
        ids = [o["metadata"]["nlicl"]["figure_id"] for o in figures]
        page.wait_for_function(
            "ids => ids.every(id => { const gd = document.getElementById(id);"
            " return gd && gd._fullData !== undefined; })", arg=ids, timeout=60_000)
        drawn = {f["id"]: f for f in page.evaluate("window.nlicl.figures()")}
        browser.close()
    for output in figures:
        want = output["metadata"]["nlicl"]
        got = drawn.get(want["figure_id"])
        assert got and got["svgTraces"] == want["drawn_traces"], (
            f"{download.stem}: figure {want['figure_id']} drew "
            f"{got and got['svgTraces']} traces in nbconvert's HTML, not {want['drawn_traces']}")


@pytest.mark.skipif(not CHAPTERS, reason=NOT_BUILT)
def test_colab_copies_install_the_built_commit_and_the_buttons_open_them() -> None:
    live = load("nlicl_live")
    commit = live.build_commit(ROOT)
    for source in CHAPTERS:
        copy = COLAB_DIR / "book" / source.name
        notebook = nbformat.read(copy, as_version=4)
        nbformat.validate(notebook)
        assert "colab-install" in notebook.cells[0].metadata.get("tags", [])
        assert "google.colab" in notebook.cells[0].source
        if commit and not os.environ.get("NLICL_COMMIT"):
            assert f".git@{commit}" in notebook.cells[0].source, (
                f"{copy.name} does not install this checkout's commit {commit}")
        assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")
        assert json.dumps(notebook).count(PLOTLY_MIMETYPE) == 0
        html = (HTML_DIR / "book" / source.with_suffix(".html").name).read_text(encoding="utf-8")
        links = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', html)
        assert links and all(link.endswith(f"/_colab/book/{source.name}") for link in links), (
            f"{source.stem}: Colab links {links}")
