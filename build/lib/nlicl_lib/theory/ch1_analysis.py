r"""Chapter 1's analysis (no training): linear self-attention is preconditioned gradient descent.

- :func:`construction_check`: $L$ constructed LSA layers (:func:`~nlicl_lib.theory.constructions.gd_lsa`,
  $P = e_D e_D^\top$, $Q_\ell = -\mathrm{blkdiag}(\Gamma_\ell^\top, 0)$) against $L$ explicit steps of
  preconditioned GD (:func:`~nlicl_lib.theory.predictors.preconditioned_gd`), and the context labels
  after each layer against the residuals $y_i - w_\ell^\top x_i$ (Proposition 4 (prop-lsa-gd));
- :func:`read_trained_step`: the effective preconditioner $\Gamma_{\text{eff}} = -(p_y Q_{xx}^\top +
  q_{yx} p_x^\top)$ of a trained layer against $\Gamma^* = \frac{n}{n+d+1+\sigma^2} I$
  (Theorem 5 (thm-linear-optimum));
- :func:`tuned_gd_losses`: the best $L$ steps of GD with scalar step sizes $\gamma_1..\gamma_L$ for every
  depth and noise level, on one float64 sample of contexts;
- :func:`input_row_norms`: how much each layer of a trained stack writes into the inputs $x_i$.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_float, check_int
from nlicl_lib.core.models import LSA, InContextRegressor
from nlicl_lib.core.tasks import Prompts, TaskConfig
from nlicl_lib.theory import gd_steps
from nlicl_lib.theory.constructions import gd_lsa
from nlicl_lib.theory.predictors import preconditioned_gd


def random_preconditioners(input_dim: int, count: int, seed: int = 0) -> list[np.ndarray]:
    r"""``count`` random non-symmetric preconditioners $\Gamma_\ell = \frac12 I_d + 0.1\,G_\ell$,
    $G_\ell$ with i.i.d. $\mathcal N(0, 1)$ entries (``numpy.random.default_rng(seed)``), ``(d, d)`` each."""
    d = check_int("input_dim", input_dim, minimum=1)
    count = check_int("count", count, minimum=1)
    rng = np.random.default_rng(seed)
    return [0.5 * np.eye(d) + 0.1 * rng.standard_normal((d, d)) for _ in range(count)]


def max_relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    r"""$\max |a - b| / \max |b|$ over all entries."""
    return float((a - b).abs().max() / b.abs().max())


@dataclass(frozen=True)
class ConstructionCheck:
    r"""Relative differences (:func:`max_relative_difference`): ``one_layer``, one layer against one
    GD step; ``all_layers``, $L$ layers against $L$ steps; ``residual_labels[\ell - 1]``, the context
    labels after layer $\ell$ against the residuals $y_i - w_\ell^\top x_i$ after step $\ell$."""

    one_layer: float
    all_layers: float
    residual_labels: tuple[float, ...]


@torch.no_grad()
def construction_check(prompts: Prompts, gammas: Sequence[np.ndarray]) -> ConstructionCheck:
    r"""Proposition 4 (prop-lsa-gd) on ``prompts``: one constructed layer predicts
    $\hat y = x_{n+1}^\top \Gamma_1 \frac1n \sum_{i \le n} y_i x_i$, and $L$ = ``len(gammas)`` layers
    predict what $L$ steps $w_\ell = w_{\ell-1} + \Gamma_\ell \frac1n \sum_i (y_i - w_{\ell-1}^\top x_i)
    x_i$ from $w_0 = 0$ predict, with the residuals in the context labels. Use float64 prompts."""
    if len(gammas) < 1:
        raise ConfigError("gammas", len(gammas), "at least one preconditioner")
    d, n = prompts.x.shape[-1], prompts.context_length
    one_layer = gd_lsa(d, gammas[:1])(prompts.embed())
    one_step = preconditioned_gd(prompts, gammas[:1])
    first = max_relative_difference(one_layer, one_step)
    layers, stream = gd_lsa(d, gammas)(prompts.embed(), return_stream=True)
    steps, residuals = preconditioned_gd(prompts, gammas, return_residuals=True)
    labels = tuple(max_relative_difference(stream[f"block{layer}"][:, :n, -1], residuals[layer - 1])
                   for layer in range(1, len(gammas) + 1))
    return ConstructionCheck(first, max_relative_difference(layers, steps), labels)


@dataclass(frozen=True)
class TrainedStep:
    r"""A trained layer read as one GD step: $\Gamma_{\text{eff}}$ (``gamma_eff``, ``(d, d)``),
    $\Gamma^*$ (``gamma_star``), $\|\Gamma_{\text{eff}} - \Gamma^*\|_F / \|\Gamma^*\|_F$
    (``distance``) and the non-GD terms relative to $\|\Gamma_{\text{eff}}\|_F$ (``spurious``:
    ``label_free`` $\|p_x\|\,\|Q_{xx}\|_F$, ``label_squared`` $|p_y|\,\|q_{yx}\|$)."""

    gamma_eff: np.ndarray
    gamma_star: np.ndarray
    distance: float
    spurious: dict[str, float]


def read_trained_step(layer: LSA, input_dim: int, gamma_star: float | np.ndarray) -> TrainedStep:
    r"""Read a trained full LSA layer as one preconditioned GD step
    (:func:`~nlicl_lib.theory.gd_steps.effective_gamma`) and compare it with ``gamma_star``
    (a scalar $\gamma^*$ means $\gamma^* I_d$; for a linear task $\gamma^* = \frac{n}{n+d+1+\sigma^2}$,
    Theorem 5 (thm-linear-optimum))."""
    d = check_int("input_dim", input_dim, minimum=1)
    star = np.asarray(gamma_star, dtype=np.float64)
    if star.ndim == 0:
        star = float(star) * np.eye(d)
    if star.shape != (d, d):
        raise ConfigError("gamma_star", star.shape, f"a scalar or a {d}x{d} matrix")
    gamma_eff = gd_steps.effective_gamma(layer, d)
    return TrainedStep(gamma_eff, star, gd_steps.relative_distance(gamma_eff, star),
                       gd_steps.spurious_weights(layer, d))


def tuned_gd_losses(input_dim: int, context_length: int, depths: Sequence[int],
                    noise_levels: Sequence[float], num_prompts: int = 40_000, seed: int = 0
                    ) -> dict[tuple[float, int], gd_steps.TunedGD]:
    r"""The best $L$ steps of GD with step sizes $\gamma_1..\gamma_L$ for every $\sigma$ in
    ``noise_levels`` and $L$ in ``depths`` (:func:`~nlicl_lib.theory.gd_steps.tune_gd_steps`).

    With $\hat S = \frac1n\sum_i x_i x_i^\top$ and $h = \frac1n\sum_i \epsilon_i x_i$ the error
    $e_\ell = w - w_\ell$ follows $e_\ell = (I - \gamma_\ell \hat S)\,e_{\ell-1} - \gamma_\ell h$,
    $e_0 = w$, so $e_L = p(\hat S)\,w - r(\hat S)\,h$ with $p(\lambda) = \prod_\ell (1 - \gamma_\ell
    \lambda)$, $r(\lambda) = (1 - p(\lambda))/\lambda$, and the loss $\mathbb E\operatorname{tr}
    p(\hat S)^2 + \frac{\sigma^2}{n}\mathbb E\operatorname{tr} r(\hat S)^2\hat S$ is a quadratic in
    the coefficients of $p$. The moments $\mathbb E\operatorname{tr}\hat S^k$ depend on the inputs
    only: one sample of ``num_prompts`` contexts (``seed``) serves every $\sigma$.
    Returns ``{(sigma, L): TunedGD}``."""
    if not depths:
        raise ConfigError("depths", depths, "at least one depth")
    noise_levels = [check_float("noise_levels", s, minimum=0.0) for s in noise_levels]
    clean = TaskConfig(kind="linear", input_dim=input_dim, context_length=context_length)
    spectrum = gd_steps.sample_spectrum(clean, max_power=max(depths), num_prompts=num_prompts,
                                        seed=seed)
    tuned = {}
    for sigma in noise_levels:
        noisy = TaskConfig(kind="linear", input_dim=input_dim, context_length=context_length,
                           noise_std=sigma)
        sample = gd_steps.SpectralSample(noisy, spectrum.per_prompt)
        for depth in depths:
            tuned[sigma, depth] = gd_steps.tune_gd_steps(sample, depth)
    return tuned


def input_row_norms(model: InContextRegressor, input_dim: int) -> list[float]:
    r"""$\|P_\ell[{:}d, :]\|_F$ for each layer $\ell$: the rows of $P_\ell$ that write into the inputs
    $x_i$ of the tokens (zero in the GD construction, where $P_\ell = e_D e_D^\top$)."""
    d = check_int("input_dim", input_dim, minimum=1)
    return [block.lsa.P.detach()[:d].norm().item() for block in model.blocks]
