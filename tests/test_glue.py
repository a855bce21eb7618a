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


@pytest.fixture()
def book_copy(tmp_path: Path) -> Path:
    """The files the digest reads, and a build with an execution cache and doctrees."""
    for name in ("Makefile", "requirements.txt", "pyproject.toml", "_config.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    for folder in ("nlicl_lib", "book/_ext"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
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


# (file changed, whether the execution cache goes, whether the doctrees go): what the pages
# import clears both; the build's extensions change how pages are read and written, not what
# they compute; a page's own code and bytecode are jupyter-cache's business
@pytest.mark.parametrize(("changed", "execution", "doctrees"), [
    ("nlicl_lib/core/models.py", True, True), ("nlicl_lib/new_module.py", True, True),
    ("requirements.txt", True, True), ("_config.yml", True, True),
    ("book/_ext/nlicl_site.py", False, True), ("book/ch1.md", False, False),
    ("nlicl_lib/__pycache__/x.pyc", False, False)])
def test_a_change_clears_what_it_can_change(book_copy, changed, execution, doctrees):
    make(book_copy, "book-cache")  # first build: records the digests
    caches = fill_caches(book_copy)
    make(book_copy, "book-cache")  # nothing changed: the caches stay
    assert all(path.exists() for path in caches)
    path = book_copy / changed
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text((path.read_text() if path.exists() else "") + "\n# changed\n")
    make(book_copy, "book-cache")
    assert [not path.exists() for path in caches] == [execution, doctrees]
