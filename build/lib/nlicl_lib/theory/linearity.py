r"""Attention alone is linear in the query, at any depth: Theorem 6 (thm-query-linear).

The mask $M = \mathrm{diag}(I_n, 0)$ keeps the query out of the keys and values, so in every
layer the statistic $S_\ell = \sum_{i \le n} z_i^{(\ell)} z_i^{(\ell)\top}$ is built from the
context alone, the context tokens evolve without ever seeing the query, and the query token
moves by a linear map that the context fixes:

$$z_{n+1}^{(\ell)} = \Big(I + \tfrac1n P_\ell S_\ell Q_\ell\Big)\, z_{n+1}^{(\ell-1)},
\qquad z_{n+1}^{(0)} = (x_{n+1};\ 0;\ 0).$$

By induction $z_{n+1}^{(L)} = T(\text{context})\, z_{n+1}^{(0)}$, so the prediction
$\hat y = -[z_{n+1}^{(L)}]_D = v(\text{context})^\top x_{n+1}$ is linear in the query for any
depth $L$ and any $P_\ell, Q_\ell$. Since $x_{n+1}$ is independent of the context, no LSA can do
better than the best linear predictor of each target, Corollary 7 (cor-linear-bound):
$\mathcal L_{\mathrm{LSA}} \ge \mathbb E_f\big[\min_v \mathbb E_x (v^\top x - f(x))^2\big]$
(:func:`~nlicl_lib.theory.closed_forms.best_linear_loss`).

**The assumption behind the bound.** The argument needs the query token to be $(x_{n+1}; 0)$,
with no constant entry. Were a constant $1$ appended to every token, the same induction would
give an *affine* prediction $v(\text{context})^\top x_{n+1} + b(\text{context})$, and the bound
would drop to the best affine predictor's loss,
$\mathbb E_f\big[\min_{v, b} \mathbb E_x (v^\top x + b - f(x))^2\big]$ (:func:`best_affine_loss`).
For a target with $\mathbb E_x f(x) \ne 0$, such as the pure quadratic task
($\mathbb E[x_j^2] = 1$), that is strictly lower: $d = 3$ gives $0.75\,\mathbb E[y^2]$ instead of
$\mathbb E[y^2]$. The book's tokens have no constant entry.

This module probes a model with queries of our choosing while its context stays fixed:
:func:`predict_at_queries`, :func:`query_weights` (the $v$ above), :func:`linearity_gap` (the
exact identity $\hat y(a x + b x') = a\hat y(x) + b\hat y(x')$) and :func:`line_probe` (the
model, the target and the best linear predictor along a line through query space).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor
from nlicl_lib.core.monomials import PolyMap, second_moment
from nlicl_lib.core.tasks import Prompts, TaskConfig
from nlicl_lib.theory.closed_forms import best_linear_loss, null_loss


def predict_at_queries(model: InContextRegressor, prompts: Prompts, queries: torch.Tensor
                       ) -> torch.Tensor:
    """The model's predictions when the query of each prompt is replaced by each of ``queries``.

    ``queries``: ``(Q, d)`` (the same points for every prompt) or ``(B, Q, d)``. The context
    stays as it is. Returns ``(B, Q)``.
    """
    x, y = prompts.x, prompts.y
    batch, tokens, d = x.shape
    queries = queries.to(dtype=x.dtype, device=x.device)
    if queries.dim() == 2:
        queries = queries.expand(batch, *queries.shape)
    if queries.dim() != 3 or queries.shape[0] != batch or queries.shape[2] != d:
        raise ConfigError("queries", tuple(queries.shape), f"shape (Q, {d}) or ({batch}, Q, {d})")
    count = queries.shape[1]
    xs = x.unsqueeze(1).repeat(1, count, 1, 1)  # (B, Q, n + 1, d)
    xs[:, :, -1] = queries
    ys = y.unsqueeze(1).expand(batch, count, tokens).clone()
    ys[:, :, -1] = 0.0  # the query's label is never seen
    flat = Prompts(xs.reshape(batch * count, tokens, d), ys.reshape(batch * count, tokens),
                   prompts.coefficients.repeat_interleave(count, dim=0))
    with torch.no_grad():
        out = model(flat.embed(model.feature_slots))
    return out.reshape(batch, count)


def query_weights(model: InContextRegressor, prompts: Prompts) -> torch.Tensor:
    r"""$v(\text{context})$ with $\hat y = v^\top x_{n+1}$, read off by querying $e_1, \dots, e_d$.

    Meaningful for attention-only models (for others it is just the predictions at $e_j$).
    Returns ``(B, d)``.
    """
    d = prompts.x.shape[-1]
    return predict_at_queries(model, prompts, torch.eye(d, dtype=prompts.x.dtype))


def linearity_gap(model: InContextRegressor, prompts: Prompts, scale_a: float = 1.7,
                  scale_b: float = -0.6, seed: int = 0) -> float:
    r"""$\max |\hat y(a x + b x') - a\,\hat y(x) - b\,\hat y(x')|$ over the prompts, relative to
    the largest $|\hat y|$ involved, with $x$ each prompt's query and $x'$ a second random
    query, the context held fixed. Zero up to rounding (about $10^{-15}$ in float64) for every
    attention-only model; of order one once a GLU is in the model."""
    x = prompts.x[:, -1]
    gen = torch.Generator().manual_seed(seed)
    other = torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x)
    combined = scale_a * x + scale_b * other
    out = predict_at_queries(model, prompts, torch.stack([x, other, combined], dim=1))
    gap = (out[:, 2] - scale_a * out[:, 0] - scale_b * out[:, 1]).abs().max()
    return float(gap / out.abs().max().clamp_min(torch.finfo(out.dtype).tiny))


def target_values(task: TaskConfig, prompts: Prompts, points: torch.Tensor) -> torch.Tensor:
    r"""Each prompt's own target $f(x) = \beta^\top\phi(x)$ at ``points`` ``(Q, d)`` or
    ``(B, Q, d)``; returns ``(B, Q)``. (Linear task: $w^\top x$.)"""
    points = points.to(prompts.x)
    if points.dim() == 2:
        points = points.expand(prompts.x.shape[0], *points.shape)
    if task.kind == "linear":
        return torch.einsum("bqd,bd->bq", points, prompts.coefficients)
    return torch.einsum("bqp,bp->bq", task.target_features(points), prompts.coefficients)


def best_linear_weights(task: TaskConfig, coefficients: np.ndarray | torch.Tensor) -> np.ndarray:
    r"""$v^*(f) = \arg\min_v \mathbb E_x (v^\top x - f(x))^2 = \mathbb E[x\,\phi(x)^\top]\,\beta$
    for $x \sim \mathcal N(0, I)$: the best linear predictor of each target, exactly.

    ``coefficients``: ``(B, p)`` the drawn $\beta$. Returns ``(B, d)``.
    """
    beta = torch.as_tensor(coefficients).double().cpu().numpy()
    if task.kind == "linear":
        return beta
    linear = PolyMap.monomials(task.input_dim, [1])
    return beta @ second_moment(linear, task.target_features).T  # S_xx = I


def best_predictor_loss(task: TaskConfig, features: PolyMap) -> float:
    r"""$\mathbb E_f\big[\min_\theta \mathbb E_x (\theta^\top \psi(x) - f(x))^2\big]$: the loss of
    the best predictor in the span of ``features`` $\psi$, target by target, exactly.

    For $f = \beta^\top\phi$, $\beta \sim \mathcal N(0, I)$ and $x \sim \mathcal N(0, I_d)$ the
    inner minimum is $\beta^\top(S - C^\top T^{+} C)\beta$ with $S = \mathbb E[\phi\phi^\top]$,
    $T = \mathbb E[\psi\psi^\top]$ and $C = \mathbb E[\psi\phi^\top]$ (least squares of $f$ on
    $\psi$), so the mean over $\beta$ is $\operatorname{tr} S - \operatorname{tr}(C^\top T^{+} C)$.
    Every moment is exact (Lemma 3 (lem-gaussian-moments)). A linear task $y = w^\top x$ is
    $\phi = x$."""
    if task.covariance is not None:
        raise ConfigError("covariance", "given", "isotropic inputs")
    if features.input_dim != task.input_dim:
        raise ConfigError("features", features.input_dim, f"a map of d={task.input_dim} inputs")
    target = (PolyMap.monomials(task.input_dim, [1]) if task.kind == "linear"
              else task.target_features)
    cross = second_moment(features, target)  # C, shape (p_psi, p_phi)
    explained = np.trace(cross.T @ np.linalg.pinv(second_moment(features), hermitian=True) @ cross)
    return float(np.trace(second_moment(target)) - explained)


def best_affine_loss(task: TaskConfig) -> float:
    r"""$\mathbb E_f\big[\min_{v, b} \mathbb E_x (v^\top x + b - f(x))^2\big]$, exactly: what
    Corollary 7 (cor-linear-bound) would bound every LSA by if tokens carried a constant entry
    (then the prediction is affine in the query, not linear).

    :func:`best_predictor_loss` with $\psi = (1; x)$. For $x \sim \mathcal N(0, I_d)$ the constant
    and $x$ are orthonormal, so this is the best linear loss minus
    $\mathbb E_\beta\big[(\mathbb E_x f(x))^2\big] = \|\mathbb E[\phi]\|^2$: equal to it for odd
    and linear targets, lower as soon as the target has a mean. The pure quadratic task in $d$
    dimensions has $\mathbb E[y^2] = 3d + d(d-1)/2$, of which the means of the $d$ squares carry
    $d$: for $d = 3$ the bound drops from $12/12 = 1$ to $9/12 = 0.75$ of $\mathbb E[y^2]$."""
    return best_predictor_loss(task, PolyMap.monomials(task.input_dim, [0, 1]))


def normalised_bounds(task: TaskConfig) -> dict[str, float]:
    r"""The best linear and the best affine predictor's loss over $\mathbb E[y^2]$: the bound of
    Corollary 7 (cor-linear-bound) for tokens without and with a constant entry."""
    null = null_loss(task)
    return {"linear": best_linear_loss(task) / null, "affine": best_affine_loss(task) / null}


@dataclass
class LineProbe:
    r"""Values along $x(t) = x_0 + t\,u$ for one prompt: ``offsets`` $t$, the model's
    ``predictions``, the prompt's ``targets`` $f(x(t))$ and the ``best_linear`` $v^{*\top} x(t)$."""

    offsets: np.ndarray
    predictions: np.ndarray
    targets: np.ndarray
    best_linear: np.ndarray

    @property
    def curvature(self) -> float:
        r"""$\max_t |\hat y(t) - \text{chord}(t)|$: how far the predictions bend away from the
        straight line through their two ends (zero for a model linear in the query)."""
        t, p = self.offsets, self.predictions
        chord = p[0] + (p[-1] - p[0]) * (t - t[0]) / (t[-1] - t[0])
        return float(np.max(np.abs(p - chord)))


