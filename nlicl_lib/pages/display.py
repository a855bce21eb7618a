"""Show plotly figures so that they work both in the built book and in a live notebook.

Why this module exists: when myst-nb executes a notebook, a plotly figure's output is only the
``application/vnd.plotly.v1+json`` MIME type, which the HTML builder cannot render (the page
shows a blank space). :func:`show` therefore has two modes.

**Book build** (the environment variable ``NLICL_BOOK_BUILD`` is set to ``1``; ``make book``
exports it, and the Jupyter kernel that myst-nb starts inherits it): the figure is written as
``text/html``: a ``<div class="nlicl-plotly">`` plus the short script calling ``Plotly.newPlot``
that ``plotly.io.to_html`` writes. plotly.js itself is *not* inlined (each chapter page would
grow by 1.5 to 4.8 MB) and does *not* come from a CDN (the book must work offline): every page
loads the vendored cartesian bundle (``book/_static/vendor/plotly-cartesian.min.js``, named in
``html_js_files`` of ``_config.yml``; the browser caches it after the first page). That bundle
draws the trace types of :data:`CARTESIAN_TRACES`; a figure with another type stops the build
(:func:`check_trace_types`), and ``book/_ext/nlicl_site.py`` checks that the bundle is the
plotly.js of the installed ``plotly``. The output's metadata
(``{"nlicl": {"figure_id", "traces", "drawn_traces"}}``) tells the browser test how many traces
each drawn figure must show. The bundle deliberately has no ``application/vnd.plotly.v1+json``
entry: myst-nb warns about that MIME type, and the strict build turns the warning into an error,
which is what catches a cell that shows a figure with plain ``fig.show()`` or as its value (the
blank-figure trap).

**Live session** (Jupyter, JupyterLab, Colab, Binder: ``NLICL_BOOK_BUILD`` unset or ``0``): the
figure goes through plotly's own renderer (``fig.show()``), which picks the right one for the
front end.

In both modes the figure gets an opaque background (it must stay readable in the theme's dark
mode), ``autosize`` with no fixed width and plotly's ``responsive`` config (it resizes with its
column, down to a phone's), and full-number tick labels on log axes. Its layout is plotly's own
(:func:`nlicl_lib.pages.plots.new_figure`: margins that grow to fit the title, the legend and the
axes). Sliders and update menus are kept as they are: they are how readers of the static site
move through precomputed sweeps, and they need no kernel.

**Accessibility** (book build): the figure's ``<div class="nlicl-plotly">`` has ``role="figure"``,
an ``aria-label`` (its title) and an ``aria-describedby`` pointing to a visually hidden
``<p class="nlicl-sr-only">`` that says in words what the figure plots (:func:`describe_figure`).
The site's ``book/_static/nlicl-figures.js`` makes every plotly slider a keyboard-operable ARIA
slider and combines the choices of several sliders.
"""

from __future__ import annotations

import ast
import hashlib
import html
import inspect
import itertools
import json
import math
import os
import re
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from IPython.display import Markdown, display, publish_display_data

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.pages import plots

BOOK_BUILD_ENV = "NLICL_BOOK_BUILD"
"""Name of the environment variable that switches :func:`show` into book-build mode."""

PLOTLY_CONFIG: dict[str, Any] = {
    "responsive": True,
    "displaylogo": False,  # the logo links to plotly's website
}
"""plotly.js config used for every figure of the book."""

DEFAULT_HEIGHT_PX = 450
OPAQUE_BACKGROUND = "white"

CARTESIAN_TRACES = frozenset({
    "bar", "box", "contour", "heatmap", "histogram", "histogram2d", "histogram2dcontour",
    "image", "pie", "scatter", "scatterternary", "violin",
})
"""The trace types the site's plotly.js draws: those of its cartesian bundle (the README of
``plotly.js-cartesian-dist-min``). plotly.js would leave a trace of another type out without
an error."""

_figure_counter = itertools.count()

SR_ONLY_STYLE = ("position:absolute;width:1px;height:1px;margin:-1px;padding:0;border:0;"
                 "overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap")
"""Inline style of the figure's text description: read by screen readers, not shown (the same
rules as the class ``nlicl-sr-only`` of the book's CSS, so it works without that)."""


GLUE_PREFIX = "application/papermill.record/"
"""The MIME prefix of MyST-NB's glue record (``myst_nb.ext.glue.GLUE_PREFIX``)."""


