r"""Baselines with a tuned penalty: ridge on $x$ and kernel ridge regression with a polynomial kernel.

**Kernel ridge through its features.** The polynomial kernel $k(x, x') = (c + x^\top x')^k$
expands by the multinomial theorem into
$\sum_{a_0 + |\alpha| = k} \frac{k!}{a_0!\,\alpha!}\, c^{a_0}\, x^\alpha x'^\alpha$, so
$k(x, x') = \psi_c(x)^\top \psi_c(x')$ with the weighted monomials
$\psi_c(x) = \big(\sqrt{k!\,c^{k-|\alpha|} / ((k-|\alpha|)!\,\alpha!)}\; x^\alpha\big)_{|\alpha| \le k}$
(:func:`polynomial_kernel_features`). Kernel ridge regression,
$\hat y = k_{n+1}^\top (K + n\lambda I)^{-1} y$, then equals ridge regression on $\psi_c$,
$\hat y = \psi_c(x_{n+1})^\top (\Psi^\top\Psi + n\lambda I)^{-1}\Psi^\top y$ (the push-through
identity), a $p \times p$ solve instead of an $n \times n$ one.

**An honest penalty.** :func:`tuned_ridge` picks $\lambda$ from a grid by the loss on a
*validation* stream of prompts (never the test stream), then reports the test loss of that
$\lambda$ on the test stream, with its Monte Carlo error. One eigendecomposition per prompt
serves the whole grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import factorial

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_float, check_int
from nlicl_lib.core.monomials import PolyMap, monomial_exponents, monomial_name
from nlicl_lib.core.seeding import STREAM_OTHER
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.training.evaluate import LossEstimate, test_loss

#: The default grid of ridge penalties $\lambda$ (the solve uses $n\lambda$).
DEFAULT_PENALTIES = tuple(float(v) for v in np.logspace(-5, 2, 15))


def polynomial_kernel_features(input_dim: int, degree: int, offset: float = 1.0) -> PolyMap:
    r"""$\psi_c$ with $\psi_c(x)^\top \psi_c(x') = (c + x^\top x')^k$: every monomial of degree
    $0..k$ with weight $\sqrt{k!\,c^{k-|\alpha|}/((k-|\alpha|)!\,\alpha!)}$ (see the module doc).
    ``offset`` $c \ge 0$ (with $c = 0$ only degree $k$ remains)."""
    d = check_int("d", input_dim, minimum=1)
    k = check_int("degree", degree, minimum=1)
    c = check_float("offset", offset, minimum=0.0)
    degrees = [k] if c == 0 else list(range(k + 1))
    exps = monomial_exponents(d, degrees)
    weights = []
    for alpha in exps:
        rest = k - int(alpha.sum())
        multinomial = factorial(k) / (factorial(rest) * np.prod([factorial(int(a)) for a in alpha]))
        weights.append(np.sqrt(multinomial * c**rest))
    return PolyMap(exps, np.diag(weights), tuple(monomial_name(a) for a in exps))


def ridge_path(prompts: Prompts, penalties: Sequence[float], features: PolyMap | None = None
               ) -> torch.Tensor:
    r"""Ridge predictions for every $\lambda$ in ``penalties`` at once:
    $\hat y_\lambda = \psi_{n+1}^\top U (\Lambda + n\lambda)^{-1} U^\top \Psi^\top y$ with
    $\Psi^\top\Psi = U\Lambda U^\top$. Returns ``(len(penalties), B)``; equal to
    :func:`~nlicl_lib.theory.predictors.ridge` for each $\lambda > 0$ (the tests check it)."""
    n = prompts.context_length
    if features is not None and features.input_dim != prompts.x.shape[-1]:
        raise ConfigError("features.input_dim", features.input_dim,
                          f"the prompts' input dimension d = {prompts.x.shape[-1]}")
    psi = prompts.x if features is None else features(prompts.x)
    context, query = psi[:, :n], psi[:, n]
    gram = context.transpose(1, 2) @ context
    values, vectors = torch.linalg.eigh(gram)
    rhs = torch.einsum("bif,bi->bf", context, prompts.y[:, :n])
    rotated_rhs = torch.einsum("bfg,bf->bg", vectors, rhs)
    rotated_query = torch.einsum("bfg,bf->bg", vectors, query)
    lam = torch.as_tensor(list(penalties), dtype=psi.dtype, device=psi.device)
    scale = 1.0 / (values.unsqueeze(0) + n * lam[:, None, None])  # (L, B, p)
    return torch.einsum("bg,lbg,bg->lb", rotated_query, scale, rotated_rhs)


@dataclass(frozen=True)
class TunedRidge:
    """The chosen ``penalty``, the validation loss of every penalty tried, and the test loss
    (:class:`~nlicl_lib.training.evaluate.LossEstimate`, on the same test prompts as the trained models)."""

    penalty: float
    penalties: tuple[float, ...]
    validation_losses: tuple[float, ...]
    test: LossEstimate
    features: str


def tuned_ridge(task: TaskConfig, features: PolyMap | None = None,
                penalties: Sequence[float] = DEFAULT_PENALTIES, seed: int = 0,
                validation_prompts: int = 20000, test_prompts: int = 100_000,
                device: torch.device | str = "cpu", dtype: torch.dtype = torch.float64,
                name: str | None = None, batch_size: int = 4000) -> TunedRidge:
    r"""Ridge on ``features`` (default $x$) with $\lambda$ chosen on the validation stream.

    ``validation_prompts`` prompts of stream ``STREAM_OTHER`` pick $\lambda$; the test loss is
    then measured on the first ``test_prompts`` prompts of the test stream
    (:func:`~nlicl_lib.training.evaluate.test_loss`), in batches of ``batch_size`` prompts: keep
    its default to measure on the same prompts as ``test_loss`` does by default."""
    penalties = tuple(check_float("penalty", p, minimum=0.0, strict_minimum=True) for p in penalties)
    if not penalties:
        raise ConfigError("penalties", penalties, "at least one penalty")
    count = check_int("validation_prompts", validation_prompts, minimum=1)
    total = torch.zeros(len(penalties), dtype=torch.float64)
    done, step = 0, 0
    while done < count:
        size = min(batch_size, count - done)
        prompts = sample_prompts(task, size, seed, step, device, STREAM_OTHER, dtype)
        path = ridge_path(prompts, penalties, features)
        total += ((path - prompts.query_label) ** 2).double().sum(dim=1).cpu()
        done += size
        step += 1
    losses = (total / count).numpy()
    best = float(penalties[int(np.argmin(losses))])

    def predict(prompts: Prompts) -> torch.Tensor:
        return ridge_path(prompts, [best], features)[0]

    test = test_loss(predict, task, test_prompts, seed=seed, device=device, batch_size=batch_size,
                     dtype=dtype)
    label = name or ("x" if features is None else f"{features.num_outputs} features")
    return TunedRidge(best, penalties, tuple(float(v) for v in losses), test, label)


def tuned_kernel_ridge(task: TaskConfig, degree: int | None = None, offset: float = 1.0,
                       **kwargs) -> TunedRidge:
    r"""Kernel ridge regression with $k(x, x') = (c + x^\top x')^k$, $k$ the task's degree by
    default, penalty tuned on the validation stream (:func:`tuned_ridge`)."""
    degree = task.degree if degree is None else degree
    features = polynomial_kernel_features(task.input_dim, degree, offset)
    return tuned_ridge(task, features, name=f"kernel (c + x.x')^{degree}, c={offset:g}", **kwargs)
