"""The notebooks the built site offers, read where their readers read them (``make
notebook-test``, after ``make book``; ``NLICL_NOTEBOOKS=ch2,ch3`` restricts the chapters).

The ``jupyter`` builder (``book/_ext/nlicl_notebooks.py``) writes each page's download
(``_build/html/_sources/book/<page>.ipynb``, with its outputs) and its live copy for Colab and
Binder (``_build/html/_colab/book/<page>.ipynb``). Both hold plain Markdown (no MyST role,
directive or glue placeholder left) quoting the values the page shows, with links that land on
an anchor; the download keeps every code cell with its tags and outputs, and its figures draw
in nbconvert's HTML in Chromium, offline; the live copies install the library at the built
commit, and each chapter's Colab and Binder buttons open its copy. (The live copies run in
Colab's versions in tests/test_colab.py, in Binder's in tests/test_binder.py.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html import unescape as html_unescape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest
from nlicl_notebooks import build_commit

pytestmark = pytest.mark.built

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "_build" / "html"
SOURCES_DIR = HTML_DIR / "_sources"
COLAB_DIR = HTML_DIR / "_colab"
EXECUTED_DIR = ROOT / "_build" / "jupyter_execute"
CHROMIUM = Path("/usr/bin/chromium")
PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"

# a MyST role or directive, or a glue placeholder; a link to a notebook and/or an anchor
LEFTOVER = re.compile(r"\{[A-Za-z][\w:+-]*\}`|^\s*(?:`{3,}|:{3,})\{[\w:+-]+\}|\{glue", re.MULTILINE)
LINK = re.compile(r"\]\((?P<file>[\w./-]*?\.ipynb)?(?:#(?P<anchor>[^)\s]+))?\)")


def selected(paths: list[Path]) -> list[Path]:
    chosen = {c.strip() for c in os.environ.get("NLICL_NOTEBOOKS", "").split(",") if c.strip()}
    return [p for p in paths if not chosen or p.stem.split("_")[0] in chosen]


DOWNLOADS = selected(sorted((SOURCES_DIR / "book").glob("*.ipynb")))
CHAPTERS = [p for p in DOWNLOADS if p.stem.startswith("ch")]
LIVE_COPIES = sorted((COLAB_DIR / "book").glob("*.ipynb"))
NOT_BUILT = f"the book is not built ({SOURCES_DIR} has no notebooks): run `make book`"


def markdown_leftovers(notebook: nbformat.NotebookNode) -> list[str]:
    return [f"cell {index}: {hit.group(0).strip()}" for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "markdown" for hit in LEFTOVER.finditer(cell.source)]


def markdown(notebook: nbformat.NotebookNode) -> str:
    return "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")


@pytest.mark.skipif(not LIVE_COPIES, reason=NOT_BUILT)
@pytest.mark.parametrize("copy", LIVE_COPIES, ids=[p.stem for p in LIVE_COPIES])
def test_download_and_live_copy_read_as_plain_markdown(copy: Path) -> None:
    """Every page's live copy, and the download of each page that has one."""
    assert all(LEFTOVER.search(t) for t in ("{prf:ref}`x`", ":::{note}", "{glue:text}`a`"))
    served = [copy] + [d for d in DOWNLOADS if d.name == copy.name]
    for path in served:
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        assert markdown_leftovers(notebook) == [], path
    assert {d.name for d in DOWNLOADS} <= {c.name for c in LIVE_COPIES}


@pytest.mark.skipif(not DOWNLOADS, reason=NOT_BUILT)
@pytest.mark.parametrize("download", DOWNLOADS, ids=[p.stem for p in DOWNLOADS])
def test_download_keeps_every_code_cell_with_its_tags_and_outputs(download: Path) -> None:
    """The page's code cells, as MyST-NB executed them: the same sources in the same order
    (those whose input the page hides included), their tags and their outputs."""
    from jupyter_cache import get_cache

    executed = nbformat.read(EXECUTED_DIR / "book" / download.name, as_version=4)
    # with its outputs from the execution cache: MyST-NB 1.4.0 writes jupyter_execute/ without
    # them (review/issue-31/upstream-issues.md)
    executed = get_cache(ROOT / "_build" / ".jupyter_cache").merge_match_into_notebook(executed)[1]
    notebook = nbformat.read(download, as_version=4)
    want = [c for c in executed.cells if c.cell_type == "code"]
    got = [c for c in notebook.cells if c.cell_type == "code"]
    assert [c.source for c in got] == [c.source for c in want]
    assert [c.metadata.get("tags", []) for c in got] == [c.metadata.get("tags", []) for c in want]
    def kinds(cells: list) -> list[list[str]]:  # the output types, without the plotly.js loader
        return [[o.output_type for o in c.outputs
                 if "nlicl-plotly-js" not in o.get("metadata", {}).get("tags", [])] for c in cells]

    assert kinds(got) == kinds(want) and any(kinds(want))
    if "remove-input" in json.dumps([c.metadata for c in want]):
        assert any("remove-input" in c.metadata.get("tags", []) and c.source for c in got)


