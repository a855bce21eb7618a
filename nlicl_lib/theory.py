r"""Closed forms of theory.md 3.1 to 3.4, exact (no sampling).

One preconditioned GD step from $\theta = 0$ on features $\psi$ predicts
$\hat y = \psi(x_{n+1})^\top \Gamma\, g$ with $g = \frac1n \sum_{i \le n} y_i \psi(x_i)$. For a target
$y = \beta^\top \phi(x)$ with $\beta \sim \mathcal N(0, I)$, context noise $\sigma^2$ and a clean
query, write $S_{\psi\phi} = \mathbb E[\psi\phi^\top]$ (and likewise $S_{\psi\psi}, S_{\phi\phi}$) and

$$B = \tfrac{n-1}{n} S_{\psi\phi} S_{\phi\psi} + \tfrac1n \mathbb E\big[\|\phi\|^2 \psi\psi^\top\big]
      + \tfrac{\sigma^2}{n} S_{\psi\psi} \;=\; \mathbb E[g g^\top].$$

Then the loss of any $\Gamma$ is
$\mathcal L(\Gamma) = \operatorname{tr}(\Gamma^\top S_{\psi\psi} \Gamma B)
 - 2 \operatorname{tr}(\Gamma^\top S_{\psi\phi} S_{\phi\psi}) + \operatorname{tr} S_{\phi\phi}$,
minimised by $\Gamma^* = S_{\psi\psi}^{-1} S_{\psi\phi} S_{\phi\psi} B^{-1}$. With $\psi = \phi$ this is
theory.md 3.3: $S = \mathbb E[\phi\phi^\top]$, $B = \frac{n-1}{n}S^2 + \frac1n \mathbb E[\|\phi\|^2
\phi\phi^\top]$, $\Gamma^* = S B^{-1}$, $\mathcal L^* = \operatorname{tr} S - \operatorname{tr}(S^3 B^{-1})$;
with $\phi = \psi = x$ it is theory.md 3.1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ConfigError, check_float, check_int
from .monomials import PolyMap, monomial_count, second_moment, squared_norm, weighted_second_moment
from .tasks import TaskConfig


@dataclass(frozen=True)
class GDMoments:
    r"""The exact moments that fix the loss of one GD step on features $\psi$ for target $\phi$."""

    s_pp: np.ndarray  # E[psi psi^T]
    s_pf: np.ndarray  # E[psi phi^T]
    s_ff_trace: float  # tr E[phi phi^T] = E[y^2] for beta ~ N(0, I)
    b: np.ndarray  # E[g g^T]


@dataclass(frozen=True)
class OneStepOptimum:
    r"""$\Gamma^*$ and $\mathcal L^*$ of one preconditioned GD step, plus the null loss $\mathbb E[y^2]$."""

    gamma: np.ndarray
    loss: float
    null_loss: float

    @property
    def normalised_loss(self) -> float:
        return self.loss / self.null_loss


def gd_moments(target: PolyMap, features: PolyMap, context_length: int, noise_std: float = 0.0
               ) -> GDMoments:
    """Exact moments for $x \\sim \\mathcal N(0, I_d)$; see the module doc for $B$."""
    n = check_int("n", context_length, minimum=1)
    sigma = check_float("noise", noise_std, minimum=0.0)
    if target.input_dim != features.input_dim:
        raise ConfigError("features", features.input_dim, f"maps of d={target.input_dim} inputs")
    s_pp = second_moment(features)
    s_pf = second_moment(features, target)
    s_ff_trace = float(np.trace(second_moment(target)))
    fourth = weighted_second_moment(squared_norm(target), features)
    b = (n - 1) / n * s_pf @ s_pf.T + fourth / n + sigma**2 / n * s_pp
    return GDMoments(s_pp, s_pf, s_ff_trace, b)


def gd_loss_from_moments(gamma: np.ndarray, moments: GDMoments) -> float:
    r"""$\mathcal L(\Gamma) = \operatorname{tr}(\Gamma^\top S_{\psi\psi}\Gamma B) - 2\operatorname{tr}
    (\Gamma^\top S_{\psi\phi}S_{\phi\psi}) + \operatorname{tr}S_{\phi\phi}$."""
    gamma = np.asarray(gamma, dtype=np.float64)
    cross = moments.s_pf @ moments.s_pf.T
    return float(
        np.trace(gamma.T @ moments.s_pp @ gamma @ moments.b)
        - 2 * np.trace(gamma.T @ cross)
        + moments.s_ff_trace
    )


def gd_optimum_from_moments(moments: GDMoments) -> OneStepOptimum:
    r"""$\Gamma^* = S_{\psi\psi}^{-1} S_{\psi\phi} S_{\phi\psi} B^{-1}$ (pseudo-inverses where
    the features are linearly dependent) and its loss."""
    cross = moments.s_pf @ moments.s_pf.T
    gamma = np.linalg.pinv(moments.s_pp, hermitian=True) @ cross @ np.linalg.pinv(
        moments.b, hermitian=True
    )
    return OneStepOptimum(gamma, gd_loss_from_moments(gamma, moments), moments.s_ff_trace)


def one_step_gd_loss(gamma: np.ndarray, target: PolyMap, features: PolyMap, context_length: int,
                     noise_std: float = 0.0) -> float:
    r"""Exact loss of $\hat y = \psi_{n+1}^\top \Gamma \frac1n \sum_i y_i \psi_i$ (any $\Gamma$)."""
    return gd_loss_from_moments(gamma, gd_moments(target, features, context_length, noise_std))


def one_step_gd_optimum(target: PolyMap, features: PolyMap, context_length: int,
                        noise_std: float = 0.0) -> OneStepOptimum:
    r"""The best one-step GD predictor on ``features`` $\psi$ for targets $\beta^\top\phi$."""
    return gd_optimum_from_moments(gd_moments(target, features, context_length, noise_std))


def kernel_features(input_dim: int, max_degree: int) -> PolyMap:
    r"""$\psi(x) = (x; \phi_2(x); \dots)$: all monomials of degree $1..k$, what the kernel
    construction's token holds after the GLU (degree 2) or after several blocks (higher)."""
    return PolyMap.monomials(input_dim, range(1, max_degree + 1))


