"""The book build's live side (tools/nlicl_live.py): Colab copies of the notebooks, the Colab
button, accessible toggles and the instructors page's run-time tables. Unit tests: no book
build, no browser (they run with ``make test``)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def load_live():
    spec = importlib.util.spec_from_file_location("nlicl_live", ROOT / "tools" / "nlicl_live.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


live = load_live()
REPO = "https://github.com/nlicl/nlicl"


def executed_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    cell = nbformat.v4.new_code_cell("print(1)", execution_count=3)
    cell.outputs = [nbformat.v4.new_output("stream", text="1\n")]
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), cell]
    return nb


def test_colab_copy_installs_the_library_first_and_has_no_outputs():
    original = executed_notebook()
    colab = live.colab_notebook(original, REPO, "main")
    nbformat.validate(colab)
    first = colab.cells[0]
    assert first.cell_type == "code" and first.metadata["tags"] == ["colab-install"]
    assert "git+https://github.com/nlicl/nlicl.git@main" in first.source  # the ref it is given
    assert "--no-deps" in first.source and '"google.colab" in sys.modules' in first.source
    assert [c.source for c in colab.cells[1:]] == [c.source for c in original.cells]
    code = [c for c in colab.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert "widgets" not in colab.metadata
    assert original.cells[1].outputs, "the executed notebook itself is left alone"


def test_install_cell_does_nothing_outside_colab(monkeypatch):
    calls = []
    monkeypatch.setattr("subprocess.run", lambda *a, **k: calls.append(a))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(live.install_source(REPO, "main"), "install", "exec"), {})
    assert calls == []
    monkeypatch.setitem(sys.modules, "google.colab", object())
    exec(compile(live.install_source(REPO, "main"), "install", "exec"), {})
    assert calls and calls[0][0][-1] == "git+https://github.com/nlicl/nlicl.git@main"


class FakeApp:
    class config:  # noqa: N801
        html_theme_options = {"repository_url": REPO, "repository_branch": "main",
                              "launch_buttons": {"colab_url": "https://colab.research.google.com",
                                                 "binderhub_url": "https://mybinder.org"}}
        nlicl_colab_branch = "gh-pages"


def test_colab_button_opens_the_colab_copy_and_binder_is_left_alone():
    binder = {"text": "Binder", "url": "https://mybinder.org/v2/gh/nlicl/nlicl/main?x"}
    colab = {"text": "Colab", "url": f"{REPO}/blob/main/book/ch2.md"}
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": [binder, dict(colab)]}]}
    live.point_colab_button(FakeApp, "book/ch2_attention_alone", "page.html", context, None)
    buttons = context["header_buttons"][0]["buttons"]
    assert buttons[0] == binder
    assert buttons[1]["url"] == ("https://colab.research.google.com/github/nlicl/nlicl/blob/"
                                 "gh-pages/_colab/book/ch2_attention_alone.ipynb")


def test_hidden_cell_toggles_are_named_by_their_text():
    body = ('<details class="hide above-input"><summary aria-label="Toggle hidden content">'
            '<span class="collapsed">Show the solution</span></summary></details>')
    context = {"body": body}
    live.name_toggles_by_their_text(None, "page", "page.html", context, None)
    assert "aria-label" not in context["body"] and "<summary><span" in context["body"]


def test_one_hour_lab_takes_the_quickest_exercise_of_each_chapter_first():
    exercises = [
        {"id": "2.1", "seconds": 30}, {"id": "2.2", "seconds": 5},
        {"id": "3.1", "seconds": 600}, {"id": "3.2", "seconds": 20},
        {"id": "4.1", "seconds": 10}, {"id": "5.1", "seconds": 15}, {"id": "5.2", "seconds": 16},
    ]
    lab = live.lab_plan(exercises)
    # 50 minutes after set-up; each exercise is 10 min + 3 runs: four firsts, then one more
    # 55 minutes after set-up, 10 per exercise plus 3 runs: the quickest of each chapter,
    # then the next quickest (5.2) while the hour lasts; 2.1 no longer fits, 3.1 never would
    assert lab == {"2.2", "3.2", "4.1", "5.1", "5.2"}
    assert live.lab_plan(exercises[:2]) == {"2.2", "2.1"}


def test_run_times_come_from_the_execution_cache(tmp_path: Path):
    cache = tmp_path / "cache"
    cell = nbformat.v4.new_output(
        "display_data", data={"text/plain": "ok"},
        metadata={live.EXERCISE_KEY: {"id": "2.1", "title": "T", "seconds": 4.5,
                                      "device": "cpu (2 threads)"}})
    entry = {"format": live.nlicl_exec.CACHE_FORMAT, "key": "k", "runtime": 12.5, "mtime": 0,
             "cells": [None, {"outputs": [cell], "execution_count": 1}], "evals": [],
             "metadata": {}}
    cache.mkdir()
    live.nlicl_exec.cache_file(cache, "book/ch2").write_text(json.dumps(entry))
    pages = live.executed_pages(cache, ["book/ch2", "book/ch3"])
    assert list(pages) == ["book/ch2"]
    assert pages["book/ch2"].seconds == pytest.approx(12.5)
    assert pages["book/ch2"].exercises[0]["id"] == "2.1"


# --- the one repository setting -------------------------------------------------------------


def repository_setting() -> tuple[str, str]:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"], config["repository"]["branch"]


def test_the_repository_setting_is_usable_and_the_readme_uses_it():
    url, branch = repository_setting()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert live.repository_problems(url, branch, readme) == []
    assert f"git clone {url}.git" in readme


@pytest.mark.parametrize(("url", "branch", "readme", "wanted"), [
    (None, "main", None, "repository.url is not set"),
    ("", "main", None, "repository.url is not set"),
    ("https://gitlab.com/a/b", "main", None, "allowed: https://github.com/<owner>/<repo>"),
    ("https://github.com/a", "main", None, "allowed: https://github.com/<owner>/<repo>"),
    ("https://github.com/a/b", "", None, "repository.branch is not set"),
    ("https://github.com/a/b", "main", "git clone https://github.com/c/d.git",
     "README.md names ['github.com/c/d.git']"),
    ("https://github.com/a/b", "main", "no address at all", "does not name the repository"),
])
def test_repository_problems_name_the_setting_and_what_is_allowed(url, branch, readme, wanted):
    problems = live.repository_problems(url, branch, readme)
    assert any(wanted in problem for problem in problems), problems


def test_the_build_stops_at_its_start_on_a_bad_repository_setting(tmp_path):
    (tmp_path / "README.md").write_text("git clone https://github.com/a/b.git\n")

    class App:
        srcdir = str(tmp_path)

    class Config:
        html_theme_options = {"repository_url": "https://github.com/a/b", "repository_branch": "main"}

    live.check_repository(App, Config)  # fine
    Config.html_theme_options = {"repository_branch": "main"}
    with pytest.raises(live.ConfigError, match="repository.url is not set"):
        live.check_repository(App, Config)


@pytest.mark.slow
def test_colab_install_cell_installs_the_library_from_a_clone_in_a_fresh_venv(tmp_path):
    """The Colab copy's first cell, as the build writes it from the repository setting but with
    the address of a local clone (a file URL), run as on Colab (``google.colab`` imported) in a
    fresh virtual environment: it installs nlicl_lib from the clone at the commit the build
    names (this checkout's HEAD), without touching the dependencies (Colab has them)."""
    url, _ = repository_setting()
    commit = live.build_commit(ROOT)
    if commit is None:
        pytest.skip("not a git checkout: no commit to install")
    cell = live.colab_notebook(executed_notebook(), url, commit).cells[0].source
    assert f"git+{url}.git@{commit}" in cell, "the install cell does not use the setting"
    clone = tmp_path / "nlicl.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(ROOT), str(clone)], check=True)
    local = live.install_source(f"file://{tmp_path / 'nlicl'}", commit)
    assert local == cell.replace(url, f"file://{tmp_path / 'nlicl'}")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    as_on_colab = ("import sys, types\n"
                   "sys.modules['google.colab'] = types.ModuleType('google.colab')\n" + local)
    subprocess.run([str(python), "-c", as_on_colab], check=True, cwd=tmp_path, timeout=600)
    shown = subprocess.run([str(python), "-m", "pip", "show", "--files", "nlicl_lib"],
                           capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    assert "Version: " in shown and "nlicl_lib/__init__.py" in shown
    installed = subprocess.run(
        [str(python), "-c", "import importlib.util; print(importlib.util.find_spec('nlicl_lib').origin)"],
        capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
    assert installed.startswith(str(venv)), installed
    package = Path(installed).parent  # every layer and the stored study data were installed
    for part in ("core/tasks.py", "theory/closed_forms.py", "training/train.py", "experiments/cli.py",
                 "book/display.py", "experiments/data/depth_study.json", "experiments/data/reproduce.json"):
        assert (package / part).exists(), part


def test_build_commit_is_the_environment_s_or_the_checkout_s(monkeypatch, tmp_path):
    monkeypatch.setenv("NLICL_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    assert live.build_commit(ROOT) == "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.delenv("NLICL_COMMIT")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    assert live.build_commit(ROOT) == (head or None)
    assert live.build_commit(tmp_path) is None  # not a checkout: the build falls back to the branch
