r"""Closed forms of the book's one-step results, exact (no sampling).

One preconditioned GD step from $\theta = 0$ on features $\psi$ predicts
$\hat y = \psi(x_{n+1})^\top \Gamma\, g$ with $g = \frac1n \sum_{i \le n} y_i \psi(x_i)$
(Proposition 8 (prop-glu-kernel): what one GLU-LSA block in GD form computes). For a target
$y = \beta^\top \phi(x)$ with $\beta \sim \mathcal N(0, I)$, context noise $\sigma^2$ and a clean
query, Theorem 9 (thm-feature-optimum) writes $S = \mathbb E[\phi\phi^\top]$,
$T = \mathbb E[\psi\psi^\top]$, $C = \mathbb E[\psi\phi^\top]$ and

$$B = \tfrac{n-1}{n} C C^\top + \tfrac1n \mathbb E\big[\|\phi\|^2 \psi\psi^\top\big]
      + \tfrac{\sigma^2}{n} T \;=\; \mathbb E[g g^\top].$$

The loss of any $\Gamma$ is
$\mathcal L(\Gamma) = \operatorname{tr}(\Gamma^\top T \Gamma B)
 - 2 \operatorname{tr}(\Gamma^\top C C^\top) + \operatorname{tr} S$, minimised by
$\Gamma^* = T^{-1} C C^\top B^{-1}$ with
$\mathcal L^* = \operatorname{tr} S - \operatorname{tr}(T^{-1} C C^\top B^{-1} C C^\top)$.
This holds for *any* features $\psi$, also ones that reach outside the target's span, which can
lower $\mathcal L^*$ strictly.

Only when $\operatorname{span}\psi = \operatorname{span}\phi$ (take $\psi = \phi$: $T = C = S$) does it
reduce to Corollary 10 (cor-same-span): $B = \frac{n-1}{n}S^2 + \frac1n F + \frac{\sigma^2}{n} S$ with
$F = \mathbb E[\|\phi\|^2 \phi\phi^\top]$, $\Gamma^* = S B^{-1}$ and
$\mathcal L^* = \operatorname{tr} S - \operatorname{tr}(S^3 B^{-1})$. With $\phi = \psi = x$ it is
Theorem 5 (thm-linear-optimum). Without noise, Proposition 11 (prop-one-over-n) bounds the
optimum by $\min(c/n, \mathbb E[y^2])$ with $c = \operatorname{tr}(S^{-1}F) - \operatorname{tr} S$
(:func:`one_step_gd_asymptote`), and $n\mathcal L^*(n) \to c$. The moments that do not depend on
$n$ are computed once (:func:`feature_moments`), so :func:`one_step_gd_optimum_curve` gives
$\mathcal L^*(n)$ for many $n$ at the cost of one small matrix inverse each.

$\hat y = \frac1n\sum_i y_i\, k_\Gamma(x_{n+1}, x_i)$ with $k_\Gamma(x, x') = \psi(x)^\top\Gamma\psi(x')$, and
$k_\Gamma$ is a kernel only when $\Gamma$ is symmetric positive semidefinite
(:func:`kernel_check` measures how far a $\Gamma$ is from that).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from nlicl_lib.core.errors import ConfigError, check_float, check_int
from nlicl_lib.core.monomials import (
    PolyMap,
    monomial_count,
    second_moment,
    squared_norm,
    weighted_second_moment,
)
from nlicl_lib.core.tasks import TaskConfig


@dataclass(frozen=True)
class GDMoments:
    r"""The exact moments that fix the loss of one GD step on features $\psi$ for target $\phi$,
    at one context length $n$ (Theorem 9 (thm-feature-optimum))."""

    s_pp: np.ndarray  # T = E[psi psi^T]
    s_pf: np.ndarray  # C = E[psi phi^T]
    s_ff_trace: float  # tr S = tr E[phi phi^T] = E[y^2] for beta ~ N(0, I)
    b: np.ndarray  # B = E[g g^T]


@dataclass(frozen=True)
class OneStepOptimum:
    r"""$\Gamma^*$ and $\mathcal L^*$ of one preconditioned GD step, plus the null loss $\mathbb E[y^2]$."""

    gamma: np.ndarray
    loss: float
    null_loss: float

    @property
    def normalised_loss(self) -> float:
        return self.loss / self.null_loss


@dataclass(frozen=True)
class FeatureMoments:
    r"""The moments of Theorem 9 (thm-feature-optimum) that do not depend on $n$:
    $T = \mathbb E[\psi\psi^\top]$, $C = \mathbb E[\psi\phi^\top]$, $\operatorname{tr} S$ and
    $\mathbb E[\|\phi\|^2\psi\psi^\top]$. :meth:`at` forms $B$ for one $n$."""

    s_pp: np.ndarray  # T, shape (p_psi, p_psi)
    s_pf: np.ndarray  # C, shape (p_psi, p_phi)
    s_ff_trace: float  # tr S
    fourth: np.ndarray  # E[|phi|^2 psi psi^T], shape (p_psi, p_psi)

    def at(self, context_length: int, noise_std: float = 0.0) -> GDMoments:
        r"""$B = \frac{n-1}{n} C C^\top + \frac1n \mathbb E[\|\phi\|^2\psi\psi^\top]
        + \frac{\sigma^2}{n} T$ for $n$ = ``context_length``, $\sigma$ = ``noise_std``."""
        n = check_int("n", context_length, minimum=1)
        sigma = check_float("noise", noise_std, minimum=0.0)
        b = (n - 1) / n * self.s_pf @ self.s_pf.T + self.fourth / n + sigma**2 / n * self.s_pp
        return GDMoments(self.s_pp, self.s_pf, self.s_ff_trace, b)


def feature_moments(target: PolyMap, features: PolyMap) -> FeatureMoments:
    r"""The $n$-independent moments for $x \sim \mathcal N(0, I_d)$, target $\phi$ = ``target``,
    features $\psi$ = ``features``; exact by Lemma 3 (lem-gaussian-moments)."""
    if target.input_dim != features.input_dim:
        raise ConfigError("features", features.input_dim, f"maps of d={target.input_dim} inputs")
    return FeatureMoments(
        s_pp=second_moment(features),
        s_pf=second_moment(features, target),
        s_ff_trace=float(np.trace(second_moment(target))),
        fourth=weighted_second_moment(squared_norm(target), features),
    )


def gd_moments(target: PolyMap, features: PolyMap, context_length: int, noise_std: float = 0.0
               ) -> GDMoments:
    """Exact moments for $x \\sim \\mathcal N(0, I_d)$ at one $n$; see the module doc for $B$."""
    check_int("n", context_length, minimum=1)
    check_float("noise", noise_std, minimum=0.0)
    return feature_moments(target, features).at(context_length, noise_std)


def gd_loss_from_moments(gamma: np.ndarray, moments: GDMoments) -> float:
    r"""Theorem 9 (thm-feature-optimum): the loss of any $\Gamma$,
    $\mathcal L(\Gamma) = \operatorname{tr}(\Gamma^\top T \Gamma B) - 2\operatorname{tr}(\Gamma^\top C C^\top)
    + \operatorname{tr} S$."""
    gamma = np.asarray(gamma, dtype=np.float64)
    cross = moments.s_pf @ moments.s_pf.T
    return float(
        np.trace(gamma.T @ moments.s_pp @ gamma @ moments.b)
        - 2 * np.trace(gamma.T @ cross)
        + moments.s_ff_trace
    )


def gd_optimum_from_moments(moments: GDMoments) -> OneStepOptimum:
    r"""Theorem 9 (thm-feature-optimum): $\Gamma^* = T^{-1} C C^\top B^{-1}$ (pseudo-inverses
    where the features are linearly dependent) and its loss
    $\mathcal L^* = \operatorname{tr} S - \operatorname{tr}(T^{-1} C C^\top B^{-1} C C^\top)$. With
    $\psi = \phi$ this is $\Gamma^* = S B^{-1}$ (Corollary 10 (cor-same-span)); with features
    outside the target's span it is not, and the loss can be strictly lower."""
    cross = moments.s_pf @ moments.s_pf.T
    gamma = np.linalg.pinv(moments.s_pp, hermitian=True) @ cross @ np.linalg.pinv(
        moments.b, hermitian=True
    )
    return OneStepOptimum(gamma, gd_loss_from_moments(gamma, moments), moments.s_ff_trace)


