r"""Chapter 3's analysis (no training): one GLU-LSA block as one preconditioned GD step on
$\psi(x) = (x; \phi_2(x))$, the best such step, and what trained blocks write and use.

The block with GLU weights writing $\phi_2(x)$ into the slots and attention in GD form predicts

$$\hat y = \psi(x_{n+1})^\top \Gamma\, \frac1n \sum_{i \le n} y_i\, \psi(x_i)
        = \frac1n \sum_{i \le n} y_i\, k_\Gamma(x_{n+1}, x_i), \qquad
  k_\Gamma(x, x') = \psi(x)^\top \Gamma\, \psi(x')$$

(Proposition prop-glu-kernel), and the best $\Gamma$ is $\Gamma^* = T^{-1} C C^\top B^{-1}$,
$\Gamma^* = S B^{-1}$ when $\operatorname{span}\psi = \operatorname{span}\phi$ (Theorem
thm-feature-optimum, Corollary cor-same-span), with loss $\mathcal L^*(n) \le
\min(c/n, \mathbb E[y^2])$, $c = \operatorname{tr}(S^{-1}F) - \operatorname{tr}S$ (Proposition
prop-one-over-n). Each function below computes one of the page's measurements; the ones named
``*_values`` return the numbers the page's prose quotes, by name. Trained models come in as
:class:`~nlicl_lib.core.models.InContextRegressor` (the training lives in
:mod:`nlicl_lib.experiments.ch3_studies`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap
from nlicl_lib.core.tasks import Prompts, TaskConfig
from nlicl_lib.theory import closed_forms, constructions, feature_analysis, predictors
from nlicl_lib.theory.closed_forms import GDMoments, KernelCheck
from nlicl_lib.theory.feature_analysis import DirectionUsage
from nlicl_lib.theory.values import exact_model_loss

CROSS_TERM_COLUMNS = (1, 2, 4)
"""Columns of $x_1x_2, x_1x_3, x_2x_3$ in $\\phi_2$ for $d = 3$ (order of
``PolyMap.monomials(3, [2])``: $x_1^2, x_1x_2, x_1x_3, x_2^2, x_2x_3, x_3^2$)."""

USED = 0.5
"""A direction whose usage is above this is *used* (``DirectionUsage.used``'s threshold)."""


def _check_mapping(param: str, value: Mapping) -> None:
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(param, value, "a non-empty mapping")


# --- the construction ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConstructionCheck:
    r"""Largest relative differences, over a batch of prompts, between the block of
    :func:`~nlicl_lib.theory.constructions.kernel_glu_lsa` and one GD step on $\psi$ for each
    named $\Gamma$ (``gaps[name]``; ``is_kernel[name]``: $\Gamma$ symmetric PSD), and
    ``kernel_sum``: the block with $\Gamma_a$ against $\frac1n \sum_i y_i\,(a\,x^\top x_i +
    (x^\top x_i)^2)$ written by hand, with weight ``linear_weight`` $= a$."""

    gaps: dict[str, float]
    is_kernel: dict[str, bool]
    kernel_sum: float
    linear_weight: float

    @property
    def largest(self) -> float:
        """The largest of all the differences."""
        return max([*self.gaps.values(), self.kernel_sum])

    def report(self) -> str:
        """The page's printed lines (each within 78 characters for names up to 36)."""
        lines = ["block vs one GD step on psi, max relative difference:"]
        for name, gap in self.gaps.items():
            kernel = "a kernel" if self.is_kernel[name] else "not a kernel"
            lines.append(f"  {name:36s} {gap:.2g} (k_Gamma is {kernel})")
        lines.append(f"block with a = {self.linear_weight:g} vs (1/n) sum_i y_i k(x, x_i): "
                     f"{self.kernel_sum:.2g}")
        return "\n".join(lines)


def construction_check(prompts: Prompts, gammas: Mapping[str, np.ndarray],
                       linear_weight: float = 0.5) -> ConstructionCheck:
    r"""The block of Proposition prop-glu-kernel against the GD step it should compute.

    For each $\Gamma$ of ``gammas`` ($p \times p$ over $\psi = (x; \phi_2)$, $p = d + p_2$):
    $\max |\hat y_{\text{block}} - \hat y_{\text{GD}}| / \max |\hat y_{\text{GD}}|$ with
    $\hat y_{\text{GD}} = \psi(x_{n+1})^\top \Gamma\, \frac1n\sum_i y_i\psi(x_i)$
    (:func:`~nlicl_lib.theory.predictors.kernel_gd`); then the block with
    $\Gamma_a$ (:func:`~nlicl_lib.theory.constructions.polynomial_kernel_gamma`) against the kernel
    sum $\frac1n\sum_i y_i\,(a\, x_{n+1}^\top x_i + (x_{n+1}^\top x_i)^2)$. Use float64 prompts:
    the differences are then rounding, about $10^{-15}$."""
    _check_mapping("gammas", gammas)
    d, n = prompts.x.shape[-1], prompts.x.shape[1] - 1
    slots = d * (d + 1) // 2
    psi = closed_forms.kernel_features(d, 2)
    for name, gamma in gammas.items():
        if np.shape(gamma) != (psi.num_outputs, psi.num_outputs):
            raise ConfigError(f"gammas[{name!r}]", np.shape(gamma),
                              f"a {psi.num_outputs} x {psi.num_outputs} matrix over (x; phi_2)")
    gaps, is_kernel = {}, {}
    with torch.no_grad():
        for name, gamma in gammas.items():
            block = constructions.kernel_glu_lsa(d, gamma)(prompts.embed(slots))
            explicit = predictors.kernel_gd(prompts, gamma, psi)
            gaps[name] = float((block - explicit).abs().max() / explicit.abs().max())
            is_kernel[name] = closed_forms.kernel_check(gamma).is_kernel()
        dots = torch.einsum("bid,bd->bi", prompts.x[:, :n], prompts.x[:, n])
        by_hand = torch.einsum("bi,bi->b", prompts.y[:, :n], linear_weight * dots + dots**2) / n
        block = constructions.kernel_glu_lsa(d, constructions.polynomial_kernel_gamma(d, linear_weight))(
            prompts.embed(slots))
        kernel_sum = float((block - by_hand).abs().max() / by_hand.abs().max())
    return ConstructionCheck(gaps, is_kernel, kernel_sum, linear_weight)


def anisotropic_kernel_gamma(scales: Sequence[float]) -> np.ndarray:
    r"""$\Gamma$ over $(x; \phi_2)$ of the kernel $(x^\top \Lambda x')^2$, $\Lambda =
    \mathrm{diag}(\lambda_1, \dots, \lambda_d)$: since $(x^\top\Lambda x')^2 = \sum_{j,k}
    \lambda_j\lambda_k\, x_jx_k\, x'_jx'_k$, weight $\lambda_j^2$ on $x_j^2$, $2\lambda_j\lambda_k$
    on $x_jx_k$ ($j < k$), and $0$ on $x$."""
    lam = np.asarray(scales, dtype=np.float64)
    if lam.ndim != 1 or lam.size == 0 or not np.all(np.isfinite(lam)):
        raise ConfigError("scales", scales, "a non-empty list of finite numbers, one per input")
    exps2 = PolyMap.monomials(lam.size, [2]).exponents
    aniso = [np.prod(lam ** a) * (1 if a.max() == 2 else 2) for a in exps2]
    return np.diag(np.concatenate([np.zeros(lam.size), aniso]))


def example_gammas(optimal_gamma: np.ndarray) -> dict[str, np.ndarray]:
    r"""The page's examples of $\Gamma$ over $(x; \phi_2)$ for $d = 3$, by slider label: the kernels
    $(x^\top x')^2$, $2x^\top x' + (x^\top x')^2 = (1 + x^\top x')^2 - 1$, $(x^\top\Lambda x')^2$
    with $\Lambda = \mathrm{diag}(1, \frac12, \frac14)$, and ``optimal_gamma`` ($\Gamma^*$)."""
    if np.shape(optimal_gamma) != (9, 9):
        raise ConfigError("optimal_gamma", np.shape(optimal_gamma), "a 9 x 9 matrix over (x; phi_2), d = 3")
    return {"(x·x')²": constructions.polynomial_kernel_gamma(3, 0.0),
            "(1+x·x')²−1": constructions.polynomial_kernel_gamma(3, 2.0),
            "(x·Λx')²": anisotropic_kernel_gamma([1.0, 0.5, 0.25]),
            "Γ*": np.asarray(optimal_gamma)}


# --- the best single step -----------------------------------------------------------------------


def span_losses(task: TaskConfig, feature_degrees: Mapping[str, Sequence[int]]) -> dict[str, float]:
    r"""The best one-step loss $\mathcal L^*/\mathbb E[y^2]$ (Theorem thm-feature-optimum) on the
    features $\psi$ = all monomials of the given degrees, for each name of ``feature_degrees``,
    on the target's monomials $\phi$ of ``task`` at its context length."""
    _check_mapping("feature_degrees", feature_degrees)
    losses = {}
    for name, monomial_degrees in feature_degrees.items():
        features = PolyMap.monomials(task.input_dim, monomial_degrees)
        losses[name] = closed_forms.one_step_gd_optimum(
            task.target_features, features, task.context_length).normalised_loss
    return losses


def describe_kernel_check(name: str, found: KernelCheck) -> str:
    r"""Three lines: whether $k_{\Gamma^*}$ is a kernel, the relative asymmetry
    $\|\Gamma^* - \Gamma^{*\top}\|_F / \|\Gamma^*\|_F$, and the eigenvalue range of the symmetric
    part $(\Gamma^* + \Gamma^{*\top})/2$."""
    return (f"{name}: k_G* is {'' if found.is_kernel() else 'not '}a kernel\n"
            f"  asymmetry |G* - G*^T|_F / |G*|_F = {found.asymmetry:.2g}\n"
            f"  eigenvalues of (G* + G*^T)/2 from {found.min_eigenvalue:.4f} "
            f"to {found.max_eigenvalue:.4f}")


@dataclass(frozen=True)
class OneOverNRate:
    r"""For a target of degree $k$ with features = its monomials: $c = \operatorname{tr}(S^{-1}F)
    - \operatorname{tr}S$, ``null`` $= \mathbb E[y^2]$, and ``scaled`` $= n\mathcal L^*(n)/c$ on
    ``lengths`` (Proposition prop-one-over-n: below 1, tending to 1)."""

    c: float
    null: float
    lengths: np.ndarray
    scaled: np.ndarray

    @property
    def crossover(self) -> float:
        r"""$n_\times = c / \mathbb E[y^2]$, where the two bounds $c/n$ and $\mathbb E[y^2]$ cross."""
        return self.c / self.null

    def at(self, context_length: int) -> float:
        """``scaled`` at one of ``lengths``."""
        hit = self.lengths == context_length
        if not hit.any():
            raise ConfigError("context_length", context_length, "one of the curve's lengths")
        return float(self.scaled[hit][0])


def rate_lengths(contexts: Sequence[int], largest: int = 100_000, points: int = 241) -> np.ndarray:
    """Context lengths from 10 to ``largest``, ``points`` on a log grid, with ``contexts`` added."""
    return np.unique(np.concatenate([np.geomspace(10, largest, points).round(), contexts]
                                    ).astype(int))


def one_over_n_rates(degrees: Sequence[int], lengths: np.ndarray, input_dim: int = 3
                     ) -> dict[int, OneOverNRate]:
    r"""$n\mathcal L^*(n)/c$ exactly on ``lengths`` for the polynomial target of each degree $k$
    (features = the target's monomials, Corollary cor-same-span), with $c$ and $\mathbb E[y^2]$."""
    rates = {}
    for k in degrees:
        task_k = TaskConfig(kind="poly", input_dim=input_dim, context_length=20, degree=k)
        phi_k = task_k.target_features
        c_k = closed_forms.one_step_gd_asymptote(task_k)
        losses = closed_forms.one_step_gd_optimum_curve(phi_k, phi_k, lengths)
        rates[k] = OneOverNRate(c_k, closed_forms.null_loss(task_k), lengths, lengths * losses / c_k)
    return rates


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


def first_length_within(rate: OneOverNRate, features: PolyMap, level: float) -> int:
    r"""The first whole $n$ with $n\mathcal L^*(n)/c \ge$ ``level`` (e.g. 0.99: within 1% of the
    limit of Proposition 11), exactly: the log grid of ``rate`` brackets it, then every integer in
    the bracket is evaluated (the curve rises with $n$)."""
    above = np.flatnonzero(rate.scaled >= level)
    if above.size == 0:
        raise ConfigError("level", level, f"a level the curve reaches by n = {int(rate.lengths[-1])}")
    i = int(above[0])
    if i == 0:
        return int(rate.lengths[0])
    candidates = np.arange(int(rate.lengths[i - 1]) + 1, int(rate.lengths[i]) + 1)
    scaled = candidates * closed_forms.one_step_gd_optimum_curve(features, features,
                                                                 candidates) / rate.c
    return int(candidates[np.argmax(scaled >= level)])


# --- trained blocks: initialisations and lost directions ----------------------------------------


def lost_cross_term_plateaus(task: TaskConfig, optimum_loss: float, counts: Sequence[int] = (1, 2, 3)
                             ) -> dict[int, float]:
    r"""The best one-step loss on $(x; \phi_2)$ with the first ``lost`` cross terms
    $x_1x_2, x_1x_3, x_2x_3$ projected out, over ``optimum_loss`` (Theorem thm-feature-optimum on
    the smaller span, :func:`~nlicl_lib.theory.feature_analysis.missing_direction_optimum`): the
    plateaus of blocks that lost that many cross-term directions ($d = 3$)."""
    if task.input_dim != 3:
        raise ConfigError("task.input_dim", task.input_dim, "3 (the cross terms of d = 3)")
    phi2 = PolyMap.monomials(3, [2])
    plateaus = {}
    for lost in counts:
        if lost not in (1, 2, 3):
            raise ConfigError("counts", counts, "numbers of cross terms from 1 to 3")
        rows = np.zeros((lost, 6))
        for r, column in enumerate(CROSS_TERM_COLUMNS[:lost]):
            rows[r, column] = 1.0
        direction = PolyMap(phi2.exponents, rows)
        plateaus[lost] = feature_analysis.missing_direction_optimum(task, direction).loss / optimum_loss
    return plateaus


def usages(models: Mapping[str, Sequence[InContextRegressor]], optimal_gamma: np.ndarray
           ) -> dict[str, list[DirectionUsage]]:
    r""":func:`~nlicl_lib.theory.feature_analysis.direction_usage` of every model, per group:
    usage$_k = e_k^\top K e_k / e_k^\top \Gamma^* e_k$."""
    return {key: [feature_analysis.direction_usage(m, optimal_gamma) for m in group]
            for key, group in models.items()}


def init_values(ratios: Mapping[str, Sequence[float]], usage_of: Mapping[str, Sequence[DirectionUsage]]
                ) -> dict[str, float | int | str]:
    """Per initialisation: how many seeds end within 1% of the optimum (``ok_*``, "none" if
    none), the best and median loss / optimum, and how many seeds lost a direction (usage at most
    :data:`USED`)."""
    found: dict[str, float | int | str] = {}
    for init, values in ratios.items():
        values = np.array(values)
        ok = int(np.sum(values < 1.01))
        found[f"ok_{init}"] = ok if ok else "none"
        found[f"best_{init}"] = float(values.min())
        found[f"median_{init}"] = float(np.median(values))
        found[f"lost_{init}"] = int(sum(np.any(u.usage <= USED) for u in usage_of[init]))
    return found


def best_and_worst(ratios: Mapping[str, Sequence[float]],
                   models: Mapping[str, Sequence[InContextRegressor]], inits: Sequence[str]
                   ) -> dict[str, InContextRegressor]:
    """The block of the best and of the worst seed (lowest and highest loss / optimum) for each
    initialisation, named "<init> init, best seed" and "<init> init, worst seed"."""
    examples = {}
    for init in inits:
        values = np.array(ratios[init])
        examples[f"{init} init, best seed"] = models[init][int(np.argmin(values))]
        examples[f"{init} init, worst seed"] = models[init][int(np.argmax(values))]
    return examples


@dataclass(frozen=True)
class BlockSummary:
    r"""One trained block: its direction ``usage``, its exact ``ratio`` = loss / $\mathcal L^*$
    and ``used_ratio``: the best one-step loss on $(x;$ its used directions$)$ / $\mathcal L^*$."""

    usage: DirectionUsage
    ratio: float
    used_ratio: float


def block_summaries(examples: Mapping[str, InContextRegressor], task: TaskConfig,
                    optimum: closed_forms.OneStepOptimum) -> dict[str, BlockSummary]:
    r"""For each block: usage of its directions against $\Gamma^*$, its exact loss over
    $\mathcal L^*$ (:func:`~nlicl_lib.theory.values.exact_model_loss`) and the best loss on the
    span it uses (:func:`~nlicl_lib.theory.feature_analysis.span_optimum`) over $\mathcal L^*$."""
    summaries = {}
    for name, model in examples.items():
        usage = feature_analysis.direction_usage(model, optimum.gamma)
        loss = exact_model_loss(model, task)
        used = feature_analysis.span_optimum(task, usage.used()).loss
        summaries[name] = BlockSummary(usage, loss / optimum.loss, used / optimum.loss)
    return summaries


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
        lines.append(f"    {feature_analysis.describe_polynomial(one)}")
    if not alive.all():
        fractions = feature_analysis.captured_fraction(phi2, usage.used())
        lines.append("  share of each monomial inside the used span:\n    "
                     + ", ".join(f"{m} {f:.2f}" for m, f in zip(phi2.names, fractions, strict=True)))
    return "\n".join(lines)


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
            "dead_weakest": feature_analysis.describe_polynomial(dead_direction),
            "plateau_square": feature_analysis.missing_direction_optimum(task, square).loss / optimum_loss}


