"""The book's PDF (``make pdf``, tools/make_pdf.py): printed from the built site, it holds every
page of the table of contents in order and every figure of the site, and the site links to it.

Needs the built site and its PDF: ``make book && make pdf`` (``make pdf`` runs this file)."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest
from notebook_envs import load_tool
from pypdf import PdfReader

pytestmark = pytest.mark.built

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "_build" / "html"


make_pdf = load_tool("make_pdf")
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
    figures = sum((HTML_DIR / f"{page}.html").read_text(encoding="utf-8")
                  .count('class="nlicl-plotly"') for page in make_pdf.toc_pages())
    assert figures >= 20 and len(site) == figures, (figures, len(site))  # every figure numbered
    missing = [f"{page}: {label}" for page, label in site
               if not re.search(re.escape(label) + r"(?!\d)", text)]
    assert not missing, f"figures of the site not in the PDF: {missing}"


def test_the_site_links_to_the_pdf() -> None:
    intro = (HTML_DIR / "book" / "intro.html").read_text(encoding="utf-8")
    links = re.findall(r'href="([^"]*nlicl-book\.pdf)"', intro)
    assert links, "the introduction does not link to the PDF"
    assert all((HTML_DIR / "book" / link).resolve() == PDF.resolve() for link in links)
