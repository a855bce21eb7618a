"""The book's PDF (``make pdf``, tools/make_pdf.py): printed from the built site, it holds every
page of the table of contents in order and every figure of the site, and the site links to it.
Laid out as the PDF prints it (the print stylesheet, at the width of the paper's text), no
page holds a figure, table, code block or display equation wider than the text column, nor
the toggle of a folded code cell (a button that does nothing on paper).

Needs the built site and its PDF: ``make book && make pdf`` (``make pdf`` runs this file; the
print layout's test needs Debian's chromium, which ``make pdf`` installs)."""

from __future__ import annotations

import os
import re
from html import unescape
from pathlib import Path

import pytest
from pypdf import PdfReader

from tools import make_pdf

pytestmark = pytest.mark.built

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = Path(os.environ.get("NLICL_HTML_DIR", ROOT / "_build" / "html"))  # the built site


PDF = HTML_DIR / make_pdf.PDF_NAME


@pytest.fixture(scope="module")
def reader() -> PdfReader:
    if not PDF.exists():
        pytest.fail(f"{PDF} is missing: run `make book` then `make pdf`")
    return PdfReader(PDF)


def _title(page: str) -> str:
    html = (HTML_DIR / f"{page}.html").read_text(encoding="utf-8")
    title = unescape(re.search(r"<title>(.*?)</title>", html, re.S).group(1))
    return title.split(" — ")[0].split(" | ")[0].strip()


def _figure_labels(page: str) -> list[str]:
    """The numbers of the page's figures ("Fig. 3.2"), from their captions in the site."""
    html = (HTML_DIR / f"{page}.html").read_text(encoding="utf-8")
    return [" ".join(unescape(label).split()) for label in
            re.findall(r'<span class="caption-number">\s*(Fig\.\s*[\d.]+)', html)]


def test_one_bookmark_per_page_in_the_books_order(reader: PdfReader) -> None:
    pages = make_pdf.toc_pages()
    titles = [item.title for item in reader.outline]
    assert titles == [_title(page) for page in pages]
    starts = [reader.get_destination_page_number(item) for item in reader.outline]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)  # each page its own
    assert len(reader.pages) > len(pages)


def test_every_figure_of_the_site_is_in_the_pdf(reader: PdfReader) -> None:
    text = " ".join(" ".join(page.extract_text().split()) for page in reader.pages)
    site = [(page, label) for page in make_pdf.toc_pages() for label in _figure_labels(page)]
    pages = [(HTML_DIR / f"{page}.html").read_text(encoding="utf-8") for page in make_pdf.toc_pages()]
    figures = sum(html.count('class="nlicl-plotly"') for html in pages)
    diagrams = sum(len(re.findall(r'<figure class="[^"]*\bnlicl-diagram\b', html)) for html in pages)
    assert diagrams >= 5 and figures >= 20, (diagrams, figures)
    assert len(site) == figures + diagrams, (figures, diagrams, len(site))  # every figure numbered
    missing = [f"{page}: {label}" for page, label in site
               if not re.search(re.escape(label) + r"(?!\d)", text)]
    assert not missing, f"figures of the site not in the PDF: {missing}"


PRINT_LAYOUT_JS = """() => {
  // what sticks out of the text column, laid out for print: figures, tables and code blocks,
  // and a block whose content is cut off inside it (it would scroll on a screen)
  const column = document.querySelector('article.bd-article');
  const box = column.getBoundingClientRect();
  const [left, right] = [box.left - 1, box.right + 1];
  const kinds = [['figure', '.nlicl-plotly .main-svg'], ['table', 'table'], ['code', 'pre'],
                 ['formula', 'div.math']];
  const wide = [];
  for (const [kind, selector] of kinds) {
    for (const element of column.querySelectorAll(selector)) {
      if (!element.getClientRects().length) continue;  // not printed (a folded code cell)
      const at = element.getBoundingClientRect();
      const cut = kind !== 'figure' && element.scrollWidth > element.clientWidth + 1;
      if (at.left < left || at.right > right || cut) {
        const line = (element.textContent || '').trim().split('\\n')[0].slice(0, 50);
        wide.push(`${kind} ${JSON.stringify(line)}: from x = ${Math.round(at.left)} to `
                  + `${Math.round(at.right)}, content ${element.scrollWidth} px in `
                  + `${element.clientWidth} px`);
      }
    }
  }
  const toggles = Array.from(column.querySelectorAll('details.hide > summary'))
    .filter((summary) => summary.getClientRects().length)
    .map((summary) => `the toggle ${JSON.stringify(summary.textContent.trim().slice(0, 40))}`);
  return {column: [Math.round(box.left), Math.round(box.right)], width: window.innerWidth,
          problems: wide.concat(toggles)};
}"""


def test_nothing_is_wider_than_the_printed_column() -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if not Path(make_pdf.CHROMIUM).exists():
        pytest.fail(f"{make_pdf.CHROMIUM} is missing: `make chromium` installs it")
    server, url = make_pdf.serve(HTML_DIR)
    problems = []
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=make_pdf.CHROMIUM)
            context = make_pdf.new_print_context(browser)
            for page_name in make_pdf.toc_pages():
                page = make_pdf.open_for_print(context, url, page_name)
                layout = page.evaluate(PRINT_LAYOUT_JS)
                assert layout["width"] == make_pdf.PRINT_WIDTH_PX
                if layout["column"][1] > layout["width"]:
                    problems.append(f"{page_name}: the column {layout['column']} is wider "
                                    f"than the paper's {layout['width']} px")
                problems += [f"{page_name}: {problem}" for problem in layout["problems"]]
                page.close()
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    assert not problems, (f"printed at {make_pdf.PRINT_WIDTH_PX} px, wider than the text "
                          "column or a dead button:\n" + "\n".join(problems))


def test_the_site_links_to_the_pdf() -> None:
    intro = (HTML_DIR / "book" / "intro.html").read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]*nlicl-book\.pdf)"', intro)
    assert links, "the introduction does not link to the PDF"
    assert all((HTML_DIR / "book" / link).resolve() == PDF.resolve() for link in links)
