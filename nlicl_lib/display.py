"""Show plotly figures so that they work both in the built book and in a live notebook.

Why this module exists: when myst-nb executes a notebook, a plotly figure's output is only the
``application/vnd.plotly.v1+json`` MIME type, which the HTML builder cannot render (the page
shows a blank space). :func:`show` therefore has two modes.

**Book build** (the environment variable ``NLICL_BOOK_BUILD`` is set to ``1``; ``make book``
exports it, and the Jupyter kernel that myst-nb starts inherits it): the figure is written as
``text/html``: a ``<div class="nlicl-plotly">`` plus a short script calling ``Plotly.newPlot``.
plotly.js itself is *not* inlined (each chapter page would grow by about 4.6 MB) and does *not*
come from a CDN (the book must work offline): the book's Sphinx extension
(``tools/nlicl_sphinx.py``) copies ``plotly.min.js`` from the installed ``plotly`` package into
the site's ``_static/vendor/`` and adds it to every page that holds an ``nlicl-plotly`` figure.
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
phone-width screen). Sliders and update menus are kept as they are: they are how readers of
the static site move through precomputed sweeps, and they need no kernel.
"""

from __future__ import annotations

import hashlib
import itertools
import os
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from nlicl_lib.plots import fit_top_legend

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

SLIDER_SCRIPT = """
(function () {
  // Combine several static sliders (nlicl_lib.plots.slider_figure): each step alone shows its
  // value with the other sliders at their first value; this keeps every slider's choice.
  var gd = document.getElementById('{plot_id}');
  var spec = gd && gd.layout && gd.layout.meta && gd.layout.meta.nlicl_sliders;
  if (!spec || spec.names.length < 2 || !gd.on) { return; }
  var active = spec.names.map(function () { return 0; });
  function apply() {
    var key = -1;
    for (var k = 0; k < spec.keys.length; k++) {
      var same = true;
      for (var s = 0; s < active.length; s++) { if (spec.keys[k][s] !== active[s]) { same = false; } }
      if (same) { key = k; break; }
    }
    if (key < 0) { return; }
    var visible = spec.panel_of_trace.map(function (p) { return p === key; });
    var layout = spec.titles ? {'title.text': spec.titles[key]} : {};
    window.Plotly.update(gd, {visible: visible}, layout);
  }
  gd.on('plotly_sliderchange', function (event) {
    var index = event.slider._index;
    if (index === undefined) { index = (gd.layout.sliders || []).indexOf(event.slider); }
    if (index < 0 || index >= active.length) { return; }
    active[index] = event.step._index;
    // the step's own restyle runs in the next animation frame; apply the combination after it
    window.requestAnimationFrame(function () { window.requestAnimationFrame(apply); });
  });
})();
"""
"""Page script run after each figure is drawn: combines several static sliders (see
:func:`nlicl_lib.plots.slider_figure`, which records the grid in ``layout.meta``)."""


def in_book_build() -> bool:
    """True when the code runs inside the book build (``NLICL_BOOK_BUILD=1``)."""
    return os.environ.get(BOOK_BUILD_ENV, "").strip().lower() in {"1", "true", "yes"}


def prepare_figure(fig: go.Figure) -> go.Figure:
    """Return a copy of ``fig`` with the book's display settings; ``fig`` is left unchanged.

    Sets an opaque paper and plot background when the figure has none, turns on ``autosize``
    and drops a fixed ``width`` (the container sets it), and gives a default height so that
    an autosized figure does not collapse to zero height in a flexible layout. A legend above
    the plot gets a top margin with room for one entry per row (:func:`plots.fit_top_legend`).
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
    return fit_top_legend(prepared)


def new_figure_id(fig: go.Figure) -> str:
    """A page-unique id for ``fig``'s div: a digest of its content plus a per-process counter.

    Re-executing a notebook gives the same ids, and two figures on one page never share one.
    """
    digest = hashlib.sha1(fig.to_json().encode()).hexdigest()[:12]
    return f"nlicl-fig-{digest}-{next(_figure_counter)}"


def figure_html(fig: go.Figure, div_id: str | None = None) -> str:
    """HTML for ``fig`` that draws it with the page's plotly.js (not inlined, no CDN).

    The result is one ``<div class="nlicl-plotly">`` that holds plotly's own figure div and
    the ``Plotly.newPlot`` call, with the data embedded as JSON. ``div_id`` defaults to
    :func:`new_figure_id`.
    """
    prepared = prepare_figure(fig)
    div_id = div_id or new_figure_id(prepared)
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
        post_script=SLIDER_SCRIPT,
    )
    return f'<div class="nlicl-plotly" data-nlicl-figure="{div_id}">{inner}</div>'


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
        "text/html": figure_html(prepared, figure_id),
        "text/plain": f"<plotly figure {figure_id}: {len(prepared.data)} trace(s)>",
    }
    metadata = {
        "nlicl": {
            "figure_id": figure_id,
            "traces": len(prepared.data),
            "drawn_traces": drawn_trace_count(prepared),
        }
    }
    return data, metadata


def show(fig: go.Figure) -> None:
    """Display ``fig`` in the book build or in a live notebook (see the module docstring).

    Call it as the last thing a cell does with a figure, instead of ``fig.show()`` or leaving
    ``fig`` as the cell's value.
    """
    if in_book_build():
        from IPython.display import publish_display_data

        data, metadata = figure_output(fig)
        publish_display_data(data, metadata)
    else:
        prepare_figure(fig).show(config=PLOTLY_CONFIG)
