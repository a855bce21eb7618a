"""Binder readers see the chapters' MyST as jupyterlab-myst renders it, with nothing left raw.

On Binder the book's MyST Markdown pages open as notebooks in JupyterLab (jupytext), and the
``jupyterlab-myst`` extension renders their markdown cells. It is not Sphinx: it knows only the
roles and directives of mystmd (plus proof, exercise, card, grid and tabs), parses each cell on
its own, resolves references only inside the open notebook and has no bibliography. A construct
it does not know is shown as raw text (a role: its content, e.g. a glue key) or as a red
"Unknown Directive" box, a reference it cannot resolve or a citation as a bare label with a
warning icon, and a gated exercise split over cells as empty "Start of"/"End of" boxes.

``tests/myst_render/render.mjs`` runs jupyterlab-myst 2.7.0's own parse pipeline (the npm
packages at the versions its lockfile pins) on every markdown cell of a notebook and reports
what a reader would see; this test fails, naming page, cell and text, on

* an unknown role or directive, a role or directive error, a parser or transform message;
* a cross-reference or ``[](#label)`` link that does not resolve inside the notebook, a citation;
* an exercise or solution gate (``exercise-start`` ... ``exercise-end``) not closed in its cell;
* a maths error (KaTeX), an inline ``{eval}`` expression whose stored result is an error;
* a local link to a file that does not exist (``{doc}`` makes links without ``.md``);
* MyST syntax left in the rendered text (``{glue``, ``{prf:ref}``, ``{cite``, a fence ...).

An ``{eval}`` without a stored result is fine: JupyterLab shows the expression until the reader
runs the markdown cell (jupyterlab-myst then evaluates it in the kernel).

Needs node (skipped without it) and ``npm ci --prefix tests/myst_render``. To check other
notebooks, e.g. the build's downloads or Colab copies::

    .venv/bin/python tests/test_myst_render.py _build/html/_sources/book/*.ipynb
    .venv/bin/python tests/test_myst_render.py --source _build/html/_colab/*.ipynb

(``--source`` also fails on any MyST role or directive left in the markdown: Colab renders plain
Markdown, so there even an ``{eval}`` shows raw.) ``make notebook-test`` runs the same checks on
the built notebooks (``test_built_notebooks_render_in_jupyterlab_myst``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import binder_pages  # noqa: E402 (tools/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
BOOK_DIR = ROOT / "book"
RENDER_DIR = ROOT / "tests" / "myst_render"
RENDER_SCRIPT = RENDER_DIR / "render.mjs"
NODE_MODULES = RENDER_DIR / "node_modules"
INSTALL_COMMAND = "npm ci --prefix tests/myst_render"

# Every MyST page: with jupytext as JupyterLab's default viewer, any of them opens as a notebook.
PAGES = sorted(BOOK_DIR.glob("*.md"))

# The build's notebooks, when `make book` has run: the downloads and the Colab copies.
BUILT_NOTEBOOKS = ROOT / "_build" / "html"

# MyST syntax that must not survive into what the reader sees.
LEFTOVERS = {
    "glue role": re.compile(r"\{glue(:\w+)?\}"),
    "prf role": re.compile(r"\{prf:\w+\}"),
    "citation role": re.compile(r"\{cite(:\w+)?\}"),
    "eval role not parsed": re.compile(r"\{eval\}"),
    "role": re.compile(r"\{[A-Za-z][\w:+-]*\}`"),
    "directive fence": re.compile(r"(`{3,}|~{3,}|:{3,})\s*\{[A-Za-z][\w:+-]*\}"),
    "exercise directive": re.compile(r"\{(exercise|solution)(-start|-end)?\}"),
    "label target": re.compile(r"^\([\w:.-]+\)=\s*$", re.MULTILINE),
}

# Parser messages that a problem of the same cell already reports.
COVERED_CELL_MESSAGES = re.compile(
    r"unknown (role|directive)|Gated node is not closed|Usage of the \{doc\} role"
)
# Notebook-level messages that a cell-level problem already reports (with its cell index).
COVERED_MESSAGES = re.compile(
    r"Cross reference target was not found|No target for internal reference|"
    r"Undefined control sequence|KaTeX|ParseError"
)


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the jupyterlab-myst render check needs node >= 18")
    if not NODE_MODULES.is_dir():
        pytest.fail(f"{NODE_MODULES.relative_to(ROOT)} is missing: run `{INSTALL_COMMAND}` "
                    "(`make test` does it)", pytrace=False)
    return node


def notebook_cells(path: Path) -> list[dict]:
    """The cells of a notebook (``.ipynb``) or of a jupytext text notebook (``.md``)."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    else:  # a page as Binder serves it: after binder/postBuild's tools/binder_pages.py
        import jupytext

        notebook = jupytext.read(path)
        if path.parent == BOOK_DIR:
            binder_pages.binder_notebook(notebook, f"book/{path.stem}")
        cells = notebook["cells"]
    return [{"cell_type": c["cell_type"], "source": c["source"], "metadata": dict(c.get("metadata", {}))}
            for c in cells]


