"""nlicl_lib.pages.display: figures that work in the static book and in a live notebook."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest
import yaml

from nlicl_lib.pages import display, plots

ROOT = Path(__file__).resolve().parents[1]


def slider_figure(curves: int = 3) -> go.Figure:
    """A figure whose slider switches between precomputed curves, as the chapters use."""
    fig = go.Figure()
    for index in range(curves):
        fig.add_scatter(x=[0, 1, 2], y=[0, index, 2 * index], visible=index == 0)
    steps = [
        dict(method="update", label=str(index),
             args=[{"visible": [other == index for other in range(curves)]}])
        for index in range(curves)
    ]
    fig.update_layout(sliders=[dict(active=0, steps=steps)],
                      updatemenus=[dict(type="buttons", buttons=[dict(label="reset",
                                                                       method="relayout",
                                                                       args=[{}])])])
    return fig


def embedded_figure(html: str) -> tuple[list, dict, dict]:
    """The (data, layout, config) passed to Plotly.newPlot in ``html``."""
    call = html[html.index("Plotly.newPlot(") + len("Plotly.newPlot("):]
    decoder = json.JSONDecoder()
    rest = call[call.index(",") + 1:].lstrip()
    data, end = decoder.raw_decode(rest)
    rest = rest[end:].lstrip()[1:].lstrip()
    layout, end = decoder.raw_decode(rest)
    rest = rest[end:].lstrip()[1:].lstrip()
    config, _ = decoder.raw_decode(rest)
    return data, layout, config


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("", False), ("0", False), ("no", False), ("1", True), ("true", True),
     ("YES", True)],
)
def test_book_build_mode_follows_the_environment(monkeypatch, value, expected) -> None:
    if value is None:
        monkeypatch.delenv(display.BOOK_BUILD_ENV, raising=False)
    else:
        monkeypatch.setenv(display.BOOK_BUILD_ENV, value)
    assert display.in_book_build() is expected


def test_prepare_figure_is_opaque_responsive_and_leaves_the_original_alone() -> None:
    fig = go.Figure(go.Scatter(x=[0, 1], y=[1, 0]), layout=dict(width=900))
    prepared = display.prepare_figure(fig)
    assert prepared.layout.paper_bgcolor == display.OPAQUE_BACKGROUND
    assert prepared.layout.plot_bgcolor == display.OPAQUE_BACKGROUND
    assert prepared.layout.autosize is True
    assert prepared.layout.width is None
    assert prepared.layout.height == display.DEFAULT_HEIGHT_PX
    assert fig.layout.width == 900 and fig.layout.paper_bgcolor is None


def test_prepare_figure_keeps_chosen_colours_and_height() -> None:
    fig = go.Figure(layout=dict(paper_bgcolor="#f0f0f0", plot_bgcolor="#eeeeee", height=300))
    prepared = display.prepare_figure(fig)
    assert prepared.layout.paper_bgcolor == "#f0f0f0"
    assert prepared.layout.plot_bgcolor == "#eeeeee"
    assert prepared.layout.height == 300



def test_figure_html_uses_the_pages_plotly_and_no_network() -> None:
    html = display.figure_html(slider_figure(), div_id="figure-under-test")
    assert html.startswith('<div class="nlicl-plotly" data-nlicl-figure="figure-under-test" ')
    assert 'id="figure-under-test"' in html
    assert "Plotly.newPlot(" in html
    assert "<script src" not in html.replace(" ", "")  # plotly.js is not loaded here ...
    assert not re.search(r"https?://", html)  # ... nor anything else from the network
    assert len(html) < 20_000  # ... and not inlined (plotly.min.js is megabytes)


def test_figure_html_keeps_sliders_menus_and_sets_the_config() -> None:
    data, layout, config = embedded_figure(display.figure_html(slider_figure(), div_id="f"))
    assert len(data) == 3
    assert len(layout["sliders"][0]["steps"]) == 3
    assert layout["updatemenus"][0]["buttons"][0]["label"] == "reset"
    assert layout["autosize"] is True and "width" not in layout
    assert layout["paper_bgcolor"] == display.OPAQUE_BACKGROUND
    assert config["responsive"] is True
    assert config["displaylogo"] is False


def test_figure_ids_are_stable_in_content_and_unique_on_a_page() -> None:
    first = display.new_figure_id(slider_figure())
    second = display.new_figure_id(slider_figure())
    assert first != second
    assert first.rsplit("-", 1)[0] == second.rsplit("-", 1)[0]
    assert first.rsplit("-", 1)[0] != display.new_figure_id(slider_figure(4)).rsplit("-", 1)[0]


def test_drawn_trace_count_skips_hidden_traces() -> None:
    fig = slider_figure(4)
    fig.add_scatter(x=[0], y=[0], visible="legendonly")
    fig.add_heatmap(z=[[0, 1], [1, 0]])
    assert len(fig.data) == 6
    assert display.drawn_trace_count(fig) == 2


def test_figure_output_carries_html_and_the_counts_for_the_browser_test() -> None:
    data, metadata = display.figure_output(slider_figure(5))
    # No application/vnd.plotly.v1+json: the strict build fails on it (see the module doc).
    assert set(data) == {"text/html", "text/plain"}
    info = metadata["nlicl"]
    assert info["traces"] == 5 and info["drawn_traces"] == 1
    assert f'data-nlicl-figure="{info["figure_id"]}"' in data["text/html"]


def test_show_in_the_book_build_publishes_html(monkeypatch) -> None:
    published = []
    monkeypatch.setenv(display.BOOK_BUILD_ENV, "1")
    monkeypatch.setattr("nlicl_lib.pages.display.publish_display_data",
                        lambda data, metadata=None, **kwargs: published.append((data, metadata)))
    display.show(slider_figure())
    [(data, metadata)] = published
    assert "Plotly.newPlot(" in data["text/html"]
    assert metadata["nlicl"]["traces"] == 3


def test_show_in_a_live_session_uses_plotlys_renderer(monkeypatch) -> None:
    shown = []
    monkeypatch.delenv(display.BOOK_BUILD_ENV, raising=False)
    monkeypatch.setattr(go.Figure, "show", lambda fig, *args, **kwargs: shown.append((fig, kwargs)))
    original = slider_figure()
    display.show(original)
    [(fig, kwargs)] = shown
    assert kwargs["config"]["responsive"] is True
    assert fig.layout.paper_bgcolor == display.OPAQUE_BACKGROUND
    assert fig is not original and len(fig.layout.sliders) == 1


def test_multi_slider_figures_carry_their_grid_and_no_script_of_their_own():
    """Several static sliders are combined on the page by the site's nlicl-figures.js, which
    reads the grid that plots.slider_figure records (checked in a real browser by the browser
    test); the figure's HTML holds no script but plotly's own call."""
    panels = {(a, b): [plots.trained_trace([0, 1], [a, b], f"{a}{b}")] for a in (1, 2) for b in (3, 4)}
    fig = plots.slider_figure(plots.new_figure("t", "x", "y"), panels, ["a", "b"], [[1, 2], [3, 4]])
    html = display.figure_html(fig, "fig-x")
    _, layout, _ = embedded_figure(html)
    meta = layout["meta"]["nlicl_sliders"]
    assert meta["keys"] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert meta["panel_of_trace"] == [0, 1, 2, 3]
    assert html.count("<script") == 1 and "plotly_sliderchange" not in html


def test_figure_html_is_a_labelled_and_described_figure() -> None:
    """Screen readers get the title as the figure's name and a description in words."""
    from nlicl_lib.pages import plots

    base = plots.new_figure("Loss <b>against</b> n & more", "context length n", "test loss",
                            log_x=True)
    panels = {(k,): [plots.trained_trace([10, 160], [0.5, 0.1], "trained"),
                     plots.theory_trace([10, 160], [0.4, 0.1], f"theory, degree {k}")]
              for k in (1, 2, 3)}
    fig = plots.slider_figure(base, panels, ["degree"], [[1, 2, 3]])
    html = display.figure_html(fig, div_id="fig-a11y")
    opening = html[:html.index(">") + 1]
    assert 'role="figure"' in opening
    assert 'aria-label="Loss against n &amp; more"' in opening
    assert 'aria-describedby="fig-a11y-desc"' in opening
    described = re.search(r'<p class="nlicl-sr-only" id="fig-a11y-desc" style="([^"]*)">([^<]*)</p>',
                          html)
    assert described, "the description paragraph is missing"
    style, text = described.groups()
    assert "position:absolute" in style and "clip:rect(0 0 0 0)" in style
    assert text.startswith("Plot: Loss against n &amp; more.")
    assert "x axis: context length n (log scale, data from 10 to 160)." in text
    assert "y axis: test loss (data from 0.1 to 0.5)." in text
    assert "Curves: trained; theory, degree 1; theory, degree 2; theory, degree 3." in text
    assert "Slider: degree (values 1, 2, 3)" in text


