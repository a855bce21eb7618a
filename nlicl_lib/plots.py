"""Plotly figures in the book's style, and figures with static sliders over precomputed sweeps.

Every figure that shows a trained model also shows the theory it should match; the trace
styles below make the roles recognisable across chapters: trained results solid with markers,
theory (optima) dashed black, bounds dotted red, baselines grey.

Static sliders: :func:`slider_figure` takes *panels*, one list of traces per combination of
slider values, and adds one plotly slider per parameter. Each step restyles trace visibility, so
the sliders move in the published HTML with no kernel. With several sliders, the figure's
``layout.meta["nlicl_sliders"]`` describes the grid so the page script can combine the sliders
(each step alone assumes the other sliders at their first value).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import plotly.graph_objects as go

COLORS = {
    "trained": "#1f5fbf",
    "trained2": "#d9730d",
    "trained3": "#2a9d5c",
    "trained4": "#8e44ad",
    "theory": "#111111",
    "bound": "#c0392b",
    "baseline": "#7f7f7f",
}
PALETTE = ["#1f5fbf", "#d9730d", "#2a9d5c", "#8e44ad", "#b5446e", "#17becf", "#8c564b"]


TITLE_PX = 52
"""Height of the top margin taken by a figure's title (above a top legend)."""

LEGEND_ROW_PX = 21
"""Height of one legend entry's row in a top legend."""

FIGURE_HEIGHT_PX = 480
"""Default height of :func:`new_figure`, before room for a long legend or sliders is added."""


def legend_entries(fig: go.Figure) -> int:
    """Most legend entries shown at once: per slider panel for a slider figure, else all."""
    named = [bool(t.name) and t.showlegend is not False for t in fig.data]
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    panel_of_trace = (meta.get("nlicl_sliders") or {}).get("panel_of_trace")
    if not panel_of_trace or len(panel_of_trace) != len(named):
        return sum(named)
    counts: dict[int, int] = {}
    for panel, shown in zip(panel_of_trace, named, strict=True):
        counts[panel] = counts.get(panel, 0) + shown
    return max(counts.values(), default=0)


def fit_top_legend(fig: go.Figure) -> go.Figure:
    """Make room above the plot for the title and a top legend with one entry per row.

    A horizontal legend above the plot (the book's style, :func:`new_figure`) wraps to one entry
    per row on a narrow page; plotly grows the top margin to fit the legend alone, so a long
    legend would run into the title. This sets the top margin to the title plus one row per
    entry, and grows the height by as much, so the plot area keeps its size. Modifies ``fig``
    in place (and returns it); figures without a top legend are left unchanged.
    """
    legend = fig.layout.legend
    if legend.orientation != "h" or legend.yanchor != "bottom" or (legend.y or 0) < 1:
        return fig
    wanted = TITLE_PX + LEGEND_ROW_PX * max(1, legend_entries(fig)) + 8
    current = fig.layout.margin.t if fig.layout.margin.t is not None else 0
    if wanted > current:
        fig.layout.margin.t = wanted
        fig.layout.height = (fig.layout.height or FIGURE_HEIGHT_PX) + wanted - current
    return fig


def new_figure(title: str, x_title: str, y_title: str, log_x: bool = False, log_y: bool = False,
               height: int = FIGURE_HEIGHT_PX) -> go.Figure:
    """An empty figure with an opaque white background (readable in dark mode), responsive."""
    fig = go.Figure()
    fig.update_layout(
        title={"text": title, "x": 0.02, "xanchor": "left", "y": 0.985, "yanchor": "top"},
        template="plotly_white",
        paper_bgcolor="white",
        plot_bgcolor="white",
        font={"color": "#222222", "size": 13},
        height=height,
        autosize=True,
        # legend above the plot, not beside it: a long legend on the right squeezes the plot
        # to a sliver on narrow pages and phones; fit_top_legend sizes the top margin
        margin={"l": 60, "r": 20, "t": TITLE_PX + 2 * LEGEND_ROW_PX, "b": 55},
        legend={"bgcolor": "rgba(255,255,255,0.9)", "orientation": "h", "x": 0, "y": 1.02,
                "yanchor": "bottom", "xanchor": "left"},
        hovermode="closest",
    )
    fig.update_xaxes(title_text=x_title, type="log" if log_x else "linear", showline=True,
                     linecolor="#444", gridcolor="#e6e6e6")
    fig.update_yaxes(title_text=y_title, type="log" if log_y else "linear", showline=True,
                     linecolor="#444", gridcolor="#e6e6e6")
    return fig


