"""Show plotly figures so that they work both in the built book and in a live notebook.

Why this module exists: when myst-nb executes a notebook, a plotly figure's output is only the
``application/vnd.plotly.v1+json`` MIME type, which the HTML builder cannot render (the page
shows a blank space). :func:`show` therefore has two modes.

**Book build** (the environment variable ``NLICL_BOOK_BUILD`` is set to ``1``; ``make book``
exports it, and the Jupyter kernel that myst-nb starts inherits it): the figure is written as
``text/html``: a ``<div class="nlicl-plotly">`` plus a short script calling ``Plotly.newPlot``.
plotly.js itself is *not* inlined (each chapter page would grow by 1.5 to 4.8 MB) and does
*not* come from a CDN (the book must work offline): the book's Sphinx extension
(``tools/nlicl_sphinx.py``) adds the vendored cartesian bundle
(``book/_static/vendor/plotly-cartesian.min.js``: scatter, bar, heatmap and a few more trace
types; checked at build time to be the plotly.js version of the installed ``plotly`` package,
and to hold every trace type a page uses) to every page that holds an ``nlicl-plotly`` figure.
The output's metadata (``{"nlicl": {"figure_id", "traces", "drawn_traces"}}``) tells the browser
test how many traces each drawn figure must show. The bundle deliberately has no
``application/vnd.plotly.v1+json`` entry: myst-nb warns about that MIME type, and the strict
build turns the warning into an error, which is what catches a cell that shows a figure with
plain ``fig.show()`` or as its value (the blank-figure trap).

**Live session** (Jupyter, JupyterLab, Colab, Binder: ``NLICL_BOOK_BUILD`` unset or ``0``): the
figure goes through plotly's own renderer (``fig.show()``), which picks the right one for the
front end.

In both modes the figure gets an opaque background (it must stay readable in the theme's dark
mode), ``autosize`` with no fixed width and plotly's ``responsive`` config (it must resize on a
phone-width screen), full-number tick labels on log axes, and its long text wrapped to fit a
phone (:func:`nlicl_lib.book.plots.wrap_figure_text`). Sliders and update menus are kept as they are:
they are how readers of the static site move through precomputed sweeps, and they need no kernel.

**Accessibility** (book build): the figure's ``<div class="nlicl-plotly">`` has ``role="figure"``,
an ``aria-label`` (its title) and an ``aria-describedby`` pointing to a visually hidden
``<p class="nlicl-sr-only">`` that says in words what the figure plots (:func:`describe_figure`).
The page script (:data:`FIGURE_SCRIPT`) makes every plotly slider a keyboard-operable ARIA slider
(``.slider-group`` elements get ``tabindex="0"``, ``role="slider"`` and ``aria-value*``; the
arrow keys, Home and End move it; a focused slider gets the class ``nlicl-focused`` and a
``rect.nlicl-focus-ring`` drawn around it).
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import math
import os
import re
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from IPython.display import publish_display_data

from nlicl_lib.book import plots
from nlicl_lib.book.plots import fit_figure_text, wrap_figure_text

BOOK_BUILD_ENV = "NLICL_BOOK_BUILD"
"""Name of the environment variable that switches :func:`show` into book-build mode."""

PLOTLY_CONFIG: dict[str, Any] = {
    "responsive": True,
    "displaylogo": False,  # the logo links to plotly's website
}
"""plotly.js config used for every figure of the book."""

DEFAULT_HEIGHT_PX = 450
OPAQUE_BACKGROUND = "white"

_figure_counter = itertools.count()

FIGURE_SCRIPT = r"""
(function () {
  // Sliders of one figure (nlicl_lib.book.display.FIGURE_SCRIPT): keyboard access for every slider,
  // and, for several static sliders (nlicl_lib.book.plots.slider_figure), the combination of all of
  // their choices (each step alone shows its value with the other sliders at their first one).
  var gd = document.getElementById('{plot_id}');
  var Plotly = window.Plotly;
  if (!gd || !gd.on || !Plotly || !gd.layout || !(gd.layout.sliders || []).length) { return; }
  var spec = gd.layout.meta && gd.layout.meta.nlicl_sliders;
  var combine = !!(spec && spec.names && spec.names.length > 1 &&
                   spec.names.length === gd.layout.sliders.length);
  var active = gd.layout.sliders.map(function (slider) { return slider.active || 0; });
  var queue = Promise.resolve();

  function steps(index) { return ((gd.layout.sliders || [])[index] || {}).steps || []; }
  function plain(text) {
    return String(text === undefined || text === null ? '' : text)
      .replace(/<br\s*\/?>/gi, ' ').replace(/<[^>]*>/g, '').replace(/\s+/g, ' ').trim();
  }
  function showCombination() {
    // the panel of the combination of every slider's choice
    if (!combine) { return Promise.resolve(); }
    var key = -1;
    for (var k = 0; k < spec.keys.length && key < 0; k++) {
      var same = true;
      for (var s = 0; s < active.length; s++) { if (spec.keys[k][s] !== active[s]) { same = false; } }
      if (same) { key = k; }
    }
    if (key < 0) { return Promise.resolve(); }
    var visible = spec.panel_of_trace.map(function (p) { return p === key; });
    var layout = Object.assign({}, spec.layouts ? spec.layouts[key] : {});
    if (spec.titles) { layout['title.text'] = spec.titles[key]; }
    return Plotly.update(gd, {visible: visible}, layout);
  }
  function choose(index, step) {
    // record a slider's new choice: shared by the mouse (plotly's own step) and the keyboard
    active[index] = step;
  }

  function groups() {
    return Array.prototype.slice.call(gd.querySelectorAll('.slider-container .slider-group'));
  }
  function indexOf(group) {
    var datum = group.__data__;
    if (datum && typeof datum._index === 'number') { return datum._index; }
    return groups().indexOf(group);
  }
  function groupAt(index) {
    return groups().filter(function (group) { return indexOf(group) === index; })[0] || null;
  }
  function ring(group, on) {
    // a visible focus indicator drawn in the SVG, where the book's CSS outline
    // (.slider-group:focus-visible, 2px #1a4b8c, offset 2px) falls, for browsers that draw no
    // outline on SVG elements
    var old = group.querySelector('.nlicl-focus-ring');
    if (old) { old.parentNode.removeChild(old); }
    if (!on || !group.getBBox) { return; }
    var box = group.getBBox();
    var rect = document.createElementNS(group.namespaceURI, 'rect');
    rect.setAttribute('class', 'nlicl-focus-ring');
    rect.setAttribute('x', box.x - 3);
    rect.setAttribute('y', box.y - 3);
    rect.setAttribute('width', box.width + 6);
    rect.setAttribute('height', box.height + 6);
    rect.setAttribute('rx', 2);
    rect.setAttribute('fill', 'none');
    rect.setAttribute('stroke', '#1a4b8c');
    rect.setAttribute('stroke-width', 2);
    rect.setAttribute('pointer-events', 'none');
    group.appendChild(rect);
  }
  function decorate() {
    // plotly redraws the sliders' SVG: (re)set the ARIA slider attributes after every draw
    groups().forEach(function (group) {
      var index = indexOf(group);
      var slider = (gd.layout.sliders || [])[index];
      if (!slider) { return; }
      var list = steps(index);
      var now = typeof slider.active === 'number' ? slider.active : active[index];
      var step = list[now] || {};
      var name = plain(slider.currentvalue && slider.currentvalue.prefix).replace(/[:\s]+$/, '');
      group.setAttribute('tabindex', '0');
      group.setAttribute('role', 'slider');
      group.setAttribute('aria-orientation', 'horizontal');
      group.setAttribute('aria-label', name || 'slider ' + (index + 1));
      group.setAttribute('aria-valuemin', '0');
      group.setAttribute('aria-valuemax', String(Math.max(0, list.length - 1)));
      group.setAttribute('aria-valuenow', String(now));
      group.setAttribute('aria-valuetext', plain(step.label !== undefined ? step.label : now));
      ring(group, document.activeElement === group && group.classList.contains('nlicl-focused'));
    });
  }
  function move(index, target) {
    var list = steps(index);
    target = Math.max(0, Math.min(list.length - 1, target));
    if (!list.length || target === active[index]) { return; }
    choose(index, target);
    var step = list[target];
    queue = queue.then(function () {
      // the step exactly as plotly applies it on a mouse change ...
      var method = step.method || 'restyle';
      if (step.execute !== false && method !== 'skip' && typeof Plotly[method] === 'function') {
        return Plotly[method].apply(null, [gd].concat(step.args || []));
      }
    }).then(function () {
      // ... the slider's grip and label moved to it ...
      var update = {};
      update['sliders[' + index + '].active'] = target;
      return Plotly.relayout(gd, update);
    }).then(showCombination).then(function () {
      // ... and the focus kept on the slider plotly has redrawn
      decorate();
      var group = groupAt(index);
      if (group && document.activeElement !== group) {
        group.classList.add('nlicl-focused');
        group.focus({preventScroll: true});
      }
      decorate();
    }).catch(function (error) {
      if (window.console) { window.console.error(error); }
    });
  }
  var keys = {ArrowLeft: -1, ArrowDown: -1, ArrowRight: 1, ArrowUp: 1};

  gd.on('plotly_sliderchange', function (event) {
    var index = event.slider._index;
    if (index === undefined) { index = (gd.layout.sliders || []).indexOf(event.slider); }
    if (index < 0 || index >= active.length) { return; }
    choose(index, event.step._index);
    // the step's own method runs in the next animation frame; show the combination after it
    window.requestAnimationFrame(function () {
      window.requestAnimationFrame(function () { showCombination().then(decorate); });
    });
  });
  gd.addEventListener('keydown', function (event) {
    var group = event.target && event.target.closest ? event.target.closest('.slider-group') : null;
    if (!group || !gd.contains(group) || event.altKey || event.ctrlKey || event.metaKey) { return; }
    var index = indexOf(group);
    var count = steps(index).length;
    var target;
    if (keys[event.key]) { target = active[index] + keys[event.key]; }
    else if (event.key === 'Home') { target = 0; }
    else if (event.key === 'End') { target = count - 1; }
    else { return; }
    event.preventDefault();  // the arrows and Home/End would scroll the page
    move(index, target);
  });
  gd.addEventListener('focusin', function (event) {
    var group = event.target;
    if (!group.classList || !group.classList.contains('slider-group')) { return; }
    var keyboard = true;
    try { keyboard = group.matches(':focus-visible'); } catch (error) { keyboard = true; }
    group.classList.toggle('nlicl-focused', keyboard);
    ring(group, keyboard);
  });
  gd.addEventListener('focusout', function (event) {
    var group = event.target;
    if (!group.classList || !group.classList.contains('slider-group')) { return; }
    group.classList.remove('nlicl-focused');
    ring(group, false);
  });
  ['plotly_afterplot', 'plotly_relayout', 'plotly_restyle', 'plotly_update'].forEach(
    function (name) { gd.on(name, decorate); });
  decorate();
})();
"""
"""Page script run after each figure is drawn (``{plot_id}`` is the figure's div id). For every
plotly slider of the figure it sets the ARIA slider attributes (again after each redraw, since
plotly redraws the SVG) and moves the slider on ArrowLeft/ArrowDown, ArrowRight/ArrowUp, Home
and End, applying the step as a mouse change does (``Plotly[step.method](gd, ...step.args)``,
then ``sliders[i].active``) and keeping the focus on it. With several static sliders
(:func:`nlicl_lib.book.plots.slider_figure`, which records the grid in ``layout.meta``), a change from
the mouse or the keyboard shows the combination of every slider's choice. A figure without
sliders returns at once."""

FIT_SCRIPT = r"""
(function () {
  // The top margin fitted to the title as drawn at this width (nlicl_lib.book.display.FIT_SCRIPT):
  // the figure is written with room for what a phone needs above the plot (a top legend with
  // one entry per row, wrapped titles), which leaves a gap under the title on a wider page.
  var gd = document.getElementById('{plot_id}');
  var Plotly = window.Plotly;
  if (!gd || !gd.on || !Plotly || !gd.layout) { return; }
  var GAP_PX = 8, TOLERANCE_PX = 4, MAX_TRIES = 3;
  var seen = null, tries = 0;
  function contentTop() {
    // the highest thing drawn under the title: the plot, a top legend, subplot titles, a
    // colour bar (all of them move with the top margin)
    var tops = [gd._fullLayout._size.t + gd.getBoundingClientRect().top];
    var parts = gd.querySelectorAll('.infolayer .legend, .infolayer .annotation, .colorbar');
    Array.prototype.forEach.call(parts, function (part) {
      var box = part.getBoundingClientRect();
      if (box.height > 0) { tops.push(box.top); }
    });
    return Math.min.apply(null, tops);
  }
  function fit() {
    var full = gd._fullLayout;
    var title = gd.querySelector('.infolayer .gtitle');
    if (!full || !full._size || !title || !title.textContent) { return; }
    var key = full.width + '|' + title.textContent;
    if (key !== seen) { seen = key; tries = 0; }
    if (tries >= MAX_TRIES) { return; }
    var shift = Math.round(title.getBoundingClientRect().bottom + GAP_PX - contentTop());
    if (Math.abs(shift) <= TOLERANCE_PX) { return; }
    tries += 1;
    var height = full.height + shift;
    var update = {'margin.t': full.margin.t + shift, height: height};
    var t = gd.layout.title || {};
    if (typeof t.y === 'number' && (t.yref === undefined || t.yref === 'container')) {
      update['title.y'] = 1 - (1 - t.y) * full.height / height;  // same distance from the top
    }
    // plotly's HTML gives the figure's div and its parent the written height
    [gd, gd.parentElement].forEach(function (div) {
      if (div && /px$/.test(div.style.height)) { div.style.height = height + 'px'; }
    });
    Plotly.relayout(gd, update);
  }
  gd.on('plotly_afterplot', function () { window.requestAnimationFrame(fit); });
  window.requestAnimationFrame(fit);
})();
"""
"""Page script run after each figure is drawn, and again after each redraw (a resize, a
slider's new title): it moves everything under the title (the plot, a top legend, subplot
titles, a colour bar) to a small gap below the title as drawn, by changing the top margin and
the height by the same amount, so the plot area keeps its size. The written figure reserves
what a phone needs (:func:`nlicl_lib.book.plots.fit_top_legend`: one legend row per entry); on a
wider page the legend takes fewer rows and the gap closes. Each title and width gets at most
three tries, so a redraw cannot loop."""

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
    a tick format get :data:`nlicl_lib.book.plots.LOG_TICKFORMAT`, so that every tick shows a full
    number instead of a lone digit, and ticks spaced so that those labels do not collide
    (:func:`nlicl_lib.book.plots.log_axis_ticks`: 1, 2 and 5 of each decade, or decades only).
    Long titles, legend entries and axis titles are wrapped to fit a phone
    (:func:`nlicl_lib.book.plots.wrap_figure_text`) and the figure grows to hold their lines
    (:func:`nlicl_lib.book.plots.fit_figure_text`: a legend above the plot gets a top margin
    with room for the title's lines and one row per line of each entry). Preparing a prepared
    figure changes nothing.
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
    plots.log_axis_ticks(prepared)
    return fit_figure_text(wrap_figure_text(prepared))


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
    plotly's own figure div and the ``Plotly.newPlot`` call, with the data embedded as JSON,
    followed by :data:`FIGURE_SCRIPT` and :data:`FIT_SCRIPT`. ``div_id`` defaults to
    :func:`new_figure_id`.
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
        post_script=[FIGURE_SCRIPT, FIT_SCRIPT],
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
    """The (data, metadata) of the output written in book-build mode."""
    prepared = prepare_figure(fig)
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
