"""The book build's cache guard (tools/build_book.py): what makes chapters execute again.

Unit tests, no browser and no book build: they run with ``make test``. (They live beside the
browser test's helpers because both test the book's build infrastructure, not the library.)
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_build_book():
    spec = importlib.util.spec_from_file_location("build_book", ROOT / "tools" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_book = load_build_book()


@pytest.fixture
def book(tmp_path: Path) -> Path:
    """A miniature repository: a library, pinned requirements and three pages."""
    (tmp_path / "nlicl_lib").mkdir()
    (tmp_path / "nlicl_lib" / "__init__.py").write_text("")
    (tmp_path / "nlicl_lib" / "tasks.py").write_text("DEGREE = 2\n")
    (tmp_path / "requirements.txt").write_text("numpy==2.4.6\n")
    pages = tmp_path / "book"
    pages.mkdir()
    (pages / "uses_lib.md").write_text("```{code-cell} ipython3\nimport nlicl_lib.tasks\n```\n")
    (pages / "uses_from.md").write_text("```{code-cell}\nfrom nlicl_lib.display import show\n```\n")
    (pages / "plain.md").write_text("# Mentions nlicl_lib in prose only\n")
    return tmp_path


def test_digest_follows_library_sources_and_requirements(book: Path) -> None:
    first = build_book.inputs_digest(book)
    assert build_book.inputs_digest(book) == first

    (book / "book" / "plain.md").write_text("# edited page\n")
    (book / "nlicl_lib" / "__pycache__").mkdir()
    (book / "nlicl_lib" / "__pycache__" / "tasks.cpython-311.pyc").write_bytes(b"\0")
    (book / "nlicl_lib" / "notes.txt").write_text("not code")
    assert build_book.inputs_digest(book) == first

    (book / "nlicl_lib" / "tasks.py").write_text("DEGREE = 3\n")
    second = build_book.inputs_digest(book)
    assert second != first

    (book / "requirements.txt").write_text("numpy==2.4.7\n")
    assert build_book.inputs_digest(book) != second


def test_pages_using_library_are_those_that_import_it(book: Path) -> None:
    pages = build_book.pages_using_library(book / "book")
    assert {page.name for page in pages} == {"uses_lib.md", "uses_from.md"}


def cache_execution(cache_path: Path, page: Path, code: str) -> None:
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    notebook.cells[0].outputs = [nbformat.v4.new_output("stream", text="ran\n")]
    get_cache(str(cache_path)).cache_notebook_bundle(
        CacheBundleIn(notebook, str(page)), check_validity=False
    )


def cached_uris(cache_path: Path) -> set[str]:
    from jupyter_cache import get_cache

    return {record.uri for record in get_cache(str(cache_path)).list_cache_records()}


def test_refresh_forgets_library_pages_only_when_inputs_change(book: Path) -> None:
    cache = build_book.cache_dir(book)
    doctrees = book / "_build" / ".doctrees"
    uses_lib, plain = book / "book" / "uses_lib.md", book / "book" / "plain.md"

    assert build_book.refresh_cache(book) == []  # first build: nothing cached yet
    cache_execution(cache, uses_lib, "import nlicl_lib.tasks")
    cache_execution(cache, plain, "print('no library')")
    doctrees.mkdir(parents=True)

    assert build_book.refresh_cache(book) is None  # nothing changed: keep everything
    assert cached_uris(cache) == {str(uses_lib), str(plain)}
    assert doctrees.exists()

    (book / "nlicl_lib" / "tasks.py").write_text("DEGREE = 3\n")
    assert build_book.refresh_cache(book) == [str(uses_lib)]
    assert cached_uris(cache) == {str(plain)}
    assert not doctrees.exists()  # so that Sphinx reads, and so executes, the pages again

    assert build_book.refresh_cache(book) is None
