"""Plotly figures in the book's style, and figures with static sliders over precomputed sweeps.

Every figure that shows a trained model also shows the theory it should match; the trace
styles below make the roles recognisable across chapters:

* trained results (:func:`trained_trace`): solid line with markers, blue (``COLORS["trained"]``,
  then ``"trained2"``, ... or :data:`PALETTE` for several runs);
* theory, the value a trained model should reach (:func:`theory_trace`): black, dashed
  (``"dash"``);
* bounds no model of the class can beat (:func:`bound_trace`): red, dotted (``"dot"``);
* reference predictors such as the zero predictor or ridge (:func:`baseline_trace`): thin grey,
  dash-dotted (``"dashdot"``).

Colour must not be the only cue (colour-blind readers, greyscale prints), so when one figure
holds two references of the same role, give the second one its own ``dash`` (each of the three
functions takes one): ``"longdash"``, ``"longdashdot"``, ``"dot"``, ``"dashdot"`` or a plotly
dash list such as ``"6px,3px,1px,3px"``. The legend then tells them apart by line pattern as
well as by name.

Layout (:func:`book_layout`, which :func:`new_figure` applies): plotly's own. Its margins grow
to fit what lies in them (``automargin`` of the title and the axes; a legend outside the plot
pushes the margin by itself), and a horizontal legend above the plot flows into as many rows as
the width needs, so on a 390 px phone the plot gives up height, never width. plotly.js does not
wrap text: titles, legend entries and axis titles are short (about 40 characters at most), and
each figure's caption on the page carries the words.

Static sliders: :func:`slider_figure` takes *panels*, one list of traces per combination of
slider values, and adds one plotly slider per parameter. Each step restyles trace visibility, so
the sliders move in the published HTML with no kernel. With several sliders, the figure's
``layout.meta["nlicl_sliders"]`` describes the grid so the page script
(``book/_static/nlicl-figures.js``) can combine the sliders (each step alone assumes the other
sliders at their first value).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from nlicl_lib.core.errors import ConfigError

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

FIGURE_HEIGHT_PX = 480
"""Default height of :func:`new_figure`; :func:`slider_figure` adds :data:`SLIDER_PX` per slider."""

FONT_PX = 13
"""Size of the figures' text (plotly's default is 12)."""

TITLE_FONT_PX = 15
"""Size of a figure's title: one short line, which a phone shows whole."""

SUBPLOT_TITLES_PX = 60
"""Top margin of a figure with subplot titles (``make_subplots``): the title's line and, under
it, the subplot titles, which plotly draws above their plots in that margin without growing it
(automargin grows the margin for a title that needs more than it holds, and no further)."""

SLIDER_PAD_PX = 50
"""Gap between the bottom of the plot and the first slider: room for the x axis's tick labels
and title."""

SLIDER_PX = 90
"""Height each slider of :func:`slider_figure` takes (its current value, rail and step labels)."""

SLIDER_LABEL_EM = 0.6
"""Width of one character of a slider's step label, in em, rounded up from the widest fonts
plotly's default family falls back on (DejaVu Sans, Verdana): :func:`slider_figure` insets the
rail so that its end labels stay inside the figure."""

SLIDER_ROOM_PX = (30, 16)
"""Room beside the plot, left and right, that a slider's end label may take: the least a y
axis's labels take on the left, the right margin (:func:`book_layout`)."""

LOG_TICKFORMAT = "~g"
"""d3-format of the tick labels of a log axis. Without a format plotly labels the ticks between
powers of ten with one small digit (a "5" under a "1" meaning 0.5); with one, every tick gets a
full number. ``"~g"`` prints 0.5, 2, 1000 and 100000 as such and goes to exponents (1e-7, 1e+6)
only far from 1; it has no SI prefixes (``"~s"`` would print 0.001 as "1m", which reads as a unit
on a loss axis)."""

LOG_1_2_5_DECADES = 2.0
"""A log axis spanning fewer decades than this (and at least one) is labelled at 1, 2 and 5 of
each decade; a longer one at powers of ten only (:func:`log_axis_ticks`)."""