def glu_weights(model: InContextRegressor) -> list[torch.Tensor]:
    """$W_1, W_2, W_3$ of the first block's GLU, detached, in float64."""
    glu = model.blocks[0].glu
    return [w.detach().double() for w in (glu.w1, glu.w2, glu.w3)]


@dataclass(frozen=True)
class WeightMovement:
    r"""Medians over seeds, per initialisation (``movement[init][name]``): ``weakest``, the
    weakest direction's strength $\sigma_6/\sigma_1$ at the start; ``start``, the RMS weight at
    the start; ``change``, the RMS change of a weight; ``moved``,
    $\|W_{\text{end}} - W_{\text{start}}\|_F / \|W_{\text{start}}\|_F$ over $W_1, W_2, W_3$
    together. ``lost[init]``: seeds that lost a direction; ``scaled_gap``: largest relative gap
    between the ``"large"`` start and the ``"normal"`` start of the same seed scaled up
    ($W_1, W_2$ by 2, $W_3$ by $\sqrt{hd}$)."""

    movement: dict[str, dict[str, float]]
    lost: dict[str, int]
    seeds: int
    scaled_gap: float

    def report(self) -> str:
        """The page's table (lines within 78 characters) and the scaled-start check."""
        lines = ["init    weakest / strongest  RMS weight  RMS change   moved   seeds that",
                 "        direction at start   at start    of a weight          lost a direction"]
        for init, row in self.movement.items():
            lines.append(f"{init:6s}  {row['weakest']:<19.4f}  {row['start']:<10.3f}  "
                         f"{row['change']:<11.3f}  {row['moved']:<5.2f}   {self.lost[init]} of {self.seeds}")
        lines.append(f"same seed, large start vs scaled-up normal start: max relative gap "
                     f"{self.scaled_gap:.1g}")
        return "\n".join(lines)


