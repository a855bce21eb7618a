r"""Chapter 3's idea: a GLU writes polynomial features, and one GLU-LSA block is one
preconditioned GD step on them, a kernel regression whose error falls like $1/n$.

The block with GLU weights writing $\phi_2(x)$ into the slots and attention in GD form predicts

$$\hat y = \psi(x_{n+1})^\top \Gamma\, \frac1n \sum_{i \le n} y_i\, \psi(x_i)
        = \frac1n \sum_{i \le n} y_i\, k_\Gamma(x_{n+1}, x_i), \qquad
  k_\Gamma(x, x') = \psi(x)^\top \Gamma\, \psi(x'), \quad \psi = (x; \phi_2)$$

(Proposition prop-glu-kernel), and the best $\Gamma$ is $\Gamma^* = T^{-1} C C^\top B^{-1}$,
$\Gamma^* = S B^{-1}$ when $\operatorname{span}\psi = \operatorname{span}\phi$ (Theorem
thm-feature-optimum, Corollary cor-same-span), with loss $\mathcal L^*(n) \le
\min(c/n, \mathbb E[y^2])$, $c = \operatorname{tr}(S^{-1}F) - \operatorname{tr}S$ (Proposition
prop-one-over-n). The closed forms themselves live in :mod:`~nlicl_lib.theory.closed_forms`;
the ones the chapter uses are re-exported here.

What a trained GLU writes is measured with the Gaussian inner product
$\langle f, g\rangle = \mathbb E[f(x)\,g(x)]$, $x \sim \mathcal N(0, I_d)$, exact from monomial
moments. For the $m$ slot features $s(x)$ of a block, with Gram matrix
$G = \mathbb E[s\,s^\top] = U \operatorname{diag}(\sigma_1^2, \dots) U^\top$:

- the **strengths** $\sigma_1 \ge \sigma_2 \ge \dots$; the features span all $p_2$ degree-2
  monomials exactly when $p_2$ of them are nonzero, and a direction with $\sigma_k \approx 0$ is
  *dead*;
- the **directions** $u_k^\top s(x) / \sigma_k$, unit-norm polynomials; a dead one names what the
  block cannot use (for a one-block GLU on the quadratic task, a combination of cross terms);
- the **captured fraction** of a reference polynomial: the share of its squared norm inside the
  span of the live directions ($1/2$ for $x_1x_2$ and $x_2x_3$ when the dead direction is
  $(x_1x_2 - x_2x_3)/\sqrt2$);
- the **usage** of a direction: the weight the block's kernel $G = A^\top\Gamma A$ puts on it
  over the weight $\Gamma^*$ puts on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap, second_moment
from nlicl_lib.core.tasks import Prompts, TaskConfig
from nlicl_lib.theory import closed_forms, predictors
from nlicl_lib.theory.closed_forms import OneStepOptimum, kernel_check, kernel_features, null_loss
from nlicl_lib.theory.closed_forms import best_linear_loss as best_linear_loss
from nlicl_lib.theory.closed_forms import one_step_kernel_gd_optimum as one_step_kernel_gd_optimum
from nlicl_lib.theory.constructions import (
    block_features,
    block_gamma,
    glu_slot_features,
    kernel_glu_lsa,
    polynomial_kernel_gamma,
)
from nlicl_lib.theory.values import exact_model_loss

CROSS_TERM_COLUMNS = (1, 2, 4)
"""Columns of $x_1x_2, x_1x_3, x_2x_3$ in $\\phi_2$ for $d = 3$ (order of
``PolyMap.monomials(3, [2])``: $x_1^2, x_1x_2, x_1x_3, x_2^2, x_2x_3, x_3^2$)."""

USED = 0.5
"""A direction whose usage is above this is *used*."""


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


def construction_check(prompts: Prompts, gammas: Mapping[str, np.ndarray],
                       linear_weight: float = 0.5) -> ConstructionCheck:
    r"""The block of Proposition prop-glu-kernel against the GD step it should compute.

    For each $\Gamma$ of ``gammas`` ($p \times p$ over $\psi = (x; \phi_2)$, $p = d + p_2$):
    $\max |\hat y_{\text{block}} - \hat y_{\text{GD}}| / \max |\hat y_{\text{GD}}|$ with
    $\hat y_{\text{GD}} = \psi(x_{n+1})^\top \Gamma\, \frac1n\sum_i y_i\psi(x_i)$
    (:func:`~nlicl_lib.theory.predictors.kernel_gd`); then the block with $\Gamma_a$
    (:func:`~nlicl_lib.theory.constructions.polynomial_kernel_gamma`) against the kernel sum
    $\frac1n\sum_i y_i\,(a\, x_{n+1}^\top x_i + (x_{n+1}^\top x_i)^2)$. Use float64 prompts:
    the differences are then rounding, about $10^{-15}$."""
    d, n = prompts.x.shape[-1], prompts.x.shape[1] - 1
    slots = d * (d + 1) // 2
    psi = kernel_features(d, 2)
    for name, gamma in gammas.items():
        if np.shape(gamma) != (psi.num_outputs, psi.num_outputs):
            raise ConfigError(f"gammas[{name!r}]", np.shape(gamma),
                              f"a {psi.num_outputs} x {psi.num_outputs} matrix over (x; phi_2)")
    gaps, is_kernel = {}, {}
    with torch.no_grad():
        for name, gamma in gammas.items():
            block = kernel_glu_lsa(d, gamma)(prompts.embed(slots))
            explicit = predictors.kernel_gd(prompts, gamma, psi)
            gaps[name] = float((block - explicit).abs().max() / explicit.abs().max())
            is_kernel[name] = kernel_check(gamma).is_kernel()
        dots = torch.einsum("bid,bd->bi", prompts.x[:, :n], prompts.x[:, n])
        by_hand = torch.einsum("bi,bi->b", prompts.y[:, :n], linear_weight * dots + dots**2) / n
        block = kernel_glu_lsa(d, polynomial_kernel_gamma(d, linear_weight))(prompts.embed(slots))
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


# --- the best single step -----------------------------------------------------------------------


def span_losses(task: TaskConfig, feature_degrees: Mapping[str, Sequence[int]]) -> dict[str, float]:
    r"""The best one-step loss $\mathcal L^*/\mathbb E[y^2]$ (Theorem thm-feature-optimum) on the
    features $\psi$ = all monomials of the given degrees, for each name of ``feature_degrees``,
    on the target's monomials $\phi$ of ``task`` at its context length."""
    return {name: closed_forms.one_step_gd_optimum(
                task.target_features, PolyMap.monomials(task.input_dim, degrees),
                task.context_length).normalised_loss
            for name, degrees in feature_degrees.items()}


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
        rates[k] = OneOverNRate(c_k, null_loss(task_k), lengths, lengths * losses / c_k)
    return rates


