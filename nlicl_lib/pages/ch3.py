r"""Chapter 3's page (book/ch3_glu_kernel.md): the runs it shows, its figures, tables and the
numbers its prose quotes. The theory they are compared with is :mod:`nlicl_lib.theory.kernel`
(the best one-step GD of Theorem thm-feature-optimum and Corollary cor-same-span, the $c/n$
bound of Proposition prop-one-over-n).

The runs: one GLU-LSA block ($m = h = p_2$) per run, all trained together
(:func:`~nlicl_lib.training.train.train`):

- the **grid**: every target degree $k$ and context length $n$, several seeds, ``"large"``
  GLU initialisation, prompts from data seed 0;
- the **initialisations**: the quadratic task at $n = 20$, each GLU initialisation with the same
  seeds, prompts from data seed 0;
- the **exercise runs** (Exercise 3.2): each initialisation with initialisation and prompts both
  from seed 1.

A one-block model's test loss is exact: its GLU writes $s(x) = C\phi_2(x)$, so it is one GD step
on $(x; s(x))$ with its own $\Gamma$ and Theorem thm-feature-optimum gives its loss
(:func:`~nlicl_lib.theory.values.exact_model_loss`). Kernel ridge regression is the baseline.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nlicl_lib.core.book_refs import ref as ref
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap, monomial_name
from nlicl_lib.core.tables import ResultTable
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.baselines import DEFAULT_PENALTIES as DEFAULT_PENALTIES
from nlicl_lib.experiments.baselines import TunedRidge, tuned_kernel_ridge
from nlicl_lib.pages.chapter_exercises import (  # noqa: F401  (the page's exercises)
    check_glu_gradient_exponent,
    check_kernel_linear_weight,
    check_one_over_n_constant,
    check_phi2_glu,
    kernel_moments,
)
from nlicl_lib.pages.display import glue as glue
from nlicl_lib.pages.display import glue_values as glue_values
from nlicl_lib.pages.display import show as show
from nlicl_lib.pages.display import show_source as show_source
from nlicl_lib.pages.panels import glu_kernel_panel as glu_kernel_panel
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
from nlicl_lib.theory import closed_forms, constructions, values
from nlicl_lib.theory.kernel import (
    USED,
    BlockSummary,
    ConstructionCheck,
    DirectionUsage,
    OneOverNRate,
    WeightMovement,
    anisotropic_kernel_gamma,
    captured_fraction,
    direction_usage,
    first_length_within,
    missing_direction_optimum,
)
from nlicl_lib.training.train import TrainConfig, TrainResult, train

# --- the runs -----------------------------------------------------------------------------------


def context_length_grid(smallest: int = 10, largest: int = 160) -> list[int]:
    """Doubling context lengths from ``smallest`` to ``largest`` (10, 20, 40, 80, 160)."""
    grid, n = [], smallest
    while n <= largest:
        grid.append(n)
        n *= 2
    return grid


def _task(degree: int, context_length: int, input_dim: int = 3) -> TaskConfig:
    return TaskConfig(kind="poly", input_dim=input_dim, context_length=context_length, degree=degree)


@dataclass(frozen=True)
class Run:
    """One block of the study: its ``task`` and ``model``, the seed of its initial weights
    (``seed``) and of its training prompts (``data_seed``)."""

    task: TaskConfig
    model: ModelConfig
    seed: int
    data_seed: int


@dataclass
class GluKernelStudy:
    """The page's trained blocks: ``grid_runs``, ``init_runs`` and ``exercise_runs`` in this
    order in ``models`` and ``training``; ``exact``: each run's exact test loss; ``seconds``:
    the wall time of training them all."""

    grid_runs: list[Run]
    init_runs: list[Run]
    exercise_runs: list[Run]
    models: list[InContextRegressor]
    training: list[TrainResult]
    exact: list[float]
    seconds: float
    device: str

    @property
    def runs(self) -> list[Run]:
        return self.grid_runs + self.init_runs + self.exercise_runs

    def _part(self, start: int, stop: int) -> list[tuple[Run, InContextRegressor, float]]:
        return list(zip(self.runs[start:stop], self.models[start:stop], self.exact[start:stop],
                        strict=True))

    def grid(self) -> dict[tuple[int, int], list[float]]:
        r"""Test loss / $\mathbb E[y^2]$ of each grid run, keyed ``(degree, context_length)``, one
        entry per seed."""
        grid: dict[tuple[int, int], list[float]] = {}
        for run, _, loss in self._part(0, len(self.grid_runs)):
            task = run.task
            grid.setdefault((task.degree, task.context_length), []).append(
                loss / closed_forms.null_loss(task))
        return grid

    def by_init(self, optimum_loss: float
                ) -> tuple[dict[str, list[float]], dict[str, list[InContextRegressor]]]:
        r"""The initialisation runs per GLU initialisation: loss / ``optimum_loss`` ($\mathcal L^*$)
        and the trained models, in seed order."""
        first = len(self.grid_runs)
        inits = list(dict.fromkeys(run.model.glu_init for run in self.init_runs))
        ratios: dict[str, list[float]] = {init: [] for init in inits}
        models: dict[str, list[InContextRegressor]] = {init: [] for init in inits}
        for run, model, loss in self._part(first, first + len(self.init_runs)):
            ratios[run.model.glu_init].append(loss / optimum_loss)
            models[run.model.glu_init].append(model)
        return ratios, models

    def exercise_blocks(self) -> tuple[dict[str, InContextRegressor], dict[str, float]]:
        """Exercise 3.2's blocks and their exact losses, per GLU initialisation."""
        part = self._part(len(self.grid_runs) + len(self.init_runs), len(self.runs))
        return ({run.model.glu_init: model for run, model, _ in part},
                {run.model.glu_init: loss for run, _, loss in part})


