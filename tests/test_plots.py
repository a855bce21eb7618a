"""nlicl_lib.book.plots: axis types, log tick labels, line styles, and text wrapped to fit a phone."""

from __future__ import annotations

import itertools
import json
import re

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from nlicl_lib.book import display, plots

BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
TAG = re.compile(r"<[^<>]*>")

TEXTS = [
    "One LSA layer trained on linear regression (d=5, n=20)",
    "slots m (width h = max(m, p₂))  /  width h (slots m = max(h, p₂))",
    "best single step of linear GD at n = 20, exact (Theorem 9, ψ = x), L = 1",
    "kernel ridge, (1 + x·x')^2, tuned penalty (at the floor: below 0.001, exact fit)",
    "the loss L<sub>n, k</sub> of <b>all three trained models</b> against x<sup>2 + 1</sup> here",
    '<span style="color: red">a red note with spaces</span> then &amp; plain &lt;words&gt; go on',
    "supercalifragilisticexpialidocious is longer than any line we allow here",
    "short",
    "",
]


def words(text: str) -> list[str]:
    """The words of ``text`` (line breaks and runs of spaces both separate words)."""
    return BREAK.sub(" ", text).split()


@pytest.mark.parametrize(("text", "width"), list(itertools.product(TEXTS, [12, 20, 33, 45])))
def test_wrap_text_keeps_every_word_and_tag_and_fits_the_width(text: str, width: int) -> None:
    wrapped = plots.wrap_text(text, width)
    assert words(wrapped) == words(text)  # nothing lost, nothing split, nothing reordered
    assert TAG.findall(BREAK.sub("", wrapped)) == TAG.findall(text)  # every tag intact
    for line in BREAK.split(wrapped):
        # a line is too long only when it is one word (tags included) that is
        assert plots.visible_length(line) <= width or len(line.split()) == 1, line
    if plots.visible_length(text) <= width:
        assert wrapped == text  # text that fits comes back identical
    assert plots.wrap_text(wrapped, width) == wrapped  # idempotent
    assert plots.wrap_text(wrapped, 5) == wrapped  # an existing <br> is the author's layout


def test_wrap_text_never_breaks_inside_tags_or_sub_and_superscripts() -> None:
    text = "x<sub>i, j</sub> plus y<sup>a b c</sup> and <span class='one two'>z</span> w"
    wrapped = plots.wrap_text(text, 8)
    assert "<sub>i, j</sub>" in wrapped and "<sup>a b c</sup>" in wrapped
    assert "<span class='one two'>" in wrapped
    for tag in TAG.findall(BREAK.sub("", wrapped)):
        assert "<br>" not in tag


def test_wrap_text_balances_lines_and_counts_entities_as_one_character() -> None:
    assert plots.wrap_text("full one-step kernel GD (m = h = p₂)", 33) == (
        "full one-step kernel<br>GD (m = h = p₂)")  # no dangling "p₂" on a line of its own
    assert plots.visible_length("a &amp; b<sub>2</sub>") == 6
    assert plots.wrap_text("aa &amp; bb", 7) == "aa &amp; bb"


def test_wrap_text_leaves_other_values_alone() -> None:
    assert plots.wrap_text(None, 10) is None
    assert plots.wrap_text(42, 10) == 42
    latex = "$\\mathcal{L}(\\Gamma) = \\operatorname{tr} S - \\operatorname{tr}(S^3 B^{-1})$"
    assert plots.wrap_text(latex, 10) == latex
    assert plots.wrap_text("a<BR/>b long long long long", 5) == "a<BR/>b long long long long"


def test_text_lines_and_wrap_width() -> None:
    assert plots.text_lines(None) == 0 and plots.text_lines("") == 0
    assert plots.text_lines("a") == 1 and plots.text_lines("a<br>b<br/>c") == 3
    # the book's 18 px title on a phone: about 34 characters, never fewer than the minimum
    assert plots.wrap_width(plots.PHONE_FIGURE_PX - 16, 18) == 33
    assert plots.wrap_width(10, 18) == plots.MIN_WRAP_CHARS


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


LONG_TITLE = "One trained block against the best one-step GD, degree-1 task"
LONG_NAME = "kernel ridge, (1 + x·x')^2, tuned penalty (at the floor: below 0.001, exact fit)"
LONG_X = "slots m (width h = max(m, p₂))  /  width h (slots m = max(h, p₂))"
LONG_Y = "exact test loss / best one-step GD on (x, φ₂) at every n"


def lines_fit(text: str, width: int) -> bool:
    return all(plots.visible_length(line) <= width for line in BREAK.split(text))


