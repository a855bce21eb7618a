r"""Chapter 2's analysis (no training): attention alone is linear in the query.

Whatever its depth and weights, an LSA predicts $\hat y = v(\text{context})^\top x_{n+1}$
(Theorem 6 (thm-query-linear)), so its loss is at least
$\mathbb E_f\big[\min_v \mathbb E_x (v^\top x - f(x))^2\big]$ (Corollary 7 (cor-linear-bound)).

- :func:`task_bounds`: $\mathbb E[y^2]$, the best linear and the best affine predictor's loss;
- :func:`linearity_gaps`: $\hat y(a x + b x') = a\,\hat y(x) + b\,\hat y(x')$ on random LSA stacks
  (exact up to rounding) and on one GLU-LSA block (broken);
- :func:`probe_direction`, :func:`line_probes`, :func:`slope_ratio`: the predictions along a line
  $x(t) = t\,u$ through query space against the target $f(t u) = t\,\beta_{\text{lin}}^\top u + t^2
  u^\top B u$;
- :func:`diagnostic_prompts`, :func:`label_diagnosis`: how deep full attention fails, through the
  part of its prediction of degree two or more in the context labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.seeding import STREAM_OTHER
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.theory import closed_forms, linearity
from nlicl_lib.theory.linearity import LineProbe


def task_bounds(task: TaskConfig) -> tuple[float, float, float]:
    r"""$\big(\mathbb E[y^2],\ \mathbb E_f[\min_v \mathbb E_x (v^\top x - f(x))^2],\
    \mathbb E_f[\min_{v,b} \mathbb E_x (v^\top x + b - f(x))^2]\big)$, exact from the Gaussian
    moments: the zero predictor's loss, the bound for every LSA (Corollary 7 (cor-linear-bound))
    and the bound if the tokens carried a constant entry."""
    return (closed_forms.null_loss(task), closed_forms.best_linear_loss(task),
            linearity.best_affine_loss(task))


def linearity_gaps(task: TaskConfig, depths: Sequence[int], num_prompts: int = 256, seed: int = 3,
                   attention_init_std: float = 0.2) -> tuple[dict[int, float], float]:
    r"""The relative gap of $\hat y(a x + b x') = a\,\hat y(x) + b\,\hat y(x')$
    (:func:`~nlicl_lib.theory.linearity.linearity_gap`), in float64 on ``num_prompts`` prompts of
    ``task`` (stream ``seed``), for an LSA of every depth $L$ in ``depths`` with random
    $P_\ell, Q_\ell$ (initial scale ``attention_init_std``, weights seed $L$), and for one GLU-LSA
    block (weights seed 0). Returns ``({L: gap}, glu_gap)``."""
    if not depths:
        raise ConfigError("depths", depths, "at least one depth")
    prompts = sample_prompts(task, batch_size=num_prompts, seed=seed, step=0, dtype=torch.float64)
    gaps = {}
    for depth in depths:
        random_lsa = build_model(ModelConfig(kind="lsa", depth=depth,
                                             attention_init_std=attention_init_std),
                                 task, seed=depth, dtype=torch.float64)
        gaps[depth] = linearity.linearity_gap(random_lsa, prompts)
    glu_block = build_model(ModelConfig(kind="glu-lsa"), task, seed=0, dtype=torch.float64)
    return gaps, linearity.linearity_gap(glu_block, prompts)


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
    (:func:`~nlicl_lib.theory.linearity.line_probe`; $u$ from :func:`probe_direction`).
    ``models`` maps a key (the depth) to a model; the result has the same keys."""
    direction = probe_direction(task, prompts)
    origin = np.zeros(task.input_dim)
    return {key: linearity.line_probe(model, task, prompts, origin, direction, offsets)
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
    num_prompts = check_int("num_prompts", num_prompts, minimum=2)
    if not 0 < quantile < 1:
        raise ConfigError("quantile", quantile, "a number strictly between 0 and 1")
    prompts = sample_prompts(task, num_prompts, seed=seed, step=0, stream=STREAM_OTHER)
    labels = prompts.query_label.double()
    n = prompts.context_length
    context_energy = (prompts.y[:, :n].double() ** 2).mean(dim=1)
    largest = context_energy >= torch.quantile(context_energy, quantile)
    return DiagnosticPrompts(prompts, labels, float((labels**2).mean()), largest)


@torch.no_grad()
def label_diagnosis(model: InContextRegressor, diagnostic: DiagnosticPrompts, loss_history: ArrayLike,
                    null_loss: float, last_steps: int = 100) -> dict[str, float]:
    r"""How a model's squared errors $e = (\hat y - y_{n+1})^2 / \frac1N\sum y_{n+1}^2$ spread over
    the diagnostic prompts: ``mean``, ``median``, ``share`` (of the mean carried by the worst 0.1%),
    ``largest`` and ``rest`` (mean on the prompts with the largest context labels, and on the
    others), ``superlinear`` (median of $|p(2y) - 2p(y) + p(0)| / |p(y)|$, $p(c\,y)$ the prediction
    with the context labels times $c$: a polynomial in $c$, so this is its part of degree two or
    more in the labels) and ``training`` (largest batch loss / ``null_loss`` $\mathbb E[y^2]$ in the
    last ``last_steps`` steps of ``loss_history``)."""
    last_steps = check_int("last_steps", last_steps, minimum=1)
    at = {c: model(diagnostic.labels_times(c)).double() for c in (0.0, 1.0, 2.0)}
    errors = (at[1.0] - diagnostic.labels) ** 2 / diagnostic.zero_loss
    worst = torch.topk(errors, len(errors) // 1000).values
    superlinear = (at[2.0] - 2 * at[1.0] + at[0.0]).abs() / (
        at[1.0].abs().clamp_min(torch.finfo(torch.float32).tiny))
    history = np.asarray(loss_history)[-last_steps:] / null_loss
    largest = diagnostic.largest
    return {
        "mean": float(errors.mean()), "median": float(errors.median()),
        "share": float(worst.sum() / errors.sum()),
        "largest": float(errors[largest].mean()),
        "rest": float(errors[~largest].mean()),
        "superlinear": float(superlinear.median()),
        "training": float(history.max())}


def one_step_curve(task: TaskConfig, context_lengths: Sequence[int]) -> np.ndarray:
    r"""$\mathcal L^*(n) / \mathbb E[y^2]$ of the best single step of linear GD ($\psi = x$,
    Theorem 9 (thm-feature-optimum)) at every $n$ in ``context_lengths``, exact; it tends to the
    best linear predictor's loss as $n \to \infty$."""
    x_features = closed_forms.kernel_features(task.input_dim, 1)  # psi = x
    return closed_forms.one_step_gd_optimum_curve(
        task.target_features, x_features, context_lengths) / closed_forms.null_loss(task)
