"""nlicl_lib.sphinxext.site, the book's Sphinx extension: the vendored plotly.js is the plotly
package's, no page holds widget state, and a static file's change rewrites every page.

Unit tests and one-page Sphinx builds (no book build): they run with ``make test``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import plotly.graph_objects as go
import pytest
from sphinx.errors import ExtensionError

from nlicl_lib.pages.display import figure_output
from nlicl_lib.pages.panels import lsa_gd_panel
from nlicl_lib.sphinxext import site

ROOT = Path(__file__).resolve().parents[1]
VENDORED_PLOTLY = ROOT / "book" / "_static" / site.PLOTLY_STATIC_PATH


def bundle(path: Path, header: str) -> Path:
    path.write_text(f"/**\n* {header}\n* Copyright 2012-2026, Plotly, Inc.\n*/\n(function(){{}})();\n")
    return path


def test_plotly_js_version_reads_full_and_partial_bundle_headers(tmp_path: Path) -> None:
    assert site.plotly_js_version(bundle(tmp_path / "a.js", "plotly.js v4.1.1")) == "4.1.1"
    partial = bundle(tmp_path / "b.js", "plotly.js (cartesian - minified) v4.2.0")
    assert site.plotly_js_version(partial) == "4.2.0"
    with pytest.raises(ExtensionError, match="no plotly.js version"):
        site.plotly_js_version(bundle(tmp_path / "c.js", "some other library v1.0.0"))


def test_vendored_plotly_js_is_the_one_the_plotly_package_ships() -> None:
    source = site.plotly_js_source()
    version = site.check_plotly_version(VENDORED_PLOTLY, source)
    assert version == site.plotly_js_version(source) == "4.1.1"


def test_a_plotly_upgrade_without_a_new_bundle_stops_the_build(tmp_path: Path) -> None:
    upgraded = bundle(tmp_path / "plotly.min.js", "plotly.js v4.2.0")
    with pytest.raises(ExtensionError) as error:
        site.check_plotly_version(VENDORED_PLOTLY, upgraded)
    message = str(error.value)
    assert "v4.1.1" in message and "v4.2.0" in message
    assert "npm pack plotly.js-cartesian-dist-min@4.2.0" in message


def test_a_changed_static_file_rereads_every_page(tmp_path: Path) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "a.css").write_text("p { color: red }")
    app = SimpleNamespace(confdir=str(tmp_path), config=SimpleNamespace(html_static_path=["static"]),
                          builder=SimpleNamespace(format="html"))
    env = SimpleNamespace(found_docs={"a", "b", "c"})
    notebooks = SimpleNamespace(**{**vars(app), "builder": SimpleNamespace(format="ipynb")})
    assert site.reread_when_static_changed(notebooks, env, set(), set(), set()) == []
    assert site.reread_when_static_changed(app, env, set(), set(), set()) == ["a", "b", "c"]
    assert site.reread_when_static_changed(app, env, set(), set(), set()) == []  # nothing changed
    (static / "a.css").write_text("p { color: blue }")
    assert site.reread_when_static_changed(app, env, {"c"}, set(), set()) == ["a", "b"]


def static_panel_html(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("NLICL_BOOK_BUILD", "1")
    return lsa_gd_panel().static_html()


def build_site(tmp_path: Path, notebook: nbformat.NotebookNode) -> subprocess.CompletedProcess:
    """A one-page Sphinx site with myst-nb (no execution), plotly.js by ``html_js_files`` as
    the book names it, and the book's extension."""
    source = tmp_path / "src"
    (source / "_static" / "vendor").mkdir(parents=True)
    shutil.copyfile(VENDORED_PLOTLY, source / "_static" / site.PLOTLY_STATIC_PATH)
    (source / "conf.py").write_text(
        "extensions = ['myst_nb', 'nlicl_lib.sphinxext.site']\nnb_execution_mode = 'off'\n"
        f"html_static_path = ['_static']\nhtml_js_files = [{site.PLOTLY_STATIC_PATH!r}]\n")
    nbformat.write(notebook, source / "index.ipynb")
    return subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E",
                           str(source), str(tmp_path / "html")],
                          capture_output=True, text=True, timeout=300)


def notebook_with(*outputs: dict) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("panel", execution_count=1)
    cell.outputs = [nbformat.v4.new_output("display_data", data=data) for data in outputs]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Page"), cell])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    return notebook


def test_a_page_with_a_figure_and_a_static_panel_loads_plotly_and_no_widget_manager(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figure = figure_output(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])))[0]
    panel = {"text/html": static_panel_html(monkeypatch), "text/plain": "panel"}
    result = build_site(tmp_path, notebook_with(figure, panel))
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    assert 'src="_static/vendor/plotly-cartesian.min.js' in page
    assert 'class="nlicl-static-panel"' in page
    assert "require" not in page and "embed-amd" not in page
    assert "widget-state+json" not in page


def test_a_page_with_saved_widget_state_fails_the_build(tmp_path: Path) -> None:
    notebook = notebook_with({"text/plain": "IntSlider(value=1)"})
    notebook.metadata["widgets"] = {site.WIDGET_STATE_MIMETYPE: {
        "state": {"abc": {"model_name": "IntSliderModel", "model_module": "@jupyter-widgets/controls",
                          "model_module_version": "2.0.0", "state": {"value": 1}}},
        "version_major": 2, "version_minor": 0}}
    result = build_site(tmp_path, notebook)
    assert result.returncode != 0
    assert "page index holds ipywidgets state" in result.stderr


def test_sphinx_thebe_writes_its_configuration_twice_so_the_book_drops_it(tmp_path: Path) -> None:
    """The upstream bug behind ``site.drop_thebe``: sphinx-thebe's configuration script twice on
    a page (a SyntaxError). When this test fails, the bug is fixed: remove ``drop_thebe``."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "conf.py").write_text("extensions = ['sphinx_thebe']\n")
    (source / "index.rst").write_text("Page\n====\n")
    result = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E",
                             str(source), str(tmp_path / "html")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    assert page.count("const THEBE_JS_URL") == 2


def test_with_thebe_off_no_sphinx_thebe_file_reaches_a_page() -> None:
    from sphinx.builders.html._assets import _CascadingStyleSheet, _JavaScript

    config = SimpleNamespace(html_theme_options={"launch_buttons": {"thebe": False}})
    app = SimpleNamespace(config=config)
    context = {"script_files": [_JavaScript("_static/doctools.js"),
                                _JavaScript("", body='const THEBE_JS_URL = "x"'),
                                _JavaScript("", body='const THEBE_JS_URL = "x"'),
                                _JavaScript("_static/sphinx-thebe.js")],
               "css_files": [_CascadingStyleSheet("_static/sphinx-thebe.css")]}
    site.drop_thebe(app, "index", "page.html", context, None)
    assert [asset.filename for asset in context["script_files"]] == ["_static/doctools.js"]
    assert context["css_files"] == []
    config.html_theme_options["launch_buttons"]["thebe"] = True
    kept = {"script_files": [_JavaScript("_static/sphinx-thebe.js")]}
    site.drop_thebe(app, "index", "page.html", kept, None)
    assert len(kept["script_files"]) == 1
