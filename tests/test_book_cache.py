"""The execution cache, on the built book: a second ``make book`` with nothing changed executes
nothing (marker ``built``: run by ``make notebook-test`` after ``make book``). That a change of
the library, the pins or the configuration clears the cache is checked without a build, in
tests/test_glue.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from jupyter_cache import get_cache

pytestmark = pytest.mark.built

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"


def records() -> dict[int, tuple[str, object]]:
    """Each executed notebook in the cache: its hash and when it was executed."""
    return {r.pk: (r.hashkey, r.created) for r in get_cache(CACHE).list_cache_records()}


def test_a_second_build_with_nothing_changed_executes_nothing() -> None:
    if not CACHE.is_dir():
        pytest.fail("no execution cache: run `make book` first")
    before = records()
    assert before, "the execution cache is empty after `make book`"
    build = subprocess.run(["make", "book"], cwd=ROOT, capture_output=True, text=True)
    log = build.stdout + build.stderr
    assert build.returncode == 0, log[-3000:]
    # jupyter-cache's executor runs first (it names each page it runs), then MyST-NB
    assert "Executing 0 notebook(s)" in log, log[-3000:]
    executed = [line for line in log.splitlines()
                if "Executing notebook" in line or "Executing: " in line]
    assert not executed, "a page was executed again:\n" + "\n".join(executed)
    assert "clearing" not in log  # the inputs digest did not change
    assert records() == before
