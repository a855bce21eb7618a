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

Text that fits a phone: plotly.js never wraps text, so on a 390 px screen a long figure title,
legend entry or axis title is cut off at the figure's edge. :func:`wrap_figure_text` (run by
``nlicl_lib.book.display.prepare_figure`` on every figure of the book) breaks such text with ``<br>``
at word boundaries, to widths derived from the figure's font sizes and margins at
:data:`PHONE_FIGURE_PX`, and :func:`fit_figure_text` makes room for the extra lines (the
figure grows; its plot keeps its size).

Static sliders: :func:`slider_figure` takes *panels*, one list of traces per combination of
slider values, and adds one plotly slider per parameter. Each step restyles trace visibility, so
the sliders move in the published HTML with no kernel. With several sliders, the figure's
``layout.meta["nlicl_sliders"]`` describes the grid so the page script can combine the sliders
(each step alone assumes the other sliders at their first value).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
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
"""Height of the top margin taken by a one-line figure title (above a top legend)."""

TITLE_LINE_PX = 24
"""Height of each further line of a wrapped title: plotly's line spacing (1.3 em) at the
title's default 18 px (1.4 times the book's 13 px font)."""

LEGEND_ROW_PX = 21
"""Height of one legend entry's row in a legend of one entry per row (a phone's)."""

LEGEND_LINE_PX = 17
"""Height each further line of a wrapped legend entry adds to its row: plotly's line spacing
(1.3 em) at the book's 13 px."""

FIGURE_HEIGHT_PX = 480
"""Default height of :func:`new_figure`, before room for a long legend or sliders is added."""

SLIDER_PAD_PX = 45
"""Gap above each slider of :func:`slider_figure` (room for the x axis's tick labels and
one-line title); :func:`fit_figure_text` widens it for a wrapped x axis title."""

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

PHONE_FIGURE_PX = 350
"""Width of a figure on a 390 px phone screen (the book theme leaves 358 px; a little less for
safety). Wrap widths are computed for it: plotly.js has no text wrapping of its own."""

CHAR_EM = 0.55
"""Width of one character of figure text, in em, in the widest fonts plotly's default family
("Open Sans", verdana, arial, sans-serif) falls back on: Verdana (iOS has no Open Sans) and
DejaVu Sans (Linux), which are about as wide. Measured in Chromium with DejaVu Sans over the
book's titles, legend names and axis titles: 0.50 em on average, 0.58 at most. Open Sans, Arial
and Roboto are narrower, so text wrapped for this width fits with any of them."""

LINE_SPACING = 1.3
"""plotly.js's line height, in em, of multi-line text."""

MIN_WRAP_CHARS = 12
"""Shortest line :func:`wrap_width` asks for, however little room the figure leaves."""

LEGEND_SYMBOL_PX = 45
"""Width of a legend entry's line sample and the gaps around it, left of its text."""

COLORBAR_PX = 75
"""Width a colour bar (of a heatmap, say) takes right of the plot: plotly widens the right
margin for it, so the plot is that much narrower."""

SLIDER_INSET_PX = 10
"""Distance from a slider's end to the centre of its end label (the grip's half width)."""

TITLE_TOP_PX = 8
"""Gap between the figure's top edge and the first line of a wrapped title."""

TEXT_ASCENT_EM = 0.86
"""Height of a line of text above its baseline (plotly places the baseline of a multi-line
title's first line at the title's ``y``, whatever its ``yanchor``)."""

TEXT_DESCENT_EM = 0.25
"""Depth of a line of text below its baseline."""


PLOTLY_MARGINS = {"l": 80, "r": 80, "t": 100, "b": 80}
"""plotly.js's default margins, used where a figure sets none."""

PLOTLY_HEIGHT_PX = 450
"""plotly.js's default figure height, used where a figure sets none."""

_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"<[^<>]*>")
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-f]+|[a-z][a-z0-9]*);", re.IGNORECASE)
_TAG_NAME = re.compile(r"<\s*(/?)\s*([a-z]+)", re.IGNORECASE)
_UNBREAKABLE_TAGS = {"sub", "sup"}
_NO_LEGEND_TYPES = {"heatmap", "contour", "histogram2d", "histogram2dcontour", "image",
                    "surface", "table", "indicator"}
"""Trace types that plotly leaves out of the legend unless ``showlegend`` is set."""
_COLORBAR_TYPES = {"heatmap", "contour", "histogram2d", "histogram2dcontour", "surface"}
"""Trace types that draw a colour bar unless ``showscale`` is off."""


