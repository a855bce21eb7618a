"""Build the book strictly, with an execution cache that tells the truth.

Usage: ``python tools/build_book.py`` (``make book`` runs it inside ``.venv``).

jupyter-cache re-executes a page only when that page's own code cells change; it cannot see
that a page imports ``nlicl_lib`` and that the library changed under it. So before building,
this script hashes what the executed outputs depend on besides the page itself:

* every ``nlicl_lib/**/*.py`` file (path and contents), and
* ``requirements.txt`` (the pinned versions).

The digest is kept next to the cache (``_build/.jupyter_cache/nlicl-inputs.sha256``). When it
differs from the last build's, the cached executions of every page that imports ``nlicl_lib``
are removed from the cache, and Sphinx's saved environment is dropped so that those pages are
read (and so executed) again; pages that do not import the library keep their cache. Nothing
else triggers a re-execution, apart from jupyter-cache's own rule (a page's code changed, or
it has no cached execution).

It first runs ``tools/check_refs.py``: a page or library string that cites the team's private
notes instead of the book's numbered results stops the build.

Then it runs ``jupyter-book build . -W -n --keep-going`` with ``NLICL_BOOK_BUILD=1`` (see
``nlicl_lib.display``): every Sphinx warning, broken cross-reference and failing cell fails
the build, with the cell's traceback printed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check_refs  # noqa: E402 (tools/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
DIGEST_NAME = "nlicl-inputs.sha256"

IMPORTS_LIBRARY = re.compile(r"^\s*(?:from|import)\s+nlicl_lib\b", re.MULTILINE)


def cache_dir(root: Path) -> Path:
    """jupyter-book's execution cache for the book at ``root``."""
    return root / "_build" / ".jupyter_cache"


def inputs_digest(root: Path) -> str:
    """SHA-256 over the library's Python sources and the pinned requirements."""
    digest = hashlib.sha256()
    files = sorted(p for p in (root / "nlicl_lib").rglob("*.py") if "__pycache__" not in p.parts)
    requirements = root / "requirements.txt"
    if requirements.exists():
        files.append(requirements)
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def pages_using_library(book_dir: Path) -> set[Path]:
    """Book sources (MyST notebooks or .ipynb) whose code imports ``nlicl_lib``."""
    pages = set()
    for path in list(book_dir.rglob("*.md")) + list(book_dir.rglob("*.ipynb")):
        if "_build" in path.parts or ".ipynb_checkpoints" in path.parts:
            continue
        if IMPORTS_LIBRARY.search(path.read_text(encoding="utf-8")):
            pages.add(path.resolve())
    return pages


def forget_executions(cache_path: Path, pages: set[Path]) -> list[str]:
    """Remove the cached executions of ``pages`` from the cache; return the URIs removed."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_path))
    removed = []
    for record in cache.list_cache_records():
        if record.uri and Path(record.uri).resolve() in pages:
            cache.remove_cache(record.pk)
            removed.append(record.uri)
    return removed


def refresh_cache(root: Path) -> list[str] | None:
    """Invalidate library-dependent executions when the library or requirements changed.

    Returns the URIs of the cached executions removed, or None when nothing changed.
    """
    cache = cache_dir(root)
    digest_file = cache / DIGEST_NAME
    current = inputs_digest(root)
    previous = digest_file.read_text().strip() if digest_file.exists() else None
    if previous == current:
        return None
    removed = []
    if cache.exists():
        removed = forget_executions(cache, pages_using_library(root / "book"))
        # Sphinx would otherwise consider the unchanged page sources up to date and not read
        # (so not execute) them again.
        shutil.rmtree(root / "_build" / ".doctrees", ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    digest_file.write_text(current + "\n")
    return removed


def build() -> int:
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [str(jupyter_book), "build", str(ROOT), "-W", "-n", "--keep-going"]
    env = dict(os.environ, NLICL_BOOK_BUILD="1")
    print("nlicl: " + " ".join(command), flush=True)
    return subprocess.call(command, cwd=ROOT, env=env)


def main() -> int:
    start = time.monotonic()
    if check_refs.main() != 0:  # the pages cite the book's own numbered results only
        return 1
    removed = refresh_cache(ROOT)
    if removed is None:
        print("nlicl: nlicl_lib and requirements.txt unchanged; cached executions are valid.")
    else:
        print("nlicl: nlicl_lib or requirements.txt changed: pages that import nlicl_lib will be "
              f"executed again ({len(removed)} cached execution(s) removed).")
    status = build()
    elapsed = time.monotonic() - start
    if status != 0:
        print(f"nlicl: book build FAILED (exit {status}) after {elapsed:.0f} s", file=sys.stderr)
        return status
    print(f"nlicl: book built in {elapsed:.0f} s: {ROOT / '_build' / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