def trained_trace(x, y, name: str, color: str | None = None, error_y=None, mode="lines+markers",
                  **kw) -> go.Scatter:
    """A trained model's results: solid line with markers (optional Monte Carlo error bars)."""
    return go.Scatter(x=list(x), y=list(y), name=name, mode=mode,
                      line={"color": color or COLORS["trained"], "width": 2.5},
                      error_y=None if error_y is None else {"type": "data", "array": list(error_y),
                                                            "visible": True},
                      **kw)


def theory_trace(x, y, name: str, color: str | None = None, **kw) -> go.Scatter:
    """What theory says the trained model should reach: dashed line."""
    return go.Scatter(x=list(x), y=list(y), name=name, mode="lines",
                      line={"color": color or COLORS["theory"], "width": 2, "dash": "dash"}, **kw)


def bound_trace(x, y, name: str, color: str | None = None, **kw) -> go.Scatter:
    """A bound or baseline no model of the class can beat: dotted line."""
    return go.Scatter(x=list(x), y=list(y), name=name, mode="lines",
                      line={"color": color or COLORS["bound"], "width": 2, "dash": "dot"}, **kw)


def baseline_trace(x, y, name: str, **kw) -> go.Scatter:
    """A reference predictor (zero predictor, ridge, ...): thin grey line."""
    return go.Scatter(x=list(x), y=list(y), name=name, mode="lines",
                      line={"color": COLORS["baseline"], "width": 1.5, "dash": "dashdot"}, **kw)


def slider_figure(
    base: go.Figure,
    panels: dict[tuple, Sequence[go.BaseTraceType]],
    slider_names: Sequence[str],
    slider_values: Sequence[Sequence],
    panel_titles: dict[tuple, str] | None = None,
) -> go.Figure:
    """Add one static slider per parameter to ``base``.

    ``panels[(v1, v2, ...)]`` holds the traces to show when slider 1 is at ``v1``, slider 2 at
    ``v2``, and so on; every combination in ``itertools.product(*slider_values)`` must be
    present. The first value of each slider is shown initially. ``panel_titles`` optionally
    replaces the figure title per panel.
    """
    keys = list(itertools.product(*slider_values))
    missing = [k for k in keys if k not in panels]
    if missing:
        raise ValueError(f"panels is missing the slider combinations {missing[:3]}")
    if len(slider_names) != len(slider_values):
        raise ValueError("slider_names and slider_values must have the same length")
    fig = go.Figure(base)
    panel_of_trace: list[int] = []
    for index, key in enumerate(keys):
        for trace in panels[key]:
            trace = go.Scatter(trace) if isinstance(trace, dict) else trace
            trace.visible = index == 0
            fig.add_trace(trace)
            panel_of_trace.append(index)
    default = keys[0]

    def visibility(key: tuple) -> list[bool]:
        target = keys.index(key)
        return [p == target for p in panel_of_trace]

    sliders = []
    gap = 0.16
    for s, (name, values) in enumerate(zip(slider_names, slider_values, strict=True)):
        steps = []
        for value in values:
            key = tuple(value if i == s else default[i] for i in range(len(default)))
            args: list = [{"visible": visibility(key)}]
            if panel_titles is not None:
                args.append({"title.text": panel_titles[key]})
            steps.append({"label": str(value), "method": "update" if panel_titles else "restyle",
                          "args": args if panel_titles else [args[0]]})
        sliders.append({
            "active": 0,
            "currentvalue": {"prefix": f"{name}: ", "font": {"size": 13}},
            "pad": {"t": 45 + gap * 0, "b": 10},
            "y": -0.05 - s * gap * 1.6,
            "yanchor": "top",
            "len": 0.9,
            "x": 0.05,
            "steps": steps,
        })
    extra = 110 * len(sliders)
    fig.update_layout(
        sliders=sliders,
        height=(base.layout.height or FIGURE_HEIGHT_PX) + extra,
        margin={"b": 55 + extra},
        meta={"nlicl_sliders": {
            "names": list(slider_names),
            "values": [[str(v) for v in vals] for vals in slider_values],
            "keys": [[list(vals).index(k[i]) for i, vals in enumerate(slider_values)]
                     for k in keys],
            "panel_of_trace": panel_of_trace,
            "titles": None if panel_titles is None else [panel_titles[k] for k in keys],
        }},
    )
    if panel_titles is not None:
        fig.update_layout(title_text=panel_titles[default])
    return fig
