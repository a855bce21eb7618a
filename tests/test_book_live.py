"""The book build's live side (``book/_ext/nlicl_notebooks.py``): the live copies of the
notebooks for Colab and Binder, their install cell and the repository
setting. Unit tests: no book build, no browser (they run with ``make test``)."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import nlicl_notebooks as live
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
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
    colab = live.live_copy(original, live.install_source(REPO, "main"))
    nbformat.validate(colab)
    first = colab.cells[0]
    assert first.cell_type == "code" and first.metadata["tags"] == ["colab-install"]
    assert "git+https://github.com/nlicl/nlicl.git@main" in first.source  # the ref it is given
    assert "--no-deps" in first.source and '"google.colab" in sys.modules' in first.source
    assert [c.source for c in colab.cells[1:]] == [c.source for c in original.cells]
    code = [c for c in colab.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert original.cells[1].outputs, "the executed notebook itself is left alone"
    plain = live.live_copy(original, None)  # a page without code (the glossary): no install cell
    assert [c.source for c in plain.cells] == [c.source for c in original.cells]
    assert len({c.id for c in colab.cells}) == len(colab.cells)


def test_install_cell_does_nothing_outside_colab(monkeypatch):
    calls = []
    monkeypatch.setattr("subprocess.run", lambda *a, **k: calls.append(a))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(compile(live.install_source(REPO, "main"), "install", "exec"), {})
    assert calls == []
    monkeypatch.setitem(sys.modules, "google.colab", object())
    exec(compile(live.install_source(REPO, "main"), "install", "exec"), {})
    assert calls and calls[0][0][-1] == "git+https://github.com/nlicl/nlicl.git@main"


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
