"""Build the book strictly.

Usage: ``python tools/build_book.py`` (``make book`` runs it inside ``.venv``).

Pages are executed inline by MyST-NB and cached by ``tools/nlicl_exec.py`` (in
``_build/.nlicl_cache``): a page runs again when its code, its ``{eval}`` expressions, the
library ``nlicl_lib`` or the pins change, and only then. After a successful build it lists the
slowest cells (``tests/test_notebooks.py`` fails on a cell over a minute).

It first runs ``tools/check_refs.py``: a page or library string that cites the team's private
notes instead of the book's numbered results stops the build.

Then it runs ``jupyter-book build . -W -n --keep-going`` with ``NLICL_BOOK_BUILD=1`` (see
``nlicl_lib.book.display``): every Sphinx warning, broken cross-reference and failing cell fails
the build, with the cell's traceback printed.

Last, it reads the executed notebooks (``_build/jupyter_execute/**/*.ipynb``, the notebooks
myst-nb executed or took from the cache) and fails the build when an output holds a Python
warning (a stderr line such as ``...: RuntimeWarning: divide by zero``) or a traceback (a
stream that prints one, or an error output of a cell not tagged ``raises-exception``): the
build shows stderr on the page (``execute.stderr_output: show``), so a warning would be
published as part of the chapter. Each finding is printed as page, cell index (0-based, as
in the ``.ipynb``) and the offending line. ``python tools/build_book.py --check-outputs``
runs this check alone, on the last build.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_refs  # noqa: E402 (tools/ is not a package)
import nlicl_exec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


# --- warnings and tracebacks in the executed notebooks' outputs ----------------------------

WARNING_LINE = re.compile(r"\b\w*Warning:(?:\s|$)")
"""A line Python's ``warnings`` module writes: ``<file>:<line>: RuntimeWarning: <message>``
(also UserWarning, DeprecationWarning, FutureWarning, ... and a bare ``Warning:``)."""

TRACEBACK = "Traceback (most recent call last)"
EXPECTED_ERROR_TAG = "raises-exception"  # myst-nb's tag for a cell whose error is the point


class OutputProblem(NamedTuple):
    """A warning or traceback in a cell's output. (A NamedTuple, not a dataclass: the tests load
    this file with importlib, without registering it in ``sys.modules``.)"""

    page: str  # the notebook, relative to the scanned folder, without ".ipynb"
    cell: int  # index of the cell in the notebook's cells (0-based, as in the .ipynb)
    line: str  # the offending line

    def __str__(self) -> str:
        return f"{self.page}, cell {self.cell}: {self.line}"


def _text(value: str | list[str] | None) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def output_problems(notebook: dict, page: str) -> list[OutputProblem]:
    """The warnings and tracebacks in the outputs of ``notebook`` (an nbformat dict)."""
    problems = []
    for index, cell in enumerate(notebook.get("cells", [])):
        expected_error = EXPECTED_ERROR_TAG in cell.get("metadata", {}).get("tags", [])
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                for line in _text(output.get("text")).splitlines():
                    warning = output.get("name") == "stderr" and WARNING_LINE.search(line)
                    if warning or TRACEBACK in line:
                        problems.append(OutputProblem(page, index, line.strip()))
            elif kind == "error" and not expected_error:
                problems.append(OutputProblem(
                    page, index, f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"))
    return problems


def executed_notebooks_dir(root: Path) -> Path:
    """Where the last build left the executed notebooks of the book at ``root``."""
    return root / "_build" / "jupyter_execute"


def scan_executed_notebooks(folder: Path) -> list[OutputProblem]:
    """The warnings and tracebacks in every ``.ipynb`` under ``folder`` (sorted by page)."""
    problems = []
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        page = path.relative_to(folder).with_suffix("").as_posix()
        problems.extend(output_problems(json.loads(path.read_text(encoding="utf-8")), page))
    return problems


def check_outputs(root: Path) -> int:
    """Print every warning and traceback in the executed notebooks; 1 when there are any."""
    folder = executed_notebooks_dir(root)
    if not folder.is_dir():
        print(f"nlicl: no executed notebooks in {folder}", file=sys.stderr)
        return 1
    problems = scan_executed_notebooks(folder)
    for problem in problems:
        print(f"nlicl: {problem}", file=sys.stderr)
    if problems:
        print(f"nlicl: {len(problems)} warning(s) or traceback(s) in the executed notebooks' "
              "outputs (they would be published on the pages)", file=sys.stderr)
        return 1
    return 0


def build(*builder: str) -> int:
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [str(jupyter_book), "build", str(ROOT), "-W", "-n", "--keep-going", *builder]
    env = dict(os.environ, NLICL_BOOK_BUILD="1")
    print("nlicl: " + " ".join(command), flush=True)
    return subprocess.call(command, cwd=ROOT, env=env)


def main(argv: list[str] | None = None) -> int:
    if "--check-outputs" in (sys.argv[1:] if argv is None else argv):
        return check_outputs(ROOT)
    start = time.monotonic()
    if check_refs.main() != 0:  # the pages cite the book's own numbered results only
        return 1
    # the execution cache of earlier builds (jupyter-cache), which the build no longer uses
    shutil.rmtree(ROOT / "_build" / ".jupyter_cache", ignore_errors=True)
    # the HTML, then the reader notebooks from the same doctrees (nlicl_lib/sphinxext/notebooks.py)
    status = build() or build("--builder", "custom", "--custom-builder", "jupyter")
    elapsed = time.monotonic() - start
    if status != 0:
        print(f"nlicl: book build FAILED (exit {status}) after {elapsed:.0f} s", file=sys.stderr)
        return status
    if check_outputs(ROOT) != 0:
        print("nlicl: book build FAILED: warnings in the outputs", file=sys.stderr)
        return 1
    slowest = nlicl_exec.slowest_cells(ROOT / "_build" / nlicl_exec.CACHE_DIR_NAME)
    if slowest:
        print("nlicl: slowest cells (seconds, page, cell index, first line; when last executed):")
        for seconds, page, index, first in slowest:
            print(f"  {seconds:6.1f}  {page}  cell {index}: {first[:70]}")
    print(f"nlicl: book built in {elapsed:.0f} s: {ROOT / '_build' / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