def first_length_within(rate: OneOverNRate, features: PolyMap, level: float) -> int:
    r"""The first whole $n$ with $n\mathcal L^*(n)/c \ge$ ``level`` (e.g. 0.99: within 1% of the
    limit of Proposition prop-one-over-n), exactly: the log grid of ``rate`` brackets it, then every
    integer in the bracket is evaluated (the curve rises with $n$)."""
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


def block_optima(degrees: Sequence[int], contexts: Sequence[int], input_dim: int = 3
                 ) -> tuple[dict[tuple[int, int], float], dict[tuple[int, int], float]]:
    r"""$\mathcal L^*(n)/\mathbb E[y^2]$ for the target of each degree $k$ at each $n$, keyed
    ``(k, n)``: on the features one block can write, $\psi = (x; \phi_2)$, and on all monomials
    of degree 1 to $k$ (Theorem thm-feature-optimum)."""
    psi = kernel_features(input_dim, 2)
    block_opt, full_opt = {}, {}
    for k in degrees:
        task_k = TaskConfig(kind="poly", input_dim=input_dim, context_length=20, degree=k)
        phi_k = task_k.target_features
        null_k = null_loss(task_k)
        on_psi = closed_forms.one_step_gd_optimum_curve(phi_k, psi, contexts)
        on_all = closed_forms.one_step_gd_optimum_curve(phi_k, kernel_features(input_dim, k), contexts)
        for n, block_loss, full_loss in zip(contexts, on_psi, on_all, strict=True):
            block_opt[k, n], full_opt[k, n] = block_loss / null_k, full_loss / null_k
    return block_opt, full_opt