LOG_MAX_LABELS = 6
"""Most decade labels :func:`log_axis_ticks` puts on a long log axis (every second or third
decade beyond): full-number labels of every decade of a wide range do not fit a phone."""

_NO_LEGEND_TYPES = {"heatmap", "contour", "histogram2d", "histogram2dcontour", "image",
                    "surface", "table", "indicator"}
"""Trace types that plotly leaves out of the legend unless ``showlegend`` is set."""


def shows_in_legend(trace: go.BaseTraceType) -> bool:
    """True when plotly lists ``trace`` in the legend (it has a name and is not left out)."""
    if not getattr(trace, "name", None) or getattr(trace, "showlegend", None) is False:
        return False
    return trace.showlegend is True or trace.type not in _NO_LEGEND_TYPES


def _panels_of_traces(fig: go.Figure) -> list[int] | None:
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    panel_of_trace = (meta.get("nlicl_sliders") or {}).get("panel_of_trace")
    return panel_of_trace if panel_of_trace and len(panel_of_trace) == len(fig.data) else None


SUBSCRIPTS = str.maketrans("0123456789k", "₀₁₂₃₄₅₆₇₈₉ₖ")
SUPERSCRIPTS = str.maketrans("0123456789k", "⁰¹²³⁴⁵⁶⁷⁸⁹ᵏ")


def unicode_label(name: str) -> str:
    """A feature or monomial name as figure text, in the figures' one spelling of indices and
    powers (Unicode sub- and superscripts, as in p₂, φ₂): ``"x1"`` -> ``"x₁"``, ``"x1^2"`` ->
    ``"x₁²"``, ``"x1 x2"`` -> ``"x₁x₂"``, ``"p_k"`` -> ``"pₖ"``, ``"phi_2"`` -> ``"φ₂"``,
    ``"d^k"`` -> ``"dᵏ"``. Other text is left as it is."""
    text = re.sub(r"\bphi_", "φ_", str(name))
    # an index: after a one-letter symbol, a number, or k written with an underscore
    text = re.sub(r"(?<![A-Za-z])([A-Za-zφσψ])(?:_(\d+|k)|(\d+))(?!\w)",
                  lambda m: m.group(1) + (m.group(2) or m.group(3)).translate(SUBSCRIPTS), text)
    text = re.sub(r"\^(\d+|k)(?!\w)", lambda m: m.group(1).translate(SUPERSCRIPTS), text)
    return re.sub(r"(?<=[₀-₉⁰-⁹¹²³]) (?=[A-Za-z][₀-₉])", "", text)


def _axis_values(fig: go.Figure, axis: Any, traces: Iterable[int] | None = None) -> list[float]:
    """The positive finite coordinates that the traces of ``fig`` (those numbered ``traces``,
    else every trace, shown or not) plot on ``axis``."""
    letter, number = axis.plotly_name[0], axis.plotly_name[5:]
    chosen = range(len(fig.data)) if traces is None else traces
    values: list[float] = []
    for index in chosen:
        trace = fig.data[index]
        if (getattr(trace, f"{letter}axis", None) or letter) != letter + number:
            continue
        coordinates = getattr(trace, letter, None)
        if coordinates is None:
            continue
        try:
            numbers = np.asarray(coordinates, dtype=float).ravel()
        except (TypeError, ValueError):  # categories
            continue
        values += [float(v) for v in numbers if np.isfinite(v) and v > 0]
    return values


def _log_ticks(low: float, high: float) -> dict[str, Any]:
    """``dtick`` and ``tick0`` of a log axis from ``10**low`` to ``10**high`` (None: plotly's
    own ticks), as :func:`log_axis_ticks` describes."""
    span = high - low
    if span < 1:
        return {"dtick": None, "tick0": None}
    if span < LOG_1_2_5_DECADES:
        return {"dtick": "D2", "tick0": None}
    return {"dtick": max(1, math.ceil((math.floor(high) - math.ceil(low) + 1) / LOG_MAX_LABELS)),
            "tick0": 0}


