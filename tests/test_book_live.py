"""The book build's live side (``nlicl_lib/sphinxext/notebooks.py``): the live copies of the
notebooks for Colab and Binder, their install cell, the launch buttons and the repository
setting. Unit tests: no book build, no browser (they run with ``make test``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest
import yaml

from nlicl_lib.sphinxext import notebooks as live

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


def config(**launch):
    buttons = {"colab_url": "https://colab.research.google.com", "binderhub_url": "https://mybinder.org",
               "notebook_interface": "jupyterlab", **launch}
    return SimpleNamespace(nlicl_pages_branch="gh-pages", html_theme_options={
        "repository_url": REPO, "repository_branch": "main", "launch_buttons": buttons})


def test_launch_buttons_open_the_live_copy_on_the_published_branch():
    binder = {"text": "Binder", "url": "https://mybinder.org/v2/gh/nlicl/nlicl/main?x"}
    colab = {"text": "Colab", "url": f"{REPO}/blob/main/book/ch2.md"}
    other = {"text": "JupyterHub", "url": "https://hub.example/x"}
    context = {"header_buttons": [{"label": "launch-buttons", "buttons": [binder, colab, other]}]}
    live.point_launch_buttons(SimpleNamespace(config=config()), "book/ch2_attention_alone",
                              "page.html", context, None)
    buttons = {b["text"]: b["url"] for b in context["header_buttons"][0]["buttons"]}
    assert buttons["Colab"] == ("https://colab.research.google.com/github/nlicl/nlicl/blob/"
                                "gh-pages/_colab/book/ch2_attention_alone.ipynb")
    assert buttons["JupyterHub"] == "https://hub.example/x"
    # Binder: the environment of binder/ on the repository's branch; nbgitpuller pulls the
    # published branch into ~/nlicl and opens the copy there
    url = urlsplit(buttons["Binder"])
    assert (url.netloc, url.path) == ("mybinder.org", "/v2/gh/nlicl/nlicl/main")
    pull = urlsplit(parse_qs(url.query)["urlpath"][0])
    assert pull.path == "git-pull" and parse_qs(pull.query) == {
        "repo": [REPO], "branch": ["gh-pages"],
        "urlpath": ["lab/tree/nlicl/_colab/book/ch2_attention_alone.ipynb"]}


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
    cell = live.live_copy(executed_notebook(), live.install_source(url, commit)).cells[0].source
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


# --- the notebooks the builder writes, on a small book ------------------------------------------

CONF = """\
extensions = ["myst_nb", "sphinx_proof", "sphinx_exercise", "nlicl_lib.sphinxext.notebooks"]
prf_realtyp_to_countertyp = {"definition": "theorem", "lemma": "theorem"}  # one counter
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 2
numfig = True
nb_execution_mode = "force"
html_static_path = ["_static"]
html_theme_options = {"repository_url": "https://github.com/a/b", "repository_branch": "main"}
"""
PROOFS = """\
# Proofs

:::{admonition} In this part
Two results.
:::

:::{prf:definition} A definition
:label: def-a

Text.
:::

:::{prf:lemma} A lemma
:label: lem-b

Text.
:::

:::{prf:proof}
By definition.
:::

```{glossary}
kernel
  A function of two points.
```
"""
FIGURE = {"data": [{"type": "scatter", "y": [1, 2]}], "layout": {}}
PAGE = f"""\
---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  name: python3
  display_name: Python 3
---

# A page

## A section

See {{prf:ref}}`def-a`, {{prf:ref}}`lem-b` and the {{term}}`kernel`.

```{{code-cell}} ipython3
:tags: [remove-input]
x = 21
```

```{{code-cell}} ipython3
print(2 * x)
```

```{{code-cell}} ipython3
---
mystnb:
  figure:
    caption: A line, $y$ against $x$.
    name: fig-line
---
from IPython.display import display
display({{"text/html": "<div>fig</div>", "text/plain": "fig"}}, raw=True,
        metadata={{"nlicl": {{"figure_id": "f1", "figure": {FIGURE!r}}}}})
```

````{{exercise-start}} Double it
:label: ex-double
````

Print twice `x`.