def train_glu_kernel_study(quadratic: TaskConfig, contexts: Sequence[int], degrees: Sequence[int],
                           grid_seeds: Sequence[int], inits: Sequence[str], init_seeds: Sequence[int],
                           config: TrainConfig) -> GluKernelStudy:
    r"""Train the page's blocks together (see the module docstring) with ``config`` and compute
    each one's exact test loss. ``quadratic``: the task of the initialisation and exercise runs."""
    large_init = ModelConfig(kind="glu-lsa", glu_init="large")
    grid_runs = [Run(_task(k, n), large_init, seed=s, data_seed=0)
                 for k in degrees for n in contexts for s in grid_seeds]
    init_runs = [Run(quadratic, ModelConfig(kind="glu-lsa", glu_init=init), seed=s, data_seed=0)
                 for init in inits for s in init_seeds]
    # Exercise 3.2's settings: initialisation and prompts both from seed 1
    exercise_runs = [Run(quadratic, ModelConfig(kind="glu-lsa", glu_init=init), seed=1, data_seed=1)
                     for init in inits]
    runs = grid_runs + init_runs + exercise_runs
    models = [build_model(run.model, run.task, seed=run.seed) for run in runs]
    start = time.perf_counter()
    training = train(models, [run.task for run in runs],
                     [replace(config, seed=run.data_seed) for run in runs], progress=False)
    seconds = time.perf_counter() - start
    exact = [values.exact_model_loss(model, run.task) for run, model in zip(runs, models, strict=True)]
    return GluKernelStudy(grid_runs, init_runs, exercise_runs, models, training, exact, seconds,
                          training[0].device)


def kernel_ridge_sweep(degrees: Sequence[int], contexts: Sequence[int], test_prompts: int = 10000,
                       validation_prompts: int = 2000, batch_size: int = 1000
                       ) -> dict[tuple[int, int], TunedRidge]:
    r"""Kernel ridge regression with $k(x, x') = (1 + x^\top x')^k$ on the degree-$k$ task at each
    context length $n$, keyed ``(k, n)``; penalty tuned on validation prompts, test loss a Monte
    Carlo estimate on ``test_prompts`` prompts
    (:func:`~nlicl_lib.experiments.baselines.tuned_kernel_ridge`)."""
    return {(k, n): tuned_kernel_ridge(_task(k, n), validation_prompts=validation_prompts,
                                       test_prompts=test_prompts, batch_size=batch_size)
            for k in degrees for n in contexts}


