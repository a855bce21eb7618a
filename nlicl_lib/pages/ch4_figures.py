r"""Chapter 4's figures ("How big must one block be?"), one builder per figure; every trained
result is drawn next to the exact reference it is compared with.

- :func:`capacity_figure`: one block's exact test loss against its slots $m$ or GLU width $h$,
  with the best span a block of that size can write, $\ell_m = \min_{\dim V \le m}
  \mathcal L^*((x; V))$ (Proposition 12 (prop-capacity)), the full kernel step and linear GD;
- :func:`training_curves_figure`: the batch loss of each block while it trains, against the
  same reference;
- :func:`saturation_figure`: $\ell_m$ and the trained blocks for $d = 3, 4, 5$;
- :func:`embedding_figure`: the slots $m = p_2 + \dots + p_k$, $p_j = \binom{d+j-1}{j}$, a token
  needs to hold the degree-$\le k$ kernel, against $d^k / k!$.

All losses are shown over $\mathbb E[y^2]$.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from nlicl_lib.pages.plots import (
    COLORS,
    PALETTE,
    baseline_trace,
    bound_trace,
    new_figure,
    slider_figure,
    theory_trace,
    trained_trace,
)
from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.experiments.capacity_sweeps import CapacitySweep, SaturationSweep
from nlicl_lib.theory.capacity import required_embedding
from nlicl_lib.theory.ch4_analysis import OneBlockReferences

KINDS = ["slots m", "width h"]
"""The two sweeps of a slider: block size by slots $m$ (width $\\max(m, p_2)$) or by GLU width
$h$ (slots $\\max(h, p_2)$)."""

SMOOTHING_STEPS = 20
"""Steps in the running mean of :func:`training_curves_figure`'s batch losses."""


def _sweep_panel(sweep: CapacitySweep, references: OneBlockReferences, kind: str
                 ) -> list[go.Scatter]:
    norm, kernel, linear, p2 = (references.normaliser, references.kernel, references.linear,
                                references.p2)
    slots = kind == KINDS[0]
    values = sweep.slot_values if slots else sweep.width_values
    trained = sweep.slots_loss if slots else sweep.width_loss
    best = ({m: sweep.subspace[m].loss for m in values} if slots
            else {h: sweep.glu[h].loss for h in values})
    traces = [
        trained_trace(values, [trained[v] / norm for v in values],
                      "trained block (exact test loss)"),
        theory_trace(values, [best[v] / norm for v in values],
                     "best span the block can write"),
    ]
    if slots:
        traces.append(theory_trace(values, [sweep.coordinate[v].loss / norm for v in values],
                                   "best m monomials", color=COLORS["trained2"],
                                   dash="longdashdot"))
    traces += [
        bound_trace(values, [kernel / norm] * len(values), "full one-step kernel GD (m = h = p₂)"),
        baseline_trace(values, [linear / norm] * len(values), "no slots: linear GD on x"),
        baseline_trace([p2, p2], [kernel / norm * 0.97, linear / norm * 1.01],
                       f"saturates at m = p₂ = {p2}", dash="longdash"),
    ]
    return traces


def capacity_figure(sweep: CapacitySweep, references: OneBlockReferences) -> go.Figure:
    r"""The slot and width sweeps of one block (a slider between them): trained exact test loss
    against the best span a block of that size can write, the best $m$ monomials (slots only),
    the kernel step $\mathcal L^*((x; \phi_2))$ and linear GD $\mathcal L^*(x)$."""
    base = new_figure("One block against the best span it can write",
                      "block size: slots m or GLU width h", "test loss / E[y²]")
    base.update_xaxes(tickvals=sweep.slot_values)
    return slider_figure(base, {(k,): _sweep_panel(sweep, references, k) for k in KINDS},
                         ["vary"], [KINDS],
                         panel_titles={("slots m",): "One block, m slots (h = max(m, p₂))",
                                       ("width h",): "One block, h GLU units (m = max(h, p₂))"})


