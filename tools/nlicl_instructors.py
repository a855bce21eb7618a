"""The instructors page's tables that come from the chapters' sources, not from their execution.

``{nlicl-run-times} goals`` and ``{nlicl-run-times} reading`` (the directive of
``tools/nlicl_live.py``, which hands these two arguments to :func:`source_nodes`) become, when the
page is read, every chapter's goals (its *In this chapter* box) and a table of its words of prose
and reading time, both computed by ``nlicl_lib.book.instructors`` from the chapters' MyST sources
and parsed as MyST (maths and ``{doc}`` links included). The page is re-read in every build
(``nlicl_live.always_reread``), so a chapter's new goals or text show at once.

They are arguments of ``nlicl-run-times`` rather than directives of their own so that the page
stays readable where the book's build does not run: ``tools/nlicl_plain.py`` (Binder, the
downloads) already replaces that directive by a pointer to the published page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList

#: The arguments of ``{nlicl-run-times}`` handled here.
SOURCE_TABLES = ("goals", "reading")


def source_markdown(which: str, book: Path) -> str:
    """The MyST text of a table, computed from the chapters in ``book``."""
    from nlicl_lib.book import instructors  # the page builds only with the library installed

    if which == "goals":
        return instructors.goals_markdown(book)
    if which == "reading":
        return instructors.reading_markdown(book)
    raise ValueError(f"not a source table: {which!r} (one of {SOURCE_TABLES})")


def source_nodes(directive: Any, which: str) -> list[nodes.Node]:
    """Parse the table's MyST inside ``directive`` (its page's folder holds the chapters)."""
    env = directive.state.document.settings.env
    book = Path(env.doc2path(env.docname)).parent
    text = source_markdown(which, book)
    container = nodes.container(classes=[f"nlicl-{which}"])
    directive.state.nested_parse(StringList(text.splitlines(), source=f"nlicl-run-times {which}"),
                                 directive.content_offset, container)
    return [container]