def glu_weight_movement(models: Mapping[str, Sequence[InContextRegressor]], seeds: Sequence[int],
                        task: TaskConfig, usage_of: Mapping[str, Sequence[DirectionUsage]]
                        ) -> WeightMovement:
    r"""How far each initialisation's GLU weights moved in training: each trained block of
    ``models[init]`` (seed ``seeds[i]``) against its start, rebuilt with
    :func:`~nlicl_lib.core.models.build_model` (``ModelConfig(kind="glu-lsa", glu_init=init)``,
    same seed). Needs the inits ``"normal"`` and ``"large"`` for the scaled-start check."""
    _check_mapping("models", models)
    missing = {"normal", "large"} - set(models)
    if missing:
        raise ConfigError("models", sorted(models), "initialisations including 'normal' and 'large'")
    movement, starts, lost = {}, {}, {}
    for init, group in models.items():
        if len(group) != len(seeds):
            raise ConfigError(f"models[{init!r}]", len(group), f"one model per seed ({len(seeds)})")
        weakest, start_rms, change_rms, moved = [], [], [], []
        for seed, model in zip(seeds, group, strict=True):
            start = build_model(ModelConfig(kind="glu-lsa", glu_init=init), task, seed=seed)
            weakest.append(feature_analysis.slot_feature_directions(start).relative_strengths[-1])
            starts[init, seed] = glu_weights(start)
            before = torch.cat([w.reshape(-1) for w in starts[init, seed]])
            after = torch.cat([w.reshape(-1) for w in glu_weights(model)])
            start_rms.append(float(before.pow(2).mean().sqrt()))
            change_rms.append(float((after - before).pow(2).mean().sqrt()))
            moved.append(float((after - before).norm() / before.norm()))
        movement[init] = {name: float(np.median(values)) for name, values in
                          [("weakest", weakest), ("start", start_rms),
                           ("change", change_rms), ("moved", moved)]}
        lost[init] = sum(np.any(u.usage <= USED) for u in usage_of[init])
    glu = models["large"][0].blocks[0].glu
    scale = [2.0, 2.0, float(np.sqrt(glu.width * glu.input_dim))]
    scaled_gap = max(float((large - factor * normal).abs().max() / large.abs().max())
                     for seed in seeds
                     for large, normal, factor in zip(starts["large", seed],
                                                      starts["normal", seed], scale, strict=True))
    return WeightMovement(movement, lost, len(seeds), scaled_gap)