@pytest.mark.skipif(not LIVE_COPIES, reason=NOT_BUILT)
def test_links_between_the_live_copies_land_on_an_anchor() -> None:
    folder = COLAB_DIR / "book"
    texts = {p.name: markdown(nbformat.read(p, as_version=4)) for p in LIVE_COPIES}
    broken, checked = [], 0
    for name, text in texts.items():
        for link in LINK.finditer(text):
            target = link["file"] or name
            anchor = link["anchor"]
            if target not in texts:
                broken.append(f"{name}: {link.group(0)} (no {folder / target})")
            elif anchor and not re.search(rf"<a id=[\"']{re.escape(anchor)}[\"']", texts[target]):
                broken.append(f"{name}: {link.group(0)} (no anchor in {target})")
            checked += 1
    assert checked > 100 and any("theorems.ipynb#thm-" in t for t in texts.values())
    assert broken == [], "\n".join(broken)


@pytest.mark.skipif(not CHAPTERS, reason=NOT_BUILT)
@pytest.mark.parametrize("download", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_download_quotes_the_numbers_the_page_shows(download: Path) -> None:
    """The values in the download's text are the page's: every number the page's HTML shows
    in place of an ``{eval}`` or a ``{glue:text}`` appears in the download's text."""
    html = (HTML_DIR / "book" / download.with_suffix(".html").name).read_text(encoding="utf-8")
    text = markdown(nbformat.read(download, as_version=4))
    # MyST-NB writes an inline {eval} result as <span class="output text_plain">...</span>, a
    # {glue:text} value as <span class="pasted-text">...</span>
    values = re.findall(r'<span class="(?:output text_plain|pasted-text)">([^<]*)</span>', html)
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
def test_live_copies_install_the_built_commit_and_the_buttons_open_them() -> None:
    commit = build_commit(ROOT)
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
        assert links and all(link.endswith(f"/blob/gh-pages/_colab/book/{source.name}")
                             for link in links), f"{source.stem}: Colab links {links}"
        binder = [html_unescape(u) for u in re.findall(r'href="(https://mybinder\.org/[^"]+)"', html)]
        assert binder, f"{source.stem}: no Binder link"
        for url in binder:  # the environment from the repository, the notebook by nbgitpuller
            assert urlsplit(url).path == "/v2/gh/nlicl/nlicl/main", url
            pull = urlsplit(parse_qs(urlsplit(url).query)["urlpath"][0])
            assert pull.path == "git-pull", url
            assert parse_qs(pull.query) == {
                "repo": ["https://github.com/nlicl/nlicl"], "branch": ["gh-pages"],
                "urlpath": [f"lab/tree/nlicl/_colab/book/{source.name}"]}, url


@pytest.mark.skipif(not LIVE_COPIES, reason=NOT_BUILT)
def test_the_problems_handout_has_every_statement_and_no_solution(tmp_path: Path) -> None:
    """The page's command (``book/instructor_problems.md``): nbconvert without the cells tagged
    ``solution`` keeps every problem's title and statement, and no solution."""
    from nlicl_lib.pages.instructors import problems

    subprocess.run([sys.executable, "-m", "nbconvert", "--to", "markdown",
                    "--TagRemovePreprocessor.enabled=True",
                    "--TagRemovePreprocessor.remove_cell_tags", "solution", "--output-dir",
                    str(tmp_path), "--output", "problems",
                    str(COLAB_DIR / "book" / "instructor_problems.ipynb")],
                   check=True, capture_output=True, timeout=300)
    text = " ".join((tmp_path / "problems.md").read_text(encoding="utf-8").split())
    page = " ".join(markdown(nbformat.read(COLAB_DIR / "book" / "instructor_problems.ipynb",
                                           as_version=4)).split())
    assert not LEFTOVER.search(text) and "Theorem" in text
    found = problems((ROOT / "book" / "instructor_problems.md").read_text(encoding="utf-8"))
    assert len(found) >= 10
    for problem in found:
        assert problem.title.split(":")[0] in text, problem.title  # "Problem 1.1"
        # the solution's longest stretch of plain words: on the page, not in the handout
        stretches = re.split(r"\$[^$]*\$|\{[^}]+\}`[^`]*`|[`*\n()\"“”'’]|\d+\.", problem.solution)
        phrase = " ".join(max(stretches, key=len).split())
        assert len(phrase) > 20 and phrase in page, (problem.label, phrase)
        assert phrase not in text, f"{problem.label}'s solution leaked: {phrase!r}"


HEADINGS = re.compile(r"\A(?:#{1,6} [^\n]*(?:\n|\Z)|\s*\n)*")
CAPTION = re.compile(r"\A(?:<a id=\"[^\"]+\"></a>)*\*\*(Fig\. [\d.]+)\*\* \S")


@pytest.mark.skipif(not DOWNLOADS, reason=NOT_BUILT)
@pytest.mark.parametrize("download", DOWNLOADS, ids=[p.stem for p in DOWNLOADS])
def test_download_opens_with_solutions_closed_and_figures_captioned(download: Path) -> None:
    """As on the page, a solution opens closed: each of its code cells collapsed (source and
    outputs: JupyterLab's ``jupyter`` metadata, the classic notebook's ``collapsed``), its text
    under its heading in a closed ``<details>`` block (JupyterLab, nbconvert, GitHub). Each
    figure is followed by a Markdown cell with its number and caption, the page's numbers in
    the page's order. The live copy's solutions are closed too."""
    problems = []
    for path in (download, COLAB_DIR / "book" / download.name):
        notebook = nbformat.read(path, as_version=4)
        solutions = [(i, c) for i, c in enumerate(notebook.cells)
                     if "solution" in c.metadata.get("tags", [])]
        if download.stem.startswith("ch") and not solutions:
            problems.append(f"{path.name}: no cell tagged solution")
        for index, cell in solutions:
            where = f"{path.parent.parent.name}/{path.name}, cell {index}"
            if cell.cell_type == "code":
                if (cell.metadata.get("jupyter") != {"source_hidden": True, "outputs_hidden": True}
                        or cell.metadata.get("collapsed") is not True):
                    problems.append(f"{where}: a solution's code cell not collapsed "
                                    f"({dict(cell.metadata)})")
                continue
            body = cell.source[HEADINGS.match(cell.source).end():].strip()
            if body and not (re.match(r"<details>\s*<summary>[^<]+</summary>\n\n", body)
                             and body.endswith("\n\n</details>") and body.count("<details") == 1):
                problems.append(f"{where}: a solution's text not in a closed <details> block: "
                                f"{body[:80]!r}")
    notebook = nbformat.read(download, as_version=4)
    captions = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown" and cell.get("attachments"):
            # a diagram: its drawing embedded, then its number and caption in the same cell
            image = re.match(r"(?:<a id=\"[^\"]+\"></a>)*!\[[^\]]*\]\(attachment:([^)]+)\)\n\n",
                             cell.source)
            found = image and image.group(1) in cell.attachments and \
                CAPTION.match(cell.source[image.end():])
            captions.append(found.group(1) if found else f"(no drawing and caption in cell {index})")
            continue
        if not any(o.get("metadata", {}).get("nlicl") for o in cell.get("outputs", [])):
            continue
        following = notebook.cells[index + 1] if index + 1 < len(notebook.cells) else None
        found = CAPTION.match(following.source) if following and \
            following.cell_type == "markdown" else None
        captions.append(found.group(1) if found else f"(no caption after cell {index})")
    html = (HTML_DIR / "book" / download.with_suffix(".html").name).read_text(encoding="utf-8")
    page = [" ".join(n.split()) for n in
            re.findall(r'<span class="caption-number">(Fig\. [\d.]+)\s*</span>', html)]
    if captions != page:
        problems.append(f"{download.name}: figures captioned {captions}, the page's {page}")
    assert problems == [], "\n".join(problems)
