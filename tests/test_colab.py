"""The chapters' Colab copies run top to bottom with Colab's package versions (``make
notebook-test``, after ``make book``; ``NLICL_NOTEBOOKS=ch2,ch3`` restricts the chapters,
``NLICL_COLAB_DIR`` reads the copies from another folder).

Colab has its own versions of what the library uses (``tests/envs/colab-requirements.txt``
lists them and their source), and a chapter's Colab copy installs only the library, without
dependencies, from the repository (``pip install --no-deps git+<url>.git@<ref>``) when
``google.colab`` is imported. Each copy runs in a fresh kernel of a venv of those versions
(``.envs/colab``, without nlicl_lib), with ``google.colab`` importable and the install cell's
address replaced by a bare clone of this repository, so that pip installs the ref the cell
names (the committed library, not uncommitted changes). Then the kernel must have imported
nlicl_lib from that install, its panel must train once when Train is pressed, under 1 GB.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from notebook_envs import ENVS_DIR, ROOT, ensure_venv, run_notebook

pytestmark = pytest.mark.built

COLAB_DIR = Path(os.environ.get("NLICL_COLAB_DIR") or ROOT / "_build" / "html" / "_colab" / "book")
REQUIREMENTS = ROOT / "tests" / "envs" / "colab-requirements.txt"
ENV_NAME = "colab"
MEMORY_LIMIT_BYTES = 10**9  # Binder's 1 GB per chapter, as in tests/test_notebooks.py
CELL_TIMEOUT_S = 600

INSTALL_TARGET = re.compile(r'"git\+(?P<url>[^"@\s]+)\.git@(?P<ref>[^"\s]+)"')  # the install cell's

COLAB_PRELUDE = (
    "# as on Colab: google.colab is importable (the install cell runs, plotly picks 'colab')\n"
    "import sys, types\n"
    "sys.modules.setdefault('google', types.ModuleType('google'))\n"
    "sys.modules['google.colab'] = types.ModuleType('google.colab')\n"
    "sys.modules['google'].colab = sys.modules['google.colab']\n"
)

INSTALLED_CODE = (
    "import importlib.metadata, json, nlicl_lib\n"
    "print(json.dumps({'file': nlicl_lib.__file__, 'direct_url': json.loads(\n"
    "    importlib.metadata.distribution('nlicl_lib').read_text('direct_url.json') or 'null')}))"
)

PANEL_CODE = (
    "from nlicl_lib.pages.panels import TrainingPanel\n"
    "_panels = [value for value in Out.values() if isinstance(value, TrainingPanel)]\n"
    "assert len(_panels) == 1, f'expected the chapter to show one TrainingPanel, found {_panels}'\n"
    "_panels[0].train_button.click()  # as a reader's press of Train\n"
    "assert _panels[0].last_error is None, _panels[0].last_error\n"
    "assert len(_panels[0].results) == 1, _panels[0].status.value\n"
    "print(_panels[0].status.value)"
)  # presses the Train button of the panel the chapter showed (a cell's value, kept in Out)


def chapter_copies() -> list[Path]:
    chosen = {c.strip() for c in os.environ.get("NLICL_NOTEBOOKS", "").split(",") if c.strip()}
    copies = sorted(COLAB_DIR.glob("ch*.ipynb"))
    return [c for c in copies if not chosen or c.stem.split("_")[0] in chosen]


COPIES = chapter_copies()
NOT_BUILT = f"the book is not built ({COLAB_DIR} has no chapter notebooks): run `make book`"


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def colab_python() -> Path:
    start = time.perf_counter()
    python = ensure_venv(ENV_NAME, [REQUIREMENTS])
    print(f"\nColab environment {python.parent.parent} ready in {time.perf_counter() - start:.0f} s")
    return python


@pytest.fixture(scope="module")
def bare_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare clone of this repository, ``<tmp>/nlicl.git``: what the install cells install from."""
    clone = tmp_path_factory.mktemp("colab-clone") / "nlicl.git"
    git("clone", "--quiet", "--bare", str(ROOT), str(clone))
    changed = git("status", "--porcelain", "--", "nlicl_lib", "pyproject.toml")
    if changed:
        print("\nnote: nlicl_lib or pyproject.toml has uncommitted changes; the Colab copies install "
              "the committed library at the ref they name, not these changes")
    return clone


def local_install(notebook: nbformat.NotebookNode, clone: Path) -> tuple[nbformat.NotebookNode, str]:
    """``notebook`` with its install cell's repository replaced by ``clone`` (a file URL), and
    the ref that cell installs."""
    first = notebook.cells[0]
    assert "colab-install" in first.metadata.get("tags", []), "the first cell is not the install cell"
    found = INSTALL_TARGET.search(first.source)
    assert found, f"no `git+<url>.git@<ref>` in the install cell:\n{first.source}"
    local = f"file://{clone.with_suffix('')}"  # + ".git", as the cell writes it
    first.source = first.source.replace(f"git+{found['url']}.git@", f"git+{local}.git@")
    return notebook, found["ref"]


@pytest.mark.skipif(not COPIES, reason=NOT_BUILT)
@pytest.mark.parametrize("copy", COPIES, ids=[c.stem for c in COPIES])
def test_colab_copy_runs_with_colabs_versions(copy: Path, colab_python: Path, bare_clone: Path,
                                              tmp_path: Path) -> None:
    notebook, ref = local_install(nbformat.read(copy, as_version=4), bare_clone)
    try:
        commit = git("rev-parse", "--verify", f"{ref}^{{commit}}", cwd=bare_clone)
    except subprocess.CalledProcessError:
        pytest.fail(f"{copy.name} installs nlicl_lib at {ref!r}, which this repository does not have")
    # the install cell must install: no nlicl_lib left from an earlier chapter or run
    subprocess.run([str(colab_python), "-m", "pip", "uninstall", "--quiet", "--yes", "nlicl_lib"],
                   capture_output=True, check=False)
    notebook.cells += [nbformat.v4.new_code_cell(INSTALLED_CODE), nbformat.v4.new_code_cell(PANEL_CODE)]

    run = run_notebook(colab_python, notebook, tmp_path, timeout_s=CELL_TIMEOUT_S,
                       prelude=[COLAB_PRELUDE])
    print(f"{copy.stem}: {run.seconds:.0f} s, peak memory {run.peak_bytes / 2**20:.0f} MiB "
          f"(Colab's versions, nlicl_lib at {commit[:12]})")

    installed_cell, panel_cell = run.notebook.cells[-3], run.notebook.cells[-2]
    installed = json.loads(next(o["text"] for o in installed_cell.outputs if o.get("name") == "stdout"))
    where = Path(installed["file"])
    assert where.is_relative_to(ENVS_DIR / ENV_NAME), f"nlicl_lib was imported from {where}"
    assert not where.is_relative_to(ROOT / "nlicl_lib"), f"nlicl_lib was imported from {where}"
    direct = installed["direct_url"] or {}
    assert direct.get("url") == f"file://{bare_clone}", f"nlicl_lib was not installed from the clone: {direct}"
    assert direct.get("vcs_info", {}).get("commit_id") == commit, (
        f"nlicl_lib was installed at {direct.get('vcs_info')}, not {ref} ({commit})")
    assert any("Trained in" in o.get("text", "") for o in panel_cell.outputs), panel_cell.outputs
    assert run.peak_bytes < MEMORY_LIMIT_BYTES, (
        f"{copy.name} peaked at {run.peak_bytes / 2**20:.0f} MiB with Colab's versions, over 1 GB")