def test_prepare_figure_wraps_title_legend_and_axis_titles_to_fit_a_phone() -> None:
    fig = plots.new_figure(LONG_TITLE, LONG_X, LONG_Y)
    fig.add_trace(plots.trained_trace([1, 2], [1, 2], "trained"))
    fig.add_trace(plots.baseline_trace([1, 2], [1, 1], LONG_NAME))
    fig.add_trace(plots.bound_trace([1, 2], [0, 0], "hidden " * 12, showlegend=False))
    prepared = display.prepare_figure(fig)
    layout = prepared.layout
    assert plots.text_lines(layout.title.text) == 2 and lines_fit(layout.title.text, 33)
    assert prepared.data[0].name == "trained"
    assert plots.text_lines(prepared.data[1].name) >= 3 and lines_fit(prepared.data[1].name, 33)
    assert prepared.data[2].name == "hidden " * 12  # not in the legend: left alone
    assert plots.text_lines(layout.xaxis.title.text) == 2
    assert lines_fit(layout.xaxis.title.text, 36)
    assert plots.text_lines(layout.yaxis.title.text) == 2
    assert fig.layout.title.text == LONG_TITLE and fig.data[1].name == LONG_NAME  # untouched
    # the wrapped title starts inside the figure: its first baseline below the top edge
    assert layout.title.yanchor == "bottom" and layout.title.yref == "container"
    first_baseline = (1 - layout.title.y) * layout.height
    assert first_baseline == pytest.approx(plots.TITLE_TOP_PX + 0.86 * 18, abs=1)


def test_prepare_figure_twice_changes_nothing_more() -> None:
    base = plots.new_figure(LONG_TITLE, LONG_X, LONG_Y, log_y=True)
    panels = {(k, m): [plots.trained_trace([1, 2], [k, m], f"{LONG_NAME} {k}{m}")]
              for k in (1, 2) for m in ("pure quadratic", "linear + quadratic")}
    titles = {key: f"{LONG_TITLE} at k = {key[0]}" for key in panels}
    slider = plots.slider_figure(base, panels, ["target degree k", "task"],
                                 [[1, 2], ["pure quadratic", "linear + quadratic"]], titles)
    grid = make_subplots(rows=1, cols=2, subplot_titles=["trained block: K = AᵀΓA",
                                                         "optimal Γ* = S B⁻¹ (Corollary 10)"])
    grid.add_heatmap(z=[[0, 1], [1, 0]], row=1, col=1)
    grid.add_heatmap(z=[[0, 1], [1, 0]], row=1, col=2)
    grid.update_layout(title_text="The preconditioner the trained block applies, and the best",
                       margin={"t": 90})
    bottom = plots.new_figure(LONG_TITLE, "x", "y")
    bottom.add_trace(plots.trained_trace([1], [1], LONG_NAME))
    bottom.update_layout(legend={"y": -0.2, "yanchor": "top"}, margin={"b": 150})
    for fig in (slider, grid, bottom, go.Figure(go.Scatter(x=[1], y=[2], name=LONG_NAME))):
        once = display.prepare_figure(fig)
        assert json.loads(display.prepare_figure(once).to_json()) == json.loads(once.to_json())


def test_top_legend_counts_the_lines_of_wrapped_entries_and_title() -> None:
    fig = plots.new_figure("title", "x", "y")
    fig.add_trace(plots.trained_trace([0], [0], "one line"))
    fig.add_trace(plots.trained_trace([0], [0], "two<br>lines"))
    assert plots.legend_entries(fig) == 2 and plots.legend_lines(fig) == 3
    assert plots.legend_height(fig) == 2 * plots.LEGEND_ROW_PX + plots.LEGEND_LINE_PX
    prepared = display.prepare_figure(fig)
    one_line_title = prepared.layout.margin.t
    assert one_line_title == plots.TITLE_PX + plots.legend_height(fig) + 8
    fig.update_layout(title_text="a title<br>in two lines")
    two_line_title = display.prepare_figure(fig).layout.margin.t
    assert two_line_title == one_line_title + plots.TITLE_LINE_PX
    assert display.prepare_figure(fig).layout.height - fig.layout.height == (
        two_line_title - fig.layout.margin.t)  # the plot keeps its size


