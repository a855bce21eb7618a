r"""Explicit in-context predictors: what the constructed models should equal, and baselines.

Every predictor takes a batch of :class:`~nlicl_lib.core.tasks.Prompts` and returns the query
predictions, shape ``(batch,)``. Context: $x_i, y_i$ for $i \le n$; query $x_{n+1}$.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from numpy.typing import ArrayLike

from nlicl_lib.core.errors import check_float
from nlicl_lib.core.tasks import Prompts

FeatureMap = Callable[[torch.Tensor], torch.Tensor]


def _as(matrix: ArrayLike, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(matrix, dtype=like.dtype, device=like.device)


def zero_predictor(prompts: Prompts) -> torch.Tensor:
    """$\\hat y = 0$: its loss is $\\mathbb E[y^2]$, the normaliser of every figure."""
    return prompts.x.new_zeros(prompts.x.shape[0])


def preconditioned_gd(prompts: Prompts, gammas: Sequence, features: FeatureMap | None = None,
                      return_residuals: bool = False
                      ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""$L$ steps of preconditioned GD from $\theta_0 = 0$ on
    $\frac1{2n}\sum_i (\theta^\top \psi(x_i) - y_i)^2$:

    $\theta_{\ell} = \theta_{\ell-1} + \Gamma_\ell \frac1n \sum_i r^{(\ell-1)}_i \psi(x_i)$,
    $r^{(\ell)}_i = y_i - \theta_\ell^\top \psi(x_i)$, $\hat y = \theta_L^\top \psi(x_{n+1})$.

    ``gammas``: one matrix per step (``(p, p)``) or a scalar (meaning $\gamma I$). ``features``
    $\psi$ defaults to the identity ($\psi(x) = x$: linear regression). With
    ``return_residuals`` also returns the list of residuals $r^{(\ell)}$, each ``(batch, n)``.
    """
    n = prompts.context_length
    psi = prompts.x if features is None else features(prompts.x)
    context, query = psi[:, :n], psi[:, n]
    theta = psi.new_zeros(psi.shape[0], psi.shape[-1])
    residual = prompts.y[:, :n]
    history = []
    for gamma in gammas:
        g = torch.einsum("bi,bif->bf", residual, context) / n
        gamma = _as(gamma, psi)
        step = gamma * g if gamma.dim() == 0 else g @ gamma.T
        theta = theta + step
        residual = residual - torch.einsum("bif,bf->bi", context, step)
        history.append(residual)
    prediction = torch.einsum("bf,bf->b", query, theta)
    return (prediction, history) if return_residuals else prediction


def kernel_gd(prompts: Prompts, gamma: ArrayLike, features: FeatureMap) -> torch.Tensor:
    r"""One step of kernel GD: $\hat y = \psi_{n+1}^\top \Gamma \frac1n \sum_i y_i \psi_i
    = \frac1n \sum_i y_i k_\Gamma(x_i, x_{n+1})$ with $k_\Gamma(x, x') = \psi(x)^\top\Gamma^\top\psi(x')$."""
    return preconditioned_gd(prompts, [gamma], features)


def block_coordinate_descent(prompts: Prompts, feature_blocks: Sequence[FeatureMap],
                             gammas: Sequence, return_residuals: bool = False
                             ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""One cyclic pass of block-coordinate descent, Theorem 13 (thm-depth-bcd):
    $r^{(0)}_i = y_i$, $g_\ell = \frac1n \sum_i r^{(\ell-1)}_i \phi_\ell(x_i)$,
    $r^{(\ell)}_i = r^{(\ell-1)}_i - \phi_\ell(x_i)^\top \Gamma_\ell g_\ell$,
    $\hat y = \sum_\ell \phi_\ell(x_{n+1})^\top \Gamma_\ell g_\ell$.

    With ``return_residuals`` also returns the residuals and the partial query predictions
    $\sum_{\ell' \le \ell} \phi_{\ell'}(x_{n+1})^\top\Gamma_{\ell'} g_{\ell'}$ after each block.
    """
    n = prompts.context_length
    residual = prompts.y[:, :n]
    prediction = prompts.x.new_zeros(prompts.x.shape[0])
    residuals, partial = [], []
    for features, gamma in zip(feature_blocks, gammas, strict=True):
        phi = features(prompts.x)
        gamma = _as(gamma, phi)
        g = torch.einsum("bi,bif->bf", residual, phi[:, :n]) / n
        step = g @ gamma.T
        residual = residual - torch.einsum("bif,bf->bi", phi[:, :n], step)
        prediction = prediction + torch.einsum("bf,bf->b", phi[:, n], step)
        residuals.append(residual)
        partial.append(prediction)
    if return_residuals:
        return prediction, residuals, partial
    return prediction


def ridge(prompts: Prompts, penalty: float = 0.0, features: FeatureMap | None = None
          ) -> torch.Tensor:
    r"""Ridge regression on $\psi$ (default $x$): $\hat\theta = (\Psi^\top\Psi + n\lambda I)^{+}
    \Psi^\top y$; ``penalty`` $\lambda = 0$ is least squares (minimum-norm when $n < p$)."""
    penalty = check_float("penalty", penalty, minimum=0.0)
    n = prompts.context_length
    psi = prompts.x if features is None else features(prompts.x)
    context, query = psi[:, :n], psi[:, n]
    gram = context.transpose(1, 2) @ context
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
    rhs = torch.einsum("bif,bi->bf", context, prompts.y[:, :n]).unsqueeze(-1)
    theta = torch.linalg.pinv(gram + n * penalty * eye, hermitian=True) @ rhs
    return torch.einsum("bf,bf->b", query, theta.squeeze(-1))


def least_squares(prompts: Prompts, features: FeatureMap | None = None) -> torch.Tensor:
    """Ordinary (minimum-norm) least squares on $x$ or on ``features``."""
    return ridge(prompts, 0.0, features)


def polynomial_kernel(degree: int, offset: float = 1.0) -> Callable:
    """$k(x, x') = (c + x^\\top x')^k$ on batches: ``(b, s, d), (b, t, d) -> (b, s, t)``."""
    def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (offset + a @ b.transpose(1, 2)) ** degree
    return kernel


def kernel_ridge(prompts: Prompts, kernel: Callable, penalty: float) -> torch.Tensor:
    r"""Kernel ridge regression: $\hat y = k_{n+1}^\top (K + n\lambda I)^{-1} y$, what many GD
    steps on the kernel loss approach. ``penalty`` $\lambda > 0$."""
    penalty = check_float("penalty", penalty, minimum=0.0, strict_minimum=True)
    n = prompts.context_length
    context, query = prompts.x[:, :n], prompts.x[:, n:]
    gram = kernel(context, context)
    eye = torch.eye(n, dtype=gram.dtype, device=gram.device)
    alpha = torch.linalg.solve(gram + n * penalty * eye, prompts.y[:, :n].unsqueeze(-1))
    return (kernel(query, context) @ alpha).reshape(-1)
