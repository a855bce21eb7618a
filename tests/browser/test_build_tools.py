"""The book build's tools: the execution cache (tools/nlicl_exec.py), what makes chapters execute
again, and the vendored KaTeX (the Sphinx extension's checks: tests/test_sphinxext_site.py).

Unit tests, no browser and no book build: they run with ``make test``. (They live beside the
browser test's helpers because both test the book's build infrastructure, not the library.)
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import sphinxcontrib.katex

ROOT = Path(__file__).resolve().parents[2]
VENDORED_KATEX = ROOT / "book" / "_static" / "vendor" / "katex"


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nlicl_exec = load_tool("nlicl_exec")


@pytest.fixture
def book(tmp_path: Path) -> Path:
    """A miniature repository: a library, pinned requirements and three pages."""
    (tmp_path / "nlicl_lib").mkdir()
    (tmp_path / "nlicl_lib" / "__init__.py").write_text("")
    (tmp_path / "nlicl_lib" / "tasks.py").write_text("DEGREE = 2\n")
    (tmp_path / "requirements.txt").write_text("numpy==2.4.6\n")
    pages = tmp_path / "book"
    pages.mkdir()
    (pages / "uses_lib.md").write_text("```{code-cell} ipython3\nimport nlicl_lib.core.tasks\n```\n")
    (pages / "uses_from.md").write_text("```{code-cell}\nfrom nlicl_lib.book.display import show\n```\n")
    (pages / "plain.md").write_text("# Mentions nlicl_lib in prose only\n")
    return tmp_path


def test_digest_follows_library_files_and_pins(book: Path) -> None:
    first = nlicl_exec.inputs_digest(book)
    assert nlicl_exec.inputs_digest(book) == first

    (book / "book" / "plain.md").write_text("# edited page\n")  # a page has its own key
    (book / "nlicl_lib" / "__pycache__").mkdir()
    (book / "nlicl_lib" / "__pycache__" / "tasks.cpython-311.pyc").write_bytes(b"\0")
    assert nlicl_exec.inputs_digest(book) == first

    (book / "nlicl_lib" / "tasks.py").write_text("DEGREE = 3\n")
    second = nlicl_exec.inputs_digest(book)
    assert second != first
    (book / "nlicl_lib" / "data.json").write_text("{}")  # stored study data the pages read
    third = nlicl_exec.inputs_digest(book)
    assert third != second
    (book / "requirements.txt").write_text("numpy==2.4.7\n")
    assert nlicl_exec.inputs_digest(book) != third


def test_pages_read_with_another_library_are_read_and_executed_again(book: Path) -> None:
    env = SimpleNamespace(found_docs={"book/a", "book/b", "book/c"})
    app = SimpleNamespace(env=env)
    nlicl_exec._STATE["digest"] = "old"
    for docname in ("book/a", "book/b"):
        env.docname = docname
        nlicl_exec.record_digest(app, None)
    assert nlicl_exec.outdated_by_inputs(app, env, set(), set(), set()) == []
    nlicl_exec._STATE["digest"] = "new"  # nlicl_lib or the pins changed
    assert nlicl_exec.outdated_by_inputs(app, env, set(), set(), set()) == ["book/a", "book/b"]
    assert nlicl_exec.outdated_by_inputs(app, env, set(), {"book/a"}, set()) == ["book/b"]


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