def best_step_size(gamma: np.ndarray, moments: GDMoments) -> tuple[float, float]:
    r"""The best multiple $c\,\Gamma$ of a fixed preconditioner and its loss. By
    Theorem 9 (thm-feature-optimum) the loss is quadratic in $c$,
    $\mathcal L(c\Gamma) = c^2 A - 2cB + \operatorname{tr} S$ with
    $A = \operatorname{tr}(\Gamma^\top T \Gamma B)$ and $B_\Gamma = \operatorname{tr}(\Gamma^\top C C^\top)$,
    so $c^* = B_\Gamma / A$ and $\mathcal L(c^*\Gamma) = \operatorname{tr} S - B_\Gamma^2 / A$.
    Returns $(c^*, \mathcal L(c^*\Gamma))$."""
    gamma = np.asarray(gamma, dtype=np.float64)
    curvature = float(np.trace(gamma.T @ moments.s_pp @ gamma @ moments.b))
    if curvature <= 0:
        raise ConfigError("gamma", "zero on the features", "a preconditioner with a nonzero step")
    slope = float(np.trace(gamma.T @ moments.s_pf @ moments.s_pf.T))
    step = slope / curvature
    return step, gd_loss_from_moments(step * gamma, moments)


def one_step_gd_loss(gamma: np.ndarray, target: PolyMap, features: PolyMap, context_length: int,
                     noise_std: float = 0.0) -> float:
    r"""Exact loss of $\hat y = \psi_{n+1}^\top \Gamma \frac1n \sum_i y_i \psi_i$ (any $\Gamma$)."""
    return gd_loss_from_moments(gamma, gd_moments(target, features, context_length, noise_std))


