"""Each page of the book imports from at most three library modules: the package's root (its
public API), the chapter's idea module in ``theory/`` and the chapter's page module in
``pages/``. A page that needs a fourth is reaching past its page module."""

from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "book").glob("*.md"))


def library_modules(page: Path) -> set[str]:
    found = set()
    for cell in jupytext.read(page, fmt="md:myst").cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nlicl_lib"):
                for alias in node.names:  # ``from nlicl_lib.pages import ch1`` names a module
                    full = f"{node.module}.{alias.name}"
                    is_module = (ROOT / (full.replace(".", "/") + ".py")).exists()
                    found.add(full if is_module else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("nlicl_lib")}
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_a_page_imports_from_at_most_three_library_modules(page):
    modules = library_modules(page)
    assert len(modules) <= 3, f"{page.name} imports from {sorted(modules)}"


def test_the_count_sees_a_module_imported_by_name():
    assert library_modules(ROOT / "book" / "ch1_lsa_is_gd.md") >= {"nlicl_lib.pages.ch1"}
