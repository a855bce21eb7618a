"""The counter of numbers in prose (tools/prose_numbers.py, issue 34): what it counts on small
pages written here, and, on the built book, that the chapters keep to the limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import prose_numbers as pn

HTML = Path(__file__).resolve().parents[1] / "_build" / "html"


def _page(body: str) -> str:
    return f'<html><body><article class="bd-article">{body}</article></body></html>'


def _numbers(body: str) -> list[tuple[str, ...]]:
    return [p.numbers for p in pn.prose_paragraphs(_page(body))]


def test_measured_numbers_count_and_labels_do_not():
    text = ("<p>At depth four the stack reaches 0.0724 of the zero predictor's loss, 3.1% above "
            "its reference, as Fig. 3.4 and Proposition 12 and chapter 2 show.</p>")
    assert _numbers(text) == [("0.0724", "3.1%")]


def test_label_runs_are_labels_but_a_list_of_settings_is_not():
    assert _numbers("<p>The curves of Figs. 3.4 and 3.5 fall at every one of the depths.</p>") == [()]
    assert _numbers("<p>The trained stacks reach it at depths 1, 2 and 3 of the eight.</p>") == [
        ("1", "2", "3")]


def test_maths_code_tables_captions_solutions_and_links_are_not_prose():
    body = ('<p>The loss <span class="math">\\(L = 0.5\\)</span> is small on every one of the '
            'prompts <code>n=20</code>, see <a class="reference internal" href="#x">Fig. 9</a>.</p>'
            "<table><tr><td><p>0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8</p></td></tr></table>"
            "<figure><figcaption><p>Fig. 1.1 the loss falls to 0.1 0.2 0.3 0.4 0.5 in the end</p>"
            "</figcaption></figure>"
            '<details class="solution"><p>Solution: the value is 1.2963 after 1 2 3 4 steps.</p>'
            "</details>")
    assert _numbers(body) == [()]


def test_short_paragraphs_are_not_counted():
    assert _numbers("<p>Loss 0.5 at 2.</p>") == []


def test_cell_output_markdown_counts():
    body = ('<div class="cell_output"><p>The trained layer ends at 0.206 after 600 steps of '
            "training.</p></div>")
    assert _numbers(body) == [("0.206", "600")]


def test_violations_name_the_paragraph_the_median_and_chapter_five_total():
    crowded = pn.Paragraph("a " * 20, tuple("1234"))
    plain = pn.Paragraph("a " * 20, ())
    assert pn.violations([pn.ChapterCount("ch1_x", (crowded, plain, plain))]) == [
        f"ch1_x: 4 numbers (at most 3) in: {crowded.text[:100]}..."]
    two = pn.Paragraph("a " * 20, ("1", "2"))
    assert any("median 2" in v for v in pn.violations([pn.ChapterCount("ch2_x", (two, two))]))
    many = tuple(pn.Paragraph("a " * 20, ("1",)) for _ in range(pn.MAX_CH5_TOTAL))
    assert pn.violations([pn.ChapterCount("ch4_x", many)]) == []
    assert pn.violations([pn.ChapterCount("ch5_x", many)]) == [
        f"ch5_x: {pn.MAX_CH5_TOTAL} numbers in all (under {pn.MAX_CH5_TOTAL})"]


def test_a_missing_build_is_named():
    with pytest.raises(FileNotFoundError, match="html_dir="):
        pn.count_chapters(Path("/nonexistent"))


@pytest.mark.built
def test_the_built_chapters_keep_to_the_limits():
    if not any((HTML / "book").glob(pn.CHAPTER_GLOB)):
        pytest.skip("the book is not built: run `make book`")
    counts = pn.count_chapters(HTML)
    assert len(counts) == 5
    assert pn.violations(counts) == []
