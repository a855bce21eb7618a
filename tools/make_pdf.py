"""The whole book as one PDF, printed from the built site: ``make pdf`` (after ``make book``).

Jupyter Book's ``pdfhtml`` builder prints the site with a headless Chromium (through pyppeteer,
which downloads its own browser); this does the same with Debian's Chromium through Playwright,
which the browser test already uses, so the figures are plotly's own drawings, vector graphics
in the PDF, and the formulas KaTeX's. Every page of the table of contents is opened in the print
stylesheet (no sidebars, header or buttons; ``book/_static/nlicl.css`` wraps long code lines and
table cells) at the width of the paper's text (``PRINT_WIDTH_PX``, A4 less its margins), so
that plotly sizes every figure to the printed column; it is waited for until every figure is
drawn and every formula is typeset with its fonts loaded, printed to A4, and the pages are
joined in the book's order, with one bookmark per page. Fails (exit 1, nothing written) when a
page does not load, a figure does not draw, a formula is not typeset or a page is missing from
the site. ``tests/test_pdf.py`` opens the pages as :func:`open_for_print` does and checks that
no figure, table or code block is wider than the column.

    python tools/make_pdf.py [--site _build/html] [--out _build/html/nlicl-book.pdf]

Writes the PDF into the site (``nlicl-book.pdf`` at its root), where the introduction links to it.
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from playwright.sync_api import sync_playwright
from pypdf import PdfReader, PdfWriter

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
MARGINS_MM = {"top": 14, "bottom": 14, "left": 12, "right": 12}
A4_WIDTH_MM = 210
PRINT_WIDTH_PX = round((A4_WIDTH_MM - MARGINS_MM["left"] - MARGINS_MM["right"]) / 25.4 * 96)
"""The width of the text on the paper, in CSS pixels (96 per inch): the pages are laid out at it."""
RENDER_TIMEOUT_MS = 60_000
PDF_NAME = "nlicl-book.pdf"

FIGURES_DRAWN = """() => {
  const figures = Array.from(document.querySelectorAll('.nlicl-plotly'));
  return {figures: figures.length, drawn: figures.filter(f => f.querySelector('.main-svg')).length};
}"""

MATH_DONE = """() => document.fonts.ready.then(() =>
  Array.from(document.querySelectorAll('span.math, div.math')).every(m => m.querySelector('.katex')))"""
"""True once KaTeX (run by the page on ``DOMContentLoaded``) has typeset every formula and the
fonts it asked for have loaded."""

FIGURES_DONE = """() => Array.from(document.querySelectorAll('.nlicl-plotly'))
  .every(f => f.querySelector('.main-svg'))"""


def toc_pages(toc: Path = ROOT / "_toc.yml") -> list[str]:
    """The book's pages in reading order (root, then every chapter of every part), as paths
    relative to the site without ``.html``."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    pages = [data["root"]]
    for part in data.get("parts", []):
        pages += [chapter["file"] for chapter in part.get("chapters", [])]
    return pages


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base's name)
        pass


def serve(site: Path) -> tuple[ThreadingHTTPServer, str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def new_print_context(browser: object) -> object:
    """A browser context whose pages are laid out as the PDF prints them."""
    return browser.new_context(viewport={"width": PRINT_WIDTH_PX, "height": 1000},
                               color_scheme="light", service_workers="block")


def open_for_print(context: object, url: str, page_name: str) -> object:
    """The page ``page_name`` of the site at ``url``, in the print stylesheet from the start (so
    that plotly draws each figure at the width of the printed column), loaded, its formulas
    typeset and its figures drawn. Raises ``SystemExit`` naming what failed."""
    page = context.new_page()
    page.emulate_media(media="print")
    page.goto(f"{url}{page_name}.html", wait_until="load", timeout=RENDER_TIMEOUT_MS)
    page.wait_for_load_state("networkidle", timeout=RENDER_TIMEOUT_MS)
    try:
        page.wait_for_function(MATH_DONE, timeout=RENDER_TIMEOUT_MS)
    except Exception as error:  # playwright's TimeoutError
        raise SystemExit(f"make_pdf: {page_name}: a formula was not typeset") from error
    try:
        page.wait_for_function(FIGURES_DONE, timeout=RENDER_TIMEOUT_MS)
    except Exception as error:  # playwright's TimeoutError
        state = page.evaluate(FIGURES_DRAWN)
        raise SystemExit(f"make_pdf: {page_name}: {state['drawn']} of {state['figures']} "
                         "figures drawn") from error
    return page


def print_pages(site: Path, pages: list[str]) -> list[tuple[str, bytes, int]]:
    """Each page printed to PDF: ``(title, pdf bytes, figures drawn)``."""
    missing = [page for page in pages if not (site / f"{page}.html").exists()]
    if missing:
        raise SystemExit(f"make_pdf: pages missing from {site}: {missing} (run `make book`)")
    server, url = serve(site)
    printed = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM)
            context = new_print_context(browser)
            for page_name in pages:
                page = open_for_print(context, url, page_name)
                state = page.evaluate(FIGURES_DRAWN)
                title = page.title().split(" — ")[0].split(" | ")[0].strip()
                pdf = page.pdf(format="A4", print_background=True,
                               margin={side: f"{mm}mm" for side, mm in MARGINS_MM.items()})
                printed.append((title, pdf, state["figures"]))
                page.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return printed


def join(printed: list[tuple[str, bytes, int]], out: Path) -> int:
    """The printed pages in one PDF at ``out`` (written whole, then moved into place), one
    bookmark per page; returns its number of pages."""
    writer = PdfWriter()
    for title, pdf, _ in printed:
        start = len(writer.pages)
        writer.append(PdfReader(io.BytesIO(pdf)))
        writer.add_outline_item(title=title, page_number=start)
    writer.add_metadata({"/Title": "How Transformers learn nonlinear functions in context"})
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=out.parent, suffix=".pdf.tmp", delete=False) as tmp:
        writer.write(tmp)
    os.replace(tmp.name, out)
    return len(writer.pages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if not Path(CHROMIUM).exists():
        print(f"make_pdf: {CHROMIUM} is missing: `make chromium` installs it", file=sys.stderr)
        return 1
    out = args.out or args.site / PDF_NAME
    printed = print_pages(args.site, toc_pages())
    pages = join(printed, out)
    figures = sum(count for _, _, count in printed)
    size = out.stat().st_size / 1e6
    print(f"make_pdf: {out} ({pages} pages, {len(printed)} book pages, {figures} figures, "
          f"{size:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