def best_and_worst(ratios: Mapping[str, Sequence[float]],
                   models: Mapping[str, Sequence[InContextRegressor]], inits: Sequence[str]
                   ) -> dict[str, InContextRegressor]:
    """The block of the best and of the worst seed (lowest and highest loss / optimum) for each
    initialisation, named "<init> init, best seed" and "<init> init, worst seed"."""
    examples = {}
    for init in inits:
        found = np.array(ratios[init])
        examples[f"{init} init, best seed"] = models[init][int(np.argmin(found))]
        examples[f"{init} init, worst seed"] = models[init][int(np.argmax(found))]
    return examples


def example_gammas(optimal_gamma: np.ndarray) -> dict[str, np.ndarray]:
    r"""The page's examples of $\Gamma$ over $(x; \phi_2)$ for $d = 3$, by slider label: the kernels
    $(x^\top x')^2$, $2x^\top x' + (x^\top x')^2 = (1 + x^\top x')^2 - 1$, $(x^\top\Lambda x')^2$
    with $\Lambda = \mathrm{diag}(1, \frac12, \frac14)$, and ``optimal_gamma`` ($\Gamma^*$)."""
    return {"(x·x')²": constructions.polynomial_kernel_gamma(3, 0.0),
            "(1+x·x')²−1": constructions.polynomial_kernel_gamma(3, 2.0),
            "(x·Λx')²": anisotropic_kernel_gamma([1.0, 0.5, 0.25]),
            "Γ*": np.asarray(optimal_gamma)}


# --- printed reports and tables -----------------------------------------------------------------


def construction_report(check: ConstructionCheck) -> str:
    """The printed lines of the construction check (each within 78 characters for names up to
    36)."""
    lines = ["block vs one GD step on psi, max relative difference:"]
    for name, gap in check.gaps.items():
        kernel = "a kernel" if check.is_kernel[name] else "not a kernel"
        lines.append(f"  {name:36s} {gap:.2g} (k_Gamma is {kernel})")
    lines.append(f"block with a = {check.linear_weight:g} vs (1/n) sum_i y_i k(x, x_i): "
                 f"{check.kernel_sum:.2g}")
    return "\n".join(lines)


def describe_kernel_check(name: str, found: closed_forms.KernelCheck) -> str:
    r"""Three lines: whether $k_{\Gamma^*}$ is a kernel, the relative asymmetry
    $\|\Gamma^* - \Gamma^{*\top}\|_F / \|\Gamma^*\|_F$, and the eigenvalue range of the symmetric
    part $(\Gamma^* + \Gamma^{*\top})/2$."""
    return (f"{name}: k_G* is {'' if found.is_kernel() else 'not '}a kernel\n"
            f"  asymmetry |G* - G*^T|_F / |G*|_F = {found.asymmetry:.2g}\n"
            f"  eigenvalues of (G* + G*^T)/2 from {found.min_eigenvalue:.4f} "
            f"to {found.max_eigenvalue:.4f}")


def describe_polynomial(poly: PolyMap, output: int = 0, digits: int = 2, cutoff: float = 0.05
                        ) -> str:
    """A short readable form of one output, largest terms first, e.g.
    ``"0.71 x1 x2 - 0.70 x2 x3"`` (terms below ``cutoff`` times the largest are left out)."""
    coefs = poly.coefficients[output]
    if not np.any(coefs):
        return "0"
    order = np.argsort(-np.abs(coefs))
    top = np.abs(coefs[order[0]])
    text = ""
    for k in order:
        c = coefs[k]
        if abs(c) < cutoff * top:
            break
        name = monomial_name(poly.exponents[k])
        sign = "-" if c < 0 else "+"
        text += (f"{'-' if c < 0 else ''}" if not text else f" {sign} ") + f"{abs(c):.{digits}f} {name}"
    return text


def describe_block(name: str, summary: BlockSummary, phi2: PolyMap) -> str:
    """The page's printed lines for one block: its loss / optimum, how many directions it uses,
    the best step on those, each dead direction as a polynomial, and (if one is dead) the share of
    each monomial of ``phi2`` inside the used span."""
    usage = summary.usage
    alive = usage.usage > USED
    lines = [f"{name}: loss / optimum {summary.ratio:.4f}, {alive.sum()} of 6 directions used,",
             f"  best step on the used ones {summary.used_ratio:.4f}"]
    for k in np.flatnonzero(~alive):
        one = PolyMap(usage.directions.exponents, usage.directions.coefficients[k:k + 1])
        lines.append(f"  dead e{k + 1} (strength {usage.strengths[k]:.2g}, usage {usage.usage[k]:.2g}):")
        lines.append(f"    {describe_polynomial(one)}")
    if not alive.all():
        fractions = captured_fraction(phi2, usage.used())
        lines.append("  share of each monomial inside the used span:\n    "
                     + ", ".join(f"{m} {f:.2f}" for m, f in zip(phi2.names, fractions, strict=True)))
    return "\n".join(lines)


