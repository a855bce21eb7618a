"""Make the book's MyST pages read right in JupyterLab on Binder (``binder/postBuild`` runs it).

Binder opens ``book/<chapter>.md`` in JupyterLab (jupytext), where ``jupyterlab-myst`` renders
each notebook's MyST on its own: it evaluates ``{eval}`` when a cell runs and draws
admonitions, proofs and maths, but it cannot resolve what lives in another file or in the
book's build: a ``{prf:ref}`` to the Theory page, a citation of the bibliography, a ``{doc}``
link, and the exercise gates that span several cells. In Binder's copy of the repository (and
only there: the image is built from a fresh clone) this script rewrites those in every page's
markdown cells, with :func:`nlicl_plain.plain_markdown` in its Binder mode, and leaves the code
cells and everything else as they are.

It needs the standard library, jupytext and ``nlicl_lib.core.book_refs`` (the Theory part's
numbering), all of which Binder's environment has. ``--check`` rewrites nothing and prints
what would not resolve.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nlicl_plain  # noqa: E402 (tools/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
HEADING = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)
CHAPTER = re.compile(r"^ch(\d+)_")
EXERCISE = re.compile(r"\{exercise-start\}[^\n]*\n:label:\s*(\S+)")


def page_titles(book: Path = BOOK) -> dict[str, str]:
    """docname (``book/ch1_lsa_is_gd``) -> the page's first ``#`` heading."""
    titles = {}
    for path in sorted(book.glob("*.md")):
        found = HEADING.search(path.read_text(encoding="utf-8"))
        if found:
            titles[f"book/{path.stem}"] = found.group(1)
    return titles


def exercise_numbers(book: Path = BOOK) -> dict[str, str]:
    """exercise label -> "chapter.k" (the k-th exercise of chapter N's page), as the site
    numbers them."""
    numbers = {}
    for path in sorted(book.glob("ch*.md")):
        chapter = CHAPTER.match(path.name)
        if not chapter:
            continue
        for k, label in enumerate(EXERCISE.findall(path.read_text(encoding="utf-8")), start=1):
            numbers[label] = f"{int(chapter.group(1))}.{k}"
    return numbers


FIGURE_NAME = re.compile(r"^```\{code-cell\}[^\n]*\n---\n(?:(?!^---$).*\n)*?"
                         r"mystnb:\n(?:(?!^---$).*\n)*?\s+name:\s*(\S+)\s*\n", re.MULTILINE)
"""The ``mystnb.figure.name`` in a code cell's front matter (MyST-NB's numbered figure)."""

TOC_FILE = re.compile(r"^\s*-?\s*(?:file|root):\s*book/(\S+)", re.MULTILINE)


def figure_names(text: str) -> list[str]:
    """The figure names (``mystnb: figure: name:``) of one MyST page, in page order."""
    return FIGURE_NAME.findall(text)


def figure_numbers(book: Path = BOOK) -> dict[str, str]:
    """figure name -> "Fig. chapter.k" (the k-th captioned figure of chapter N's page), as the
    site numbers them (``numfig``, one section level); the figures of unnumbered pages (the
    results page) share one counter, "Fig. 1", "Fig. 2", ..., in the table of contents' order."""
    numbers = {}
    toc = book.parent / "_toc.yml"
    order = TOC_FILE.findall(toc.read_text(encoding="utf-8")) if toc.exists() else []
    pages = [book / f"{name}.md" for name in order if (book / f"{name}.md").exists()]
    pages += [path for path in sorted(book.glob("*.md")) if path not in pages]
    unnumbered = 0
    for path in pages:
        chapter = CHAPTER.match(path.name)
        for k, name in enumerate(figure_names(path.read_text(encoding="utf-8")), start=1):
            if chapter:
                numbers[name] = f"Fig. {int(chapter.group(1))}.{k}"
            else:
                unnumbered += 1
                numbers[name] = f"Fig. {unnumbered}"
    return numbers


def resolver(docname: str, book: Path = BOOK) -> nlicl_plain.Resolver:
    from nlicl_lib.core.book_refs import RESULTS

    return nlicl_plain.Resolver(
        results=dict(RESULTS),
        citations=nlicl_plain.citations((book / "references.bib").read_text(encoding="utf-8")),
        titles=page_titles(book), labels=figure_numbers(book), exercises=exercise_numbers(book),
        docname=docname, for_binder=True)


def binder_notebook(notebook: object, docname: str, book: Path = BOOK) -> list[str]:
    """Rewrite ``notebook``'s markdown cells for jupyterlab-myst; return the problems."""
    r = resolver(docname, book)
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = nlicl_plain.plain_markdown(cell.source, [], r)
    return r.problems


def main(argv: list[str]) -> int:
    import jupytext

    check = "--check" in argv
    problems = []
    for path in sorted(BOOK.glob("*.md")):
        notebook = jupytext.read(path)  # every page opens as a notebook (jupytext's viewer)
        found = binder_notebook(notebook, f"book/{path.stem}")
        problems += [f"{path.name}: {p}" for p in found]
        if not check:
            jupytext.write(notebook, path, fmt="md:myst")
    for problem in problems:
        print(f"binder_pages: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
