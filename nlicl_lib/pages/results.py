"""The Results page: every experiment's stored numbers as a table, a list and a figure.

The numbers come from ``results/`` (``make reproduce``) through
:mod:`nlicl_lib.experiments.stored_results`; this module only lays them out.
"""

from __future__ import annotations

from html import escape

import plotly.graph_objects as go

from nlicl_lib.experiments.reproduce import Row, table_html
from nlicl_lib.experiments.reproduce import experiment_list_html as experiment_list_html
from nlicl_lib.experiments.stored_results import REFRESH, StoredResults, stale_rows
from nlicl_lib.experiments.stored_results import load_results as load_results
from nlicl_lib.pages.display import show as show
from nlicl_lib.pages.plots import bound_trace, new_figure, trained_trace


def provenance_html(stored: StoredResults) -> str:
    """Where and when the stored numbers were computed, and whether this build's settings and
    code still match them (prose that wraps, not printed lines)."""
    rows, machine, commit = stored.rows, stored.machine, stored.commit
    stale = stale_rows(stored)
    lines = [
        f"Computed on {stored.date.replace('T', ' ').rstrip('Z')} UTC at commit {commit[:12]}"
        + (" (with uncommitted changes)" if commit.endswith("-dirty") else "")
        + f", seed {stored.data['seed']}, by &ldquo;{escape(REFRESH)}&rdquo;.",
        f"Machine: {escape(machine['cpu'])}, {machine['cores']} cores, torch {machine['torch']} "
        f"on {escape(machine['device'])}: {stored.data['seconds']:.0f} s for the {len(rows)} "
        "experiments (the seconds column: each one's training and test).",
        (f"Out of date: the settings or code of {escape(', '.join(sorted(stale)))} changed "
         f"since; &ldquo;{escape(REFRESH)}&rdquo; recomputes them.") if stale
        else "Every row matches the settings and code of this build.",
    ]
    return table_html(rows) + "<p>" + "<br>".join(lines) + "</p>"


def ratios_figure(rows: list[Row]) -> go.Figure:
    """Each trained model's loss over its reference, one experiment per column, and the line at
    ratio 1."""
    names = [row.experiment for row in rows if row.ratio is not None]
    ratios = [row.ratio for row in rows if row.ratio is not None]
    fig = new_figure("Trained loss / reference", "experiment", "ratio")
    fig.add_trace(trained_trace(names, ratios, "trained / reference", mode="markers",
                                marker={"size": 11}))
    fig.add_trace(bound_trace([names[0], names[-1]], [1.0, 1.0], "reference (ratio 1)"))
    fig.update_yaxes(rangemode="tozero")
    return fig