def one_step_kernel_gd_optimum(task: TaskConfig, features: PolyMap | None = None
                               ) -> OneStepOptimum:
    r"""theory.md 3.3: the optimal one-step kernel-GD loss for a polynomial (or linear) task.

    ``features`` defaults to every monomial of degree $1..k$ (so they span the target).
    """
    if task.covariance is not None:
        raise ConfigError("covariance", "given", "isotropic inputs for kernel theory")
    if features is None:
        features = kernel_features(task.input_dim, task.degree)
    return one_step_gd_optimum(task.target_features, features, task.context_length, task.noise_std)


def linear_gd_optimum(task: TaskConfig) -> OneStepOptimum:
    r"""theory.md 3.1, any covariance: one GD step on $x$ itself (what one LSA layer does).

    For a linear task $\Gamma^* = \big(\frac{n+1}{n}\Sigma + \frac{\operatorname{tr}\Sigma +
    \sigma^2}{n} I\big)^{-1}$. For a polynomial task the same formula with $\psi = x$ gives the
    best one-step *linear* GD (for the pure quadratic task $\Gamma^* = 0$: it predicts 0).
    """
    n, sigma = task.context_length, task.noise_std
    if task.kind == "linear":
        cov = task.covariance_matrix
        # E[||x||^2 x x^T] = tr(Sigma) Sigma + 2 Sigma^2 for x ~ N(0, Sigma)
        fourth = np.trace(cov) * cov + 2 * cov @ cov
        b = (n - 1) / n * cov @ cov + fourth / n + sigma**2 / n * cov
        moments = GDMoments(cov, cov, float(np.trace(cov)), b)
        return gd_optimum_from_moments(moments)
    return one_step_gd_optimum(task.target_features, PolyMap.monomials(task.input_dim, [1]), n,
                               sigma)


def linear_gd_optimum_isotropic(input_dim: int, context_length: int, noise_std: float = 0.0
                                ) -> tuple[float, float]:
    r"""$\Sigma = I$: $\Gamma^* = \frac{n}{n+d+1+\sigma^2} I$ and
    $\mathcal L^* = \frac{d(d+1+\sigma^2)}{n+d+1+\sigma^2}$. Returns (scale of $\Gamma^*$, $\mathcal L^*$)."""
    d = check_int("d", input_dim, minimum=1)
    n = check_int("n", context_length, minimum=1)
    s2 = check_float("noise", noise_std, minimum=0.0) ** 2
    return n / (n + d + 1 + s2), d * (d + 1 + s2) / (n + d + 1 + s2)


def null_loss(task: TaskConfig) -> float:
    r"""$\mathbb E[y^2]$, the loss of the zero predictor (query labels are clean)."""
    if task.kind == "linear":
        return float(np.trace(task.covariance_matrix))
    return float(np.trace(second_moment(task.target_features)))


def best_linear_loss(task: TaskConfig) -> float:
    r"""theory.md 3.2: $\mathbb E_f[\min_v \mathbb E_x (v^\top x - f(x))^2]
    = \operatorname{tr} S_{\phi\phi} - \operatorname{tr}(S_{\phi x} S_{xx}^{-1} S_{x\phi})$,
    a lower bound on the loss of every LSA of any depth (0 for a linear task)."""
    if task.kind == "linear":
        return 0.0
    target = task.target_features
    x = PolyMap.monomials(task.input_dim, [1])
    s_xf = second_moment(x, target)
    return float(np.trace(second_moment(target)) - np.trace(s_xf.T @ s_xf))  # S_xx = I


def required_slots(input_dim: int, max_degree: int) -> int:
    r"""Feature slots a single block needs for every monomial of degree $2..k$:
    $\sum_{j=2}^{k} p_j$ (degree 1 is the input itself)."""
    return sum(monomial_count(input_dim, j) for j in range(2, max_degree + 1))


def one_step_gd_asymptote(task: TaskConfig) -> float:
    r"""The constant $c$ in $\mathcal L^*(n) = c/n + O(1/n^2)$ for one GD step on the task's own
    monomials $\phi$ (features that span the target, no noise):
    $B = S^2 + \frac1n(F - S^2)$ with $F = \mathbb E[\|\phi\|^2\phi\phi^\top]$, so expanding
    $\operatorname{tr}(S^3 B^{-1})$ in $1/n$ gives $c = \operatorname{tr}(S^{-1}F) - \operatorname{tr} S$."""
    if task.covariance is not None or task.noise_std:
        raise ConfigError("task", task.describe(), "isotropic inputs and no label noise")
    if task.kind == "linear":
        d = task.input_dim
        return float(d * (d + 1))  # 3.1: d(d+1)/(n+d+1)
    phi = task.target_features
    s = second_moment(phi)
    fourth = weighted_second_moment(squared_norm(phi), phi)
    return float(np.trace(np.linalg.solve(s, fourth)) - np.trace(s))