def render(paths: list[Path], node: str = "node") -> dict[Path, dict]:
    """What jupyterlab-myst makes of each notebook's markdown cells (see render.mjs)."""
    request = {"notebooks": [{"path": str(p), "cells": notebook_cells(p)} for p in paths]}
    done = subprocess.run([node, str(RENDER_SCRIPT)], input=json.dumps(request), capture_output=True,
                          text=True, cwd=RENDER_DIR, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{RENDER_SCRIPT.name} failed ({done.returncode}):\n{done.stderr}")
    return {Path(nb["path"]): nb for nb in json.loads(done.stdout)["notebooks"]}


def _local_target(url: str) -> str | None:
    """The file a relative link points to, or None for URLs JupyterLab does not open as files."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", url) and not re.match(r"^project:", url):
        return None  # http:, https:, mailto:, doi: ... (a `project:` link is broken in JupyterLab)
    if url.startswith("#"):
        return None  # reported as an unresolved reference by render.mjs when it is one
    return url.split("#", 1)[0].split("?", 1)[0]


def problems(path: Path, rendered: dict) -> list[str]:
    """One line per thing a reader would see wrong: '<page> cell <i>: <kind>: <text>'."""
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found = []
    for cell in rendered["cells"]:
        where = f"{name} cell {cell['index']}"
        for problem in cell["problems"]:
            if problem["kind"] == "inline expression not evaluated":
                continue  # shown as code until the reader runs the cell; jupyterlab-myst evaluates it
            found.append(f"{where}: {problem['kind']}: {problem['text']}")
        for message in cell["messages"]:
            if COVERED_CELL_MESSAGES.search(message):
                continue
            found.append(f"{where}: parser: {message}")
        for url in cell["links"]:
            target = _local_target(url)
            if target == "" or (target is not None and not (path.parent / target).exists()):
                found.append(f"{where}: broken link (no such file next to the page): {url}")
        for kind, pattern in LEFTOVERS.items():
            for match in pattern.finditer(cell["text"]):
                line = cell["text"][:match.start()].count("\n")
                text = cell["text"].splitlines()[line] if cell["text"] else ""
                found.append(f"{where}: raw MyST ({kind}) in the rendered text: {text.strip()[:160]}")
    for message in rendered["messages"]:
        if not COVERED_MESSAGES.search(message):
            found.append(f"{name}: notebook: {message}")
    return found


# Any MyST role or directive in a markdown cell's source: what a plain Markdown renderer (Colab,
# GitHub, JupyterLab without jupyterlab-myst) shows raw.
SOURCE_SYNTAX = re.compile(r"\{[A-Za-z][\w:+-]*\}`|^\s*(`{3,}|~{3,}|:{3,})\s*\{[A-Za-z][\w:+-]*\}", re.MULTILINE)


def raw_myst(path: Path) -> list[str]:
    """MyST syntax in the markdown sources of a notebook meant for plain-Markdown readers (Colab)."""
    path = Path(path).resolve()
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found = []
    for index, cell in enumerate(notebook_cells(path)):
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for match in SOURCE_SYNTAX.finditer(source):
            line = source[source.rfind("\n", 0, match.start()) + 1:].split("\n", 1)[0]
            found.append(f"{name} cell {index}: MyST syntax a plain Markdown renderer shows raw: "
                         f"{match.group(0).strip()} in: {line.strip()[:160]}")
    return found


def check(paths: list[Path], node: str = "node") -> list[str]:
    """The problems of several notebooks (.ipynb) or text notebooks (.md), rendered in one run."""
    paths = [Path(p).resolve() for p in paths]
    rendered = render(paths, node)
    return [line for p in paths for line in problems(p, rendered[p])]


@pytest.fixture(scope="module")
def rendered_pages() -> dict[Path, dict]:
    return render(PAGES, node_or_skip())


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_page_renders_in_jupyterlab_myst(page, rendered_pages):
    found = problems(page, rendered_pages[page])
    assert not found, f"{len(found)} problem(s) for Binder readers:\n" + "\n".join(found)


def test_the_renderer_reports_what_jupyterlab_myst_cannot_render(tmp_path):
    node = node_or_skip()
    bad = (
        "Loss {glue:text}`loss:.3f`, see {prf:ref}`thm-elsewhere` {cite:p}`someone2024`.\n\n"
        "```{nlicl-run-times} chapters\n```\n\n"
        "Read {doc}`ch2_attention_alone`. $\\notamacro$\n\n"
        "````{exercise-start} Title\n:label: ex-9-9\n````\n\nDo this."
    )
    good = (
        ":::{prf:theorem} A result\n:label: thm-here\nIt holds.\n:::\n\n"
        "By {prf:ref}`thm-here` and [the proof](#thm-here), the loss is {eval}`f\"{loss:.3f}\"`.\n\n"
        ":::{note}\nA note with $x^2$.\n:::\n\n"
        "::::{exercise} Try it\n:label: ex-9-8\nDo this.\n::::\n\n"
        "::::{solution} ex-9-8\n:class: dropdown\nLike this.\n::::\n\n"
        "See [the theory](theorems.md)."
    )
    notebook = tmp_path / "book" / "probe.ipynb"
    notebook.parent.mkdir()
    (notebook.parent / "theorems.md").write_text("# Theory\n")
    cells = [{"cell_type": "markdown", "source": s, "metadata": {}} for s in (bad, good)]
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    found = check([notebook], node)
    bad_cell = "\n".join(line for line in found if " cell 0: " in line)
    for expected in ("unknown role: {glue:text}`loss:.3f`", "unresolved reference: thm-elsewhere",
                     "citation not found: someone2024", "unknown directive: {nlicl-run-times}",
                     "broken link (no such file next to the page): ch2_attention_alone",
                     "math error", "unjoined gate: exercise gate=start"):
        assert expected in bad_cell, f"{expected!r} not reported in:\n{bad_cell}"
    assert [line for line in found if " cell 1: " in line] == []


@pytest.mark.built
def test_built_notebooks_render_in_jupyterlab_myst():
    """The executed notebooks the site offers for download, and their Colab copies."""
    node = node_or_skip()
    notebooks = sorted((BUILT_NOTEBOOKS / "_sources" / "book").glob("*.ipynb"))
    colab = sorted((BUILT_NOTEBOOKS / "_colab").rglob("*.ipynb"))
    if not notebooks + colab:
        pytest.skip("no built notebooks: run `make book` first")
    found = check(notebooks + colab, node)
    # Colab renders plain Markdown: its copies must hold no MyST syntax at all ({eval} included)
    found += [line for path in colab for line in raw_myst(path)]
    assert not found, f"{len(found)} problem(s) in the built notebooks:\n" + "\n".join(found)


def main(argv: list[str]) -> int:
    """``python tests/test_myst_render.py [--source] NOTEBOOK...``: print the problems, exit 1 if any.

    ``--source`` also reports any MyST syntax left in the markdown sources (for Colab copies).
    """
    source = "--source" in argv
    argv = [a for a in argv if a != "--source"]
    if not argv:
        print(__doc__)
        return 2
    if not NODE_MODULES.is_dir():
        print(f"{NODE_MODULES} is missing: run `{INSTALL_COMMAND}`", file=sys.stderr)
        return 2
    found = check([Path(a) for a in argv])
    if source:
        found += [line for a in argv for line in raw_myst(Path(a))]
    print("\n".join(found) if found else f"{len(argv)} notebook(s): nothing a reader would see raw")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