def line_probe(model: InContextRegressor, task: TaskConfig, prompts: Prompts,
               origin: ArrayLike, direction: ArrayLike, offsets: ArrayLike, index: int = 0) -> LineProbe:
    """Probe prompt ``index`` of ``prompts`` along ``origin + t * direction`` for ``t`` in
    ``offsets``: what the model predicts, what the target is, what the best linear predictor
    of that target says."""
    one = Prompts(prompts.x[index:index + 1], prompts.y[index:index + 1],
                  prompts.coefficients[index:index + 1])
    dtype = one.x.dtype
    t = torch.as_tensor(np.asarray(offsets, dtype=np.float64), dtype=dtype)
    origin = torch.as_tensor(np.asarray(origin, dtype=np.float64), dtype=dtype)
    direction = torch.as_tensor(np.asarray(direction, dtype=np.float64), dtype=dtype)
    points = origin + t[:, None] * direction  # (T, d)
    predictions = predict_at_queries(model, one, points)[0]
    targets = target_values(task, one, points)[0]
    weights = best_linear_weights(task, one.coefficients)[0]
    best = points.double().cpu().numpy() @ weights
    return LineProbe(t.double().cpu().numpy(), predictions.double().cpu().numpy(),
                     targets.double().cpu().numpy(), best)