def glue(name: str, value: Any) -> None:
    """Record ``value`` under ``name`` for the page's text: ``{glue:text}`name:.4f```.

    Writes the output that ``myst_nb.glue(name, value, display=False)`` writes (MyST-NB's glue
    record: the value's ``text/plain`` under :data:`GLUE_PREFIX`, and ``scrapbook`` metadata),
    without importing MyST-NB, so a reader's environment (Colab, Binder, a laptop) needs no
    Sphinx. The book build reads the record back into the text; a front end shows nothing,
    since no front end renders that MIME type. ``{glue:text}`` formats the value with the
    format spec after the key (``:.4f``, ``:.0%``), after reading its ``text/plain`` with
    ``ast.literal_eval``, so the value must be a plain Python ``int``, ``float``, ``bool`` or
    ``str``; a numpy or torch scalar is converted here (``.item()``).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"glue name must be a Python identifier; got {name!r}")
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # numpy or torch scalar
        value = value.item()
    if not isinstance(value, (int, float, str)):  # bool is an int
        raise TypeError(f"glue value {name!r} must be an int, float, bool or str (or a numpy "
                        f"or torch scalar); got {type(value).__name__}: {value!r}")
    publish_display_data({GLUE_PREFIX + "text/plain": repr(value)},
                         metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}})


def glue_values(values: Mapping[str, Any]) -> None:
    """:func:`glue` every ``name: value`` of ``values``."""
    for name, value in values.items():
        glue(name, value)


def in_book_build() -> bool:
    """True when the code runs inside the book build (``NLICL_BOOK_BUILD=1``)."""
    return os.environ.get(BOOK_BUILD_ENV, "").strip().lower() in {"1", "true", "yes"}


def prepare_figure(fig: go.Figure) -> go.Figure:
    """Return a copy of ``fig`` with the book's display settings; ``fig`` is left unchanged.

    Sets an opaque paper and plot background when the figure has none, turns on ``autosize``
    and drops a fixed ``width`` (the container sets it), and gives a default height so that
    an autosized figure does not collapse to zero height in a flexible layout. Log axes without
    a tick format get :data:`nlicl_lib.pages.plots.LOG_TICKFORMAT`, so that every tick shows a full
    number instead of a lone digit, and ticks spaced so that those labels do not collide
    (:func:`nlicl_lib.pages.plots.log_axis_ticks`: 1, 2 and 5 of each decade, or decades only).
    Preparing a prepared figure changes nothing.
    """
    prepared = go.Figure(fig)
    layout = prepared.layout
    if layout.paper_bgcolor is None:
        layout.paper_bgcolor = OPAQUE_BACKGROUND
    if layout.plot_bgcolor is None:
        layout.plot_bgcolor = OPAQUE_BACKGROUND
    layout.autosize = True
    layout.width = None
    if layout.height is None:
        layout.height = DEFAULT_HEIGHT_PX
    for axis in [*prepared.select_xaxes(), *prepared.select_yaxes()]:
        if axis.type == "log" and not axis.tickformat:
            axis.tickformat = plots.LOG_TICKFORMAT
    return plots.log_axis_ticks(prepared)


def trace_types(fig: go.Figure) -> set[str]:
    """The types of every trace of ``fig``, its animation frames' included (a trace without a
    type is a scatter, as in plotly.js)."""
    traces = [*fig.data, *(trace for frame in fig.frames for trace in frame.data)]
    return {trace.type or "scatter" for trace in traces}


def check_trace_types(fig: go.Figure) -> None:
    """Raise ``ValueError`` naming the trace type when ``fig`` has a trace that the site's
    plotly.js bundle cannot draw (:data:`CARTESIAN_TRACES`)."""
    missing = sorted(trace_types(fig) - CARTESIAN_TRACES)
    if missing:
        raise ValueError(
            f"the figure has {', '.join(map(repr, missing))} traces, which the site's plotly.js "
            f"cartesian bundle cannot draw; it draws {', '.join(sorted(CARTESIAN_TRACES))}. Use "
            "one of those, or vendor a bundle that has them (book/_static/vendor/README.md).")


def plain_text(text: Any) -> str:
    """``text`` as plain words: line breaks become spaces, HTML tags go, entities are decoded."""
    if text is None:
        return ""
    words = re.sub(r"<[^<>]*>", "", re.sub(r"<br\s*/?>", " ", str(text), flags=re.IGNORECASE))
    return " ".join(html.unescape(words).split())


def _number(value: float) -> str:
    return f"{value:.3g}"


def _numbers(values: Any) -> list[float]:
    """The finite numbers among ``values`` (a trace's x, y or z, possibly nested)."""
    found: list[float] = []
    for value in values if values is not None else []:
        if isinstance(value, (list, tuple)) or getattr(value, "ndim", 0) > 0:
            found += _numbers(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isfinite(value):
                found.append(float(value))
        elif hasattr(value, "item"):  # numpy scalar
            found += _numbers([value.item()])
    return found


def _coordinates(trace: Any, letter: str) -> list:
    """A trace's ``x`` or ``y`` values as a list (empty when unset); plotly keeps numpy arrays
    as arrays, whose truth value is ambiguous."""
    values = getattr(trace, letter, None)
    return [] if values is None else list(values)


def _describe_axis(fig: go.Figure, axis: Any) -> str | None:
    """One sentence on an axis: its title, scale and range (explicit, or the data's)."""
    letter, number = axis.plotly_name[0], axis.plotly_name[5:]
    ref = letter + number
    traces = [t for t in fig.data if (getattr(t, f"{letter}axis", None) or letter) == ref]
    title = plain_text(axis.title.text)
    if not title and not traces:
        return None
    details: list[str] = []
    values = [v for t in traces for v in _coordinates(t, letter)]
    categories = [plain_text(v) for v in values if isinstance(v, str)]
    if axis.type == "log":
        details.append("log scale")
    if axis.type == "category" or (categories and axis.type in (None, "-", "category")):
        unique = list(dict.fromkeys(categories))
        listed = ", ".join(unique[:8]) + (f" and {len(unique) - 8} more" if len(unique) > 8
                                          else "")
        details.append(f"categories {listed}" if unique else "categories")
    elif axis.range is not None and len(axis.range) == 2 and None not in axis.range:
        low, high = (10 ** float(v) if axis.type == "log" else float(v) for v in axis.range)
        details.append(f"from {_number(low)} to {_number(high)}")
    else:
        numbers = _numbers(values)
        if numbers:
            details.append(f"data from {_number(min(numbers))} to {_number(max(numbers))}")
    name = f"{letter} axis" + (f" {number}" if number else "")
    return f"{name}: {title or 'no title'}" + (f" ({', '.join(details)})" if details else "") + "."


def describe_figure(fig: go.Figure) -> str:
    """What ``fig`` shows, in plain words, for screen readers (the figure's text alternative).

    Says the title, each axis's title, scale and range, the names of the curves (every legend
    entry, over all slider panels), subplot titles, heatmap value ranges and the sliders with
    their values, e.g. "Plot: Loss against n. x axis: context length n (log scale, data from 10
    to 160). y axis: test loss (data from 0.1 to 1). Curves: trained; theory. Slider: degree
    (values 1, 2, 3)."
    """
    sentences = [f"Plot: {plain_text(fig.layout.title.text) or 'untitled'}."]
    told: set[str] = set()
    for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
        sentence = _describe_axis(fig, axis)
        said = axis.plotly_name[0] + sentence.split(": ", 1)[1] if sentence else ""
        if sentence and said not in told:  # a grid of alike subplots: each axis once
            told.add(said)
            sentences.append(sentence)
    names = list(dict.fromkeys(plain_text(t.name) for t in fig.data if plots.shows_in_legend(t)))
    if names:
        sentences.append(f"Curve{'s' if len(names) > 1 else ''}: {'; '.join(names)}.")
    panels = [plain_text(a.text) for a in fig.layout.annotations
              if a.xref == "paper" and a.yref == "paper" and a.showarrow is False and a.text]
    if panels:
        sentences.append(f"Panels: {'; '.join(panels)}.")
    heat = _numbers([t.z for t in fig.data if t.type == "heatmap" and t.z is not None])
    if heat:
        sentences.append(f"Colour scale: values from {_number(min(heat))} to "
                         f"{_number(max(heat))}.")
    sliders = []
    for index, slider in enumerate(fig.layout.sliders):
        name = plain_text(slider.currentvalue.prefix).rstrip(": ") or f"slider {index + 1}"
        labels = [plain_text(step.label) for step in slider.steps]
        sliders.append(f"{name} (values {', '.join(labels)})")
    if sliders:
        sentences.append(f"Slider{'s' if len(sliders) > 1 else ''}: {'; '.join(sliders)}; "
                         "focus a slider and use the arrow keys to change it.")
    return " ".join(sentences)


def new_figure_id(fig: go.Figure) -> str:
    """A page-unique id for ``fig``'s div: a digest of its content plus a per-process counter.

    Re-executing a notebook gives the same ids, and two figures on one page never share one.
    """
    digest = hashlib.sha1(fig.to_json().encode()).hexdigest()[:12]
    return f"nlicl-fig-{digest}-{next(_figure_counter)}"


def figure_html(fig: go.Figure, div_id: str | None = None) -> str:
    """HTML for ``fig`` that draws it with the page's plotly.js (not inlined, no CDN).

    The result is one ``<div class="nlicl-plotly" role="figure">`` (labelled by the figure's
    title and described by a visually hidden paragraph, :func:`describe_figure`) that holds
    plotly's own figure div and the ``Plotly.newPlot`` call, with the data embedded as JSON.
    ``div_id`` defaults to :func:`new_figure_id`.
    """
    prepared = prepare_figure(fig)
    return _prepared_figure_html(prepared, div_id or new_figure_id(prepared))


def _prepared_figure_html(prepared: go.Figure, div_id: str) -> str:
    """:func:`figure_html` of a figure :func:`prepare_figure` has already prepared."""
    inner = pio.to_html(
        prepared,
        config=PLOTLY_CONFIG,
        include_plotlyjs=False,
        include_mathjax=False,
        full_html=False,
        auto_play=False,  # figures with frames wait for the reader's slider or play button
        default_width="100%",
        default_height=f"{prepared.layout.height}px",
        div_id=div_id,
    )
    label = html.escape(plain_text(prepared.layout.title.text) or "Figure")
    description = html.escape(describe_figure(prepared))
    return (f'<div class="nlicl-plotly" data-nlicl-figure="{div_id}" role="figure" '
            f'aria-label="{label}" aria-describedby="{div_id}-desc">'
            f'<p class="nlicl-sr-only" id="{div_id}-desc" style="{SR_ONLY_STYLE}">{description}</p>'
            f"{inner}</div>")


def drawn_trace_count(fig: go.Figure) -> int:
    """Number of traces plotly.js draws when ``fig`` first appears.

    Traces with ``visible=False`` (the usual way a slider switches between precomputed
    curves) or ``visible="legendonly"`` are not drawn.
    """
    return sum(1 for trace in fig.data if trace.visible in (None, True))


def figure_output(fig: go.Figure) -> tuple[dict[str, str], dict[str, Any]]:
    """The (data, metadata) of the output written in book-build mode; raises ``ValueError``
    for a trace the site cannot draw (:func:`check_trace_types`)."""
    prepared = prepare_figure(fig)
    check_trace_types(prepared)
    figure_id = new_figure_id(prepared)
    data = {
        "text/html": _prepared_figure_html(prepared, figure_id),
        "text/plain": f"<plotly figure {figure_id}: {len(prepared.data)} trace(s)>",
    }
    metadata = {
        "nlicl": {
            "figure_id": figure_id,
            "traces": len(prepared.data),
            "drawn_traces": drawn_trace_count(prepared),
            # the figure as plotly's own JSON: the build moves it into the output's data
            # (``application/vnd.plotly.v1+json``) of the notebooks readers download, where
            # JupyterLab draws it; not in the data here, where myst-nb would warn about it
            "figure": json.loads(pio.to_json(prepared, validate=False)),
        }
    }
    return data, metadata


def show(fig: go.Figure) -> None:
    """Display ``fig`` in the book build or in a live notebook (see the module docstring).

    Call it as the last thing a cell does with a figure, instead of ``fig.show()`` or leaving
    ``fig`` as the cell's value.
    """
    if in_book_build():
        data, metadata = figure_output(fig)
        publish_display_data(data, metadata)
    else:
        prepare_figure(fig).show(config=PLOTLY_CONFIG)


def show_source(function: Callable[..., Any]) -> None:
    """Display ``function``'s code as the library has it (the page's code is the library's
    code: the function a chapter shows is the one its cells run), without its docstring (the
    page states the equations in its own words), as a Markdown code block, so that the book
    draws it as its own code and Jupyter highlights it."""
    source = textwrap.dedent(inspect.getsource(function))
    definition = ast.parse(source).body[0]
    if ast.get_docstring(definition) is not None:
        lines = source.splitlines()
        docstring = definition.body[0]
        del lines[docstring.lineno - 1: docstring.end_lineno]
        source = "\n".join(lines)
    if "```" in source:
        raise ConfigError("function", function.__qualname__, "source without a Markdown fence")
    display(Markdown(f"```python\n{source.rstrip()}\n```"))
