"""The notebooks readers download from the built site run, as a reader would run them.

Run after ``make book`` with ``make notebook-test``. Each chapter's executed notebook, exactly
as the site offers it for download (``_build/html/_sources/book/ch*.ipynb``), is copied into
an empty folder outside the repository and executed top to bottom with nbclient in a fresh
``python3`` kernel:

* on the CPU (``CUDA_VISIBLE_DEVICES`` empty), without the book build's environment
  (``NLICL_BOOK_BUILD`` unset: figures go through plotly's renderer, the live panels measure
  their speed and draw their figures), with only what the README's set-up installs;
* within the time the instructors page states for the chapter, its execution time in the
  build (read from the execution cache), times ``TIME_TOLERANCE`` plus ``TIME_SLACK_S`` for
  a busy machine and for the live panels' extra work (a few timed training steps each, and
  their theory curves);
* with the kernel's peak memory under ``MEMORY_LIMIT_BYTES`` (1 GB, what a chapter may use
  on Binder).

It also checks the Colab copies (``_build/html/_colab``) and that each chapter's Colab button
opens its copy.

Only the chapters are executed (not the Results page, whose notebook re-runs every headline
experiment): CI runs them one after the other, which takes about the sum of their build
times. ``NLICL_NOTEBOOKS=ch2,ch3`` restricts the run to some chapters.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.built

ROOT = Path(__file__).resolve().parents[1]
HTML_DIR = ROOT / "_build" / "html"
SOURCES_DIR = HTML_DIR / "_sources"
EXECUTED_DIR = ROOT / "_build" / "jupyter_execute"
CACHE_DIR = ROOT / "_build" / ".jupyter_cache"
COLAB_DIR = HTML_DIR / "_colab"

TIME_TOLERANCE = 1.5
TIME_SLACK_S = 30.0
# Binder gives a chapter 1 GB (chapter 5, the largest, peaked at 784 MiB on 2026-12-03 once the
# greedy reference drew only inputs and evaluated monomials in chunks).
MEMORY_LIMIT_BYTES = 10**9
CELL_TIMEOUT_S = 600

PEAK_MEMORY_CODE = (
    "import resource, sys\n"
    "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "print(peak * (1 if sys.platform == 'darwin' else 1024))"  # bytes
)


def chapter_notebooks() -> list[Path]:
    chosen = {c.strip() for c in os.environ.get("NLICL_NOTEBOOKS", "").split(",") if c.strip()}
    notebooks = sorted((SOURCES_DIR / "book").glob("ch*.ipynb"))
    if chosen:
        notebooks = [n for n in notebooks if n.stem.split("_")[0] in chosen]
    return notebooks


NOTEBOOKS = chapter_notebooks()
NOT_BUILT = f"the book is not built ({SOURCES_DIR} has no chapter notebooks): run `make book`"


def load_live():
    import importlib.util

    spec = importlib.util.spec_from_file_location("nlicl_live", ROOT / "tools" / "nlicl_live.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def stated_seconds(page: Path) -> float:
    """The chapter's execution time in the build, as the instructors page states it."""
    live = load_live()
    docname = f"book/{page.stem}"
    runs = live.executed_pages(str(CACHE_DIR), {docname: EXECUTED_DIR / f"{docname}.ipynb"})
    assert docname in runs, f"no execution of {docname} in {CACHE_DIR}: run `make book`"
    return runs[docname].seconds


def run_notebook(source: Path, folder: Path) -> tuple[float, int, nbformat.NotebookNode]:
    """Execute a fresh copy of ``source`` in ``folder``; return (seconds, peak bytes, nb)."""
    from nbclient import NotebookClient

    notebook = nbformat.read(source, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    notebook.metadata.pop("widgets", None)
    notebook.cells.append(nbformat.v4.new_code_cell(PEAK_MEMORY_CODE))
    target = folder / source.name
    nbformat.write(notebook, target)
    env = {k: v for k, v in os.environ.items() if k != "NLICL_BOOK_BUILD"}
    env["CUDA_VISIBLE_DEVICES"] = ""
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            allow_errors=False, resources={"metadata": {"path": str(folder)}})
    start = time.perf_counter()
    client.execute(env=env)
    seconds = time.perf_counter() - start
    peak = int(notebook.cells[-1].outputs[0]["text"].strip())
    return seconds, peak, notebook


@pytest.mark.skipif(not NOTEBOOKS, reason=NOT_BUILT)
@pytest.mark.parametrize("source", NOTEBOOKS, ids=[n.stem for n in NOTEBOOKS])
def test_downloaded_notebook_runs_top_to_bottom(source: Path, tmp_path: Path) -> None:
    stated = stated_seconds(source)
    limit = TIME_TOLERANCE * stated + TIME_SLACK_S
    seconds, peak, _ = run_notebook(source, tmp_path)
    print(f"{source.stem}: {seconds:.0f} s (build: {stated:.0f} s, limit {limit:.0f} s), "
          f"peak memory {peak / 2**20:.0f} MiB")
    assert seconds <= limit, (
        f"{source.name} took {seconds:.0f} s, more than its stated {stated:.0f} s "
        f"(x{TIME_TOLERANCE} + {TIME_SLACK_S:.0f} s = {limit:.0f} s)")
    assert peak < MEMORY_LIMIT_BYTES, (
        f"{source.name} peaked at {peak / 2**20:.0f} MiB, over Binder's 1 GB per chapter")


@pytest.mark.skipif(not NOTEBOOKS, reason=NOT_BUILT)
def test_colab_copies_install_the_library_and_the_buttons_open_them() -> None:
    for source in sorted((SOURCES_DIR / "book").glob("ch*.ipynb")):
        copy = COLAB_DIR / "book" / source.name
        assert copy.exists(), f"{copy} is missing"
        notebook = nbformat.read(copy, as_version=4)
        nbformat.validate(notebook)
        assert "colab-install" in notebook.cells[0].metadata.get("tags", [])
        assert "google.colab" in notebook.cells[0].source
        assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")
        html = (HTML_DIR / "book" / source.with_suffix(".html").name).read_text(encoding="utf-8")
        links = re.findall(r'href="(https://colab\.research\.google\.com/[^"]+)"', html)
        assert links and all(link.endswith(f"/_colab/book/{source.name}") for link in links), (
            f"{source.stem}: Colab links {links}")
