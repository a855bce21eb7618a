"""Tables of results that read as tables everywhere: HTML in the book and in notebooks, aligned
text in a terminal or a plain-text output.

A :class:`ResultTable` shown as a cell's value (or with ``IPython.display.display``) gives
Jupyter both forms: ``text/html`` (a real ``<table>``, wrapped in a box that scrolls sideways on a
phone with its first column kept in view, ``nlicl.css``) and ``text/plain`` (the aligned
columns ``str(table)`` prints). The reports of the library return one where the book shows a
table, so that a phone reader gets a table, not printed text cut at the screen's edge.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from nlicl_lib.core.errors import ConfigError


@dataclass(frozen=True)
class ResultTable:
    """``header``: the column names; ``rows``: one tuple of cell texts per row, as many cells as
    the header; ``caption``: one sentence saying what the table holds (HTML caption, and the
    first line of the text form); ``notes``: lines printed under the text form and shown under
    the HTML table."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        header = tuple(str(h) for h in self.header)
        rows = tuple(tuple(str(c) for c in row) for row in self.rows)
        bad = [row for row in rows if len(row) != len(header)]
        if bad:
            raise ConfigError("rows", bad[0], f"rows of {len(header)} cells, one per column "
                              f"({', '.join(header)})")
        object.__setattr__(self, "header", header)
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "notes", tuple(str(n) for n in self.notes))

    def __str__(self) -> str:
        widths = [max(len(cell) for cell in column) for column in zip(self.header, *self.rows, strict=True)]
        lines = [self.caption] if self.caption else []
        lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                  for row in (self.header, *self.rows)]
        lines += list(self.notes)
        return "\n".join(lines)

    __repr__ = __str__

    def splitlines(self) -> list[str]:
        """The text form's lines (as ``str(table).splitlines()``)."""
        return str(self).splitlines()

    def _repr_html_(self) -> str:
        head = "".join(f'<th scope="col">{escape(h)}</th>' for h in self.header)
        body = "".join(
            "<tr>" + f'<th scope="row">{escape(row[0])}</th>'
            + "".join(f"<td>{escape(cell)}</td>" for cell in row[1:]) + "</tr>"
            for row in self.rows)
        caption = f"<caption>{escape(self.caption)}</caption>" if self.caption else ""
        notes = "".join(f"<p>{escape(note)}</p>" for note in self.notes)
        label = escape(self.caption or "table", quote=True)
        return (f'<div class="nlicl-table-wrap" role="region" tabindex="0" aria-label="{label}">'
                f'<table class="nlicl-table">{caption}<thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table></div>"
                + (f'<div class="nlicl-table-notes">{notes}</div>' if notes else ""))