def training_curves_figure(sweep: CapacitySweep, references: OneBlockReferences,
                           window: int = SMOOTHING_STEPS) -> go.Figure:
    """The batch loss of every block of the two sweeps (mean of ``window`` steps), one panel per
    sweep and size, with the best loss of its size and the full kernel step."""
    window = check_int("window", window, minimum=1)
    norm, kernel = references.normaliser, references.kernel
    if sweep.slot_values != sweep.width_values:
        raise ConfigError("sweep", (sweep.slot_values, sweep.width_values),
                          "the same sizes in the slot and the width sweep (one size slider)")
    steps_total = len(sweep.history[("slots", sweep.slot_values[0])])
    if window > steps_total:
        raise ConfigError("window", window, f"at most the {steps_total} training steps")
    steps = np.arange(window, steps_total + 1)
    base = new_figure("Training one block", "training step",
                      f"loss / E[y²] (mean of {window} steps)", log_y=True)
    panels = {}
    for kind, prefix, best in [(KINDS[0], "slots", sweep.subspace), (KINDS[1], "width", sweep.glu)]:
        for v in sweep.slot_values:
            smoothed = np.convolve(sweep.history[(prefix, v)], np.ones(window) / window,
                                   mode="valid")
            panels[(kind, v)] = [
                trained_trace(steps, smoothed / norm, "trained block", mode="lines"),
                theory_trace([1, steps_total], [best[v].loss / norm] * 2,
                             "reference (best span of this size)"),
                bound_trace([1, steps_total], [kernel / norm] * 2, "full one-step kernel GD"),
            ]
    return slider_figure(base, panels, ["vary", "size"], [KINDS, sweep.slot_values])


def _saturation_panel(saturation: SaturationSweep, d: int, kind: str) -> list[go.Scatter]:
    c = saturation.curves[d]
    best, trained = ((c.slot_loss, c.trained_slots) if kind == KINDS[0]
                     else (c.width_loss, c.trained_widths))
    ends = [min(best), max(best)]
    traces = [theory_trace(list(best), list(best.values()), "best block of this size (exact)"),
              trained_trace(list(trained), list(trained.values()), "trained block (exact loss)",
                            mode="markers", marker={"size": 10}),
              bound_trace(ends, [c.kernel] * 2, "kernel optimum L*((x; φ₂))"),
              baseline_trace([c.p2] * 2, [c.kernel * 0.97, c.linear * 1.01],
                             f"saturates at m = p₂ = {c.p2}", dash="longdash")]
    if kind == KINDS[1]:  # the slots curve, for comparison
        traces.insert(1, theory_trace(list(c.slot_loss), list(c.slot_loss.values()),
                                      "best block with h slots", color=COLORS["trained2"],
                                      dash="longdashdot"))
    return traces


def saturation_figure(saturation: SaturationSweep) -> go.Figure:
    r"""For each $d$ of ``saturation`` (a slider) and each sweep (slots or units): the best
    one-block loss $\ell_m$ against the size (piecewise linear in $m$, Proposition 12
    (prop-capacity), item 5), the trained blocks, the kernel optimum and the point $m = p_2$
    where $\ell_m$ saturates."""
    dims = list(saturation.curves)
    sizes = {KINDS[0]: "m slots, h = max(m, p₂)", KINDS[1]: "h units, m = max(h, p₂)"}
    titles = {(d, k): f"d = {d}: {sizes[k]}" for d in dims for k in KINDS}
    base = new_figure("Best one-block loss (flat from m = p₂ on)", "slots m or GLU width h", "test loss / E[y²]")
    return slider_figure(base, {key: _saturation_panel(saturation, *key) for key in titles},
                         ["d", "vary"], [dims, KINDS], panel_titles=titles)


def embedding_figure(degrees: Sequence[int], max_input_dim: int = 50) -> go.Figure:
    r"""Slots $m = p_2 + \dots + p_k$ to hold every monomial of degree 2 to $k$, for
    $d = 1, \dots,$ ``max_input_dim`` (log-log), each degree with its growth $d^k / k!$."""
    grid = np.arange(1, check_int("max_input_dim", max_input_dim, minimum=2) + 1)
    if not degrees or len(degrees) > len(PALETTE):
        raise ConfigError("degrees", list(degrees), f"1 to {len(PALETTE)} degrees")
    fig = new_figure("Slots to hold degrees 2 to k", "input dimension d",
                     "slots m = p₂ + … + pₖ", log_x=True, log_y=True)
    for k, color in zip(degrees, PALETTE[:len(degrees)], strict=True):
        k = check_int("degree", k, minimum=2)
        fig.add_trace(trained_trace(grid, [required_embedding(int(d), k).slots for d in grid],
                                    f"k = {k}: p₂ + … + pₖ", color=color, mode="lines"))
        fig.add_trace(theory_trace(grid, grid.astype(float) ** k / np.prod(range(1, k + 1)),
                                   f"k = {k}: dᵏ / k!", color=color))
    return fig