def one_step_gd_optimum(target: PolyMap, features: PolyMap, context_length: int,
                        noise_std: float = 0.0) -> OneStepOptimum:
    r"""The best one-step GD predictor on ``features`` $\psi$ for targets $\beta^\top\phi$
    (Theorem 9 (thm-feature-optimum), any features)."""
    return gd_optimum_from_moments(gd_moments(target, features, context_length, noise_std))


def one_step_gd_optimum_curve(target: PolyMap, features: PolyMap, context_lengths: Iterable[int],
                              noise_std: float = 0.0) -> np.ndarray:
    r"""$\mathcal L^*(n)$ of Theorem 9 (thm-feature-optimum) for every $n$ in ``context_lengths``,
    exact: the $n$-independent moments are computed once (:func:`feature_moments`), and only
    $B$ and $\Gamma^*$ per $n$. Returns float64 losses (not normalised), one per $n$."""
    moments = feature_moments(target, features)
    return np.array([gd_optimum_from_moments(moments.at(n, noise_std)).loss
                     for n in context_lengths], dtype=np.float64)


@dataclass(frozen=True)
class KernelCheck:
    r"""How far $\Gamma$ is from defining a kernel $k_\Gamma(x, x') = \psi(x)^\top\Gamma\psi(x')$
    (Proposition 8 (prop-glu-kernel): for linearly independent features, a kernel exactly when
    $\Gamma$ is symmetric positive semidefinite). ``asymmetry``:
    $\|\Gamma - \Gamma^\top\|_F / \|\Gamma\|_F$ (0 for symmetric, up to 2); ``min_eigenvalue`` and
    ``max_eigenvalue``: the extreme eigenvalues of the symmetric part $(\Gamma + \Gamma^\top)/2$."""

    asymmetry: float
    min_eigenvalue: float
    max_eigenvalue: float

    def is_kernel(self, tolerance: float = 1e-10) -> bool:
        """Symmetric and positive semidefinite up to ``tolerance`` (relative)."""
        scale = max(abs(self.min_eigenvalue), abs(self.max_eigenvalue), np.finfo(float).tiny)
        return self.asymmetry <= tolerance and self.min_eigenvalue >= -tolerance * scale


