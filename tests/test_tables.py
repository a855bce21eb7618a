"""Tables of results (nlicl_lib.core.tables): HTML for the book, aligned text for a terminal."""

from __future__ import annotations

import pytest

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.tables import ResultTable


def test_text_and_html_hold_the_same_cells():
    table = ResultTable(("run", "loss"), (("a <1>", "0.5"), ("b", "0.25")), caption="Losses",
                        notes=("normalised",))
    text = str(table).splitlines()
    assert text == ["Losses", "run    loss", "a <1>  0.5", "b      0.25", "normalised"]
    assert table.splitlines() == text and repr(table) == str(table)
    html = table._repr_html_()
    assert '<th scope="row">a &lt;1&gt;</th><td>0.5</td>' in html  # escaped, key column a header
    assert html.count("<tr>") == 3 and "<caption>Losses</caption>" in html
    assert 'class="nlicl-table-wrap" role="region" tabindex="0" aria-label="Losses"' in html


def test_a_row_of_the_wrong_length_is_named():
    with pytest.raises(ConfigError, match="rows"):
        ResultTable(("a", "b"), (("1",),))