def learned_kernel_values(learned: np.ndarray, optimal_gamma: np.ndarray) -> dict[str, float]:
    r"""The trained block's $K = A^\top\Gamma A$ against $\Gamma^*$: relative Frobenius distance
    $\|K - \Gamma^*\|_F / \|\Gamma^*\|_F$, relative asymmetry of $K$ and the smallest eigenvalue
    of its symmetric part."""
    distance = np.linalg.norm(learned - optimal_gamma) / np.linalg.norm(optimal_gamma)
    found = closed_forms.kernel_check(learned)
    return {"kernel_distance": float(distance), "learned_asymmetry": found.asymmetry,
            "learned_min_eig": found.min_eigenvalue}


# --- one step at every context length and degree ------------------------------------------------


def block_optima(degrees: Sequence[int], contexts: Sequence[int], input_dim: int = 3
                 ) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    r"""$\mathcal L^*(n)/\mathbb E[y^2]$ for the target of each degree $k$ at each $n$, keyed
    ``(k, n)``: on the features one block can write, $\psi = (x; \phi_2)$, and on all monomials
    of degree 1 to $k$ (Theorem thm-feature-optimum)."""
    psi = closed_forms.kernel_features(input_dim, 2)
    block_opt, full_opt = {}, {}
    for k in degrees:
        task_k = TaskConfig(kind="poly", input_dim=input_dim, context_length=20, degree=k)
        phi_k = task_k.target_features
        null_k = closed_forms.null_loss(task_k)
        on_psi = closed_forms.one_step_gd_optimum_curve(phi_k, psi, contexts)
        on_all = closed_forms.one_step_gd_optimum_curve(phi_k, closed_forms.kernel_features(input_dim, k),
                                                        contexts)
        for n, block_loss, full_loss in zip(contexts, on_psi, on_all, strict=True):
            block_opt[k, n], full_opt[k, n] = block_loss / null_k, full_loss / null_k
    return block_opt, full_opt


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


# --- exercises ----------------------------------------------------------------------------------


def kernel_weight_values(moments: GDMoments, weights: np.ndarray, tolerance: float = 0.03
                         ) -> dict[str, float]:
    r"""Exercise 3.1's solution: for each weight $a$ of ``weights``, the loss of
    $c\,\Gamma_a$ with the best step size $c$ over the optimum $\mathcal L^*$; the range of $a$
    within ``tolerance`` of it, the best $a$ and its relative gap."""
    solution_optimum = closed_forms.gd_optimum_from_moments(moments).loss
    best_ratio = np.array([closed_forms.best_step_size(constructions.polynomial_kernel_gamma(3, float(weight)),
                                                       moments)[1] / solution_optimum
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
        usage = feature_analysis.direction_usage(model, optimum.gamma).usage
        found[f"ex32_{init}_used"] = int(np.sum(usage > USED))
        found[f"ex32_{init}_ratio"] = losses[init] / optimum.loss
        found[f"ex32_{init}_usage_min"] = float(usage.min())
        found[f"ex32_{init}_usage_max"] = float(usage.max())
    return found
