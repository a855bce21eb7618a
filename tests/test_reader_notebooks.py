"""The reader notebooks' closed solutions (book/_ext/nlicl_notebooks.py), without a build: a
solution's text under its heading goes into a closed <details> block that Markdown renders."""

from __future__ import annotations

import pytest
from nlicl_notebooks import collapsed_markdown


def test_text_under_the_heading_goes_into_a_closed_details_block() -> None:
    source = '## <a id="s-1"></a>Solution to [Exercise 1.1](#ex-1-1)\n\nThe odd $a$.\n\nMore.\n'
    assert collapsed_markdown(source, "Show the solution") == (
        '## <a id="s-1"></a>Solution to [Exercise 1.1](#ex-1-1)\n\n'
        "<details>\n<summary>Show the solution</summary>\n\nThe odd $a$.\n\nMore.\n\n</details>")


def test_text_without_a_heading_is_all_in_the_block() -> None:
    assert collapsed_markdown("Text only.", "More") == (
        "<details>\n<summary>More</summary>\n\nText only.\n\n</details>")


@pytest.mark.parametrize("source", ["## Heading only", "## Two\n### headings\n", "",
                                    "<details>\n<summary>S</summary>\n\nx\n\n</details>"])
def test_nothing_to_close_or_closed_already_is_left_alone(source: str) -> None:
    assert collapsed_markdown(source, "Show the solution") == source