def visible_length(text: str) -> int:
    """Number of characters of ``text`` that show: HTML tags count 0, an entity (``&amp;``) 1."""
    return len(_ENTITY.sub("x", _TAG.sub("", text)))


def text_lines(text: str | None) -> int:
    """Number of lines plotly draws for ``text`` (``<br>`` breaks lines); 0 for no text."""
    return len(_BREAK.split(text)) if text else 0


def _words(text: str) -> list[tuple[str, str]]:
    """``text`` as (word, spaces after it) pairs, split at the spaces where a line may break.

    A line may break at a run of plain spaces (not at a no-break space), but not inside an HTML
    tag (``<span style="a: b">``) nor inside a ``<sub>``/``<sup>`` element, whose content is
    one small script. Inside ``<b>``, ``<i>`` or ``<span>`` a break is fine: plotly reopens the
    styles on the next line.
    """
    pairs: list[tuple[str, str]] = []
    word, spaces, depth, index = "", "", 0, 0
    while index < len(text):
        char = text[index]
        end = text.find(">", index) if char == "<" else -1
        if end >= 0:
            token = text[index:end + 1]
            name = _TAG_NAME.match(token)
            if name and name.group(2).lower() in _UNBREAKABLE_TAGS:
                depth = max(0, depth - 1) if name.group(1) else depth + 1
        else:
            token = char
        if token == " " and depth == 0:
            spaces += token
        else:
            if spaces:
                pairs.append((word, spaces))
                word, spaces = "", ""
            word += token
        index += len(token)
    pairs.append((word, spaces))
    return pairs


def _greedy_lines(words: list[tuple[str, str]], width: int) -> list[str]:
    """Fill each line with as many words as fit in ``width`` visible characters."""
    lines: list[str] = []
    line, length, pending = "", 0, ""
    for word, spaces in words:
        size = visible_length(word)
        if length and length + len(pending) + size > width:
            lines.append(line)
            line, length = word, size
        else:
            line += pending + word
            length += len(pending) + size
        pending = spaces
    lines.append(line + pending)
    return lines


