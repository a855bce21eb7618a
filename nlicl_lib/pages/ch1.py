r"""Chapter 1's page: its runs, figures, table and printed reports, each trained result next to
the theory it should match (:mod:`nlicl_lib.theory.lsa_gd`).

- :func:`train_one_layer`: one LSA layer $\mathrm{LSA}(Z) = Z + \frac1n P Z M Z^\top Q Z$, all of
  $P, Q$ free, against the best one-step GD loss $\mathcal L^* = \frac{d(d+1+\sigma^2)}{n+d+1+\sigma^2}$
  (Theorem 5 (thm-linear-optimum)); :func:`training_figure`, :func:`weights_figure` (the trained
  $P, Q$ rescaled by $p_{DD}$, since $(cP, Q/c)$ is the same layer, above the construction
  $P = e_D e_D^\top$, $Q = -\mathrm{blkdiag}(\Gamma^{*\top}, 0)$);
- :func:`train_depth_sweep`: $L$-layer stacks at several noise levels $\sigma$, with the Bayes
  optimum (ridge, $n\lambda = \sigma^2$); :func:`depth_figure` and :func:`depth_table` set them
  against $L$ tuned GD steps, both as loss / $\mathbb E[y^2]$.

The page's display helpers, panel, labels and closed forms are re-exported here, so the page
imports the package root, :mod:`~nlicl_lib.theory.lsa_gd` and this module only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from nlicl_lib.core.book_refs import ref as ref
from nlicl_lib.core.models import LSA, InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.tables import ResultTable
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.pages import plots
from nlicl_lib.pages.chapter_exercises import (  # noqa: F401  (the page's exercises)
    check_learning_rate,
    check_lsa_prediction,
    check_noisy_optimum_formula,
    check_preconditioner_scale,
)
from nlicl_lib.pages.display import glue as glue
from nlicl_lib.pages.display import glue_values as glue_values
from nlicl_lib.pages.display import show as show
from nlicl_lib.pages.display import show_source as show_source
from nlicl_lib.pages.panels import lsa_gd_panel as lsa_gd_panel
from nlicl_lib.theory.closed_forms import linear_gd_optimum_isotropic
from nlicl_lib.theory.closed_forms import null_loss as null_loss
from nlicl_lib.theory.lsa_gd import ConstructionCheck, TrainedStep, TunedGD
from nlicl_lib.theory.predictors import least_squares, ridge
from nlicl_lib.training.evaluate import LossEstimate, test_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainConfig, TrainResult, train


@dataclass
class OneLayerRun:
    """The trained ``model``, its ``training`` record and settings, its Monte Carlo ``test`` loss
    and the ``least_squares`` predictor's, on the same task."""

    model: InContextRegressor
    train_config: TrainConfig
    training: TrainResult
    test: LossEstimate
    least_squares: LossEstimate


def train_one_layer(task: TaskConfig, seed: int = 0, train_config: TrainConfig | None = None
                    ) -> OneLayerRun:
    """Train one full LSA layer on ``task`` with ``train_config`` (default:
    :func:`~nlicl_lib.training.settings.default_train_config` with ``seed``; ``seed`` also draws the
    weights and the test stream), then estimate its test loss to 0.5% and least squares'
    (float64) to 5%."""
    model_config = ModelConfig(kind="lsa", depth=1)
    if train_config is None:
        train_config = default_train_config(task, model_config, seed=seed)
    model = build_model(model_config, task, seed=seed)
    training = train(model, task, train_config, progress=False)
    test = test_loss(model, task, relative_error=0.005, seed=seed)
    ls = test_loss(least_squares, task, relative_error=0.05, seed=seed, dtype=torch.float64,
                   max_prompts=40000)
    return OneLayerRun(model, train_config, training, test, ls)


@dataclass
class DepthSweep:
    r"""``runs[i] = (sigma, L)`` with its ``models[i]`` and ``results[i]``;
    ``trained[sigma, L]``: the Monte Carlo test loss; ``bayes[sigma]`` ($\sigma > 0$): ridge with
    $n\lambda = \sigma^2$; ``seconds``: wall time of the training, all runs side by side."""

    runs: list[tuple[float, int]]
    models: list[InContextRegressor]
    results: list[TrainResult]
    trained: dict[tuple[float, int], LossEstimate]
    bayes: dict[float, LossEstimate]
    seconds: float

    @property
    def thread_seconds(self) -> float:
        """Training time summed over the groups of runs trained at once (each run's share)."""
        return sum(r.seconds / r.trained_with for r in self.results)

    def model(self, sigma: float, depth: int) -> InContextRegressor:
        """The trained stack of depth ``depth`` at noise ``sigma``."""
        return self.models[self.runs.index((sigma, depth))]


