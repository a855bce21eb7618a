r"""Chapter 3's figures, one builder per figure; each trained result is drawn next to the theory
it is compared with (the best one-step GD of Theorem 9 (thm-feature-optimum) and Corollary 10
(cor-same-span), the $c/n$ bound of prop-one-over-n).

- :func:`gamma_examples_figure`: example $\Gamma$'s over $\psi = (x; \phi_2)$ as heatmaps;
- :func:`one_over_n_figure`: $n\mathcal L^*(n)/c$ against $n$, with the crossovers
  $n_\times = c/\mathbb E[y^2]$;
- :func:`initialisations_figure`: each seed's loss / $\mathcal L^*$ per GLU initialisation, with
  the plateaus of blocks that lost cross-term directions;
- :func:`directions_figure`: strengths and usage of the six directions a trained GLU writes;
- :func:`kernel_comparison_figure`: the trained block's $K = A^\top\Gamma A$ next to $\Gamma^*$;
- :func:`context_length_figure`: trained blocks against the best one-step GD across $n$, one
  slider step per target degree, with kernel ridge regression;
- :func:`degree_figure`: the same at the longest context, against the target's degree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nlicl_lib.pages.plots import (
    COLORS,
    PALETTE,
    baseline_trace,
    book_layout,
    bound_trace,
    new_figure,
    slider_figure,
    theory_trace,
    trained_trace,
    unicode_label,
)
from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.theory.ch3_analysis import USED, BlockSummary, OneOverNRate
from nlicl_lib.theory.feature_analysis import DirectionUsage

GAMMA_TITLES = {
    "(x·x')²": "Γ of the kernel (x·x')²",
    "(1+x·x')²−1": "Γ of the kernel (1 + x·x')² − 1",
    "(x·Λx')²": "Γ of (x·Λx')², Λ = diag(1, ½, ¼)",
    "Γ*": f"The optimal Γ* = S B⁻¹ ({ref('cor-same-span')})",
}
"""Panel titles of :func:`gamma_examples_figure`, by the slider labels of
:func:`nlicl_lib.theory.ch3_analysis.example_gammas`."""

PLATEAU_COLORS = ["#c0392b", "#e67e22", "#8e44ad"]
"""Colours of the plateaus with one, two and three cross-term directions lost."""


def gamma_examples_figure(gammas: Mapping[str, np.ndarray], labels: Sequence[str]) -> go.Figure:
    r"""One heatmap per $\Gamma$ (a slider step each, titled from :data:`GAMMA_TITLES` or the
    label), colour scale symmetric about 0; ``labels``: the names of the features of $\psi$."""
    if not gammas:
        raise ConfigError("gammas", gammas, "at least one matrix")
    panels, titles = {}, {}
    names = [unicode_label(label) for label in labels]
    for name, gamma in gammas.items():
        if np.shape(gamma) != (len(labels), len(labels)):
            raise ConfigError(f"gammas[{name!r}]", np.shape(gamma), f"a {len(labels)} x {len(labels)} matrix")
        limit = np.abs(gamma).max()
        panels[(name,)] = [go.Heatmap(
            z=gamma, x=names, y=names, zmin=-limit, zmax=limit, zmid=0,
            colorscale="RdBu_r", name=name,
            hovertemplate="Γ[%{y}, %{x}] = %{z:.3f}<extra></extra>")]
        titles[(name,)] = GAMMA_TITLES.get(name, name)
    base = book_layout(go.Figure(), "", height=500)
    base.update_yaxes(autorange="reversed")
    return slider_figure(base, panels, ["kernel"], [list(gammas)], panel_titles=titles)


def one_over_n_figure(rates: Mapping[int, OneOverNRate], trained: tuple[int, int] = (10, 160)
                      ) -> go.Figure:
    r"""$n\mathcal L^*(n)/c$ for each degree (theory curves), a diamond at $n_\times$ where it is
    on the curve's range, the limit 1 of Proposition prop-one-over-n, and the band of the
    context lengths ``trained``."""
    if not rates:
        raise ConfigError("rates", rates, "at least one degree")
    low, high = trained
    fig = new_figure("Best one-step loss against c/n (d = 3)",
                     "context length n", "n L*(n) / c", log_x=True, height=540)
    fig.add_trace(go.Scatter(x=[low, high, high, low, low], y=[0, 0, 1.05, 1.05, 0],
                             fill="toself", mode="none", fillcolor="rgba(120,120,120,0.12)",
                             name=f"trained context lengths ({low} to {high})",
                             hoverinfo="skip"))
    lengths = None
    for index, (k, rate) in enumerate(rates.items()):
        lengths, crossover = rate.lengths, rate.crossover
        fig.add_trace(theory_trace(
            lengths, rate.scaled, f"degree {k}: n L*(n)/c, c = {rate.c:,.1f}",
            color=PALETTE[index]))
        if crossover >= lengths[0]:
            fig.add_trace(go.Scatter(
                x=[crossover], y=[np.interp(np.log(crossover), np.log(lengths), rate.scaled)],
                mode="markers", marker={"symbol": "diamond", "size": 11, "color": PALETTE[index]},
                name=f"degree {k}: n× = c / E[y²] = {crossover:.1f}",
                hovertemplate="n× = %{x:.1f}<extra></extra>"))
    fig.add_trace(bound_trace([lengths[0], lengths[-1]], [1.0, 1.0],
                              f"1: the limit of n L*(n)/c ({ref('prop-one-over-n')})"))
    fig.update_yaxes(range=[0, 1.05])
    return fig


def initialisations_figure(ratios: Mapping[str, Sequence[float]],
                           usage_of: Mapping[str, Sequence[DirectionUsage]], seeds: Sequence[int],
                           plateaus: Mapping[int, float]) -> go.Figure:
    r"""One point per seed (loss / $\mathcal L^*$, log scale) for each GLU initialisation, the
    optimum (1, theory) and the plateaus of blocks with ``lost`` cross-term directions removed
    (``plateaus[lost]``, bounds)."""
    inits = list(ratios)
    if not inits:
        raise ConfigError("ratios", ratios, "at least one initialisation")
    right = len(inits) - 0.5
    fig = new_figure(f"{len(seeds)} seeds per GLU initialisation",
                     "GLU initialisation", "loss / optimum", log_y=True, height=470)
    for index, init in enumerate(inits):
        values = np.array(ratios[init])
        ranks = [int(np.sum(u.usage > USED)) for u in usage_of[init]]
        fig.add_trace(go.Scatter(
            x=index + np.linspace(-0.18, 0.18, len(values)), y=values, mode="markers",
            name=f"{init} init, one point per seed",
            marker={"size": 9, "color": PALETTE[index], "opacity": 0.85},
            text=[f"seed {s}: {r:.4f}, {k} of 6 directions used" for s, r, k in zip(seeds, values, ranks, strict=True)],
            hovertemplate="%{text}<extra></extra>"))
    fig.add_trace(theory_trace([-0.5, right], [1.0, 1.0],
                               f"best one-step GD on (x; φ₂) ({ref('cor-same-span')})"))
    for lost, value in plateaus.items():
        fig.add_trace(bound_trace(
            [-0.5, right], [value, value],
            f"{lost} cross-term direction{'s' if lost > 1 else ''} lost "
            f"({ref('thm-feature-optimum')})", color=PLATEAU_COLORS[(lost - 1) % len(PLATEAU_COLORS)]))
    fig.update_xaxes(tickvals=list(range(len(inits))), ticktext=inits, range=[-0.5, right])
    return fig


def directions_figure(summaries: Mapping[str, BlockSummary]) -> go.Figure:
    r"""For each block (a slider step): strength $\sigma_k/\sigma_1$ and usage of each direction
    $e_k$ it writes (bars), and the usage 1 of the optimal $\Gamma^*$ (theory)."""
    if not summaries:
        raise ConfigError("summaries", summaries, "at least one block")
    count = len(next(iter(summaries.values())).usage.strengths)
    positions = np.arange(count)
    panels = {}
    for name, summary in summaries.items():
        usage = summary.usage
        panels[(name,)] = [
            go.Bar(x=positions, y=usage.strengths, name="strength σₖ / σ₁",
                   marker={"color": COLORS["trained"]},
                   text=[f"{v:.2g}" for v in usage.strengths], textposition="outside"),
            go.Bar(x=positions, y=usage.usage, name="usage: block's weight / optimal weight",
                   marker={"color": COLORS["trained2"]},
                   text=[f"{v:.2f}" for v in usage.usage], textposition="outside"),
            theory_trace([-0.5, count - 0.5], [1.0, 1.0], f"usage of the optimal Γ* ({ref('cor-same-span')})"),
        ]
    base = new_figure(f"The {'six' if count == 6 else count} directions and how Γ uses them",
                      "direction (strongest first)", "relative value", height=470)
    base.update_yaxes(range=[-0.05, 1.35])
    base.update_xaxes(tickvals=positions, ticktext=[f"e{k + 1}" for k in range(count)],
                      range=[-0.5, count - 0.5])
    base.update_layout(barmode="group")
    return slider_figure(base, panels, ["block"], [list(summaries)])


def kernel_comparison_figure(learned: np.ndarray, optimal: np.ndarray, labels: Sequence[str]) -> go.Figure:
    r"""Two heatmaps on one colour scale (that of $\Gamma^*$): the trained block's
    $K = A^\top\Gamma A$ (left) and the optimal $\Gamma^*$ (right)."""
    if np.shape(learned) != np.shape(optimal) or np.shape(optimal) != (len(labels), len(labels)):
        raise ConfigError("learned", np.shape(learned), f"two {len(labels)} x {len(labels)} matrices")
    limit = np.abs(optimal).max()
    names = [unicode_label(label) for label in labels]
    fig = book_layout(make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                                    subplot_titles=["trained K", "optimal Γ*"]),
                      "Trained and optimal preconditioner", height=440)
    for col, matrix in enumerate([learned, optimal], start=1):
        fig.add_trace(go.Heatmap(
            z=matrix, x=names, y=names, zmin=-limit, zmax=limit, zmid=0,
            colorscale="RdBu_r", showscale=col == 2,
            hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"), row=1, col=col)
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    return fig


def context_length_figure(grid: Mapping[tuple[int, int], Sequence[float]],
                          block_opt: Mapping[tuple[int, int], float],
                          full_opt: Mapping[tuple[int, int], float], rates: Mapping[int, OneOverNRate],
                          krr_losses: Mapping[tuple[int, int], float], degrees: Sequence[int],
                          contexts: Sequence[int], floor: float = 1e-3) -> go.Figure:
    r"""For each target degree $k$ (a slider step), against $n$: the trained blocks (median and
    each seed), the best one-step GD on $(x; \phi_2)$ (theory), the best one-step GD on all
    monomials up to degree $k$ and $\min(c/n, \mathbb E[y^2])$ (bounds), and tuned kernel ridge
    (baseline: ``krr_losses``, drawn at ``floor`` where below it). Losses are over
    $\mathbb E[y^2]$, keyed ``(k, n)``."""
    seeds = len(grid[degrees[0], contexts[0]])
    base = new_figure("One block against one-step GD", "context length n",
                      "test loss / E[y²]", log_x=True, log_y=True, height=560)
    base.update_xaxes(tickvals=list(contexts))
    base.update_yaxes(range=[np.log10(floor) - 0.1, 0.05])
    panels = {}
    for k in degrees:
        c_k, null_k = rates[k].c, rates[k].null
        seeds_y = np.array([grid[k, n] for n in contexts])  # (n, seeds)
        krr_y = [krr_losses[k, n] for n in contexts]
        kernel = "(1 + x·x')" + (f"<sup>{k}</sup>" if k > 1 else "")
        panels[(k,)] = [
            trained_trace(contexts, np.median(seeds_y, axis=1), f"trained block, median of {seeds} seeds"),
            go.Scatter(x=np.repeat(contexts, seeds_y.shape[1]), y=seeds_y.reshape(-1),
                       mode="markers", name="trained block, each seed",
                       marker={"color": COLORS["trained"], "size": 6, "symbol": "circle-open"}),
            theory_trace(contexts, [block_opt[k, n] for n in contexts],
                         "best one-step GD on (x; φ₂)"),
            bound_trace(contexts, [full_opt[k, n] for n in contexts],
                        f"best one-step GD, monomials of degree ≤ {k}", color=COLORS["trained3"]),
            bound_trace(contexts, [min(c_k / n / null_k, 1.0) for n in contexts],
                        f"min(c/n, E[y²]) ({ref('prop-one-over-n')})", color=COLORS["baseline"]),
            baseline_trace(contexts, [max(v, floor) for v in krr_y], f"tuned kernel ridge, {kernel}",
                           text=[f"{v:.3g}" if v >= floor else f"below {floor:g} (exact fit), drawn at {floor:g}"
                                 for v in krr_y], hovertemplate="n = %{x}: %{text}<extra></extra>"),
        ]
    titles = {(k,): f"One block against one-step GD, k = {k}" for k in degrees}
    return slider_figure(base, panels, ["target degree k"], [list(degrees)], panel_titles=titles)


def degree_figure(grid: Mapping[tuple[int, int], Sequence[float]], block_opt: Mapping[tuple[int, int], float],
                  full_opt: Mapping[tuple[int, int], float], degrees: Sequence[int],
                  context_length: int) -> go.Figure:
    r"""At one context length $n$, against the target's degree $k$: the trained blocks (median of
    the seeds), the best one-step GD on $(x; \phi_2)$ (theory) and on all monomials up to degree
    $k$ (bound), over $\mathbb E[y^2]$."""
    if (degrees[0], context_length) not in grid:
        raise ConfigError("context_length", context_length, "a context length of the grid")
    fig = new_figure(f"Loss at n = {context_length} against the degree k",
                     "target degree k", "test loss / E[y²]", log_y=True, height=440)
    fig.update_xaxes(tickvals=list(degrees))
    seeds_y = np.array([grid[k, context_length] for k in degrees])
    fig.add_trace(trained_trace(degrees, np.median(seeds_y, axis=1),
                                f"trained block (median of {seeds_y.shape[1]} seeds)"))
    fig.add_trace(theory_trace(degrees, [block_opt[k, context_length] for k in degrees],
                               "best one-step GD on (x; φ₂)"))
    fig.add_trace(bound_trace(degrees, [full_opt[k, context_length] for k in degrees],
                              "best one-step GD, monomials of degree ≤ k", color=COLORS["trained3"]))
    return fig