def _ticks_of_values(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    return _log_ticks(math.log10(min(values)), math.log10(max(values)))


def log_axis_ticks(fig: go.Figure) -> go.Figure:
    """Tick spacing of every log axis that has none, so that its full-number labels
    (:data:`LOG_TICKFORMAT`) do not print on top of each other.

    plotly.js picks the ticks of a log axis for its one-digit minor labels (a "2" ... "9" between
    the powers of ten); with full numbers ("0.002", "3000") those collide. An axis spanning (its
    ``range``, else its data) at least one decade and less than :data:`LOG_1_2_5_DECADES` gets
    ``dtick="D2"`` (labels at 1, 2 and 5), a longer one labels at powers of ten only, at most
    :data:`LOG_MAX_LABELS` of them (``dtick`` 1, 2, ... decades); under one decade plotly's own
    fully labelled ticks stay. Unlabelled minor grid lines mark the values in between.

    In a :func:`slider_figure` each panel is autoscaled to its own data, so the spacing is chosen
    per panel: when panels need different ones, the axis gets the first panel's, and every
    slider step (and ``meta["nlicl_sliders"]["layouts"]``, which the page script applies to a
    combination of several sliders) sets its panel's; a panel under one decade then gets
    ``dtick="D1"`` (every digit labelled). An axis with a ``range``, ``dtick`` or
    ``tickvals`` of its own is left alone but for the first rule. Modifies ``fig`` in place
    (and returns it); idempotent.
    """
    panel_of_trace = _panels_of_traces(fig)
    panels = sorted(set(panel_of_trace)) if panel_of_trace else []
    per_panel: dict[int, dict[str, Any]] = {p: {} for p in panels}
    for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
        if axis.type != "log" or axis.dtick is not None or axis.tickvals is not None:
            continue
        if axis.range is not None and len(axis.range) == 2 and None not in axis.range:
            low, high = sorted(float(v) for v in axis.range)
            choices = {None: _log_ticks(low, high)}
        elif panels:
            choices = {p: _ticks_of_values(_axis_values(
                fig, axis, [i for i, q in enumerate(panel_of_trace) if q == p])) for p in panels}
            choices = {p: c for p, c in choices.items() if c is not None}
        else:
            choices = {None: _ticks_of_values(_axis_values(fig, axis))}
        if not choices or None in choices.values():
            continue
        if all(choice["dtick"] is None for choice in choices.values()):
            continue
        per_view = any(choice != next(iter(choices.values())) for choice in choices.values())
        if per_view:
            # a step back to plotly's own ticks (dtick null) restores the figure's first dtick
            # in plotly.js 4.1, not plotly's choice: such panels get every digit labelled
            choices = {p: choice if choice["dtick"] is not None else {"dtick": "D1", "tick0": None}
                       for p, choice in choices.items()}
        first = next(iter(choices.values()))
        axis.dtick, axis.tick0 = first["dtick"], first["tick0"]
        axis.minor = {"showgrid": True, "gridcolor": "#f3f3f3", "ticks": ""}
        if per_view:
            for p, choice in choices.items():
                per_panel[p].update({f"{axis.plotly_name}.{key}": value
                                     for key, value in choice.items()})
    if any(per_panel.values()):
        _set_panel_layouts(fig, per_panel)
    return fig


def _set_panel_layouts(fig: go.Figure, layouts: dict[int, dict[str, Any]]) -> None:
    """Make each slider step of a :func:`slider_figure` also apply its panel's layout
    ``layouts[panel]`` (method ``update``), and store the layouts for the page script."""
    panel_of_trace = _panels_of_traces(fig)
    meta = dict(fig.layout.meta)
    sliders_meta = dict(meta["nlicl_sliders"])
    count = max(panel_of_trace) + 1
    stored = sliders_meta.get("layouts") or [{} for _ in range(count)]
    sliders_meta["layouts"] = [{**stored[p], **layouts.get(p, {})} for p in range(count)]
    fig.layout.meta = {**meta, "nlicl_sliders": sliders_meta}
    for slider in fig.layout.sliders:
        steps = [step.to_plotly_json() for step in slider.steps]
        for step in steps:
            args = list(step.get("args") or [])
            visible = (args[0] or {}).get("visible") if args else None
            if not visible or True not in visible:
                continue
            panel = panel_of_trace[list(visible).index(True)]
            step["method"] = "update"
            step["args"] = [args[0], {**(args[1] if len(args) > 1 else {}),
                                      **sliders_meta["layouts"][panel]}]
        slider.steps = steps


def book_layout(fig: go.Figure, title: str, height: int = FIGURE_HEIGHT_PX) -> go.Figure:
    """The book's layout of ``fig``: an opaque white background (readable in dark mode), a short
    title at the top left, a horizontal legend above the plot, and margins that plotly grows to
    fit them (``automargin``: the title's margin comes on top of the legend's, so the two never
    overlap). Modifies ``fig`` in place (and returns it)."""
    fig.update_layout(
        title={"text": title, "font": {"size": TITLE_FONT_PX}, "automargin": True,
               "xref": "container", "x": 0, "xanchor": "left", "pad": {"l": 8, "t": 10, "b": 6},
               "yref": "container", "y": 1, "yanchor": "top"},
        template="plotly_white",
        paper_bgcolor="white",
        plot_bgcolor="white",
        font={"color": "#222222", "size": FONT_PX},
        height=height,
        autosize=True,
        margin={"l": 8, "r": 16, "t": 8, "b": 8},
        # above the plot, not beside it: a legend on the right squeezes the plot to a sliver
        # on a phone; above it, it flows into as many rows as the width needs
        legend={"bgcolor": "rgba(255,255,255,0.9)", "orientation": "h", "x": 0, "xanchor": "left",
                "y": 1.02, "yanchor": "bottom"},
        hovermode="closest",
    )
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)
    if fig.layout.annotations:  # subplot titles, in the text's size
        fig.update_annotations(font_size=FONT_PX)
        fig.update_layout(margin_t=SUBPLOT_TITLES_PX)
    return fig