def train_depth_sweep(input_dim: int, context_length: int, depths: Sequence[int],
                      noise_levels: Sequence[float], train_config: TrainConfig, seed: int = 1
                      ) -> DepthSweep:
    r"""Train a full LSA of every depth $L$ in ``depths`` on linear tasks with label noise $\sigma$
    for every $\sigma$ in ``noise_levels`` (the noise levels of one depth at once, depths side
    by side: :func:`~nlicl_lib.training.train.train`), then estimate each test loss to 1%, and
    the Bayes-optimal loss for $w \sim \mathcal N(0, I_d)$: ridge
    $\hat w = (X^\top X + n\lambda I)^{-1} X^\top y$ with $n\lambda = \sigma^2$."""
    d, n = input_dim, context_length
    runs = [(sigma, depth) for sigma in noise_levels for depth in depths]
    tasks = [TaskConfig(kind="linear", input_dim=d, context_length=n, noise_std=sigma)
             for sigma, _ in runs]
    models = [build_model(ModelConfig(kind="lsa", depth=L), t, seed=seed)
              for (_, L), t in zip(runs, tasks, strict=True)]
    start = time.perf_counter()
    results = train(models, tasks, train_config, progress=False)
    seconds = time.perf_counter() - start
    trained = {key: test_loss(model, task, relative_error=0.01, seed=seed)
               for key, model, task in zip(runs, models, tasks, strict=True)}
    bayes = {}
    for sigma in noise_levels:
        if sigma == 0:
            continue  # without noise n > d examples determine w: the Bayes loss is exactly 0
        noisy = TaskConfig(kind="linear", input_dim=d, context_length=n, noise_std=sigma)
        bayes[sigma] = test_loss(lambda p, s=sigma: ridge(p, s**2 / n), noisy, seed=seed,
                                 relative_error=0.01, dtype=torch.float64)
    return DepthSweep(runs, models, results, trained, bayes, seconds)


def training_figure(task: TaskConfig, result: TrainResult, test: LossEstimate, optimum: float,
                    normaliser: float, window: int = 25) -> go.Figure:
    r"""Batch loss / $\mathbb E[y^2]$ per step of a layer trained on ``task`` (raw and its mean over
    ``window`` steps), the test loss with two standard errors, the best one-step GD loss ``optimum``
    $\mathcal L^*$ and the zero predictor (1 after normalising by ``normaliser`` $= \mathbb E[y^2]$)."""
    steps = np.arange(1, result.steps + 1)
    smoothed = np.convolve(result.loss_history, np.ones(window) / window, mode="valid")
    title = f"Training one LSA layer (d={task.input_dim}, n={task.context_length})"
    fig = plots.new_figure(title, "training step", "loss / E[y²]", log_y=True, height=480)
    fig.add_trace(plots.trained_trace(steps, result.loss_history / normaliser, "batch loss",
                                      mode="lines", opacity=0.35))
    fig.add_trace(plots.trained_trace(steps[window - 1:], smoothed / normaliser,
                                      f"batch loss, mean of {window} steps", mode="lines"))
    fig.add_trace(plots.theory_trace([1, result.steps], [optimum / normaliser] * 2,
                                     f"best one-step GD ({ref('thm-linear-optimum')})"))
    fig.add_trace(plots.baseline_trace([1, result.steps], [1.0, 1.0], "zero predictor"))
    fig.add_trace(go.Scatter(
        x=[result.steps], y=[test.mean / normaliser], mode="markers",
        name="test loss (Monte Carlo, ±2 s.e.)",
        marker={"color": plots.COLORS["trained2"], "size": 9},
        error_y={"type": "data", "array": [2 * test.std_error / normaliser]}))
    return fig


