"""nlicl_lib.pages.display: a figure works offline in the static book and in a live notebook,
only with traces the site's plotly.js bundle draws; the code a chapter shows fits its column.
(How the built pages draw the figures: tests/test_browser.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import plotly.graph_objects as go
import pytest

from nlicl_lib.pages import display

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "book" / "_static"


def slider_figure(curves: int = 3) -> go.Figure:
    """A figure whose slider switches between precomputed curves, as the chapters use."""
    fig = go.Figure()
    for index in range(curves):
        fig.add_scatter(x=[0, 1, 2], y=[0, index, 2 * index], visible=index == 0)
    steps = [dict(method="update", label=str(index),
                  args=[{"visible": [other == index for other in range(curves)]}])
             for index in range(curves)]
    return fig.update_layout(sliders=[dict(active=0, steps=steps)])


def test_figure_html_uses_the_pages_plotly_and_no_network() -> None:
    html = display.figure_html(slider_figure(), div_id="figure-under-test")
    assert html.startswith('<div class="nlicl-plotly" data-nlicl-figure="figure-under-test" ')
    assert 'id="figure-under-test"' in html
    assert "Plotly.newPlot(" in html
    assert "<script src" not in html.replace(" ", "")  # plotly.js is not loaded here ...
    assert not re.search(r"https?://", html)  # ... nor anything else from the network
    assert len(html) < 20_000  # ... and not inlined (plotly.min.js is megabytes)


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




def test_a_slider_figure_opens_on_the_combination_the_text_discusses() -> None:
    from nlicl_lib.core.errors import ConfigError
    from nlicl_lib.pages.plots import slider_figure as sliders

    panels = {(k, b): [go.Scatter(x=[0, 1], y=[k, b], name=f"{k}-{b}")]
              for k in (1, 2, 3) for b in (0, 1)}
    fig = sliders(go.Figure(), panels, ["k", "block"], [[1, 2, 3], [0, 1]], initial=(2, 1))
    assert [trace.name for trace in fig.data if trace.visible] == ["2-1"]
    assert [slider.active for slider in fig.layout.sliders] == [1, 1]
    opened = sliders(go.Figure(), panels, ["k", "block"], [[1, 2, 3], [0, 1]])
    assert [trace.name for trace in opened.data if trace.visible] == ["1-0"]
    with pytest.raises(ConfigError, match="initial"):
        sliders(go.Figure(), panels, ["k", "block"], [[1, 2, 3], [0, 1]], initial=(4, 0))
