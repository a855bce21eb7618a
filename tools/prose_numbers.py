"""Count the numbers quoted in the built chapters' prose, paragraph by paragraph.

Prose is every paragraph of eight words or more on a chapter page (the chapter's text, its
boxes, its exercises, and the Markdown its cells print), with its mathematics, code and
cross-references removed; tables, figure captions and the collapsed solutions are not prose
(tables and figures carry the numbers; a solution is worked, not read). A number is a run of
digits (``0.0724``, ``1,200``, ``32``, ``3.1%``) that is not a label: the numbers of figures,
tables, chapters, sections, exercises and statements (``Fig. 3.4``, ``chapter 2``,
``Proposition 12``) are names, not measurements.

    python tools/prose_numbers.py _build/html            # a table per chapter
    python tools/prose_numbers.py _build/html --worst 5  # and each chapter's five worst paragraphs
    python tools/prose_numbers.py _build/html --check    # exit 1 unless the limits below hold

Limits (issue 34): no paragraph above ``MAX_PER_PARAGRAPH``, a median of at most
``MAX_MEDIAN`` in every chapter, chapter 5 under ``MAX_CH5_TOTAL`` in all.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from bs4 import BeautifulSoup

MAX_PER_PARAGRAPH = 3
MAX_MEDIAN = 1
MAX_CH5_TOTAL = 40
MIN_WORDS = 8

CHAPTER_GLOB = "ch[0-9]*.html"
# Everything inside these is not prose: code, maths, tables, captions, solutions, widgets.
NOT_PROSE = (
    "pre, code, table, figcaption, .caption, .math, .MathJax, mjx-container, script, style,"
    " .cell_input, .solution, .above-input, .nlicl-static-panel, .widget-subarea,"
    " .nlicl-sr-only"  # a figure's text description for screen readers: the figure's data
)
# Cross-references and citations: their numbers are names.
REFERENCES = "a.reference, a.footnote-reference, span.cite, a[href^='#']"
NUMBER = re.compile(r"(?<![\w.])\d(?:[\d,]*\d)?(?:\.\d+)?%?(?![\w])")
# A number right after one of these words names something (Fig. 3.4, chapter 2, item 5), and so
# does each number of a run that one of them starts (Figs. 3.4 and 3.5; chapters 2, 3 and 4).
LABEL_WORD = (r"(?:fig(?:ure)?s?\.?|tables?|chapters?|ch\.|sections?|§|exercises?|propositions?|"
              r"theorems?|lemmas?|corollar(?:y|ies)|definitions?|items?|parts?|eq(?:uation)?s?\.?|"
              r"issues?)")
LABEL = re.compile(LABEL_WORD + r"\s*(?:[\d.]+\s*(?:,|and|or|to|-|–)\s*)*$", re.IGNORECASE)


@dataclass(frozen=True)
class Paragraph:
    text: str
    numbers: tuple[str, ...]

    @property
    def words(self) -> int:
        return len(self.text.split())


def _is_label(text: str, start: int) -> bool:
    """True when the number at ``start`` is a label or continues a run of labels."""
    return bool(LABEL.search(text[max(0, start - 60):start]))


def prose_paragraphs(html: str) -> list[Paragraph]:
    """The prose paragraphs of one built page, each with the numbers it quotes."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article.bd-article") or soup
    for node in article.select(NOT_PROSE):
        node.decompose()
    for node in article.select(REFERENCES):
        node.replace_with(" REF ")
    paragraphs = []
    for p in article.find_all("p"):
        text = " ".join(p.get_text(" ").split())
        # MathJax sources left as text (\( ... \), $...$) are maths, not prose.
        text = re.sub(r"\\\(.*?\\\)|\\\[.*?\\\]|\$\$.*?\$\$|\$[^$]*\$", " MATH ", text)
        if len(text.split()) < MIN_WORDS:
            continue
        numbers = tuple(m.group(0) for m in NUMBER.finditer(text)
                        if not _is_label(text, m.start()))
        paragraphs.append(Paragraph(text, numbers))
    return paragraphs


@dataclass(frozen=True)
class ChapterCount:
    page: str
    paragraphs: tuple[Paragraph, ...]

    @property
    def total(self) -> int:
        return sum(len(p.numbers) for p in self.paragraphs)

    @property
    def most(self) -> int:
        return max((len(p.numbers) for p in self.paragraphs), default=0)

    @property
    def median(self) -> float:
        return statistics.median([len(p.numbers) for p in self.paragraphs] or [0])

    @property
    def words(self) -> int:
        return sum(p.words for p in self.paragraphs)

    @property
    def long_paragraphs(self) -> int:
        return sum(p.words > 150 for p in self.paragraphs)


def count_chapters(html_dir: Path) -> list[ChapterCount]:
    pages = sorted((html_dir / "book").glob(CHAPTER_GLOB)) or sorted(html_dir.glob(CHAPTER_GLOB))
    if not pages:
        raise FileNotFoundError(f"html_dir={str(html_dir)!r} holds no built chapter "
                                f"({CHAPTER_GLOB}, directly or under book/): run `make book` first")
    return [ChapterCount(page.stem, tuple(prose_paragraphs(page.read_text(encoding="utf-8"))))
            for page in pages]


def violations(counts: list[ChapterCount]) -> list[str]:
    """Every way the built chapters break the limits, one line each (empty when they hold)."""
    found = []
    for chapter in counts:
        for p in chapter.paragraphs:
            if len(p.numbers) > MAX_PER_PARAGRAPH:
                found.append(f"{chapter.page}: {len(p.numbers)} numbers (at most "
                             f"{MAX_PER_PARAGRAPH}) in: {p.text[:100]}...")
        if chapter.median > MAX_MEDIAN:
            found.append(f"{chapter.page}: median {chapter.median} numbers a paragraph "
                         f"(at most {MAX_MEDIAN})")
        if chapter.page.startswith("ch5") and chapter.total >= MAX_CH5_TOTAL:
            found.append(f"{chapter.page}: {chapter.total} numbers in all (under {MAX_CH5_TOTAL})")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=Path, nargs="?", default=Path("_build/html"))
    parser.add_argument("--worst", type=int, default=0, help="show each chapter's N worst paragraphs")
    parser.add_argument("--check", action="store_true", help="exit 1 unless the limits hold")
    args = parser.parse_args(argv)
    counts = count_chapters(args.html_dir)
    print("| chapter | numbers | paragraphs | a paragraph (mean) | median | most | words | over 150 words |")
    print("|---|---|---|---|---|---|---|---|")
    for c in counts:
        n = len(c.paragraphs)
        print(f"| {c.page} | {c.total} | {n} | {c.total / max(n, 1):.1f} | {c.median:g} | {c.most} "
              f"| {c.words} | {c.long_paragraphs} |")
    for c in counts:
        for p in sorted(c.paragraphs, key=lambda p: -len(p.numbers))[:args.worst]:
            print(f"\n{c.page} ({len(p.numbers)}: {', '.join(p.numbers)}): {p.text}")
    if args.check:
        found = violations(counts)
        for line in found:
            print("LIMIT:", line, file=sys.stderr)
        return 1 if found else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