def new_figure(title: str, x_title: str, y_title: str, log_x: bool = False, log_y: bool = False,
               height: int = FIGURE_HEIGHT_PX) -> go.Figure:
    """An empty figure in the book's layout (:func:`book_layout`), responsive.

    The axes keep plotly's automatic type (numbers give a linear axis, strings a category axis)
    unless ``log_x``/``log_y`` ask for a log axis, whose ticks get full-number labels
    (:data:`LOG_TICKFORMAT`).
    """
    fig = book_layout(go.Figure(), title, height)
    axis_style = {"showline": True, "linecolor": "#444", "gridcolor": "#e6e6e6"}
    log = {"type": "log", "tickformat": LOG_TICKFORMAT}
    fig.update_xaxes(title_text=x_title, **axis_style, **(log if log_x else {}))
    fig.update_yaxes(title_text=y_title, **axis_style, **(log if log_y else {}))
    return fig


def trained_trace(x: Iterable[Any], y: Iterable[Any], name: str, color: str | None = None,
                  error_y: Iterable[float] | None = None, mode: str = "lines+markers",
                  **kw: Any) -> go.Scatter:
    """A trained model's results: solid line with markers (optional Monte Carlo error bars)."""
    return go.Scatter(x=list(x), y=list(y), name=name, mode=mode,
                      line={"color": color or COLORS["trained"], "width": 2.5},
                      error_y=None if error_y is None else {"type": "data", "array": list(error_y),
                                                            "visible": True},
                      **kw)


def theory_trace(x: Iterable[Any], y: Iterable[Any], name: str, color: str | None = None,
                 dash: str = "dash", **kw: Any) -> go.Scatter:
    """What theory says the trained model should reach: black dashed line (``dash`` gives a
    second theory curve on the same figure its own pattern, see the module docstring)."""
    return go.Scatter(x=list(x), y=list(y), name=name, mode="lines",
                      line={"color": color or COLORS["theory"], "width": 2, "dash": dash}, **kw)


