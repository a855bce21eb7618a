"""Every chapter runs on Binder as a reader opens it there (``make live-test``, after
``make book``; ``NLICL_NOTEBOOKS=ch2,ch3`` restricts the chapters).

Binder (repo2docker) builds its environment from ``binder/`` alone: ``pip install -r
binder/requirements.txt``, then ``binder/postBuild``. These tests do the same into a venv
``.envs/binder`` (nothing from the book build's ``.venv``), check that it holds exactly the pins
and nbgitpuller's server extension (the Binder button's ``git-pull`` address), then run each
built live copy (``_build/html/_colab/book/ch*.ipynb``) top to bottom on the CPU under 1 GB
of peak memory, what Binder gives a chapter, and press a live panel's Train button.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from notebook_envs import ENVS_DIR, ensure_venv, run_notebook

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
MEMORY_LIMIT_BYTES = 10**9
CHAPTERS = sorted((ROOT / "_build" / "html" / "_colab" / "book").glob("ch*.ipynb"))
chosen = {c.strip() for c in os.environ.get("NLICL_NOTEBOOKS", "").split(",") if c.strip()}
if chosen:
    CHAPTERS = [c for c in CHAPTERS if c.stem.split("_")[0] in chosen]

PANEL_TRAIN = """\
from IPython.display import display
from nlicl_lib.pages.panels import lsa_gd_panel

panel = lsa_gd_panel()
display(panel)
panel.train_button.click()  # as a reader's click: errors become the panel's message
assert panel.last_error is None, panel.last_error
(result,) = panel.results
print(f"panel trained in {result.seconds:.1f} s: test loss {result.normalised_test_loss:.4f}")
"""


IGNORED = shutil.ignore_patterns(".git", ".venv", ".envs", "_build", ".stamps", "node_modules",
                                 "__pycache__", ".pytest_cache", ".ruff_cache", "*.egg-info")


def binder_checkout() -> Path:
    """Binder's copy of the repository: the working tree without what git ignores."""
    copy = ENVS_DIR / "binder-repo"
    if copy.exists():
        shutil.rmtree(copy)
    shutil.copytree(ROOT, copy, ignore=IGNORED)
    return copy


@pytest.fixture(scope="module")
def binder() -> tuple[Path, Path]:
    """(python, repository copy): the venv built from ``binder/`` as repo2docker builds it, its
    ``postBuild`` run in the copy (when the venv is reused, the library is installed from the
    new copy again)."""
    copy = binder_checkout()
    version = hashlib.sha256((BINDER / "postBuild").read_bytes()).hexdigest()[:16]
    post_build = ["bash", "-c", f"cd {shlex.quote(str(copy))} && bash binder/postBuild  # {version}"]
    # binder/requirements.txt names PyTorch's CPU index, which Binder reaches and this machine
    # does not: without retries pip moves on at once to the same wheel from the local mirror
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIP_RETRIES", "0")
        python = ensure_venv("binder", [BINDER / "requirements.txt"], after=[post_build])
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(copy)],
                   check=True, capture_output=True)
    return python, copy


def pinned(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        assert match, f"{path.name}: {line!r} is not pinned as name==version"
        found[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return found


def test_the_binder_environment_is_exactly_the_pinned_one(binder: tuple[Path, Path]) -> None:
    """Every package of binder/requirements.txt pinned, as requirements.in and the book's
    requirements.txt say, and installed exactly so."""
    locked = pinned(BINDER / "requirements.txt")
    book = pinned(ROOT / "requirements.txt")
    for name, version in pinned(BINDER / "requirements.in").items():
        assert locked.get(name) == version, f"binder/requirements.txt has {name}=={locked.get(name)}"
        assert book.get(name, version.split("+")[0]) == version.split("+")[0], name
    frozen = subprocess.run([str(binder[0]), "-m", "pip", "freeze", "--all", "--exclude", "pip",
                             "--exclude", "setuptools", "--exclude", "wheel"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    installed = {re.sub(r"[-_.]+", "-", line.partition("==")[0]).lower(): line.partition("==")[2]
                 for line in frozen
                 if "nlicl" not in line.lower() and not line.startswith(("#", "-e"))}
    assert installed == locked


def test_nbgitpuller_serves_the_launch_links(binder: tuple[Path, Path]) -> None:
    """The Binder button's ``git-pull?...`` address is nbgitpuller's server extension."""
    listed = subprocess.run([str(binder[0]), "-m", "jupyter", "server", "extension", "list"],
                            capture_output=True, text=True, check=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)  # no colours
    assert re.search(r"nbgitpuller\s+enabled", text) and "nbgitpuller 1.3.0 OK" in text, text


@pytest.mark.skipif(not CHAPTERS, reason="the book is not built (no _colab/book/ch*.ipynb): make book")
@pytest.mark.parametrize("source", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_chapter_runs_top_to_bottom_in_the_binder_environment(
        binder: tuple[Path, Path], source: Path, tmp_path: Path) -> None:
    notebook = nbformat.read(source, as_version=4)  # what the Binder button opens
    run = run_notebook(binder[0], notebook, tmp_path)
    print(f"{source.stem}: {run.seconds:.0f} s, peak memory {run.peak_bytes / 2**20:.0f} MiB")
    assert run.peak_bytes < MEMORY_LIMIT_BYTES, (
        f"{source.name} peaked at {run.peak_bytes / 2**20:.0f} MiB on Binder's 1 GB")


def test_a_live_panel_trains_in_the_binder_environment(binder: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(PANEL_TRAIN)]
    run = run_notebook(binder[0], notebook, tmp_path)
    text = "".join(o.get("text", "") for o in run.notebook.cells[0].outputs)
    print(text.strip(), f"(peak {run.peak_bytes / 2**20:.0f} MiB)")
    assert "panel trained in" in text
    assert run.peak_bytes < MEMORY_LIMIT_BYTES