def movement_report(movement: WeightMovement) -> str:
    """The table of how far the GLU weights moved (lines within 78 characters) and the
    scaled-start check."""
    lines = ["init    weakest / strongest  RMS weight  RMS change   moved   seeds that",
             "        direction at start   at start    of a weight          lost a direction"]
    for init, row in movement.movement.items():
        lines.append(f"{init:6s}  {row['weakest']:<19.4f}  {row['start']:<10.3f}  "
                     f"{row['change']:<11.3f}  {row['moved']:<5.2f}   "
                     f"{movement.lost[init]} of {movement.seeds}")
    lines.append(f"same seed, large start vs scaled-up normal start: max relative gap "
                 f"{movement.scaled_gap:.1g}")
    return "\n".join(lines)


def grid_table(grid: Mapping[tuple[int, int], Sequence[float]], block_opt: Mapping[tuple[int, int], float],
               krr: Mapping[tuple[int, int], TunedRidge], degrees: Sequence[int],
               contexts: Sequence[int]) -> ResultTable:
    """The page's table: per degree and context length, each seed's trained loss over the block's
    optimum, and the KRR test loss / E[y^2] with its penalty."""
    seeds = len(grid[degrees[0], contexts[0]])
    rows = []
    for k in degrees:
        for n in contexts:
            ratios = np.array(grid[k, n]) / block_opt[k, n]
            rows.append((f"degree {k}, n = {n}", " ".join(f"{r:.4f}" for r in ratios),
                         f"{krr[k, n].test.normalised:.2e}", f"{krr[k, n].penalty:.0e}"))
    return ResultTable(("task, context", f"trained / block optimum ({seeds} seeds)",
                        "KRR / E[y²]", "KRR penalty"), tuple(rows),
                       caption="Trained blocks against their optimum, and kernel ridge regression")


# --- the numbers the prose quotes ---------------------------------------------------------------


def rate_values(rates: Mapping[int, OneOverNRate], contexts: Sequence[int], task: TaskConfig
                ) -> dict[str, float | int]:
    r"""The page's numbers on the $1/n$ rate: $c$ and $n_\times$ per degree, $n\mathcal L^*/c$ at
    $n = 10$ and $160$, the log-log slopes of $\mathcal L^*(n)$ between consecutive ``contexts``
    (first and last) for ``task``, and the first $n$ where $n\mathcal L^*/c \ge 0.99$ (degree 2)."""
    c2, null2 = rates[2].c, rates[2].null
    on_grid = closed_forms.one_step_gd_optimum_curve(task.target_features, task.target_features,
                                                     contexts)
    slopes2 = np.diff(np.log(on_grid)) / np.diff(np.log(contexts))
    return {"c2": c2, "crossover1": rates[1].c / rates[1].null, "crossover2": c2 / null2,
            "crossover3": rates[3].c / rates[3].null,
            "scaled2_10": rates[2].at(10), "scaled2_160": rates[2].at(160),
            "scaled1_160": rates[1].at(160), "scaled3_160": rates[3].at(160),
            "slope2_first": float(slopes2[0]), "slope2_last": float(slopes2[-1]),
            "n99_2": first_length_within(rates[2], task.target_features, 0.99)}


def init_values(ratios: Mapping[str, Sequence[float]], usage_of: Mapping[str, Sequence[DirectionUsage]]
                ) -> dict[str, float | int | str]:
    """Per initialisation: how many seeds end within 1% of the optimum (``ok_*``, "none" if
    none), the best and median loss / optimum, and how many seeds lost a direction (usage at most
    :data:`~nlicl_lib.theory.kernel.USED`)."""
    found: dict[str, float | int | str] = {}
    for init, ratio in ratios.items():
        ratio = np.array(ratio)
        ok = int(np.sum(ratio < 1.01))
        found[f"ok_{init}"] = ok if ok else "none"
        found[f"best_{init}"] = float(ratio.min())
        found[f"median_{init}"] = float(np.median(ratio))
        found[f"lost_{init}"] = int(sum(np.any(u.usage <= USED) for u in usage_of[init]))
    return found