def bound_trace(x: Iterable[Any], y: Iterable[Any], name: str, color: str | None = None,
                dash: str = "dot", **kw: Any) -> go.Scatter:
    """A bound or baseline no model of the class can beat: red dotted line (``dash`` gives a
    second bound on the same figure its own pattern, see the module docstring)."""
    return go.Scatter(x=list(x), y=list(y), name=name, mode="lines",
                      line={"color": color or COLORS["bound"], "width": 2, "dash": dash}, **kw)


def baseline_trace(x: Iterable[Any], y: Iterable[Any], name: str, dash: str = "dashdot",
                   **kw: Any) -> go.Scatter:
    """A reference predictor (zero predictor, ridge, ...): thin grey dash-dotted line
    (``dash`` gives a second baseline on the same figure its own pattern)."""
    return go.Scatter(x=list(x), y=list(y), name=name, mode="lines",
                      line={"color": COLORS["baseline"], "width": 1.5, "dash": dash}, **kw)


def slider_figure(
    base: go.Figure,
    panels: dict[tuple, Sequence[go.BaseTraceType]],
    slider_names: Sequence[str],
    slider_values: Sequence[Sequence],
    panel_titles: dict[tuple, str] | None = None,
    initial: tuple | None = None,
) -> go.Figure:
    """Add one static slider per parameter to ``base``.

    ``panels[(v1, v2, ...)]`` holds the traces to show when slider 1 is at ``v1``, slider 2 at
    ``v2``, and so on; every combination in ``itertools.product(*slider_values)`` must be
    present. ``initial``: the combination shown when the figure opens (the one the text
    discusses), each slider set to its value; default the first value of each slider.
    ``panel_titles`` optionally replaces the figure title per panel.
    """
    keys = list(itertools.product(*slider_values))
    missing = [k for k in keys if k not in panels]
    if missing:
        raise ValueError(f"panels is missing the slider combinations {missing[:3]}")
    if len(slider_names) != len(slider_values):
        raise ValueError("slider_names and slider_values must have the same length")
    default = keys[0] if initial is None else tuple(initial)
    if default not in panels:
        raise ConfigError("initial", initial, f"one of the slider combinations, e.g. {keys[0]}")
    fig = go.Figure(base)
    panel_of_trace: list[int] = []
    for index, key in enumerate(keys):
        for trace in panels[key]:
            trace = go.Scatter(trace) if isinstance(trace, dict) else trace
            trace.visible = key == default
            fig.add_trace(trace)
            panel_of_trace.append(index)

    def visibility(key: tuple) -> list[bool]:
        target = keys.index(key)
        return [p == target for p in panel_of_trace]

    sliders = []
    for s, (name, values) in enumerate(zip(slider_names, slider_values, strict=True)):
        steps = []
        for value in values:
            key = tuple(value if i == s else default[i] for i in range(len(default)))
            args: list = [{"visible": visibility(key)}]
            if panel_titles is not None:
                args.append({"title.text": panel_titles[key]})
            steps.append({"label": str(value), "method": "update" if panel_titles else "restyle",
                          "args": args if panel_titles else [args[0]]})
        # plotly centres each step's label on its tick, 10 px in from the rail's end: the rail
        # is inset so that a long end label stays inside the figure on a phone
        inset = [max(0, round(SLIDER_LABEL_EM * FONT_PX * len(str(values[end])) / 2) - 10 - room)
                 for end, room in zip((0, -1), SLIDER_ROOM_PX, strict=True)]
        sliders.append({
            "active": list(values).index(default[s]),
            "currentvalue": {"prefix": f"{name}: ", "font": {"size": FONT_PX}},
            # each slider under the one before, below the x axis (plotly grows the bottom
            # margin to hold them)
            "y": 0,
            "yanchor": "top",
            "pad": {"t": SLIDER_PAD_PX + s * SLIDER_PX, "b": 10, "l": inset[0], "r": inset[1]},
            "x": 0,
            "len": 1,
            "steps": steps,
        })
    fig.update_layout(
        sliders=sliders,
        height=(base.layout.height or FIGURE_HEIGHT_PX) + SLIDER_PX * len(sliders),
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
