"""The book build's static files and HTML fixes: the vendored KaTeX, and the ARIA fixes of the
site extension (its other checks: tests/test_sphinxext_site.py).

Unit tests, no browser and no book build: they run with ``make test``. (They live beside the
browser test's helpers because both test the book's build infrastructure, not the library.)
"""

from __future__ import annotations

import re
from pathlib import Path

import nlicl_site as site
import sphinxcontrib.katex

ROOT = Path(__file__).resolve().parents[2]
VENDORED_KATEX = ROOT / "book" / "_static" / "vendor" / "katex"


def test_the_vendored_katex_stylesheet_and_fonts_match_the_script_sphinxcontrib_katex_ships(
        ) -> None:
    # the stylesheet states its version; every font it names has its WOFF2 beside it
    version = sphinxcontrib.katex.katex_version
    css = (VENDORED_KATEX / "katex.min.css").read_text(encoding="utf-8")
    assert f'content:"{version}"' in css, (
        f"book/_static/vendor/katex is not KaTeX {version}: `npm pack katex@{version}` and copy "
        "dist/katex.min.css and dist/fonts/*.woff2 (book/_static/vendor/README.md)")
    named = set(re.findall(r"url\((fonts/[\w-]+\.woff2)\)", css))
    assert named, "the stylesheet names no WOFF2 fonts"
    missing = sorted(name for name in named if not (VENDORED_KATEX / name).is_file())
    assert not missing, f"fonts the stylesheet names but the site lacks: {missing}"


def test_hidden_cell_toggles_are_named_by_their_text_and_the_bibliography_is_no_list():
    body = ('<details class="hide above-input"><summary aria-label="Toggle hidden content">'
            '<span class="collapsed">Show the solution</span></summary></details>'
            '<div role="list" class="citation-list"><div role="doc-biblioentry">A</div></div>')
    context = {"body": body}
    site.accessible_names(None, "page", "page.html", context, None)
    assert "aria-label" not in context["body"] and "<summary><span" in context["body"]
    assert '<div class="citation-list"><div role="doc-biblioentry">' in context["body"]
