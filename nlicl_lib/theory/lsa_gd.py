r"""Chapter 1's idea: one LSA layer is one step of preconditioned GD, $L$ layers are $L$ steps,
and the best step sizes; what a trained LSA layer computes.

Chapter 1 compares an $L$-layer LSA with $L$ steps of gradient descent on the in-context
least-squares loss $\frac1{2n}\sum_{i\le n}(w^\top x_i - y_i)^2$, from $w_0 = 0$. Layer $\ell$ of
:func:`~nlicl_lib.theory.constructions.gd_lsa` holds $P = e_D e_D^\top$ and
$Q_\ell = -\mathrm{blkdiag}(\Gamma_\ell^\top, 0)$; one such layer predicts
$\hat y = x_{n+1}^\top \Gamma_1 \frac1n \sum_{i \le n} y_i x_i$, and $L$ of them predict what $L$
steps $w_\ell = w_{\ell-1} + \Gamma_\ell \frac1n \sum_i (y_i - w_{\ell-1}^\top x_i)\, x_i$ predict,
with the residuals $y_i - w_\ell^\top x_i$ in the context labels after layer $\ell$
(Proposition 4 (prop-lsa-gd), :func:`construction_check`). With one scalar step size
$\gamma_\ell$ per step ($\Gamma_\ell = \gamma_\ell I$) this module finds the best step sizes
(:func:`tune_gd_steps`, :func:`tuned_gd_losses`) and reads the preconditioner off trained
weights (:func:`effective_gamma`, :func:`read_trained_step`).

**The recursion.** Write $\hat S = \frac1n \sum_{i\le n} x_i x_i^\top$ (the context's empirical
covariance, $d \times d$), $y_i = w^\top x_i + \epsilon_i$ and $\xi = \frac1n\sum_i \epsilon_i x_i$.
One step is $w_\ell = w_{\ell-1} + \gamma_\ell\,\frac1n\sum_i (y_i - w_{\ell-1}^\top x_i)\,x_i$, so the
error $e_\ell = w - w_\ell$ obeys

$$e_\ell = (I - \gamma_\ell \hat S)\, e_{\ell-1} - \gamma_\ell \xi, \qquad e_0 = w,$$

and after $L$ steps $e_L = p(\hat S)\, w - r(\hat S)\, \xi$ with the polynomial
$p(\lambda) = \prod_{\ell=1}^{L} (1 - \gamma_\ell \lambda)$ (degree $L$, $p(0) = 1$) and
$r(\lambda) = (1 - p(\lambda))/\lambda$. For $w \sim \mathcal N(0, I)$, noise variance $\sigma^2$,
a clean query $x_{n+1} \sim \mathcal N(0, \Sigma)$ and $\mathbb E[\xi \xi^\top \mid X] =
\frac{\sigma^2}{n}\hat S$, the excess loss of the prediction $\hat y = w_L^\top x_{n+1}$ is

$$\mathcal L(\gamma_1, \dots, \gamma_L) = \mathbb E\,\operatorname{tr}\!\big(p(\hat S)\,\Sigma\,
p(\hat S)\big) + \frac{\sigma^2}{n}\,\mathbb E\,\operatorname{tr}\!\big(r(\hat S)\,\Sigma\,r(\hat S)\,
\hat S\big).$$

**Tuning.** Writing $p(\lambda) = 1 + \sum_{k=1}^{L} c_k \lambda^k$ makes $\mathcal L$ a quadratic
in $c$ whose coefficients are the matrix moments $A_{jk} = \mathbb E\operatorname{tr}(\hat S^j
\Sigma \hat S^k)$, $0 \le j, k \le L$, and $B_{jk} = A_{j-1,k}$:

$$\mathcal L(c) = A_{00} + 2\sum_k c_k A_{0k} + \sum_{j,k} c_j c_k \big(A_{jk} +
\tfrac{\sigma^2}{n} B_{jk}\big),$$

minimised by one $L \times L$ linear solve. The step sizes are the reciprocals of the roots of
$p$ (their order does not matter: the factors commute). The moments are averages over a fixed
sample of $\hat S$ in float64 (``num_prompts`` contexts drawn once), so the tuned step sizes are
the exact optimum for that sample and the Monte Carlo error of its loss is reported with it.
For $L = 1$ this reproduces Theorem 5 (thm-linear-optimum), $\gamma^* = n/(n+d+1+\sigma^2)$. If
the optimal polynomial ever had complex roots (no real step sizes reach it) the step sizes are
refined by a direct minimisation over real $\gamma$ instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike

from nlicl_lib.core.errors import ConfigError, check_float, check_int
from nlicl_lib.core.models import LSA, InContextRegressor
from nlicl_lib.core.seeding import STREAM_OTHER, generator
from nlicl_lib.core.tasks import Prompts, TaskConfig
from nlicl_lib.theory.constructions import gd_lsa
from nlicl_lib.theory.predictors import preconditioned_gd


@dataclass(frozen=True)
class SpectralSample:
    r"""The moments $A_{jk} = \mathbb E\operatorname{tr}(\hat S^j\Sigma\hat S^k)$ for
    $0 \le j, k \le$ ``max_power``, their per-prompt values (for error bars) and the task."""

    task: TaskConfig
    per_prompt: np.ndarray  # (prompts, max_power + 1, max_power + 1)

    @property
    def moments(self) -> np.ndarray:
        return self.per_prompt.mean(axis=0)

    @property
    def max_power(self) -> int:
        return self.per_prompt.shape[1] - 1

    @property
    def num_prompts(self) -> int:
        return self.per_prompt.shape[0]


@dataclass(frozen=True)
class TunedGD:
    r"""Step sizes $\gamma_1..\gamma_L$ (sorted increasingly; their order does not change the
    result), the coefficients $c_1..c_L$ of $p$, the excess loss on the tuning sample, its Monte
    Carlo standard error, and whether the unconstrained optimal $p$ had real roots."""

    step_sizes: tuple[float, ...]
    coefficients: tuple[float, ...]
    loss: float
    std_error: float
    real_roots: bool

    @property
    def steps(self) -> int:
        return len(self.step_sizes)


def sample_spectrum(task: TaskConfig, max_power: int, num_prompts: int = 100_000, seed: int = 0,
                    chunk: int = 20_000) -> SpectralSample:
    r"""Draw ``num_prompts`` contexts $x_1..x_n \sim \mathcal N(0, \Sigma)$ in float64 and
    record $\operatorname{tr}(\hat S^j \Sigma \hat S^k)$ per prompt, $0 \le j, k \le$
    ``max_power``. Only the inputs matter: $w$ and the noise are integrated out exactly."""
    if task.kind != "linear":
        raise ConfigError("task", task.kind, "a linear task (GD on x)")
    max_power = check_int("max_power", max_power, minimum=1)
    num_prompts = check_int("num_prompts", num_prompts, minimum=2)
    n, d = task.context_length, task.input_dim
    cov = torch.as_tensor(task.covariance_matrix, dtype=torch.float64)
    chol = torch.linalg.cholesky(cov)
    rows = []
    for index, start in enumerate(range(0, num_prompts, chunk)):
        size = min(chunk, num_prompts - start)
        gen = generator(seed, STREAM_OTHER, index, torch.device("cpu"))
        x = torch.randn(size, n, d, generator=gen, dtype=torch.float64) @ chol.T
        s_hat = x.transpose(1, 2) @ x / n
        powers = [torch.eye(d, dtype=torch.float64).expand(size, d, d)]
        for _ in range(max_power):
            powers.append(powers[-1] @ s_hat)
        left = torch.stack(powers, dim=1)  # (size, K, d, d): S^j
        right = torch.stack([cov @ p for p in powers], dim=1)  # Sigma S^k
        # tr(S^j Sigma S^k) = sum_ab (S^j)_ab (Sigma S^k)_ba
        rows.append(torch.einsum("pjab,pkba->pjk", left, right))
    return SpectralSample(task, torch.cat(rows).numpy())


def _quadratic(sample: SpectralSample, steps: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(H, b, a) with loss(c) = a + 2 b.c + c.H.c on the sample mean."""
    if steps > sample.max_power:
        raise ConfigError("steps", steps, f"at most {sample.max_power} for this sample")
    a = sample.moments
    n, sigma = sample.task.context_length, sample.task.noise_std
    idx = np.arange(1, steps + 1)
    hessian = a[np.ix_(idx, idx)] + sigma**2 / n * a[np.ix_(idx - 1, idx)]
    hessian = 0.5 * (hessian + hessian.T)
    return hessian, a[0, idx], float(a[0, 0])