def dead_direction_values(dead: BlockSummary, alive: BlockSummary, task: TaskConfig,
                          optimum_loss: float) -> dict[str, float | str]:
    r"""The page's numbers on a block with a dead direction (``dead``) against one using all six
    (``alive``): usage range of ``alive``, strength, usage and polynomial of ``dead``'s least
    used direction, its loss ratios, and the plateau of a block that lost $x_1^2$ instead."""
    k_dead = int(np.argmin(dead.usage.usage))
    dead_direction = PolyMap(dead.usage.directions.exponents,
                             dead.usage.directions.coefficients[k_dead:k_dead + 1])
    phi2 = PolyMap.monomials(task.input_dim, [2])
    square = PolyMap(phi2.exponents, np.eye(phi2.num_outputs)[:1])  # x1^2
    return {"alive_usage_min": float(alive.usage.usage.min()),
            "alive_usage_max": float(alive.usage.usage.max()),
            "dead_strength": float(dead.usage.strengths[k_dead]),
            "dead_usage": float(dead.usage.usage[k_dead]),
            "dead_ratio": dead.ratio, "dead_used": dead.used_ratio,
            "dead_weakest": describe_polynomial(dead_direction),
            "plateau_square": missing_direction_optimum(task, square).loss / optimum_loss}


def learned_kernel_values(learned: np.ndarray, optimal_gamma: np.ndarray) -> dict[str, float]:
    r"""The trained block's $G = A^\top\Gamma A$ against $\Gamma^*$: relative Frobenius distance
    $\|G - \Gamma^*\|_F / \|\Gamma^*\|_F$, relative asymmetry of $G$ and the smallest eigenvalue
    of its symmetric part."""
    distance = np.linalg.norm(learned - optimal_gamma) / np.linalg.norm(optimal_gamma)
    found = closed_forms.kernel_check(learned)
    return {"kernel_distance": float(distance), "learned_asymmetry": found.asymmetry,
            "learned_min_eig": found.min_eigenvalue}


def context_values(grid: Mapping[tuple[int, int], Sequence[float]],
                   block_opt: Mapping[tuple[int, int], float], rates: Mapping[int, OneOverNRate],
                   krr_losses: Mapping[tuple[int, int], float], contexts: Sequence[int],
                   degrees: Sequence[int]) -> dict[str, float | int]:
    r"""The page's numbers on the quadratic task across $n$: trained / block optimum (median at
    $n = 20$, largest median, worst seed), the optimum at $n = 10$ and $160$, $c/n$ at $n = 160$
    over $\mathbb E[y^2]$, the kernel's feature count $p$ (monomials up to degree 2, plus the
    constant) and the largest KRR loss where $n > p$."""
    ratios2 = {n: np.array(grid[2, n]) / block_opt[2, n] for n in contexts}
    p_features = {k: closed_forms.kernel_features(3, k).num_outputs + 1 for k in degrees}
    exact_fit = [krr_losses[2, n] for n in contexts if n > p_features[2]]
    return {"ratio2_n20": float(np.median(ratios2[20])),
            "ratio2_worst": float(max(r.max() for r in ratios2.values())),
            "ratio2_median_max": float(max(np.median(r) for r in ratios2.values())),
            "opt2_160": float(block_opt[2, 160]), "opt2_10": float(block_opt[2, 10]),
            "c2_over_n160": rates[2].c / 160 / rates[2].null,
            "p2_features": p_features[2], "krr_exact": max(exact_fit)}


