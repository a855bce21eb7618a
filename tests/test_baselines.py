r"""The tuned baselines of :mod:`nlicl_lib.experiments.baselines`: ridge on $x$ and kernel ridge
with $k(x, x') = (c + x^\top x')^k$ through its features $\psi_c$, exactly, in float64."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
import torch

from nlicl_lib.core.device import use_threads
from nlicl_lib.core.seeding import STREAM_OTHER
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.experiments.baselines import (
    DEFAULT_PENALTIES,
    polynomial_kernel_features,
    ridge_path,
    tuned_kernel_ridge,
    tuned_ridge,
)
from nlicl_lib.training.evaluate import test_loss

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LINEAR = TaskConfig(kind="linear", input_dim=3, context_length=10)
QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
NOISY = TaskConfig(kind="linear", input_dim=3, context_length=10, noise_std=1.0)
SMALL = {"validation_prompts": 3000, "test_prompts": 2000, "batch_size": 1000}


def _prompts(task: TaskConfig, batch: int = 200, step: int = 0):
    return sample_prompts(task, batch, 0, step, stream=STREAM_OTHER, dtype=torch.float64)


@pytest.mark.parametrize(("d", "k", "c"), [(1, 3, 1.0), (3, 2, 1.0), (2, 4, 0.5), (3, 3, 2.0),
                                           (3, 2, 0.0), (2, 3, 0.0)])
def test_kernel_features_reproduce_the_kernel(d, k, c):
    r"""$\psi_c(x)^\top\psi_c(x') = (c + x^\top x')^k$ at random points (float64)."""
    psi = polynomial_kernel_features(d, k, c)
    x = torch.randn(50, d, dtype=torch.float64, generator=torch.Generator().manual_seed(d + k))
    features = psi(x)
    assert torch.allclose(features @ features.T, (c + x @ x.T) ** k, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("d", "k", "c"), [(3, 2, 1.0), (2, 4, 3.0), (3, 3, 0.0)])
def test_kernel_features_span_the_right_monomials(d, k, c):
    """Every monomial of degree 0..k once (only degree k when c = 0), one weight per monomial,
    and the weight of x^alpha is sqrt(k! c^(k-|alpha|) / ((k-|alpha|)! alpha!))."""
    psi = polynomial_kernel_features(d, k, c)
    degrees = psi.exponents.sum(axis=1)
    expected = [k] if c == 0 else list(range(k + 1))
    assert sorted(set(degrees.tolist())) == expected
    assert psi.num_outputs == sum(comb(d + j - 1, j) for j in expected)
    assert len({tuple(a) for a in psi.exponents.tolist()}) == psi.num_outputs
    assert np.count_nonzero(psi.coefficients - np.diag(np.diag(psi.coefficients))) == 0
    weights = np.diag(psi.coefficients)
    assert np.all(weights > 0)
    # x1^k has weight c^0 = 1 ... and the constant sqrt(c^k)
    pure = [j for j, a in enumerate(psi.exponents) if a[0] == k]
    assert weights[pure[0]] == pytest.approx(1.0, rel=1e-15)
    if c > 0:
        constant = [j for j, a in enumerate(psi.exponents) if a.sum() == 0]
        assert weights[constant[0]] == pytest.approx(c ** (k / 2), rel=1e-14)


def test_tiny_penalty_recovers_a_noise_free_linear_task():
    """n = 10 >= d = 3, no noise: lambda -> 0 is least squares, which finds w exactly."""
    prompts = _prompts(LINEAR)
    path = ridge_path(prompts, [1e-12])
    assert torch.allclose(path[0], prompts.query_label, rtol=0, atol=1e-8)
    # a larger penalty shrinks: it no longer interpolates
    assert (ridge_path(prompts, [1.0])[0] - prompts.query_label).abs().max() > 0.1


def test_kernel_ridge_with_tiny_penalty_recovers_a_quadratic_task():
    """n = 20 >= p = 10 features of degree <= 2: the task is in their span."""
    prompts = _prompts(QUADRATIC)
    path = ridge_path(prompts, [1e-12], polynomial_kernel_features(3, 2))
    assert torch.allclose(path[0], prompts.query_label, rtol=0, atol=1e-6)


@pytest.mark.parametrize("features", [None, polynomial_kernel_features(3, 2, 0.5)])
def test_ridge_path_is_the_ridge_solve_for_every_penalty(features):
    prompts = _prompts(NOISY if features is None else QUADRATIC, batch=50)
    penalties = [1e-3, 0.1, 1.0, 30.0]
    path = ridge_path(prompts, penalties, features)
    assert path.shape == (len(penalties), 50) and path.dtype == torch.float64
    n = prompts.context_length
    psi = prompts.x if features is None else features(prompts.x)
    context, query = psi[:, :n], psi[:, n]
    gram = context.transpose(1, 2) @ context
    rhs = torch.einsum("bif,bi->bf", context, prompts.y[:, :n])
    eye = torch.eye(psi.shape[-1], dtype=torch.float64)
    for row, lam in zip(path, penalties, strict=True):
        theta = torch.linalg.solve(gram + n * lam * eye, rhs.unsqueeze(-1)).squeeze(-1)
        assert torch.allclose(row, (query * theta).sum(-1), rtol=1e-10, atol=1e-12)


def test_kernel_ridge_through_features_is_kernel_ridge():
    r"""Push-through: ridge on $\psi_c$ equals $k_{n+1}^\top (K + n\lambda I)^{-1} y$ with the
    $n \times n$ kernel matrix, here with n = 8 < p = 20 (d = 3, k = 3)."""
    task = TaskConfig(kind="poly", input_dim=3, context_length=8, degree=3, noise_std=0.3)
    prompts = _prompts(task, batch=40)
    c, lam, n = 1.5, 0.05, 8
    path = ridge_path(prompts, [lam], polynomial_kernel_features(3, 3, c))[0]
    x = prompts.x
    kernel = (c + x @ x.transpose(1, 2)) ** 3  # (B, n + 1, n + 1)
    alpha = torch.linalg.solve(kernel[:, :n, :n] + n * lam * torch.eye(n, dtype=torch.float64),
                               prompts.y[:, :n].unsqueeze(-1)).squeeze(-1)
    direct = (kernel[:, n, :n] * alpha).sum(-1)
    assert torch.allclose(path, direct, rtol=1e-8, atol=1e-10)


@pytest.fixture(scope="module")
def tuned_noisy():
    with use_threads(1):
        return tuned_ridge(NOISY, **SMALL)


def test_the_tuned_penalty_is_the_grid_minimiser_on_the_validation_prompts(tuned_noisy):
    result = tuned_noisy
    assert result.penalties == DEFAULT_PENALTIES and result.features == "x"
    # recompute every validation loss from the validation stream (STREAM_OTHER, batches of 1000)
    total = np.zeros(len(DEFAULT_PENALTIES))
    for step in range(3):
        prompts = sample_prompts(NOISY, 1000, 0, step, stream=STREAM_OTHER, dtype=torch.float64)
        path = ridge_path(prompts, DEFAULT_PENALTIES)
        total += ((path - prompts.query_label) ** 2).sum(dim=1).numpy()
    assert np.allclose(result.validation_losses, total / 3000, rtol=1e-12, atol=0)
    assert result.penalty == DEFAULT_PENALTIES[int(np.argmin(total))]
    # noise sigma = 1 at n = 10: neither end of the grid is best
    assert DEFAULT_PENALTIES[0] < result.penalty < DEFAULT_PENALTIES[-1]


def test_the_test_loss_is_that_of_the_chosen_penalty_on_the_test_prompts(tuned_noisy):
    result = tuned_noisy
    test = test_loss(lambda p: ridge_path(p, [result.penalty])[0], NOISY, 2000,
                            batch_size=1000, dtype=torch.float64)
    assert result.test == test
    assert result.test.num_prompts == 2000
    # the test prompts are not the validation prompts: tuned on one stream, measured on another
    validation = result.validation_losses[DEFAULT_PENALTIES.index(result.penalty)]
    assert result.test.mean != pytest.approx(validation, rel=1e-6)


def test_tuned_kernel_ridge_solves_a_noise_free_quadratic_task():
    result = tuned_kernel_ridge(QUADRATIC, **SMALL)
    assert result.features == "kernel (c + x.x')^2, c=1"
    assert result.penalty == DEFAULT_PENALTIES[0]  # no noise: the smallest penalty wins
    assert list(result.validation_losses) == sorted(result.validation_losses)
    assert result.test.normalised < 1e-3
    # ridge on x alone stays near the best linear predictor's loss (12 / 15 of E[y^2])
    linear = tuned_ridge(QUADRATIC, **SMALL)
    assert linear.test.normalised > 0.75


