"""nlicl_lib.pages.plots: axis types, log tick labels, line styles, and plotly's own layout
(margins that grow to fit the title, legend and axes; sliders stacked under the plot)."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nlicl_lib.pages import display, plots


def test_new_figure_keeps_plotlys_automatic_axis_type_for_categories() -> None:
    """Experiment names on the x axis: a category axis, not an empty linear one."""
    fig = plots.new_figure("Trained loss / theory value", "experiment", "ratio")
    fig.add_trace(plots.trained_trace(["ch1", "ch2", "ch3"], [1.0, 1.1, 0.9], "ratio"))
    prepared = display.prepare_figure(fig)
    # no type: plotly.js sees strings and makes a category axis (a "linear" one drew nothing)
    for axis in (fig.layout.xaxis, fig.layout.yaxis, prepared.layout.xaxis):
        assert axis.type is None
    layout = prepared.to_plotly_json()["layout"]
    assert "type" not in layout["xaxis"] and "type" not in layout["yaxis"]


def test_new_figure_log_axes_get_full_number_tick_labels() -> None:
    fig = plots.new_figure("t", "n", "loss", log_x=True, log_y=True)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis.tickformat == plots.LOG_TICKFORMAT == "~g"
    assert fig.layout.yaxis.tickformat == "~g"
    linear = plots.new_figure("t", "n", "loss")
    assert linear.layout.yaxis.tickformat is None


def test_prepare_figure_formats_every_log_axis_but_keeps_a_chosen_format() -> None:
    fig = make_subplots(rows=1, cols=2)
    fig.add_scatter(x=[1, 10], y=[1, 100], row=1, col=1)
    fig.add_scatter(x=[1, 10], y=[1, 100], row=1, col=2)
    fig.update_yaxes(type="log")
    fig.update_xaxes(type="log", row=1, col=2)
    fig.update_layout(yaxis2_tickformat=".0e")
    prepared = display.prepare_figure(fig)
    assert prepared.layout.yaxis.tickformat == "~g"
    assert prepared.layout.xaxis2.tickformat == "~g"
    assert prepared.layout.yaxis2.tickformat == ".0e"
    assert prepared.layout.xaxis.tickformat is None  # linear: plotly's own labels


def test_reference_traces_keep_their_styles_and_take_a_dash() -> None:
    x, y = [0, 1], [1, 1]
    assert plots.theory_trace(x, y, "t").line.dash == "dash"
    assert plots.bound_trace(x, y, "b").line.dash == "dot"
    assert plots.baseline_trace(x, y, "r").line.dash == "dashdot"
    assert plots.theory_trace(x, y, "t", dash="longdash").line.dash == "longdash"
    assert plots.bound_trace(x, y, "b", plots.COLORS["trained2"], "dashdot").line.dash == "dashdot"
    baseline = plots.baseline_trace(x, y, "r", dash="longdashdot", showlegend=False)
    assert baseline.line.dash == "longdashdot" and baseline.showlegend is False
    assert plots.bound_trace(x, y, "b").line.color == plots.COLORS["bound"]


def test_new_figure_leaves_the_margins_to_plotlys_automargin() -> None:
    fig = plots.new_figure("A short title", "x", "y")
    title, legend = fig.layout.title, fig.layout.legend
    # the title in the container's top margin, which plotly grows for it on top of the
    # legend's: the two never overlap, whatever the number of legend rows
    assert title.automargin is True and title.yref == "container" and title.yanchor == "top"
    assert legend.orientation == "h" and legend.yanchor == "bottom" and legend.y > 1
    assert fig.layout.xaxis.automargin is True and fig.layout.yaxis.automargin is True
    assert max(fig.layout.margin[side] for side in "lrtb") <= 16  # plotly adds what is needed
    prepared = display.prepare_figure(fig)
    assert prepared.layout.title.text == "A short title" and prepared.layout.margin == fig.layout.margin


def test_subplot_titles_get_room_and_the_texts_size() -> None:
    fig = plots.book_layout(make_subplots(rows=1, cols=2, subplot_titles=["left", "right"]), "t")
    assert fig.layout.margin.t == plots.SUBPLOT_TITLES_PX
    assert {annotation.font.size for annotation in fig.layout.annotations} == {plots.FONT_PX}
    assert plots.new_figure("t", "x", "y").layout.margin.t < plots.SUBPLOT_TITLES_PX


def slider_test_figure(labels: list[str]) -> go.Figure:
    panels = {(depth, label): [go.Scatter(x=[0, 1], y=[depth, 1])]
              for depth in (1, 2) for label in labels}
    return plots.slider_figure(plots.new_figure("t", "x", "y"), panels, ["depth", "task"],
                               [[1, 2], labels])


def test_sliders_stack_under_the_plot_and_the_figure_grows_for_them() -> None:
    fig = slider_test_figure(["a", "b"])
    first, second = fig.layout.sliders
    assert first.y == second.y == 0 and first.yanchor == second.yanchor == "top"
    assert first.pad.t == plots.SLIDER_PAD_PX
    assert second.pad.t == plots.SLIDER_PAD_PX + plots.SLIDER_PX  # under the first
    assert fig.layout.height == plots.FIGURE_HEIGHT_PX + 2 * plots.SLIDER_PX
    assert (first.x, first.len) == (0, 1)


def test_long_end_labels_inset_the_rail_so_that_they_stay_on_a_phone() -> None:
    short = slider_test_figure(["a", "b"]).layout.sliders[1]
    assert (short.pad.l, short.pad.r) == (0, 0)
    long = slider_test_figure(["pure quadratic", "linear + quadratic"]).layout.sliders[1]
    half_last = plots.SLIDER_LABEL_EM * plots.FONT_PX * len("linear + quadratic") / 2
    # the last label's centre sits 10 px in from the rail's end: it may reach the figure's
    # right margin, and no further
    assert long.pad.r == round(half_last) - 10 - plots.SLIDER_ROOM_PX[1]
    assert 0 < long.pad.l < long.pad.r


def test_log_axes_get_ticks_whose_full_number_labels_do_not_collide() -> None:
    # plotly.js would label every digit of these decades ("D1"); with full numbers they overlap
    fig = plots.new_figure("t", "n", "loss", log_x=True, log_y=True)
    fig.add_scatter(x=[10, 30], y=[0.0008, 0.26])  # x: half a decade, y: 2.5 decades
    fig.add_scatter(x=[10, 40], y=[0.001, 0.01], visible=False)  # a hidden slider panel counts
    prepared = display.prepare_figure(fig)
    assert prepared.layout.yaxis.dtick == 1 and prepared.layout.yaxis.tick0 == 0  # decades
    assert prepared.layout.yaxis.minor.showgrid is True  # unlabelled lines in between
    assert prepared.layout.xaxis.dtick is None  # under a decade: plotly's own ticks
    short = plots.new_figure("t", "n", "loss", log_y=True)
    short.add_scatter(x=[1, 2], y=[0.02, 0.5])  # 1.4 decades: 1, 2 and 5 of each
    assert display.prepare_figure(short).layout.yaxis.dtick == "D2"
    wide = plots.new_figure("t", "n", "loss", log_y=True)
    wide.add_scatter(x=[1, 2], y=[0.04, 3e5])  # 6.9 decades: every second one
    wide.update_yaxes(range=[-2, 6])  # the range, not the data, sets the span
    assert display.prepare_figure(wide).layout.yaxis.dtick == 2
    chosen = plots.new_figure("t", "n", "loss", log_y=True)
    chosen.add_scatter(x=[1, 2], y=[0.001, 1])
    chosen.update_yaxes(dtick="D1")
    assert display.prepare_figure(chosen).layout.yaxis.dtick == "D1"  # the author's choice
    twice = display.prepare_figure(prepared)
    assert twice.layout.yaxis.dtick == 1 and twice.layout.xaxis.dtick is None


def test_slider_panels_of_different_spans_get_their_own_log_ticks() -> None:
    # each panel is autoscaled to its own data: one spacing for all (from every panel's data)
    # left a panel spanning 1.1 decades with a single label, as chapter 5's training curves had
    base = plots.new_figure("t", "step", "loss", log_y=True)
    panels = {("a", 1): [go.Scatter(x=[1, 2], y=[0.3, 4.0])],          # 1.1 decades: 1-2-5
              ("a", 2): [go.Scatter(x=[1, 2], y=[0.01, 1e8])],         # 10 decades: every 2nd
              ("b", 1): [go.Scatter(x=[1, 2], y=[0.5, 0.9])],          # under one: every digit
              ("b", 2): [go.Scatter(x=[1, 2], y=[0.2, 3.0])]}
    fig = display.prepare_figure(plots.slider_figure(base, panels, ["s", "L"], [["a", "b"], [1, 2]]))
    assert fig.layout.yaxis.dtick == "D2"  # the first panel's, shown first
    layouts = fig.layout.meta["nlicl_sliders"]["layouts"]  # the page script's, per panel
    assert [layout["yaxis.dtick"] for layout in layouts] == ["D2", 2, "D1", "D2"]
    assert layouts[1]["yaxis.tick0"] == 0
    # a step alone shows its panel with the other slider at its first value
    first, second = fig.layout.sliders
    assert [step.method for step in second.steps] == ["update", "update"]
    assert [step.args[1]["yaxis.dtick"] for step in second.steps] == ["D2", 2]
    assert [step.args[1]["yaxis.dtick"] for step in first.steps] == ["D2", "D1"]
    again = display.prepare_figure(fig)
    assert again.layout.meta["nlicl_sliders"]["layouts"] == layouts
    same = plots.slider_figure(plots.new_figure("t", "step", "loss", log_y=True),
                               {(1,): [go.Scatter(x=[1, 2], y=[0.3, 4.0])],
                                (2,): [go.Scatter(x=[1, 2], y=[0.2, 3.0])]}, ["L"], [[1, 2]])
    same = display.prepare_figure(same)
    assert same.layout.yaxis.dtick == "D2" and "layouts" not in same.layout.meta["nlicl_sliders"]
    assert [step.method for step in same.layout.sliders[0].steps] == ["restyle", "restyle"]


def test_unicode_label_writes_indices_and_powers_as_the_figures_do() -> None:
    spelled = {"x1": "x₁", "x1^2": "x₁²", "x1 x2": "x₁x₂", "x10": "x₁₀", "p_k": "pₖ",
               "phi_2": "φ₂", "d^k / k!": "dᵏ / k!", "σ1": "σ₁", "y": "y", "block k": "block k",
               "p₂ + … + p_k": "p₂ + … + pₖ", "slots m": "slots m"}
    assert {name: plots.unicode_label(name) for name in spelled} == spelled