def degree_values(grid: Mapping[tuple[int, int], Sequence[float]],
                  block_opt: Mapping[tuple[int, int], float], full_opt: Mapping[tuple[int, int], float],
                  contexts: Sequence[int]) -> dict[str, float | str]:
    r"""The page's numbers on degrees 1 and 3: the block's optimum and the optimum on all
    monomials up to degree 3 at $n = 10$ and $160$, their ratio, the trained blocks' median
    ratios, and how closely the two optima agree for degree 1 (equal up to rounding)."""
    gap3 = {n: block_opt[3, n] / full_opt[3, n] for n in contexts}
    k1_same = max(abs(block_opt[1, n] / full_opt[1, n] - 1) for n in contexts)
    return {"k3_block_160": float(block_opt[3, 160]), "k3_block_10": float(block_opt[3, 10]),
            "k3_full_160": float(full_opt[3, 160]), "k3_gap_160": float(gap3[160]),
            "k1_ratio": float(np.median([np.median(grid[1, n]) / block_opt[1, n] for n in contexts])),
            "k3_ratio_worst": float(max(np.median(grid[3, n]) / block_opt[3, n] for n in contexts)),
            "k1_same": "exactly" if k1_same == 0 else
            f"to within a relative {k1_same:.0e} (float64 rounding)"}


def kernel_weight_values(moments: closed_forms.GDMoments, weights: np.ndarray, tolerance: float = 0.03
                         ) -> dict[str, float]:
    r"""Exercise 3.1's solution: for each weight $a$ of ``weights``, the loss of
    $c\,\Gamma_a$ with the best step size $c$ over the optimum $\mathcal L^*$; the range of $a$
    within ``tolerance`` of it, the best $a$ and its relative gap."""
    solution_optimum = closed_forms.gd_optimum_from_moments(moments).loss
    best_ratio = np.array([closed_forms.best_step_size(
        constructions.polynomial_kernel_gamma(3, float(weight)), moments)[1] / solution_optimum
        for weight in weights])
    within = weights[best_ratio <= 1 + tolerance]
    if within.size == 0:
        raise ConfigError("weights", f"{weights.min()}..{weights.max()}",
                          f"a grid with at least one weight within {tolerance:.0%} of the optimum")
    return {"ex31_low": float(within.min()), "ex31_high": float(within.max()),
            "ex31_best": float(weights[np.argmin(best_ratio)]),
            "ex31_best_gap": float(best_ratio.min() - 1)}


def usage_values(models: Mapping[str, InContextRegressor], losses: Mapping[str, float],
                 optimum: closed_forms.OneStepOptimum) -> dict[str, float | int]:
    """Exercise 3.2's solution: for the block of each initialisation, how many directions it uses,
    its loss / optimum and its usage range (names ``ex32_<init>_...``)."""
    found: dict[str, float | int] = {}
    for init, model in models.items():
        usage = direction_usage(model, optimum.gamma).usage
        found[f"ex32_{init}_used"] = int(np.sum(usage > USED))
        found[f"ex32_{init}_ratio"] = losses[init] / optimum.loss
        found[f"ex32_{init}_usage_min"] = float(usage.min())
        found[f"ex32_{init}_usage_max"] = float(usage.max())
    return found


# --- figures ------------------------------------------------------------------------------------


GAMMA_TITLES = {
    "(x·x')²": "Γ of the kernel (x·x')²",
    "(1+x·x')²−1": "Γ of the kernel (1 + x·x')² − 1",
    "(x·Λx')²": "Γ of (x·Λx')², Λ = diag(1, ½, ¼)",
    "Γ*": f"The optimal Γ* = S B⁻¹ ({ref('cor-same-span')})",
}
"""Panel titles of :func:`gamma_examples_figure`, by the slider labels of
:func:`example_gammas`."""

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
    $G = A^\top\Gamma A$ (left) and the optimal $\Gamma^*$ (right)."""
    if np.shape(learned) != np.shape(optimal) or np.shape(optimal) != (len(labels), len(labels)):
        raise ConfigError("learned", np.shape(learned), f"two {len(labels)} x {len(labels)} matrices")
    limit = np.abs(optimal).max()
    names = [unicode_label(label) for label in labels]
    fig = book_layout(make_subplots(rows=1, cols=2, horizontal_spacing=0.16,
                                    subplot_titles=["trained G", "optimal Γ*"]),
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
    each seed; it opens on $k = 2$), the best one-step GD on $(x; \phi_2)$ (theory), the best one-step GD on all
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
    shown = (2,) if 2 in degrees else None  # the quadratic task, which the text discusses
    return slider_figure(base, panels, ["target degree k"], [list(degrees)], panel_titles=titles,
                         initial=shown)


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
