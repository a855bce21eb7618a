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

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = ROOT / "_build"
CACHE_DIR = BUILD_DIR / ".jupyter_cache"
DOCTREES_DIR = BUILD_DIR / ".doctrees"
DIGEST_FILE = CACHE_DIR / "nlicl-inputs.sha256"
LIBRARY_DIR = ROOT / "nlicl_lib"
REQUIREMENTS = ROOT / "requirements.txt"
BOOK_DIR = ROOT / "book"

IMPORTS_LIBRARY = re.compile(r"^\s*(?:from|import)\s+nlicl_lib\b", re.MULTILINE)


def inputs_digest(root: Path = ROOT) -> str:
    """SHA-256 over the library's Python sources and the pinned requirements."""
    digest = hashlib.sha256()
    library = root / "nlicl_lib"
    files = sorted(p for p in library.rglob("*.py") if "__pycache__" not in p.parts)
    requirements = root / "requirements.txt"
    if requirements.exists():
        files.append(requirements)
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def pages_using_library(book_dir: Path = BOOK_DIR) -> set[Path]:
    """Book sources (MyST notebooks or .ipynb) whose code imports ``nlicl_lib``."""
    pages = set()
    for path in list(book_dir.rglob("*.md")) + list(book_dir.rglob("*.ipynb")):
        if "_build" in path.parts or ".ipynb_checkpoints" in path.parts:
            continue
        if IMPORTS_LIBRARY.search(path.read_text(encoding="utf-8")):
            pages.add(path.resolve())
    return pages


def forget_executions(pages: set[Path]) -> list[str]:
    """Remove the cached executions of ``pages``; return the URIs removed."""
    from jupyter_cache import get_cache

    cache = get_cache(str(CACHE_DIR))
    removed = []
    for record in cache.list_cache_records():
        if record.uri and Path(record.uri).resolve() in pages:
            cache.remove_cache(record.pk)
            removed.append(record.uri)
    return removed


def refresh_cache() -> None:
    """Invalidate library-dependent executions when the library or requirements changed."""
    current = inputs_digest()
    previous = DIGEST_FILE.read_text().strip() if DIGEST_FILE.exists() else None
    if previous == current:
        print("nlicl: nlicl_lib and requirements.txt unchanged; cached executions are valid.")
        return
    if CACHE_DIR.exists():
        removed = forget_executions(pages_using_library())
        names = ", ".join(sorted(Path(uri).name for uri in removed)) or "none cached"
        print(f"nlicl: nlicl_lib or requirements.txt changed; re-executing pages: {names}")
        # Sphinx would otherwise consider the unchanged page sources up to date and not read
        # (so not execute) them again.
        shutil.rmtree(DOCTREES_DIR, ignore_errors=True)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    DIGEST_FILE.write_text(current + "\n")


def build() -> int:
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    command = [str(jupyter_book), "build", str(ROOT), "-W", "-n", "--keep-going"]
    env = dict(os.environ, NLICL_BOOK_BUILD="1")
    print("nlicl: " + " ".join(command), flush=True)
    return subprocess.call(command, cwd=ROOT, env=env)


def main() -> int:
    start = time.monotonic()
    refresh_cache()
    status = build()
    elapsed = time.monotonic() - start
    if status != 0:
        print(f"nlicl: book build FAILED (exit {status}) after {elapsed:.0f} s", file=sys.stderr)
        return status
    print(f"nlicl: book built in {elapsed:.0f} s: {BUILD_DIR / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
