"""The book build's tools: the execution cache (tools/nlicl_exec.py), what makes chapters execute
again, and the Sphinx extension's checks (tools/nlicl_sphinx.py): the vendored plotly.js
bundle matches the plotly package and draws every trace of the pages, and no page needs a
widget manager.

Unit tests, no browser and no book build: they run with ``make test``. (They live beside the
browser test's helpers because both test the book's build infrastructure, not the library.)
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import plotly.graph_objects as go
import pydata_sphinx_theme
import pytest
import sphinxcontrib.katex
from plotly.subplots import make_subplots
from sphinx.builders.html._assets import _CascadingStyleSheet, _JavaScript
from sphinx.errors import ExtensionError

from nlicl_lib.book.display import figure_output
from nlicl_lib.book.widgets import Param, TrainingPanel

ROOT = Path(__file__).resolve().parents[2]
VENDORED_PLOTLY = ROOT / "book" / "_static" / "vendor" / "plotly-cartesian.min.js"
VENDORED_KATEX = ROOT / "book" / "_static" / "vendor" / "katex"


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nlicl_exec = load_tool("nlicl_exec")
nlicl_sphinx = load_tool("nlicl_sphinx")


@pytest.fixture
def book(tmp_path: Path) -> Path:
    """A miniature repository: a library, pinned requirements and three pages."""
    (tmp_path / "nlicl_lib").mkdir()
    (tmp_path / "nlicl_lib" / "__init__.py").write_text("")
    (tmp_path / "nlicl_lib" / "tasks.py").write_text("DEGREE = 2\n")
    (tmp_path / "requirements.txt").write_text("numpy==2.4.6\n")
    pages = tmp_path / "book"
    pages.mkdir()
    (pages / "uses_lib.md").write_text("```{code-cell} ipython3\nimport nlicl_lib.core.tasks\n```\n")
    (pages / "uses_from.md").write_text("```{code-cell}\nfrom nlicl_lib.book.display import show\n```\n")
    (pages / "plain.md").write_text("# Mentions nlicl_lib in prose only\n")
    return tmp_path


def test_digest_follows_library_files_and_pins(book: Path) -> None:
    first = nlicl_exec.inputs_digest(book)
    assert nlicl_exec.inputs_digest(book) == first

    (book / "book" / "plain.md").write_text("# edited page\n")  # a page has its own key
    (book / "nlicl_lib" / "__pycache__").mkdir()
    (book / "nlicl_lib" / "__pycache__" / "tasks.cpython-311.pyc").write_bytes(b"\0")
    assert nlicl_exec.inputs_digest(book) == first

    (book / "nlicl_lib" / "tasks.py").write_text("DEGREE = 3\n")
    second = nlicl_exec.inputs_digest(book)
    assert second != first
    (book / "nlicl_lib" / "data.json").write_text("{}")  # stored study data the pages read
    third = nlicl_exec.inputs_digest(book)
    assert third != second
    (book / "requirements.txt").write_text("numpy==2.4.7\n")
    assert nlicl_exec.inputs_digest(book) != third


def test_pages_read_with_another_library_are_read_and_executed_again(book: Path) -> None:
    env = SimpleNamespace(found_docs={"book/a", "book/b", "book/c"})
    app = SimpleNamespace(env=env)
    nlicl_exec._STATE["digest"] = "old"
    for docname in ("book/a", "book/b"):
        env.docname = docname
        nlicl_exec.record_digest(app, None)
    assert nlicl_exec.outdated_by_inputs(app, env, set(), set(), set()) == []
    nlicl_exec._STATE["digest"] = "new"  # nlicl_lib or the pins changed
    assert nlicl_exec.outdated_by_inputs(app, env, set(), set(), set()) == ["book/a", "book/b"]
    assert nlicl_exec.outdated_by_inputs(app, env, set(), {"book/a"}, set()) == ["book/b"]


# --- tools/nlicl_sphinx.py -----------------------------------------------------------------


def bundle(path: Path, header: str) -> Path:
    path.write_text(f"/**\n* {header}\n* Copyright 2012-2026, Plotly, Inc.\n*/\n(function(){{}})();\n")
    return path


def test_plotly_js_version_reads_full_and_partial_bundle_headers(tmp_path: Path) -> None:
    assert nlicl_sphinx.plotly_js_version(bundle(tmp_path / "a.js", "plotly.js v4.1.1")) == "4.1.1"
    partial = bundle(tmp_path / "b.js", "plotly.js (cartesian - minified) v4.2.0")
    assert nlicl_sphinx.plotly_js_version(partial) == "4.2.0"
    with pytest.raises(ExtensionError, match="no plotly.js version"):
        nlicl_sphinx.plotly_js_version(bundle(tmp_path / "c.js", "some other library v1.0.0"))


def test_vendored_plotly_js_is_the_one_the_plotly_package_ships() -> None:
    source = nlicl_sphinx._plotly_js_source()
    version = nlicl_sphinx.check_plotly_version(VENDORED_PLOTLY, source)
    assert version == nlicl_sphinx.plotly_js_version(source) == "4.1.1"


def test_a_plotly_upgrade_without_a_new_bundle_stops_the_build(tmp_path: Path) -> None:
    upgraded = bundle(tmp_path / "plotly.min.js", "plotly.js v4.2.0")
    with pytest.raises(ExtensionError) as error:
        nlicl_sphinx.check_plotly_version(VENDORED_PLOTLY, upgraded)
    message = str(error.value)
    assert "v4.1.1" in message and "v4.2.0" in message
    assert "npm pack plotly.js-cartesian-dist-min@4.2.0" in message


def test_the_site_drops_retired_static_files_unless_they_are_sources_again(tmp_path: Path) -> None:
    source, site = tmp_path / "static", tmp_path / "html" / "_static"
    (source / "vendor").mkdir(parents=True)
    shutil.copyfile(VENDORED_PLOTLY, source / nlicl_sphinx.PLOTLY_STATIC_PATH)
    (source / "vendor" / "require.js").write_text("// vendored again")
    for name in ("vendor/plotly.min.js", "nlicl-widgets.js", "vendor/require.js",
                 "vendor/jupyter-widgets/embed-amd.js", "vendor/mathjax/tex-chtml.js",
                 "vendor/katex/katex.min.css"):
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text("// from an earlier build")
    app = SimpleNamespace(builder=SimpleNamespace(format="html"), confdir=str(tmp_path),
                          outdir=str(tmp_path / "html"),
                          config=SimpleNamespace(html_static_path=["static"]))
    nlicl_sphinx.prepare_static(app)
    left = sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file())
    assert left == ["vendor/katex/katex.min.css", "vendor/require.js"]


def test_the_vendored_katex_stylesheet_and_fonts_match_the_script_sphinxcontrib_katex_ships(
        ) -> None:
    # the stylesheet states its version; every font it names has its WOFF2 beside it
    version = sphinxcontrib.katex.katex_version
    css = (VENDORED_KATEX / "katex.min.css").read_text(encoding="utf-8")
    assert f'content:"{version}"' in css, (
        f"book/_static/vendor/katex is not KaTeX {version}: `npm pack katex@{version}` and copy "
        "dist/katex.min.css and dist/fonts/*.woff2 (book/_static/vendor/README.md)")
    named = set(re.findall(r"url\((fonts/[\w-]+\.woff2)\)", css))
    assert named, "the stylesheet names no WOFF2 fonts"
    missing = sorted(name for name in named if not (VENDORED_KATEX / name).is_file())
    assert not missing, f"fonts the stylesheet names but the site lacks: {missing}"


def test_the_cartesian_trace_list_is_the_bundles() -> None:
    """The list in nlicl_sphinx is the trace modules the bundle registers (those its npm
    package's README names)."""
    text = VENDORED_PLOTLY.read_text(encoding="utf-8")
    registered = set(re.findall(r'moduleType:\s*"trace",\s*name:\s*"(\w+)"', text))
    assert registered == nlicl_sphinx.CARTESIAN_TRACES


def page_body(*figures: go.Figure) -> str:
    """A page body as myst-nb writes it: prose around each figure's HTML output."""
    parts = ["<p>Axis <code>type</code> is &quot;log&quot;.</p>"]
    for fig in figures:
        parts += [figure_output(fig)[0]["text/html"], "<p>More prose.</p>"]
    return "\n".join(parts)


def test_trace_types_come_from_the_traces_not_the_layout() -> None:
    fig = make_subplots(rows=1, cols=3)
    fig.add_trace(go.Scatter(x=[1, 2], y=[1, 10]), 1, 1)
    fig.add_trace(go.Bar(x=["a", "b"], y=[1, 2]), 1, 2)
    fig.add_trace(go.Heatmap(z=[[1, 2], [3, 4]]), 1, 3)
    fig.update_yaxes(type="log", row=1, col=1)
    fig.update_xaxes(type="category", row=1, col=2)
    fig.update_layout(template="plotly_white")  # its defaults name every trace type
    body = page_body(fig)
    assert '"type":"scatter3d"' in body.replace(" ", "")  # in the template only
    assert [kind for _, kind in nlicl_sphinx.figure_trace_types(body)] == ["scatter", "bar",
                                                                          "heatmap"]
    nlicl_sphinx.check_plotly_traces("book/ch1", body)


def test_frames_are_read_and_a_trace_without_type_is_a_scatter() -> None:
    fig = go.Figure(go.Scatter(x=[1], y=[2]), frames=[go.Frame(data=[go.Bar(x=[1], y=[3])])])
    assert [kind for _, kind in nlicl_sphinx.figure_trace_types(page_body(fig))] == [
        "scatter", "bar"]
    # as plotly.js reads them: a trace without a type is a scatter; a frame's trace without
    # one restyles the figure's trace
    written = ('<div class="nlicl-plotly"><div id="f"></div><script>Plotly.newPlot("f", '
               '[{"y": [1]}], {"xaxis": {"type": "log"}}).then(function(){ '
               "Plotly.addFrames('f', [{\"data\": [{\"y\": [2]}]}]); })</script></div>")
    assert nlicl_sphinx.figure_trace_types(written) == [("f", "scatter")]


def test_a_trace_the_bundle_cannot_draw_fails_naming_page_figure_and_type() -> None:
    flat = go.Figure(go.Scatter(x=[1], y=[1]))
    solid = go.Figure(go.Scatter3d(x=[1], y=[1], z=[1]))
    body = page_body(flat, solid)
    figure_id = nlicl_sphinx.figure_trace_types(body)[-1][0]
    with pytest.raises(ExtensionError) as error:
        nlicl_sphinx.check_plotly_traces("book/ch9_solids", body)
    message = str(error.value)
    assert "book/ch9_solids" in message and "'scatter3d'" in message and figure_id in message
    # frames are checked too
    animated = go.Figure(go.Scatter(x=[1], y=[1]), frames=[go.Frame(data=[go.Scattergl(y=[1])])])
    with pytest.raises(ExtensionError, match="'scattergl'"):
        nlicl_sphinx.check_plotly_traces("book/ch9", page_body(animated))


def test_a_figure_whose_data_cannot_be_read_fails() -> None:
    broken = '<div class="nlicl-plotly"><div id="f"></div><script>Plotly.newPlot("f", [{oops}], {})</script></div>'
    with pytest.raises(ExtensionError, match="book/ch1: figure f: unreadable data"):
        nlicl_sphinx.check_plotly_traces("book/ch1", broken)
    with pytest.raises(ExtensionError, match="no Plotly.newPlot"):
        nlicl_sphinx.check_plotly_traces("book/ch1", '<div class="nlicl-plotly"><script></script>')


def static_panel_html(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("NLICL_BOOK_BUILD", "1")
    panel = TrainingPanel([Param("depth", "depth L", 1, 1, 3)], lambda settings: None)
    return panel.static_html()


def build_site(tmp_path: Path, notebook: nbformat.NotebookNode) -> subprocess.CompletedProcess:
    """A one-page Sphinx site with myst-nb (no execution) and the book's extension."""
    source = tmp_path / "src"
    (source / "_static" / "vendor").mkdir(parents=True)
    shutil.copyfile(VENDORED_PLOTLY, source / "_static" / nlicl_sphinx.PLOTLY_STATIC_PATH)
    (source / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tools')!r})\n"
        "extensions = ['myst_nb', 'nlicl_sphinx']\nnb_execution_mode = 'off'\n"
        "html_static_path = ['_static']\n")
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
    notebook.metadata["widgets"] = {nlicl_sphinx.WIDGET_STATE_MIMETYPE: {
        "state": {"abc": {"model_name": "IntSliderModel", "model_module": "@jupyter-widgets/controls",
                          "model_module_version": "2.0.0", "state": {"value": 1}}},
        "version_major": 2, "version_minor": 0}}
    result = build_site(tmp_path, notebook)
    assert result.returncode != 0
    assert "page index holds ipywidgets state" in result.stderr


# --- icons: the theme's icon script replaced by inline SVG -------------------------------------

def _theme_icon_script() -> str:
    path = (Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static"
            / "scripts" / "fontawesome.js")
    return path.read_text(encoding="utf-8")


def test_icon_paths_come_from_each_pack_of_the_theme_script() -> None:
    packs = nlicl_sphinx.icon_paths(_theme_icon_script())
    assert set(packs) == {"solid", "regular", "brands"}
    assert packs["solid"]["bars"][:2] == (448, 512)
    assert packs["brands"]["github"][:2] == (496, 512)
    assert "github" not in packs["solid"]  # each icon from its own pack
    assert packs["solid"]["moon"][2] != packs["regular"]["moon"][2]


def test_pages_get_svg_icons_and_lose_the_icon_script() -> None:
    packs = nlicl_sphinx.icon_paths(_theme_icon_script())
    page = ('<head>\n    <script defer src="../_static/scripts/fontawesome.js?digest=abc"></script>\n'
            '</head><body><i class="fa-solid fa-bars"></i>'
            '<i class="theme-switch fa-solid fa-sun  fa-lg" data-mode="light" aria-hidden="true"></i>'
            '<i class="fab fa-github"></i><i class="fa-solid fa-no-such-icon"></i>'
            '<span class="fa-solid fa-bars"></span></body>')
    out = nlicl_sphinx.inline_icon_tags(page, packs)
    assert "fontawesome.js" not in out
    assert out.count("<svg ") == 4 and out.count('aria-hidden="true"') == 4
    assert 'data-mode="light"' in out and 'viewBox="0 0 496 512"' in out
    assert '<i class="fa-solid fa-no-such-icon"></i>' in out  # left to the icon font
    assert nlicl_sphinx.inline_icon_tags(out, packs) == out  # idempotent


def test_katex_loads_only_on_pages_with_a_formula() -> None:
    def page(has_maths: bool) -> list[str]:
        domain = SimpleNamespace(has_equations=lambda name: has_maths)
        app = SimpleNamespace(env=SimpleNamespace(get_domain=lambda name: domain))
        context = {
            "script_files": [_JavaScript("_static/doctools.js"), _JavaScript("_static/katex.min.js"),
                             _JavaScript("_static/auto-render.min.js"),
                             _JavaScript("_static/katex_autorenderer.js")],
            "css_files": [_CascadingStyleSheet("_static/nlicl.css"),
                          _CascadingStyleSheet("_static/vendor/katex/katex.min.css"),
                          _CascadingStyleSheet("_static/katex-math.css")],
        }
        nlicl_sphinx.katex_only_with_maths(app, "search", "page.html", context, None)
        return [asset.filename for key in ("script_files", "css_files") for asset in context[key]]

    assert page(False) == ["_static/doctools.js", "_static/nlicl.css"]
    assert len(page(True)) == 7


def test_hidden_cell_toggles_are_named_by_their_text_and_the_bibliography_is_no_list():
    body = ('<details class="hide above-input"><summary aria-label="Toggle hidden content">'
            '<span class="collapsed">Show the solution</span></summary></details>'
            '<div role="list" class="citation-list"><div role="doc-biblioentry">A</div></div>')
    context = {"body": body}
    nlicl_sphinx.accessible_names(None, "page", "page.html", context, None)
    assert "aria-label" not in context["body"] and "<summary><span" in context["body"]
    assert '<div class="citation-list"><div role="doc-biblioentry">' in context["body"]
