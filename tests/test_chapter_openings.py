"""Every chapter opens with what the reader will be able to do after it (about three goals) and
its key idea in plain words, before the formal statements (issue 23)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
CHAPTERS = sorted(BOOK.glob("ch[0-9]_*.md"))


def _opening(path: Path) -> str:
    """The chapter's text from its title to its first code cell or section."""
    text = path.read_text(encoding="utf-8")
    start = re.search(r"^# .+$", text, re.M).end()
    end = re.search(r"^(```\{code-cell\}|## )", text[start:], re.M)
    return text[start: start + (end.start() if end else len(text))]


def test_there_are_five_chapters():
    assert len(CHAPTERS) == 5


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_goals_then_key_idea_open_the_chapter(path: Path):
    opening = _opening(path)
    goals = re.search(r":::\{admonition\} In this chapter\n:class: nlicl-goals\n(.*?)\n:::", opening, re.S)
    idea = re.search(r":::\{admonition\} Key idea\n:class: tip\n(.*?)\n:::", opening, re.S)
    assert goals and idea, f"{path.name}: no goals box or no key-idea box before the first cell"
    assert goals.start() < idea.start() < opening.index("{prf:ref}") if "{prf:ref}" in opening \
        else goals.start() < idea.start()
    items = re.findall(r"^- ", goals.group(1), re.M)
    assert 2 <= len(items) <= 5, f"{path.name}: {len(items)} goals"
    words = len(idea.group(1).split())
    assert 25 <= words <= 90, f"{path.name}: key idea of {words} words"
    assert "{prf:ref}" not in idea.group(1) and "$$" not in idea.group(1)  # plain words


@pytest.mark.built
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_built_key_idea_box_is_titled_key_idea(path: Path):
    """The box's title reads "Key idea" (a ``{tip}`` directive titles it "Tip" and runs the
    words "Key idea" into its text)."""
    import os

    from bs4 import BeautifulSoup

    html_dir = Path(os.environ.get("NLICL_HTML_DIR", BOOK.parent / "_build" / "html"))
    html = html_dir / "book" / f"{path.stem}.html"
    if not html.exists():
        pytest.skip("the book is not built: run `make book`")
    soup = BeautifulSoup(html.read_text(encoding="utf-8"), "html.parser")
    titles = [box.select_one("p.admonition-title").get_text(strip=True)
              for box in soup.select("div.admonition.tip")]
    assert titles == ["Key idea"], titles
    body = soup.select_one("div.admonition.tip").get_text(" ", strip=True)
    assert not body.removeprefix("Key idea").strip().startswith("Key idea")