def _per_prompt_loss(sample: SpectralSample, coefficients: np.ndarray) -> np.ndarray:
    c = np.concatenate([[1.0], np.asarray(coefficients, dtype=np.float64)])
    steps = len(c) - 1
    n, sigma = sample.task.context_length, sample.task.noise_std
    a = sample.per_prompt[:, : steps + 1, : steps + 1]
    signal = np.einsum("j,pjk,k->p", c, a, c)
    # noise term: r(S) = -sum_{k>=1} c_k S^{k-1}, so tr(r S r S) uses A_{j-1,k}
    tail = c[1:]
    noise = np.einsum("j,pjk,k->p", tail, sample.per_prompt[:, :steps, 1 : steps + 1], tail)
    return signal + sigma**2 / n * noise


def coefficients_from_steps(step_sizes: ArrayLike) -> np.ndarray:
    r"""$c_1..c_L$ of $p(\lambda) = \prod_\ell (1 - \gamma_\ell\lambda) = 1 + \sum_k c_k\lambda^k$."""
    poly = np.array([1.0])
    for gamma in step_sizes:
        poly = np.convolve(poly, [1.0, -float(gamma)])  # increasing powers of lambda
    return poly[1:]


def gd_steps_loss(step_sizes: ArrayLike, sample: SpectralSample) -> tuple[float, float]:
    r"""Excess loss $\mathcal L(\gamma_1..\gamma_L)$ of $L$ GD steps on the sample, and its
    Monte Carlo standard error."""
    values = _per_prompt_loss(sample, coefficients_from_steps(step_sizes))
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))


