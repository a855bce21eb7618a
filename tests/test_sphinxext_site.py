"""The book's Sphinx extension (book/_ext/nlicl_site.py): vendored plotly.js, no widget
state in pages, a static file's change rewrites every page."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import nlicl_site as site
import plotly.graph_objects as go
import pytest
from sphinx.errors import ExtensionError

from nlicl_lib.pages.display import figure_output
from nlicl_lib.pages.panels import lsa_gd_panel

ROOT = Path(__file__).resolve().parents[1]
VENDORED_PLOTLY = ROOT / "book" / "_static" / site.PLOTLY_STATIC_PATH


def bundle(path: Path, header: str) -> Path:
    path.write_text(f"/**\n* {header}\n* Copyright 2012-2026, Plotly, Inc.\n*/\n(function(){{}})();\n")
    return path


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
        f"import sys\nsys.path.insert(0, {str(Path(site.__file__).parent)!r})\n"
        "extensions = ['myst_nb', 'nlicl_site']\nnb_execution_mode = 'off'\n"
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