def test_slider_panel_titles_and_labels_are_wrapped_and_counted() -> None:
    base = plots.new_figure("short", "x", "y")
    panels = {(k,): [plots.trained_trace([0, 1], [0, k], f"k={k}")] for k in (1, 2)}
    titles = {(1,): "short", (2,): LONG_TITLE}
    fig = plots.slider_figure(base, panels, ["the target degree of the task, k, varies"],
                              [[1, 2]], titles)
    prepared = display.prepare_figure(fig)
    meta_titles = prepared.layout.meta["nlicl_sliders"]["titles"]
    assert meta_titles[0] == "short" and plots.text_lines(meta_titles[1]) == 2
    step_titles = [step.args[1]["title.text"] for step in prepared.layout.sliders[0].steps]
    assert step_titles == meta_titles
    assert fig.layout.sliders[0].steps[1].args[1]["title.text"] == LONG_TITLE  # untouched
    assert fig.layout.meta["nlicl_sliders"]["titles"][1] == LONG_TITLE
    assert plots.title_lines(prepared) == 2
    # room for the longest panel title, though the first panel's has one line
    assert prepared.layout.margin.t == (plots.TITLE_PX + plots.TITLE_LINE_PX
                                        + plots.legend_height(prepared) + 8)
    assert "<br>" in prepared.layout.sliders[0].currentvalue.prefix


def test_wrapped_x_title_pushes_the_sliders_down() -> None:
    base = plots.new_figure("t", LONG_X, "y")
    panels = {(k,): [plots.trained_trace([0, 1], [0, k], "c")] for k in (1, 2)}
    fig = plots.slider_figure(base, panels, ["k"], [[1, 2]])
    prepared = display.prepare_figure(fig)
    extra = prepared.layout.sliders[0].pad.t - plots.SLIDER_PAD_PX
    assert extra == round(plots.LINE_SPACING * 16)  # one more line of 16 px axis title
    assert prepared.layout.margin.b == fig.layout.margin.b + extra


def test_long_end_labels_shorten_the_slider_to_stay_on_a_phone_screen() -> None:
    base = plots.new_figure("t", "x", "y")
    panels = {(k,): [plots.trained_trace([0, 1], [0, 1], "c")]
              for k in ("pure quadratic", "linear + quadratic")}
    fig = plots.slider_figure(base, panels, ["task"], [[key[0] for key in panels]])
    slider = display.prepare_figure(fig).layout.sliders[0]
    assert slider.x >= 0.05 and slider.x + slider.len < 0.95
    short = plots.slider_figure(base, {(k,): panels[("pure quadratic",)] for k in (1, 2)},
                                ["k"], [[1, 2]])
    unchanged = display.prepare_figure(short).layout.sliders[0]
    assert (unchanged.x, unchanged.len) == (0.05, 0.9)


def test_subplot_titles_wrap_and_get_room_above_the_plots() -> None:
    fig = make_subplots(rows=1, cols=2, subplot_titles=["trained block: K = AᵀΓA",
                                                        "optimal Γ* = S B⁻¹ (Corollary 10)"])
    fig.add_heatmap(z=[[0, 1], [1, 0]], row=1, col=1)
    fig.add_heatmap(z=[[0, 1], [1, 0]], row=1, col=2)
    fig.update_layout(title_text="A title", margin={"t": 60}, height=400)
    prepared = display.prepare_figure(fig)
    texts = [a.text for a in prepared.layout.annotations]
    assert all(plots.text_lines(text) >= 2 for text in texts)
    lines = max(plots.text_lines(text) for text in texts)
    title_px = (plots.TEXT_ASCENT_EM + plots.TEXT_DESCENT_EM) * plots.title_font_px(prepared)
    wanted = plots.TITLE_TOP_PX + title_px + 10 + lines * plots.LINE_SPACING * 16 + 4
    assert prepared.layout.margin.t == pytest.approx(wanted, abs=1)
    assert prepared.layout.height - 400 == prepared.layout.margin.t - 60
    plain = make_subplots(rows=1, cols=2, subplot_titles=["a", "b"])
    plain.update_layout(title_text="A title", margin={"t": 60})
    assert display.prepare_figure(plain).layout.margin.t == 60  # nothing wrapped: unchanged


def test_bottom_legend_gets_a_margin_for_its_rows() -> None:
    fig = plots.new_figure("t", "x", "y")
    for index in range(4):
        fig.add_trace(plots.trained_trace([0], [0], f"{LONG_NAME} {index}"))
    fig.update_layout(legend={"y": -0.2, "yanchor": "top"}, margin={"b": 100})
    prepared = display.prepare_figure(fig)
    plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    wanted = 0.2 * plot_h + plots.legend_height(prepared) + 10
    assert prepared.layout.margin.b == pytest.approx(wanted, abs=1)
    assert prepared.layout.height - prepared.layout.margin.t - prepared.layout.margin.b == plot_h


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