# --- what a GLU writes: strengths, directions, spans --------------------------------------------


@dataclass(frozen=True)
class FeatureDirections:
    r"""``strengths`` $\sigma_k$ (descending) and ``directions``: a :class:`PolyMap` whose output
    $k$ is the unit-norm polynomial $u_k^\top s(x)/\sigma_k$ (zero where $\sigma_k = 0$)."""

    strengths: np.ndarray
    directions: PolyMap

    @property
    def relative_strengths(self) -> np.ndarray:
        """$\\sigma_k / \\sigma_1$."""
        top = self.strengths[0] if self.strengths.size and self.strengths[0] > 0 else 1.0
        return self.strengths / top

    def live(self, tolerance: float = 1e-2) -> PolyMap:
        """The directions with $\\sigma_k / \\sigma_1 >$ ``tolerance``."""
        keep = self.relative_strengths > tolerance
        return PolyMap(self.directions.exponents, self.directions.coefficients[keep])

    def rank(self, tolerance: float = 1e-2) -> int:
        """How many directions are alive at ``tolerance``."""
        return int(np.sum(self.relative_strengths > tolerance))


def feature_directions(features: PolyMap) -> FeatureDirections:
    r"""Strengths and unit-norm directions of ``features`` in $L^2(\mathcal N(0, I))$: the
    eigendecomposition of their Gram matrix $G = \mathbb E[s\,s^\top]$."""
    values, vectors = np.linalg.eigh(second_moment(features))
    order = np.argsort(values)[::-1]
    values, vectors = np.clip(values[order], 0.0, None), vectors[:, order]
    strengths = np.sqrt(values)
    scale = np.divide(1.0, strengths, out=np.zeros_like(strengths), where=strengths > 0)
    coefficients = (vectors * scale).T @ features.coefficients
    return FeatureDirections(strengths, PolyMap(features.exponents, coefficients))


def slot_feature_directions(model: InContextRegressor) -> FeatureDirections:
    """:func:`feature_directions` of the slot features $s(x)$ a one-block bilinear GLU writes."""
    if model.depth != 1 or model.blocks[0].glu is None:
        raise ConfigError("model", f"depth {model.depth}", "one GLU-LSA block")
    return feature_directions(glu_slot_features(model.blocks[0].glu))


def captured_fraction(reference: PolyMap, span: PolyMap) -> np.ndarray:
    r"""For each output $r_j$ of ``reference``: $\|\Pi r_j\|^2 / \|r_j\|^2$, the share of its
    squared norm inside the span of ``span``'s outputs ($\Pi$ the orthogonal projection)."""
    basis = feature_directions(span).live(1e-10)
    cross = second_moment(reference, basis)  # <r_j, e_k>
    return np.sum(cross**2, axis=1) / np.diag(second_moment(reference))


def kernel_matrix(model: InContextRegressor) -> np.ndarray:
    r"""The kernel of a one-block model in the monomial basis $\psi_0 = (x; \phi_2)$:
    $G = A^\top \Gamma A$ with $\psi(x) = (x; s(x)) = A\,\psi_0(x)$, so that
    $\hat y = \frac1n \sum_i y_i\, \psi_0(x_{n+1})^\top G\, \psi_0(x_i)$. Comparable with the
    $\Gamma^*$ of :func:`~nlicl_lib.theory.closed_forms.one_step_gd_optimum` on
    ``kernel_features(d, 2)``."""
    features = block_features(model)
    basis = kernel_features(model.input_dim, 2)
    lookup = {tuple(a): k for k, a in enumerate(basis.exponents)}
    a = np.zeros((features.num_outputs, basis.num_outputs))
    for col, alpha in enumerate(features.exponents):
        key = tuple(alpha)
        if key not in lookup:
            if np.any(features.coefficients[:, col]):
                raise ConfigError("model", "features", "features of degree 1 and 2")
            continue
        a[:, lookup[key]] += features.coefficients[:, col]
    return a.T @ block_gamma(model) @ a


