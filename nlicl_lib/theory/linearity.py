r"""Attention alone is linear in the query, at any depth: Theorem 6 (thm-query-linear).

The mask $M = \mathrm{diag}(I_n, 0)$ keeps the query out of the keys and values, so in every
layer the statistic $H_\ell = \sum_{i \le n} z_i^{(\ell-1)} z_i^{(\ell-1)\top}$ is built from the
context alone, the context tokens evolve without ever seeing the query, and the query token
moves by a linear map that the context fixes:

$$z_{n+1}^{(\ell)} = \Big(I + \tfrac1n P_\ell H_\ell Q_\ell\Big)\, z_{n+1}^{(\ell-1)},
\qquad z_{n+1}^{(0)} = (x_{n+1};\ 0;\ 0).$$

By induction $z_{n+1}^{(L)} = \Pi(\text{context})\, z_{n+1}^{(0)}$, so the prediction
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
exact identity $\hat y(a x + b x') = a\hat y(x) + b\hat y(x')$, on random stacks:
:func:`linearity_gaps`) and :func:`line_probe` (the model, the target $f(t u) = t\,
\beta_{\text{lin}}^\top u + t^2 u^\top B u$ and the best linear predictor along a line $x(t) = t\,u$
through query space: :func:`line_probes`, :func:`slope_ratio`). :func:`task_bounds` gives the
bounds, :func:`one_step_curve` the best single step of linear GD at finite $n$, and
:func:`diagnostic_prompts`, :func:`label_diagnosis` measure how deep full attention fails: through
the part of its prediction of degree two or more in the context labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap, second_moment
from nlicl_lib.core.seeding import STREAM_OTHER
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.theory import closed_forms


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


def task_bounds(task: TaskConfig) -> tuple[float, float, float]:
    r"""$\big(\mathbb E[y^2],\ \mathbb E_f[\min_v \mathbb E_x (v^\top x - f(x))^2],\
    \mathbb E_f[\min_{v,b} \mathbb E_x (v^\top x + b - f(x))^2]\big)$, exact from the Gaussian
    moments: the zero predictor's loss, the bound for every LSA (Corollary 7 (cor-linear-bound))
    and the bound if the tokens carried a constant entry."""
    return closed_forms.null_loss(task), closed_forms.best_linear_loss(task), best_affine_loss(task)


def linearity_gaps(task: TaskConfig, depths: Sequence[int], num_prompts: int = 256, seed: int = 3,
                   attention_init_std: float = 0.2) -> tuple[dict[int, float], float]:
    r"""The relative gap of $\hat y(a x + b x') = a\,\hat y(x) + b\,\hat y(x')$
    (:func:`linearity_gap`), in float64 on ``num_prompts`` prompts of ``task`` (stream ``seed``),
    for an LSA of every depth $L$ in ``depths`` with random
    $P_\ell, Q_\ell$ (initial scale ``attention_init_std``, weights seed $L$), and for one GLU-LSA
    block (weights seed 0). Returns ``({L: gap}, glu_gap)``."""
    prompts = sample_prompts(task, batch_size=num_prompts, seed=seed, step=0, dtype=torch.float64)
    gaps = {}
    for depth in depths:
        random_lsa = build_model(ModelConfig(kind="lsa", depth=depth,
                                             attention_init_std=attention_init_std),
                                 task, seed=depth, dtype=torch.float64)
        gaps[depth] = linearity_gap(random_lsa, prompts)
    glu_block = build_model(ModelConfig(kind="glu-lsa"), task, seed=0, dtype=torch.float64)
    return gaps, linearity_gap(glu_block, prompts)


def steepest_direction(task: TaskConfig, prompts: Prompts) -> np.ndarray:
    r"""Unit eigenvector of the first prompt's quadratic form $B$ with the largest $|$eigenvalue$|$:
    $u^\top B u = \sum_{|\alpha| = 2} \beta_\alpha\, u^\alpha$, $B$ symmetric (a cross monomial
    $x_j x_k$ puts half its coefficient at $(j, k)$ and half at $(k, j)$)."""
    exps = task.target_features.exponents
    beta = prompts.coefficients[0].double().numpy()
    d = task.input_dim
    form = np.zeros((d, d))
    for coefficient, alpha in zip(beta, exps, strict=True):
        if alpha.sum() != 2:
            continue
        j, k = np.flatnonzero(alpha)[0], np.flatnonzero(alpha)[-1]
        form[j, k] += coefficient / (1 if j == k else 2)
        form[k, j] = form[j, k]
    values, vectors = np.linalg.eigh(form)
    return vectors[:, np.argmax(np.abs(values))]


def probe_direction(task: TaskConfig, prompts: Prompts) -> np.ndarray:
    r"""The direction $u$ of the line probe: for a task of degree 2 only, where the prompt's
    quadratic bends most (:func:`steepest_direction`); otherwise its linear part,
    $u = \beta_{\text{lin}} / \|\beta_{\text{lin}}\|$ (the degree-1 monomials come first)."""
    if task.kind != "poly" or task.degree != 2:
        raise ConfigError("task", (task.kind, getattr(task, "degree", None)), "a polynomial task of degree 2")
    if task.homogeneous:
        return steepest_direction(task, prompts)
    linear = prompts.coefficients[0, :task.input_dim].double().numpy()
    return linear / np.linalg.norm(linear)


def line_probes(models: Mapping[int, InContextRegressor], task: TaskConfig, prompts: Prompts,
                offsets: ArrayLike) -> dict[int, LineProbe]:
    r"""Each model's predictions along $x(t) = t\,u$, $t$ in ``offsets``, for the first prompt's
    context, with the target $f(x(t))$ and the best linear predictor $v^{*\top} x(t)$
    (:func:`line_probe`; $u$ from :func:`probe_direction`).
    ``models`` maps a key (the depth) to a model; the result has the same keys."""
    direction = probe_direction(task, prompts)
    origin = np.zeros(task.input_dim)
    return {key: line_probe(model, task, prompts, origin, direction, offsets)
            for key, model in models.items()}


def slope_ratio(probe: LineProbe) -> float:
    r"""$\frac{\hat y(t_{\max}) - \hat y(t_{\min})}{\ell(t_{\max}) - \ell(t_{\min})}$: the slope of the
    predictions over that of the best linear predictor $\ell(t) = v^{*\top} x(t)$ (undefined where the
    best linear predictor is 0, as for a pure quadratic)."""
    rise = probe.best_linear[-1] - probe.best_linear[0]
    if rise == 0:
        raise ConfigError("probe", "best linear predictor flat", "a probe whose best linear predictor moves")
    return float((probe.predictions[-1] - probe.predictions[0]) / rise)


@dataclass(frozen=True)
class DiagnosticPrompts:
    r"""Prompts of the diagnosis: ``prompts``, their query labels (float64), the zero predictor's
    mean loss $\frac1N\sum y_{n+1}^2$ on them (``zero_loss``) and the mask of the prompts whose
    context energy $\frac1n\sum_{i\le n} y_i^2$ is in the top ``1 - quantile`` (``largest``)."""

    prompts: Prompts
    labels: torch.Tensor
    zero_loss: float
    largest: torch.Tensor

    def labels_times(self, scale: float) -> torch.Tensor:
        """The embedded prompts with every context label multiplied by ``scale``."""
        p = self.prompts
        return Prompts(p.x, scale * p.y, p.coefficients).embed()


def diagnostic_prompts(task: TaskConfig, num_prompts: int = 50_000, seed: int = 0,
                       quantile: float = 0.99) -> DiagnosticPrompts:
    """``num_prompts`` prompts of the stream ``STREAM_OTHER`` of ``seed`` (not the training or test
    prompts), with their largest-context-label share above ``quantile``."""
    if not 0 < quantile < 1:
        raise ConfigError("quantile", quantile, "a number strictly between 0 and 1")
    prompts = sample_prompts(task, num_prompts, seed=seed, step=0, stream=STREAM_OTHER)
    labels = prompts.query_label.double()
    n = prompts.context_length
    context_energy = (prompts.y[:, :n].double() ** 2).mean(dim=1)
    largest = context_energy >= torch.quantile(context_energy, quantile)
    return DiagnosticPrompts(prompts, labels, float((labels**2).mean()), largest)


@dataclass(frozen=True)
class LabelDiagnosis:
    r"""How a model's squared errors $e = (\hat y - y_{n+1})^2 / \frac1N\sum y_{n+1}^2$ spread over
    the diagnostic prompts: ``mean``, ``median``, ``share`` (of the mean carried by the worst 0.1%),
    ``largest`` and ``rest`` (mean on the prompts with the largest context labels, and on the
    others), ``superlinear`` (median of $|p(2y) - 2p(y) + p(0)| / |p(y)|$, $p(c\,y)$ the prediction
    with the context labels times $c$: a polynomial in $c$, so this is its part of degree two or
    more in the labels) and ``training`` (largest batch loss / $\mathbb E[y^2]$ at the end of
    training)."""

    mean: float
    median: float
    share: float
    largest: float
    rest: float
    superlinear: float
    training: float


@torch.no_grad()
def label_diagnosis(model: InContextRegressor, diagnostic: DiagnosticPrompts, loss_history: ArrayLike,
                    null_loss: float, last_steps: int = 100) -> LabelDiagnosis:
    r""":class:`LabelDiagnosis` of ``model``; ``training`` over the last ``last_steps`` steps of
    ``loss_history``, relative to ``null_loss`` $= \mathbb E[y^2]$."""
    at = {c: model(diagnostic.labels_times(c)).double() for c in (0.0, 1.0, 2.0)}
    errors = (at[1.0] - diagnostic.labels) ** 2 / diagnostic.zero_loss
    worst = torch.topk(errors, len(errors) // 1000).values
    superlinear = (at[2.0] - 2 * at[1.0] + at[0.0]).abs() / (
        at[1.0].abs().clamp_min(torch.finfo(torch.float32).tiny))
    history = np.asarray(loss_history)[-last_steps:] / null_loss
    largest = diagnostic.largest
    return LabelDiagnosis(
        mean=float(errors.mean()), median=float(errors.median()),
        share=float(worst.sum() / errors.sum()), largest=float(errors[largest].mean()),
        rest=float(errors[~largest].mean()), superlinear=float(superlinear.median()),
        training=float(history.max()))


def one_step_curve(task: TaskConfig, context_lengths: Sequence[int]) -> np.ndarray:
    r"""$\mathcal L^*(n) / \mathbb E[y^2]$ of the best single step of linear GD ($\psi = x$,
    Theorem 9 (thm-feature-optimum)) at every $n$ in ``context_lengths``, exact; it tends to the
    best linear predictor's loss as $n \to \infty$."""
    x_features = closed_forms.kernel_features(task.input_dim, 1)  # psi = x
    return closed_forms.one_step_gd_optimum_curve(
        task.target_features, x_features, context_lengths) / closed_forms.null_loss(task)