def test_describe_figure_names_categories_heatmaps_and_panels() -> None:
    from plotly.subplots import make_subplots

    from nlicl_lib.pages import plots

    fig = plots.new_figure("Trained loss / theory value", "experiment", "ratio")
    fig.add_trace(plots.trained_trace(["ch1-lsa", "ch2-lsa"], [1.0, 1.2], "trained / theory"))
    text = display.describe_figure(fig)
    assert "x axis: experiment (categories ch1-lsa, ch2-lsa)." in text
    assert "Curve: trained / theory." in text
    grid = make_subplots(rows=1, cols=2, subplot_titles=["trained", "optimal"])
    grid.add_heatmap(z=[[-1, 0], [0, 2]], row=1, col=1)
    grid.add_heatmap(z=[[0, 1], [1, 0]], row=1, col=2)
    text = display.describe_figure(grid)
    assert text.startswith("Plot: untitled.")
    assert "Panels: trained; optimal." in text
    assert "x axis: no title." in text and "x axis 2" not in text  # alike subplots: once
    assert "Colour scale: values from -1 to 2." in text
    assert display.plain_text("a<br>b <sub>2</sub> &amp; c") == "a b 2 & c"


STATIC = ROOT / "book" / "_static"


def test_every_page_loads_plotly_and_the_figure_script_by_configuration() -> None:
    """plotly.js and the sliders' script are named once, in html_js_files, for every page."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    scripts = config["sphinx"]["config"]["html_js_files"]
    assert scripts[:2] == ["vendor/plotly-cartesian.min.js", "nlicl-figures.js"]
    assert all((STATIC / script).is_file() for script in scripts)
    figures_js = (STATIC / "nlicl-figures.js").read_text(encoding="utf-8")
    for needle in (".slider-container .slider-group", '"aria-valuenow"', "ArrowRight", "Home",
                   "preventDefault", "plotly_sliderchange", "nlicl_sliders", ".plotly-graph-div"):
        assert needle in figures_js, needle
    # the graph div the script looks for is the one plotly.io writes
    assert 'class="plotly-graph-div"' in display.figure_html(slider_figure(), div_id="f")


@pytest.mark.parametrize("script", sorted(p.name for p in STATIC.glob("*.js")))
def test_the_page_scripts_are_valid_javascript(script: str) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    check = "new Function(require('fs').readFileSync(process.argv[1], 'utf8'))"
    result = subprocess.run([node, "-e", check, str(STATIC / script)], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_a_trace_the_sites_plotly_cannot_draw_stops_the_figure() -> None:
    flat = go.Figure(go.Scatter(x=[1], y=[1]))
    flat.add_bar(x=["a"], y=[1])
    flat.add_heatmap(z=[[1, 2]])
    display.figure_output(flat)  # scatter, bar, heatmap: drawn
    with pytest.raises(ValueError, match="'scatter3d'"):
        display.figure_output(go.Figure(go.Scatter3d(x=[1], y=[1], z=[1])))
    animated = go.Figure(go.Scatter(x=[1], y=[1]), frames=[go.Frame(data=[go.Scattergl(y=[1])])])
    assert display.trace_types(animated) == {"scatter", "scattergl"}  # frames count
    with pytest.raises(ValueError, match="'scattergl'"):
        display.figure_output(animated)


def test_the_cartesian_trace_list_is_the_bundles() -> None:
    """The trace modules the vendored bundle registers (those its npm package's README names)."""
    text = (STATIC / "vendor" / "plotly-cartesian.min.js").read_text(encoding="utf-8")
    registered = set(re.findall(r'moduleType:\s*"trace",\s*name:\s*"(\w+)"', text))
    assert registered == display.CARTESIAN_TRACES


def test_figures_with_numpy_coordinates_are_described():
    """plotly keeps numpy arrays as arrays: describing their axes must not test their truth."""
    fig = plots.new_figure("Numpy data", "x", "y")
    fig.add_trace(go.Scatter(x=np.arange(5), y=np.linspace(0.5, 2.0, 5), name="a"))
    fig.add_trace(go.Heatmap(z=np.eye(3)))
    data, _ = display.figure_output(fig)
    assert "from 0 to 4" in display.describe_figure(display.prepare_figure(fig))
    assert 'role="figure"' in data["text/html"]


def test_show_source_shows_the_code_without_its_docstring(monkeypatch):
    from nlicl_lib.pages import display as page_display
    from nlicl_lib.core.models import LSA, gd_steps

    shown = []
    monkeypatch.setattr(page_display, "display", lambda markdown: shown.append(markdown.data))
    page_display.show_source(gd_steps)
    page_display.show_source(LSA.forward)
    gd_code, lsa_code = shown
    assert gd_code.startswith("```python\ndef gd_steps(") and gd_code.endswith("```")
    assert "Chapter 5 shows" not in gd_code and "omega = step if omega is None" in gd_code
    assert lsa_code.startswith("```python\ndef forward(self, z") and '"""' not in lsa_code


def test_the_code_the_chapters_show_fits_their_column(monkeypatch):
    """The functions chapters 1, 3 and 5 show, as shown: no line over 78 characters (the text
    column holds about 80 at 1280 px; the browser test checks the drawn width)."""
    from nlicl_lib.pages import display as page_display
    from nlicl_lib.core.models import GLU, LSA, gd_steps

    shown = []
    monkeypatch.setattr(page_display, "display", lambda markdown: shown.append(markdown.data))
    for function in (LSA.forward, GLU.hidden, GLU.forward, gd_steps):
        page_display.show_source(function)
    assert max(len(line) for code in shown for line in code.splitlines()) <= 78