@dataclass(frozen=True)
class DirectionUsage:
    r"""For each unit direction $e_k$ the GLU writes (strongest first): its ``strengths``
    $\sigma_k/\sigma_1$ and its ``usage``, the weight $e_k^\top G e_k$ the block's kernel puts on
    it over the weight $e_k^\top \Gamma^* e_k$ the optimal kernel puts on it (both on the
    degree-2 part, coefficients over $\phi_2$). About 1 for a direction the block uses as the
    optimum does; about 0 for a *dead* one, however strong or weak it is written."""

    strengths: np.ndarray
    usage: np.ndarray
    directions: PolyMap

    def used(self, threshold: float = USED) -> PolyMap:
        """The directions with usage above ``threshold``."""
        return PolyMap(self.directions.exponents, self.directions.coefficients[self.usage > threshold])


def direction_usage(model: InContextRegressor, optimal_gamma: np.ndarray) -> DirectionUsage:
    r"""How much of the optimal kernel weight a one-block model puts on each direction it writes.

    ``optimal_gamma``: $\Gamma^*$ on $\psi_0 = (x; \phi_2)$, e.g.
    ``one_step_kernel_gd_optimum(task).gamma`` for a quadratic task. With $G$ from
    :func:`kernel_matrix` and the unit directions $e_k$ of :func:`slot_feature_directions`
    (coefficients $c_k$ over $\phi_2$), usage$_k = c_k^\top K_{qq} c_k / c_k^\top \Gamma^*_{qq} c_k$."""
    d = model.input_dim
    found = slot_feature_directions(model)
    kernel = kernel_matrix(model)[d:, d:]
    optimal = np.asarray(optimal_gamma, dtype=np.float64)[d:, d:]
    if not np.array_equal(found.directions.exponents, kernel_features(d, 2).exponents[d:]):
        raise ConfigError("model", "features", "a GLU writing quadratic forms of x")
    c = found.directions.coefficients
    weights = np.einsum("kp,pq,kq->k", c, kernel, c)
    best = np.einsum("kp,pq,kq->k", c, optimal, c)
    usage = np.divide(weights, best, out=np.zeros_like(weights), where=np.abs(best) > 0)
    return DirectionUsage(found.relative_strengths, usage, found.directions)


def usages(models: Mapping[str, Sequence[InContextRegressor]], optimal_gamma: np.ndarray
           ) -> dict[str, list[DirectionUsage]]:
    r""":func:`direction_usage` of every model, per group:
    usage$_k = e_k^\top G e_k / e_k^\top \Gamma^* e_k$."""
    return {key: [direction_usage(m, optimal_gamma) for m in group] for key, group in models.items()}


# --- the best step on a smaller span: the plateaus of blocks with dead directions ---------------


def span_optimum(task: TaskConfig, slot_directions: PolyMap) -> OneStepOptimum:
    r"""The best one-step loss on $(x; \text{slot\_directions})$ (Theorem thm-feature-optimum on
    that span)."""
    features = PolyMap.monomials(task.input_dim, [1]).concat(slot_directions)
    return closed_forms.one_step_gd_optimum(task.target_features, features, task.context_length,
                                            task.noise_std)


def live_span_optimum(task: TaskConfig, model: InContextRegressor, tolerance: float = 1e-2
                      ) -> OneStepOptimum:
    r"""The best one-step loss on $(x; \text{live slot directions})$: what a block whose dead
    directions stay dead can reach at best."""
    return span_optimum(task, slot_feature_directions(model).live(tolerance))