````{{exercise-end}}
````

````{{solution-start}} ex-double
:class: dropdown
````

Add it to itself.

```{{code-cell}} ipython3
:tags: [hide-cell, solution]
print(x + x)
```

````{{solution-end}}
````
"""


def build_notebooks(src: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sphinx", "-b", "jupyter", "-W", "--keep-going",
                           "-q", str(src), str(src.parent / "_build" / "jupyter")],
                          capture_output=True, text=True, timeout=300)


def test_the_builder_writes_notebooks_that_read_and_run_like_the_page(tmp_path):
    src = tmp_path / "src"
    (src / "_static" / "vendor").mkdir(parents=True)
    (src / "_static" / "vendor" / "plotly-cartesian.min.js").write_text("/* plotly.js */")
    pages = {"conf.py": CONF, "proofs.md": PROOFS, "page.md": PAGE,
             "index.md": "# Index\n\n```{toctree}\n:numbered:\nproofs\npage\n```\n"}
    for name, text in pages.items():
        (src / name).write_text(text, encoding="utf-8")
    done = build_notebooks(src)
    assert done.returncode == 0, done.stderr
    html = tmp_path / "_build" / "html"
    proofs = "\n".join(c.source for c in nbformat.read(html / "_colab" / "proofs.ipynb", 4).cells)
    # the result's own kind, and anchors for results and glossary terms (issues 1 and 3)
    assert '<a id="def-a"></a>**Definition 1.1** (A definition)' in proofs
    assert '<a id="lem-b"></a>**Lemma 1.2** (A lemma)' in proofs
    assert "Proof. By definition." in proofs and "**Proof.**" not in proofs
    assert '<dt><a id="term-kernel"></a>kernel</dt>' in proofs
    assert "**In this part**\n\nTwo results." in proofs and "# In this part" not in proofs  # 6
    download = nbformat.read(html / "_sources" / "page.ipynb", 4)
    nbformat.validate(download)
    text = "\n".join(c.source for c in download.cells if c.cell_type == "markdown")
    assert "## <a id=\"a-section\"></a>A section" in text
    assert "[Definition 1.1](proofs.ipynb#def-a)" in text
    assert re.search(r'^## <a id="ex-double"></a>Exercise 2\.1 \(Double it\)$', text, re.M), text
    assert '<a id="fig-line"></a>**Fig. 2.1** A line, $ y $ against $ x $.' in text
    # every code cell, the one whose input the page hides too, with its tags and outputs (issue 4)
    code = [c for c in download.cells if c.cell_type == "code"]
    assert [c.source.splitlines()[0] for c in code] == [
        "x = 21", "print(2 * x)", "from IPython.display import display", "print(x + x)"]
    assert [c.metadata.get("tags") for c in code] == [["remove-input"], None, None,
                                                     ["hide-cell", "solution"]]
    assert code[1].outputs[0]["text"] == "42\n"
    loader, figure = code[2].outputs  # plotly.js once, before the first figure
    assert "/* plotly.js */" in loader["data"]["text/html"]
    assert figure["data"]["application/vnd.plotly.v1+json"] == FIGURE
    assert figure["metadata"]["nlicl"] == {"figure_id": "f1"}
    solution = [c for c in download.cells if "solution" in c.metadata.get("tags", [])]
    assert [c.cell_type for c in solution] == ["markdown", "code"]
    assert "Add it to itself." in solution[0].source and "Solution to" in solution[0].source
    # the live copy: the install cell first, no outputs
    copy = nbformat.read(html / "_colab" / "page.ipynb", 4)
    assert copy.cells[0].metadata.tags == ["colab-install"]
    assert "git+https://github.com/a/b.git@" in copy.cells[0].source
    assert [c.source for c in copy.cells[1:]] == [c.source for c in download.cells]
    assert not any(c.get("outputs") for c in copy.cells)
    # a warning fails the build (issue 5: the builder no longer exits before Sphinx counts them)
    (src / "proofs.md").write_text(PROOFS + "\nSee {ref}`nowhere`.\n", encoding="utf-8")
    done = build_notebooks(src)
    assert done.returncode != 0 and "undefined label: 'nowhere'" in done.stderr