def weights_figure(trained: LSA, construction: LSA) -> go.Figure:
    r"""Four heat maps on one colour scale: the trained $P / p_{DD}$ and $Q\,p_{DD}$ (top), the
    construction's $P$ and $Q$ (bottom); rows and columns named $x_1..x_d, y$."""
    learned_p = trained.P.detach().double().numpy()
    learned_q = trained.Q.detach().double().numpy()
    corner = learned_p[-1, -1]
    labels = [plots.unicode_label(f"x{i}") for i in range(1, learned_p.shape[0])] + ["y"]
    panels = [("trained P / p<sub>DD</sub>", learned_p / corner),
              ("trained Q · p<sub>DD</sub>", learned_q * corner),
              ("construction P", construction.P.detach().numpy()),
              ("construction Q", construction.Q.detach().numpy())]
    limit = max(np.abs(matrix).max() for _, matrix in panels)
    fig = plots.book_layout(make_subplots(rows=2, cols=2, subplot_titles=[t for t, _ in panels],
                                          horizontal_spacing=0.16, vertical_spacing=0.16),
                            "Trained layer and construction", height=640)
    for index, (title, matrix) in enumerate(panels):
        fig.add_trace(go.Heatmap(
            z=matrix, x=labels, y=labels, zmin=-limit, zmax=limit, zmid=0, colorscale="RdBu_r",
            showscale=index == 0, name=title, colorbar={"thickness": 14},
            hovertemplate="row %{y}, column %{x}: %{z:.3f}<extra></extra>"),
            row=index // 2 + 1, col=index % 2 + 1)
    fig.update_yaxes(autorange="reversed")
    return fig


def depth_figure(depths: Sequence[int], noise_levels: Sequence[float],
                 trained: Mapping[tuple[float, int], LossEstimate],
                 tuned: Mapping[tuple[float, int], TunedGD], bayes: Mapping[float, LossEstimate],
                 normaliser: float) -> go.Figure:
    r"""Test loss / $\mathbb E[y^2]$ against depth $L$: the trained stacks (``trained[sigma, L]``,
    two standard errors), $L$ tuned GD steps (``tuned[sigma, L]``) and, for $\sigma > 0$, the Bayes
    optimum ``bayes[sigma]``; one slider step per $\sigma$ in ``noise_levels``."""
    base = plots.new_figure("L-layer LSA against L tuned GD steps", "layers L",
                            "test loss / E[y²]", log_y=True)
    base.update_xaxes(tickvals=list(depths))
    figure_panels = {}
    for sigma in noise_levels:
        ours = [trained[sigma, L] for L in depths]
        traces = [
            plots.trained_trace(depths, [e.mean / normaliser for e in ours],
                                "trained LSA (all of P, Q), ±2 s.e.",
                                error_y=[2 * e.std_error / normaliser for e in ours]),
            plots.theory_trace(depths, [tuned[sigma, L].loss / normaliser for L in depths],
                               "L steps of GD, tuned step sizes"),
        ]
        if sigma > 0:
            floor = [bayes[sigma].mean / normaliser] * len(depths)
            traces.append(plots.bound_trace(depths, floor, "Bayes optimum (ridge, nλ = σ²)"))
        figure_panels[(sigma,)] = traces
    return plots.slider_figure(base, figure_panels, ["label noise σ"], [list(noise_levels)])


def pm(mean: float, error: float) -> str:
    """mean ± error, both to the error's second significant digit"""
    places = max(1 - int(np.floor(np.log10(error))), 0) if error > 0 else 4
    return f"{mean:.{places}f} ± {error:.{places}f}"


def depth_table(depths: Sequence[int], noise_levels: Sequence[float],
                trained: Mapping[tuple[float, int], LossEstimate],
                tuned: Mapping[tuple[float, int], TunedGD], bayes: Mapping[float, LossEstimate],
                input_dim: int, context_length: int) -> ResultTable:
    r"""One row per $(\sigma, L)$: the trained loss, the tuned-GD loss (both $\pm$ one standard
    error), the exact optimum $\frac{d(d+1+\sigma^2)}{n+d+1+\sigma^2}$ at $L = 1$ and the Bayes loss
    (exactly 0 without noise), all over $\mathbb E[y^2] = d$ (the query labels are clean), as in
    :func:`depth_figure`. A table (HTML in the book, text printed)."""
    normaliser = null_loss(TaskConfig(kind="linear", input_dim=input_dim,
                                      context_length=context_length))
    rows = []
    for sigma in noise_levels:
        for depth in depths:
            ours, steps_ref = trained[sigma, depth], tuned[sigma, depth]
            exact = linear_gd_optimum_isotropic(input_dim, context_length, sigma)[1]
            floor = (pm(bayes[sigma].mean / normaliser, bayes[sigma].std_error / normaliser)
                     if sigma > 0 else "0 (exact)")
            rows.append((f"σ = {sigma:.1f}, L = {depth}",
                         pm(ours.mean / normaliser, ours.std_error / normaliser),
                         pm(steps_ref.loss / normaliser, steps_ref.std_error / normaliser),
                         f"{exact / normaliser:.4f}" if depth == 1 else "", floor))
    return ResultTable(("σ, L", "trained LSA", "tuned L-step GD", "exact (L=1)", "Bayes (ridge)"),
                       tuple(rows), caption="Test loss / E[y²] of the trained LSA stacks and their "
                       "references (± one standard error)")


def construction_report(check: ConstructionCheck) -> str:
    r"""The lines of :func:`~nlicl_lib.theory.lsa_gd.construction_check`: one layer against one
    GD step, $L$ layers against $L$ steps, and the labels after layer $\ell$ against the residuals
    $y_i - w_\ell^\top x_i$ after step $\ell$ (relative differences, 2 significant digits)."""
    depth = len(check.residual_labels)
    lines = [f"1 layer vs 1 GD step: max relative difference {check.one_layer:.2g}",
             f"{depth} layers vs {depth} GD steps: max relative difference {check.all_layers:.2g}"]
    lines += [f"  labels after layer {layer} vs residuals after step {layer}: {gap:.2g}"
              for layer, gap in enumerate(check.residual_labels, start=1)]
    return "\n".join(lines)


def one_layer_report(run: OneLayerRun, optimum: float) -> str:
    r"""Training budget and time, the test loss, $\mathcal L^*$ = ``optimum`` (Theorem 5
    (thm-linear-optimum)), their ratio $\pm$ one standard error, and least squares' loss."""
    config, test = run.train_config, run.test
    return "\n".join([
        f"trained {config.steps} steps of batch {config.batch_size} "
        f"in {run.training.seconds:.1f} s on the CPU",
        f"test loss       {test}",
        f"optimum L*      {optimum:.5f} (exact, {ref('thm-linear-optimum')})",
        f"test loss / L*  {test.mean / optimum:.4f} ± {test.std_error / optimum:.4f}",
        f"least squares   {run.least_squares.mean:.1g} (Monte Carlo; exactly 0, as n > d noiseless",
        "                examples determine w)"])


def trained_step_report(step: TrainedStep) -> str:
    r"""$\Gamma_{\text{eff}}$ (3 decimals), $\Gamma^* = \gamma^* I$, their relative distance and the
    sizes of the non-GD terms (:func:`~nlicl_lib.theory.lsa_gd.read_trained_step`)."""
    return "\n".join([
        "effective Gamma of the trained layer:",
        str(step.gamma_eff.round(3) + 0.0),  # + 0.0: no "-0." entries
        f"Gamma* = n/(n+d+1) I = {step.gamma_star[0, 0]:.4f} I",
        f"||Gamma_eff - Gamma*|| / ||Gamma*|| = {step.distance:.4f}",
        "non-GD terms relative to Gamma_eff:",
        f"  label-free {step.spurious['label_free']:.1e}, "
        f"label-squared {step.spurious['label_squared']:.1e}"])


def tuned_steps_report(tuned: Mapping[tuple[float, int], TunedGD], depths: Sequence[int],
                       sigma: float = 0.0) -> str:
    r"""The tuned step sizes $\gamma_1..\gamma_L$ and the loss $\pm$ one standard error of every
    depth $L$ at noise ``sigma``."""
    lines = []
    for depth in depths:
        best = tuned[sigma, depth]
        sizes = ", ".join(f"{g:.3f}" for g in best.step_sizes)
        lines.append(f"L={depth}: step sizes ({sizes}), loss {best.loss:.4f} ± {best.std_error:.4f}")
    return "\n".join(lines)