def missing_direction_optimum(task: TaskConfig, direction: PolyMap) -> OneStepOptimum:
    r"""The best one-step loss on $\psi_0 = (x; \phi_2)$ with the polynomials of ``direction``
    (combinations of degree-2 monomials) projected out: the plateau of a block that has lost
    exactly those directions."""
    basis = kernel_features(task.input_dim, 2)
    lost = feature_directions(direction).live(1e-10)
    both = basis.concat(lost)
    size = basis.num_outputs
    inner = second_moment(basis, lost)  # <b_j, e_k>
    projected = PolyMap(both.exponents, both.coefficients[:size] - inner @ both.coefficients[size:])
    return closed_forms.one_step_gd_optimum(task.target_features, projected, task.context_length,
                                            task.noise_std)


def lost_cross_term_plateaus(task: TaskConfig, optimum_loss: float, counts: Sequence[int] = (1, 2, 3)
                             ) -> dict[int, float]:
    r"""The best one-step loss on $(x; \phi_2)$ with the first ``lost`` cross terms
    $x_1x_2, x_1x_3, x_2x_3$ projected out, over ``optimum_loss`` (Theorem thm-feature-optimum on
    the smaller span, :func:`missing_direction_optimum`): the plateaus of blocks that lost that
    many cross-term directions ($d = 3$)."""
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
        plateaus[lost] = missing_direction_optimum(task, PolyMap(phi2.exponents, rows)).loss / optimum_loss
    return plateaus


# --- trained blocks -----------------------------------------------------------------------------


@dataclass(frozen=True)
class BlockSummary:
    r"""One trained block: its direction ``usage``, its exact ``ratio`` = loss / $\mathcal L^*$
    and ``used_ratio``: the best one-step loss on $(x;$ its used directions$)$ / $\mathcal L^*$."""

    usage: DirectionUsage
    ratio: float
    used_ratio: float


def block_summaries(examples: Mapping[str, InContextRegressor], task: TaskConfig,
                    optimum: OneStepOptimum) -> dict[str, BlockSummary]:
    r"""For each block: usage of its directions against $\Gamma^*$, its exact loss over
    $\mathcal L^*$ (:func:`~nlicl_lib.theory.values.exact_model_loss`) and the best loss on the
    span it uses (:func:`span_optimum`) over $\mathcal L^*$."""
    summaries = {}
    for name, model in examples.items():
        usage = direction_usage(model, optimum.gamma)
        used = span_optimum(task, usage.used()).loss
        summaries[name] = BlockSummary(usage, exact_model_loss(model, task) / optimum.loss,
                                       used / optimum.loss)
    return summaries


def _glu_weights(model: InContextRegressor) -> list[torch.Tensor]:
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


def glu_weight_movement(models: Mapping[str, Sequence[InContextRegressor]], seeds: Sequence[int],
                        task: TaskConfig, usage_of: Mapping[str, Sequence[DirectionUsage]]
                        ) -> WeightMovement:
    r"""How far each initialisation's GLU weights moved in training: each trained block of
    ``models[init]`` (seed ``seeds[i]``) against its start, rebuilt with
    :func:`~nlicl_lib.core.models.build_model` (``ModelConfig(kind="glu-lsa", glu_init=init)``,
    same seed). Needs the inits ``"normal"`` and ``"large"`` for the scaled-start check."""
    if {"normal", "large"} - set(models):
        raise ConfigError("models", sorted(models), "initialisations including 'normal' and 'large'")
    movement, starts, lost = {}, {}, {}
    for init, group in models.items():
        weakest, start_rms, change_rms, moved = [], [], [], []
        for seed, model in zip(seeds, group, strict=True):
            start = build_model(ModelConfig(kind="glu-lsa", glu_init=init), task, seed=seed)
            weakest.append(slot_feature_directions(start).relative_strengths[-1])
            starts[init, seed] = _glu_weights(start)
            before = torch.cat([w.reshape(-1) for w in starts[init, seed]])
            after = torch.cat([w.reshape(-1) for w in _glu_weights(model)])
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