def wrap_text(text: Any, width: int) -> Any:
    """``text`` with ``<br>`` at word boundaries so that no line shows more than ``width``
    characters (plotly.js does not wrap text; see the module docstring).

    The lines are balanced: as few as fit in ``width``, and then as even as they can be, so
    that no short last word dangles on a line of its own. Only a single word longer than
    ``width`` makes a longer line: words are never split, nor are HTML tags or ``<sub>``/
    ``<sup>`` elements. Text that already holds a ``<br>`` is the author's layout and is
    returned unchanged, which also makes the wrapping idempotent; so is anything that is not a
    string, and LaTeX (``$...$``). Text that fits comes back identical.
    """
    if not isinstance(text, str) or not text or _BREAK.search(text):
        return text
    if len(text) > 1 and text.startswith("$") and text.endswith("$"):
        return text
    if visible_length(text) <= width:
        return text
    words = _words(text)
    lines = _greedy_lines(words, width)
    for narrower in range(max(1, visible_length(text) // len(lines)), width):
        balanced = _greedy_lines(words, narrower)
        if len(balanced) == len(lines):
            lines = balanced
            break
    return "<br>".join(lines)


def wrap_width(available_px: float, font_px: float) -> int:
    """Most characters per line of ``font_px`` text that fit in ``available_px``
    (:data:`CHAR_EM` per character, at least :data:`MIN_WRAP_CHARS`)."""
    return max(MIN_WRAP_CHARS, int(available_px / (CHAR_EM * font_px)))


def base_font_px(fig: go.Figure) -> float:
    """The figure's text size: ``layout.font.size``, else its template's, else plotly's 12."""
    size = fig.layout.font.size
    if size is None and fig.layout.template is not None:
        size = fig.layout.template.layout.font.size
    return float(size or 12)


def title_font_px(fig: go.Figure) -> float:
    """Size of the figure title: its own, else plotly's default of 1.4 times the text size."""
    return float(fig.layout.title.font.size or round(1.4 * base_font_px(fig)))


def _axis_title_font_px(fig: go.Figure, axis: Any) -> float:
    """Size of an axis title: its own, else plotly's default of 1.2 times the text size."""
    return float(axis.title.font.size or round(1.2 * base_font_px(fig)))


def _margin(fig: go.Figure, side: str) -> float:
    value = fig.layout.margin[side]
    return float(PLOTLY_MARGINS[side] if value is None else value)


def shows_in_legend(trace: go.BaseTraceType) -> bool:
    """True when plotly lists ``trace`` in the legend (it has a name and is not left out)."""
    if not getattr(trace, "name", None) or getattr(trace, "showlegend", None) is False:
        return False
    return trace.showlegend is True or trace.type not in _NO_LEGEND_TYPES


def has_top_legend(fig: go.Figure) -> bool:
    """True for the book's legend style: horizontal, above the plot (:func:`new_figure`)."""
    legend = fig.layout.legend
    return legend.orientation == "h" and legend.yanchor == "bottom" and (legend.y or 0) >= 1


def _panels_of_traces(fig: go.Figure) -> list[int] | None:
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    panel_of_trace = (meta.get("nlicl_sliders") or {}).get("panel_of_trace")
    return panel_of_trace if panel_of_trace and len(panel_of_trace) == len(fig.data) else None


def _largest_panel(fig: go.Figure, weights: list[int]) -> int:
    """Largest sum of ``weights`` (one per trace) over the traces shown together."""
    panel_of_trace = _panels_of_traces(fig)
    if panel_of_trace is None:
        return sum(weights)
    counts: dict[int, int] = {}
    for panel, weight in zip(panel_of_trace, weights, strict=True):
        counts[panel] = counts.get(panel, 0) + weight
    return max(counts.values(), default=0)


def legend_entries(fig: go.Figure) -> int:
    """Most legend entries shown at once: per slider panel for a slider figure, else all."""
    return _largest_panel(fig, [int(shows_in_legend(t)) for t in fig.data])


def legend_lines(fig: go.Figure) -> int:
    """Most lines of legend text shown at once: an entry wrapped to two lines counts two (per
    slider panel for a slider figure, as :func:`legend_entries`)."""
    return _largest_panel(fig, [text_lines(t.name) if shows_in_legend(t) else 0
                                for t in fig.data])


def legend_height(fig: go.Figure) -> int:
    """Height of the legend with one entry per row (as on a phone): :data:`LEGEND_ROW_PX` per
    entry and :data:`LEGEND_LINE_PX` per further line of a wrapped entry, for the panel with
    the tallest legend; one row at least."""
    heights = [LEGEND_ROW_PX + LEGEND_LINE_PX * (text_lines(t.name) - 1)
               if shows_in_legend(t) else 0 for t in fig.data]
    return max(LEGEND_ROW_PX, _largest_panel(fig, heights))


def _title_args(args: Any) -> Iterator[tuple[dict, str]]:
    """(dict, key) of each of a slider step's ``args`` that sets the figure title."""
    for arg in args or []:
        if isinstance(arg, dict):
            if isinstance(arg.get("title.text"), str):
                yield arg, "title.text"
            title = arg.get("title")
            if isinstance(title, dict) and isinstance(title.get("text"), str):
                yield title, "text"


def title_lines(fig: go.Figure) -> int:
    """Most lines the figure's title takes: over its title and every slider panel's title."""
    texts: list[str | None] = [fig.layout.title.text]
    meta = fig.layout.meta if isinstance(fig.layout.meta, dict) else {}
    texts += list((meta.get("nlicl_sliders") or {}).get("titles") or [])
    texts += [arg[key] for slider in fig.layout.sliders for step in slider.steps
              for arg, key in _title_args(step.args)]
    return max(text_lines(text) for text in texts)


def _subplot_titles(fig: go.Figure) -> Iterator[tuple[Any, tuple[float, float], bool]]:
    """(annotation, x domain, in the top row) of each subplot title (``make_subplots``):
    an annotation in paper coordinates, centred over an x axis, standing on a y axis's top."""
    x_domains = [tuple(axis.domain or (0, 1)) for axis in fig.select_xaxes()]
    y_tops = [(axis.domain or (0, 1))[1] for axis in fig.select_yaxes()]
    for annotation in fig.layout.annotations:
        if (annotation.xref != "paper" or annotation.yref != "paper"
                or annotation.showarrow is not False or annotation.yanchor != "bottom"
                or not isinstance(annotation.text, str)
                or annotation.x is None or annotation.y is None):
            continue
        domain = next((d for d in x_domains if abs((d[0] + d[1]) / 2 - annotation.x) < 1e-6),
                      None)
        if domain is None or not any(abs(top - annotation.y) < 1e-6 for top in y_tops):
            continue
        yield annotation, domain, abs(annotation.y - max(y_tops, default=1)) < 1e-6


def wrap_figure_text(fig: go.Figure) -> go.Figure:
    """Break the figure's long text with ``<br>`` so that it fits a phone (plotly cannot).

    Wraps, each to the width its font and place leave at :data:`PHONE_FIGURE_PX`: the title
    and every slider panel's title (``layout.meta["nlicl_sliders"]["titles"]`` and the steps'
    ``"title.text"``), every legend entry's name, every axis title, subplot titles
    (``make_subplots``) and slider labels (``currentvalue.prefix``). Text that fits, or that
    already holds a ``<br>`` (its author's layout), is left alone (:func:`wrap_text`), so
    wrapping twice changes nothing more. :func:`fit_figure_text` then makes room for the extra
    lines. Modifies ``fig`` in place (and returns it).
    """
    layout = fig.layout
    base = base_font_px(fig)
    left = _margin(fig, "l")
    plot_w = _phone_plot_width(fig)
    plot_h = max(_height(fig) - _margin(fig, "t") - _margin(fig, "b"), 60.0)

    title_chars = wrap_width(PHONE_FIGURE_PX - 16, title_font_px(fig))
    layout.title.text = wrap_text(layout.title.text, title_chars)
    meta = layout.meta if isinstance(layout.meta, dict) else {}
    sliders_meta = meta.get("nlicl_sliders")
    if isinstance(sliders_meta, dict) and sliders_meta.get("titles"):
        layout.meta = {**meta, "nlicl_sliders": {
            **sliders_meta, "titles": [wrap_text(t, title_chars) for t in sliders_meta["titles"]]}}
    for slider in layout.sliders:
        steps = [step.to_plotly_json() for step in slider.steps]
        for step in steps:
            for arg, key in _title_args(step.get("args")):
                arg[key] = wrap_text(arg[key], title_chars)
        slider.steps = steps

    for axis in fig.select_xaxes():
        if axis.title.text:
            d0, d1 = axis.domain or (0, 1)
            centre = left + plot_w * (d0 + d1) / 2
            room = 2 * min(centre, PHONE_FIGURE_PX - centre) - 8
            if d1 - d0 < 1:
                room = min(room, (d1 - d0) * plot_w + 40)
            axis.title.text = wrap_text(axis.title.text,
                                        wrap_width(room, _axis_title_font_px(fig, axis)))
    y_title_px = 0.0
    for axis in fig.select_yaxes():
        if axis.title.text:
            # a y axis title runs along the plot's height, which does not shrink on a phone
            d0, d1 = axis.domain or (0, 1)
            font = _axis_title_font_px(fig, axis)
            axis.title.text = wrap_text(axis.title.text, wrap_width((d1 - d0) * plot_h, font))
            if axis.plotly_name == "yaxis":
                y_title_px = (text_lines(axis.title.text) - 1) * LINE_SPACING * font

    # a legend at the plot's left edge; automargin widens that margin for a wrapped y title
    legend_room = PHONE_FIGURE_PX - left - y_title_px - LEGEND_SYMBOL_PX - 8
    legend_chars = wrap_width(legend_room, float(layout.legend.font.size or base))
    for trace in fig.data:
        if shows_in_legend(trace):
            trace.name = wrap_text(trace.name, legend_chars)

    for annotation, (d0, d1), _ in _subplot_titles(fig):
        font = float(annotation.font.size or base)
        annotation.text = wrap_text(annotation.text, wrap_width((d1 - d0) * plot_w + 16, font))

    for slider in layout.sliders:
        font = float(slider.currentvalue.font.size or slider.font.size or base)
        value_chars = max((len(str(step.label or "")) for step in slider.steps), default=0) + 1
        room = PHONE_FIGURE_PX - left - (slider.x or 0) * plot_w - 8
        slider.currentvalue.prefix = wrap_text(
            slider.currentvalue.prefix, max(MIN_WRAP_CHARS, wrap_width(room, font) - value_chars))
    return fig


def _height(fig: go.Figure) -> float:
    return float(fig.layout.height or PLOTLY_HEIGHT_PX)


def _phone_plot_width(fig: go.Figure) -> float:
    """Width of the plot area at :data:`PHONE_FIGURE_PX`: the figure less its side margins
    and any colour bar."""
    width = PHONE_FIGURE_PX - _margin(fig, "l") - _margin(fig, "r")
    if any(_has_colorbar(trace) for trace in fig.data):
        width -= COLORBAR_PX
    return max(width, 60.0)


def _has_colorbar(trace: go.BaseTraceType) -> bool:
    if trace.type in _COLORBAR_TYPES:
        return getattr(trace, "showscale", None) is not False
    return getattr(getattr(trace, "marker", None), "showscale", None) is True


def _grow(fig: go.Figure, side: str, wanted: float) -> None:
    """Widen the ``side`` ("t" or "b") margin to ``wanted`` px, and the height by as much."""
    current = _margin(fig, side)
    if wanted > current:
        fig.layout.margin[side] = round(wanted)
        fig.layout.height = round(_height(fig) + round(wanted) - current)


def fit_figure_text(fig: go.Figure) -> go.Figure:
    """Make room for text that :func:`wrap_figure_text` broke into several lines.

    The figure grows by what its margins gain, so the plot keeps its size: a wrapped x axis
    title of a :func:`slider_figure` pushes the sliders down; a legend below the plot gets a
    bottom margin that holds its rows (:func:`fit_bottom_legend`); the title and a top legend
    get their top margin (:func:`fit_title`, :func:`fit_top_legend`); a title (or slider panel
    title) with several lines is anchored :data:`TITLE_TOP_PX` below the top edge (plotly would
    start it above the edge, cut off). Modifies ``fig`` in place (and returns it); idempotent.
    """
    _fit_sliders_below_x_title(fig)
    _fit_slider_labels(fig)
    fit_bottom_legend(fig)
    fit_title(fig)
    fit_top_legend(fig)
    _anchor_wrapped_title(fig)
    return fig


def _fit_sliders_below_x_title(fig: go.Figure) -> None:
    """Move a :func:`slider_figure`'s sliders down by the extra lines of its x axis title."""
    meta = fig.layout.meta
    if not isinstance(meta, dict) or "nlicl_sliders" not in meta or not fig.layout.sliders:
        return
    axis = fig.layout.xaxis
    extra = (text_lines(axis.title.text) - 1) * LINE_SPACING * _axis_title_font_px(fig, axis)
    delta = SLIDER_PAD_PX + round(extra) - (fig.layout.sliders[0].pad.t or 0)
    if extra <= 0 or delta <= 0:
        return
    for slider in fig.layout.sliders:
        slider.pad.t = (slider.pad.t or 0) + delta
    _grow(fig, "b", _margin(fig, "b") + delta)


def _fit_slider_labels(fig: go.Figure) -> None:
    """Shorten sliders whose first or last step label would stick out of a phone-width figure.

    plotly centres each step's label on its tick, so a long label at either end of a slider
    that spans the plot runs past the figure's edge on a phone. The slider's ``x`` and ``len``
    (fractions of the plot's width) shrink just enough to keep both end labels inside.
    """
    left = _margin(fig, "l")
    plot_w = _phone_plot_width(fig)
    for slider in fig.layout.sliders:
        labels = [str(step.label if step.label is not None else "") for step in slider.steps]
        if not labels or slider.xanchor not in (None, "left") or slider.lenmode == "pixels":
            continue
        font = float(slider.font.size or base_font_px(fig))

        def half(label: str, font: float = font) -> float:
            widest = max((visible_length(line) for line in _BREAK.split(label)), default=0)
            return widest * CHAR_EM * font / 2 + 2

        x = float(slider.x if slider.x is not None else 0)
        length = float(slider.len if slider.len is not None else 1)
        start = left + x * plot_w + SLIDER_INSET_PX  # centre of the first label
        end = left + (x + length) * plot_w - SLIDER_INSET_PX  # centre of the last label
        shift = half(labels[0]) - start
        cut = half(labels[-1]) - (PHONE_FIGURE_PX - end)
        if shift > 0.5 or cut > 0.5:
            new_x = math.ceil((x + max(0.0, shift) / plot_w) * 1e4) / 1e4
            new_end = math.floor((x + length - max(0.0, cut) / plot_w) * 1e4) / 1e4
            slider.x = new_x
            slider.len = max(0.2, round(new_end - new_x, 4))


def fit_bottom_legend(fig: go.Figure) -> go.Figure:
    """Give a horizontal legend below the plot a bottom margin that holds one row per line.

    Such a legend (``y < 0``, ``yanchor="top"``) sits ``-y`` plot heights below the plot; when
    its rows do not fit in the bottom margin plotly shrinks the plot, to a sliver on a phone,
    where every entry takes its own row. This widens the margin to hold the legend
    (:func:`legend_height`) and grows the height by as much.
    Modifies ``fig`` in place (and returns it); other figures are left unchanged.
    """
    legend = fig.layout.legend
    if legend.orientation != "h" or legend.yanchor != "top" or legend.y is None or legend.y >= 0:
        return fig
    plot_h = _height(fig) - _margin(fig, "t") - _margin(fig, "b")
    _grow(fig, "b", -legend.y * plot_h + legend_height(fig) + 10)
    return fig


def _title_at_top(fig: go.Figure) -> bool:
    """True when the title sits at the top of the figure (where plotly puts it by default)."""
    title = fig.layout.title
    if title.y is None or title.y == "auto":
        return True
    return title.yref in (None, "container") and float(title.y) >= 0.9


def fit_title(fig: go.Figure) -> go.Figure:
    """Make room in the top margin for a title or subplot titles wrapped to several lines.

    For figures without a top legend (:func:`fit_top_legend` handles those). When the title (or
    a slider panel's) or a top-row subplot title (``make_subplots``) has more than one line, the
    top margin grows to hold the title's lines from :data:`TITLE_TOP_PX` down, and the subplot
    titles below them; the height grows as much, so the plot keeps its size. Figures whose
    title and subplot titles have one line each are left unchanged. Modifies ``fig`` in place
    (and returns it); idempotent.
    """
    if has_top_legend(fig) or not _title_at_top(fig):
        return fig
    lines = title_lines(fig)
    subplot_px, wrapped = 0.0, lines > 1
    for annotation, _, top_row in _subplot_titles(fig):
        count = text_lines(annotation.text)
        wrapped = wrapped or count > 1
        if top_row:
            font = float(annotation.font.size or base_font_px(fig))
            subplot_px = max(subplot_px, count * LINE_SPACING * font + 4)
    if not wrapped:
        return fig
    font = title_font_px(fig)
    title_px = ((TEXT_ASCENT_EM + TEXT_DESCENT_EM + LINE_SPACING * (lines - 1)) * font
                if lines else 0.0)
    _grow(fig, "t", TITLE_TOP_PX + title_px + 10 + subplot_px)
    return fig


def _anchor_wrapped_title(fig: go.Figure) -> None:
    """Put the first line of a multi-line title :data:`TITLE_TOP_PX` below the top edge.

    plotly.js places a multi-line title's first baseline at its ``y`` whatever its ``yanchor``
    (so the book's ``y=0.985, yanchor="top"`` starts it above the figure); ``yanchor="bottom"``
    does the same for a one-line title, so every slider panel's title starts at the same place.
    """
    if title_lines(fig) < 2 or not _title_at_top(fig):
        return
    baseline = TITLE_TOP_PX + TEXT_ASCENT_EM * title_font_px(fig)
    fig.layout.title.update(yref="container", yanchor="bottom",
                            y=round(1 - baseline / _height(fig), 4))


def fit_top_legend(fig: go.Figure) -> go.Figure:
    """Make room above the plot for the title and a top legend with one entry per row.

    A horizontal legend above the plot (the book's style, :func:`new_figure`) wraps to one entry
    per row on a narrow page; plotly grows the top margin to fit the legend alone, so a long
    legend would run into the title. This sets the top margin to the title (:data:`TITLE_PX`
    for one line, :data:`TITLE_LINE_PX` more per further line of the longest title a slider
    shows) plus the legend's rows, each as tall as its entry's lines (:func:`legend_height`),
    and grows the height by as much, so the plot area keeps its size. Modifies ``fig`` in place (and
    returns it); figures without a top legend are left unchanged.
    """
    if not has_top_legend(fig):
        return fig
    extra_title_lines = max(0, title_lines(fig) - 1)
    wanted = TITLE_PX + TITLE_LINE_PX * extra_title_lines + legend_height(fig) + 8
    current = fig.layout.margin.t if fig.layout.margin.t is not None else 0
    if wanted > current:
        fig.layout.margin.t = wanted
        fig.layout.height = (fig.layout.height or FIGURE_HEIGHT_PX) + wanted - current
    return fig


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


def new_figure(title: str, x_title: str, y_title: str, log_x: bool = False, log_y: bool = False,
               height: int = FIGURE_HEIGHT_PX) -> go.Figure:
    """An empty figure with an opaque white background (readable in dark mode), responsive.

    The axes keep plotly's automatic type (numbers give a linear axis, strings a category axis)
    unless ``log_x``/``log_y`` ask for a log axis, whose ticks get full-number labels
    (:data:`LOG_TICKFORMAT`).
    """
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
            "pad": {"t": SLIDER_PAD_PX, "b": 10},
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
