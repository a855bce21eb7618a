"""nlicl_lib.pages.display.glue: the pages' numbers, recorded as MyST-NB's glue records, and the
Makefile rule that clears the execution cache when what the pages import changes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from myst_nb.core.variables import format_plain_text
from myst_nb.ext.glue import extract_glue_data_cell

from nlicl_lib.pages import display

ROOT = Path(__file__).resolve().parents[1]


def glued_cell(monkeypatch: pytest.MonkeyPatch, **values) -> nbformat.NotebookNode:
    """A code cell whose outputs are what ``glue(name, value)`` publishes for each value."""
    outputs = []

    def publish(data, metadata=None):
        outputs.append(nbformat.v4.new_output("display_data", data=data, metadata=metadata))

    monkeypatch.setattr(display, "publish_display_data", publish)
    for name, value in values.items():
        display.glue(name, value)
    return nbformat.v4.new_code_cell("", outputs=outputs)


@pytest.mark.parametrize(("value", "spec", "text"), [
    (0.123456, ".4f", "0.1235"),
    (np.float32(0.5), ".2f", "0.50"),          # numpy scalars become Python numbers
    (np.float64(3e-16), ".1g", "3e-16"),
    (torch.tensor(0.25, dtype=torch.float64), ".0%", "25%"),
    (np.int64(7), "", "7"),
    (200_000, ",", "200,000"),
    ("the CPU (2 cores)", "", "the CPU (2 cores)"),  # a string loses its quotes
    (True, "", "True"),
])
def test_glue_writes_the_record_myst_nb_reads(monkeypatch, value, spec, text):
    cell = glued_cell(monkeypatch, x=value)
    (key, record), = extract_glue_data_cell(cell)
    assert key == "x"
    assert cell.outputs == []  # MyST-NB takes the record out: the page shows nothing there
    assert format_plain_text(record["data"]["text/plain"], spec) == text


def test_glue_values_records_each_name(monkeypatch):
    outputs = []
    monkeypatch.setattr(display, "publish_display_data",
                        lambda data, metadata=None: outputs.append(metadata["scrapbook"]["name"]))
    display.glue_values({"a": 1, "b": 2.0})
    assert outputs == ["a", "b"]


@pytest.mark.parametrize(("name", "value", "error", "words"), [
    ("two words", 1.0, ValueError, "identifier"),
    ("", 1.0, ValueError, "identifier"),
    ("losses", [0.1, 0.2], TypeError, "list"),
    ("vector", np.zeros(3), TypeError, "ndarray"),
    ("nothing", None, TypeError, "NoneType"),
])
def test_glue_rejects_what_the_text_cannot_format(name, value, error, words):
    with pytest.raises(error, match=words):
        display.glue(name, value)


# --- the Makefile's book-cache rule -------------------------------------------------------

@pytest.fixture()
def book_copy(tmp_path: Path) -> Path:
    """The files the digest reads, and a build with an execution cache and doctrees."""
    for name in ("Makefile", "requirements.txt", "pyproject.toml", "_config.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "nlicl_lib", tmp_path / "nlicl_lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def make(folder: Path, target: str) -> str:
    return subprocess.run(["make", "-s", "--no-print-directory", target], cwd=folder, check=True,
                          capture_output=True, text=True).stdout.strip()


def fill_caches(folder: Path) -> list[Path]:
    caches = [folder / "_build" / ".jupyter_cache" / "global.db", folder / "_build" / ".doctrees" / "x"]
    for path in caches:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("cached")
    return caches


@pytest.mark.parametrize("changed", ["nlicl_lib/core/models.py", "requirements.txt",
                                     "_config.yml", "nlicl_lib/new_module.py",
                                     "nlicl_lib/pages/display.py"])
def test_a_change_the_pages_import_clears_the_execution_cache(book_copy, changed):
    digest = make(book_copy, "book-digest")
    assert len(digest) == 16 and make(book_copy, "book-digest") == digest
    make(book_copy, "book-cache")  # first build: records the digest
    caches = fill_caches(book_copy)
    make(book_copy, "book-cache")  # nothing changed: the caches stay
    assert all(path.exists() for path in caches)
    path = book_copy / changed
    path.write_text((path.read_text() if path.exists() else "") + "\n# changed\n")
    assert make(book_copy, "book-digest") != digest
    make(book_copy, "book-cache")
    assert not any(path.exists() for path in caches)
    assert (book_copy / "_build" / ".book-inputs").read_text().strip() == make(book_copy, "book-digest")


def test_an_extension_change_clears_the_doctrees_only(book_copy):
    """The build's extensions change how pages are read and written, not what they compute."""
    digest = make(book_copy, "book-digest")
    make(book_copy, "book-cache")
    execution, doctrees = fill_caches(book_copy)
    extension = book_copy / "nlicl_lib" / "sphinxext" / "site.py"
    extension.write_text(extension.read_text() + "\n# changed\n")
    assert make(book_copy, "book-digest") == digest
    make(book_copy, "book-cache")
    assert execution.exists() and not doctrees.exists()


def test_a_page_edit_leaves_the_digest_alone(book_copy):
    """A page's own code is jupyter-cache's business: its edit does not clear every page."""
    digest = make(book_copy, "book-digest"), make(book_copy, "extension-digest")
    (book_copy / "book").mkdir()
    (book_copy / "book" / "ch1.md").write_text("# edited\n")
    (book_copy / "nlicl_lib" / "__pycache__").mkdir(exist_ok=True)
    (book_copy / "nlicl_lib" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert (make(book_copy, "book-digest"), make(book_copy, "extension-digest")) == digest