def _refine_real(step_sizes: np.ndarray, sample: SpectralSample, iterations: int = 500
                 ) -> np.ndarray:
    """Minimise the sample loss over real step sizes (used only if the optimal polynomial has
    complex roots)."""
    hessian, linear, constant = (torch.as_tensor(v) for v in _quadratic(sample, len(step_sizes)))
    gammas = torch.tensor(step_sizes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([gammas], max_iter=iterations, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        poly = torch.ones(1, dtype=torch.float64)
        for gamma in gammas:
            poly = torch.cat([poly, poly.new_zeros(1)]) - gamma * torch.cat([poly.new_zeros(1), poly])
        c = poly[1:]
        loss = constant + 2 * linear @ c + c @ hessian @ c
        loss.backward()
        return loss

    optimizer.step(closure)
    return gammas.detach().numpy()


def tune_gd_steps(sample: SpectralSample, steps: int) -> TunedGD:
    r"""The step sizes $\gamma_1..\gamma_L$ that minimise $\mathcal L$ on ``sample`` (see the
    module doc): solve $(A + \frac{\sigma^2}{n}B)\,c = -A_{0,\cdot}$, take the roots of $p$."""
    steps = check_int("steps", steps, minimum=1)
    hessian, linear, _ = _quadratic(sample, steps)
    coefficients = np.linalg.solve(hessian, -linear)
    roots = np.roots(np.concatenate([coefficients[::-1], [1.0]]))
    real = bool(np.all(np.abs(roots.imag) <= 1e-9 * np.abs(roots)))
    step_sizes = np.sort(1.0 / roots.real)
    if not real:
        step_sizes = np.sort(_refine_real(step_sizes, sample))
        coefficients = coefficients_from_steps(step_sizes)
    loss, error = gd_steps_loss(step_sizes, sample)
    return TunedGD(tuple(float(g) for g in step_sizes), tuple(float(c) for c in coefficients),
                   loss, error, real)


def effective_gamma(layer: LSA, input_dim: int) -> np.ndarray:
    r"""The preconditioner a trained full-attention LSA layer applies, read off $P$ and $Q$.

    Tokens are $z_i = (x_i; y_i)$ ($D = d + 1$, no slots) and the query is $z_{n+1} = (x_{n+1}; 0)$.
    The layer writes $\frac1n e_D^\top P S Q z_{n+1}$ into the query's label, $S = \sum_{i\le n}
    z_i z_i^\top$, and the model predicts its negative. Split the last row of $P$ as
    $(p_x^\top, p_y)$ and the first $d$ columns of $Q$ as $\begin{bmatrix} Q_{xx} \\ q_{yx}^\top
    \end{bmatrix}$. Then $e_D^\top P z_i = p_x^\top x_i + p_y y_i$ and $Q z_{n+1} = (Q_{xx}
    x_{n+1};\ q_{yx}^\top x_{n+1})$, so

    $$\hat y = -\frac1n\sum_{i\le n} (p_x^\top x_i + p_y y_i)\,(x_i^\top Q_{xx} x_{n+1} + y_i\,
    q_{yx}^\top x_{n+1}).$$

    The terms linear in the labels are $x_{n+1}^\top\,\Gamma\,\frac1n\sum_i y_i x_i$ with

    $$\Gamma_{\text{eff}} = -\big(p_y\,Q_{xx}^\top + q_{yx}\,p_x^\top\big),$$

    one preconditioned GD step. The remaining terms, $-\frac1n\sum_i (p_x^\top x_i)(x_i^\top
    Q_{xx} x_{n+1})$ (no label) and $-p_y\,q_{yx}^\top x_{n+1}\,\frac1n\sum_i y_i^2$ (even in
    the labels), are uncorrelated with $w$ and only add loss, so training drives them to zero;
    :func:`spurious_weights` measures them. Returns $\Gamma_{\text{eff}}$, ``(d, d)``.
    """
    d = check_int("d", input_dim, minimum=1)
    if layer.attention != "full" or layer.dim != d + 1:
        raise ConfigError("layer", (layer.attention, layer.dim), f"a full LSA layer with D = {d + 1}")
    p = layer.P.detach().double().cpu().numpy()
    q = layer.Q.detach().double().cpu().numpy()
    p_x, p_y = p[-1, :d], p[-1, -1]
    q_xx, q_yx = q[:d, :d], q[-1, :d]
    return -(p_y * q_xx.T + np.outer(q_yx, p_x))


def spurious_weights(layer: LSA, input_dim: int) -> dict[str, float]:
    r"""Sizes of the weights that feed the non-GD terms of :func:`effective_gamma`:
    $\|p_x\|\,\|Q_{xx}\|_F$ (the label-free term) and $|p_y|\,\|q_{yx}\|$ (the $y^2$ term),
    each relative to $\|\Gamma_{\text{eff}}\|_F$."""
    d = input_dim
    p = layer.P.detach().double().cpu().numpy()
    q = layer.Q.detach().double().cpu().numpy()
    scale = np.linalg.norm(effective_gamma(layer, d))
    return {
        "label_free": float(np.linalg.norm(p[-1, :d]) * np.linalg.norm(q[:d, :d]) / scale),
        "label_squared": float(abs(p[-1, -1]) * np.linalg.norm(q[-1, :d]) / scale),
    }


def relative_distance(matrix: np.ndarray, reference: np.ndarray) -> float:
    r"""$\|A - B\|_F / \|B\|_F$."""
    matrix, reference = np.asarray(matrix, float), np.asarray(reference, float)
    return float(np.linalg.norm(matrix - reference) / np.linalg.norm(reference))


def random_preconditioners(input_dim: int, count: int, seed: int = 0) -> list[np.ndarray]:
    r"""``count`` random non-symmetric preconditioners $\Gamma_\ell = \frac12 I_d + 0.1\,G_\ell$,
    $G_\ell$ with i.i.d. $\mathcal N(0, 1)$ entries (``numpy.random.default_rng(seed)``)."""
    rng = np.random.default_rng(seed)
    return [0.5 * np.eye(input_dim) + 0.1 * rng.standard_normal((input_dim, input_dim))
            for _ in range(count)]


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
    r"""Proposition 4 (prop-lsa-gd) on ``prompts`` (float64): :func:`~nlicl_lib.theory.constructions.gd_lsa`
    against :func:`~nlicl_lib.theory.predictors.preconditioned_gd`, for the first of ``gammas`` and
    for all $L$ of them, with the context labels after each layer against the residuals."""
    d, n = prompts.x.shape[-1], prompts.context_length
    first = max_relative_difference(gd_lsa(d, gammas[:1])(prompts.embed()),
                                    preconditioned_gd(prompts, gammas[:1]))
    layers, stream = gd_lsa(d, gammas)(prompts.embed(), return_stream=True)
    steps, residuals = preconditioned_gd(prompts, gammas, return_residuals=True)
    labels = tuple(max_relative_difference(stream[f"block{layer}"][:, :n, -1], residuals[layer - 1])
                   for layer in range(1, len(gammas) + 1))
    return ConstructionCheck(first, max_relative_difference(layers, steps), labels)


@dataclass(frozen=True)
class TrainedStep:
    r"""A trained layer read as one GD step: $\Gamma_{\text{eff}}$ (``gamma_eff``, ``(d, d)``),
    $\Gamma^*$ (``gamma_star``), $\|\Gamma_{\text{eff}} - \Gamma^*\|_F / \|\Gamma^*\|_F$
    (``distance``) and the non-GD terms relative to $\|\Gamma_{\text{eff}}\|_F$
    (``spurious``, :func:`spurious_weights`)."""

    gamma_eff: np.ndarray
    gamma_star: np.ndarray
    distance: float
    spurious: dict[str, float]


def read_trained_step(layer: LSA, input_dim: int, gamma_star: float | np.ndarray) -> TrainedStep:
    r"""Read a trained full LSA layer as one preconditioned GD step (:func:`effective_gamma`) and
    compare it with ``gamma_star`` (a scalar $\gamma^*$ means $\gamma^* I_d$; for a linear task
    $\gamma^* = \frac{n}{n+d+1+\sigma^2}$, Theorem 5 (thm-linear-optimum))."""
    star = np.asarray(gamma_star, dtype=np.float64)
    if star.ndim == 0:
        star = float(star) * np.eye(input_dim)
    gamma_eff = effective_gamma(layer, input_dim)
    return TrainedStep(gamma_eff, star, relative_distance(gamma_eff, star),
                       spurious_weights(layer, input_dim))


def tuned_gd_losses(input_dim: int, context_length: int, depths: Sequence[int],
                    noise_levels: Sequence[float], num_prompts: int = 40_000, seed: int = 0
                    ) -> dict[tuple[float, int], TunedGD]:
    r"""``{(sigma, L): TunedGD}``: :func:`tune_gd_steps` for every $\sigma$ in ``noise_levels`` and
    $L$ in ``depths``. The moments $A_{jk}$ depend on the inputs only, so one sample of
    ``num_prompts`` contexts (``seed``) serves every $\sigma$."""
    noise_levels = [check_float("noise_levels", s, minimum=0.0) for s in noise_levels]
    clean = TaskConfig(kind="linear", input_dim=input_dim, context_length=context_length)
    spectrum = sample_spectrum(clean, max_power=max(depths), num_prompts=num_prompts, seed=seed)
    tuned = {}
    for sigma in noise_levels:
        noisy = TaskConfig(kind="linear", input_dim=input_dim, context_length=context_length,
                           noise_std=sigma)
        sample = SpectralSample(noisy, spectrum.per_prompt)
        for depth in depths:
            tuned[sigma, depth] = tune_gd_steps(sample, depth)
    return tuned


def input_row_norms(model: InContextRegressor, input_dim: int) -> list[float]:
    r"""$\|P_\ell[{:}d, :]\|_F$ for each layer $\ell$: the rows of $P_\ell$ that write into the inputs
    $x_i$ of the tokens (zero in the GD construction, where $P_\ell = e_D e_D^\top$)."""
    return [block.lsa.P.detach()[:input_dim].norm().item() for block in model.blocks]