def kernel_check(gamma: np.ndarray) -> KernelCheck:
    r""":class:`KernelCheck` of a square matrix $\Gamma$."""
    gamma = np.asarray(gamma, dtype=np.float64)
    if gamma.ndim != 2 or gamma.shape[0] != gamma.shape[1]:
        raise ConfigError("gamma", gamma.shape, "a square matrix")
    norm = np.linalg.norm(gamma)
    asymmetry = float(np.linalg.norm(gamma - gamma.T) / norm) if norm > 0 else 0.0
    eigenvalues = np.linalg.eigvalsh((gamma + gamma.T) / 2)
    return KernelCheck(asymmetry, float(eigenvalues[0]), float(eigenvalues[-1]))


def kernel_features(input_dim: int, max_degree: int) -> PolyMap:
    r"""$\psi(x) = (x; \phi_2(x); \dots)$: all monomials of degree $1..k$, what the kernel
    construction's token holds after the GLU (degree 2) or after several blocks (higher)."""
    return PolyMap.monomials(input_dim, range(1, max_degree + 1))


def one_step_kernel_gd_optimum(task: TaskConfig, features: PolyMap | None = None
                               ) -> OneStepOptimum:
    r"""The best one-step GD on features for a polynomial (or linear) task:
    Theorem 9 (thm-feature-optimum).

    ``features`` defaults to every monomial of degree $1..k$. For a task with every degree
    $1..k$ these are exactly the target's monomials, so Corollary 10 (cor-same-span) applies:
    $\Gamma^* = S B^{-1}$. For a homogeneous task they reach outside the target's span, and the
    optimum, the general formula of Theorem 9 (thm-feature-optimum), can be strictly lower than
    on the target's own monomials (the homogeneous cubic gains from $x$ and $\phi_2$; the
    homogeneous quadratic gains nothing from $x$, which is uncorrelated with every even
    monomial).
    """
    if task.covariance is not None:
        raise ConfigError("covariance", "given", "isotropic inputs for kernel theory")
    if features is None:
        features = kernel_features(task.input_dim, task.degree)
    return one_step_gd_optimum(task.target_features, features, task.context_length, task.noise_std)


def linear_gd_optimum(task: TaskConfig) -> OneStepOptimum:
    r"""Theorem 5 (thm-linear-optimum), any covariance: one GD step on $x$ itself (what one
    LSA layer does, Proposition 4 (prop-lsa-gd)).

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
    r"""Corollary 7 (cor-linear-bound): $\mathbb E_f[\min_v \mathbb E_x (v^\top x - f(x))^2]
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
    r"""The constant $c$ of Proposition 11 (prop-one-over-n) for one GD step on the task's own
    monomials $\phi$ (Corollary 10 (cor-same-span), no noise):
    $c = \operatorname{tr}(S^{-1}F) - \operatorname{tr} S$ with $F = \mathbb E[\|\phi\|^2\phi\phi^\top]$.

    $\Gamma = S^{-1}$ has loss exactly $c/n$ and $\Gamma = 0$ has $\mathbb E[y^2]$, so
    $\mathcal L^*(n) \le \min(c/n, \mathbb E[y^2])$ for every $n$; expanding
    $B = S^2 + \frac1n(F - S^2)$ gives $n\,\mathcal L^*(n) \to c$. The two bounds cross at
    $n = c / \mathbb E[y^2]$: below it, and for a while above it, $\mathcal L^*$ falls more slowly
    than $1/n$ (chapter 3 plots $n\,\mathcal L^*(n)/c$)."""
    if task.covariance is not None or task.noise_std:
        raise ConfigError("task", task.describe(), "isotropic inputs and no label noise")
    if task.kind == "linear":
        d = task.input_dim
        return float(d * (d + 1))  # Theorem 5 (thm-linear-optimum): d(d+1)/(n+d+1)
    moments = feature_moments(task.target_features, task.target_features)  # T = S, fourth = F
    return float(np.trace(np.linalg.solve(moments.s_pp, moments.fourth)) - moments.s_ff_trace)
