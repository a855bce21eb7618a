"""Chapter 2's bounds for attention alone: Corollary 7 (cor-linear-bound) and its assumptions.

Exact float64 closed forms: the best linear and the best affine predictor (tokens without and
with a constant entry), and the finite-$n$ reference behind the gap between the bound and the
trained models, the best one step of linear GD (Theorem 9 (thm-feature-optimum) with
$\\psi = x$). Plus one Monte Carlo check that the exact affine bound is what least squares on
$(1; x)$ approaches for one target.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.monomials import PolyMap, mean, second_moment
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.linearity import best_affine_loss, best_predictor_loss, normalised_bounds

PURE = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, homogeneous=True)
MIXED = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)


def test_affine_bound_of_the_pure_quadratic_task_is_three_quarters():
    # E[y^2] = 3 E[x_j^4] + 3 E[x_j^2 x_k^2] = 12; a constant explains the squares' means, 3
    assert closed_forms.null_loss(PURE) == 12.0
    assert closed_forms.best_linear_loss(PURE) == 12.0
    assert best_affine_loss(PURE) == 9.0
    assert best_affine_loss(PURE) / closed_forms.null_loss(PURE) == 0.75
    assert normalised_bounds(PURE) == {"linear": 1.0, "affine": 0.75}
    # linear + quadratic: x explains the linear part (3 of 15), the constant 3 more
    assert normalised_bounds(MIXED) == {"linear": 0.8, "affine": 0.6}


@pytest.mark.parametrize("input_dim", [1, 2, 3, 5])
def test_pure_quadratic_bounds_in_closed_form(input_dim):
    d = input_dim
    task = TaskConfig(kind="poly", input_dim=d, context_length=20, degree=2, homogeneous=True)
    energy = 3 * d + d * (d - 1) // 2  # E[x_j^4] = 3, E[x_j^2 x_k^2] = 1
    assert closed_forms.null_loss(task) == energy
    assert closed_forms.best_linear_loss(task) == energy  # E[x f(x)] = 0: odd moments
    assert best_affine_loss(task) == pytest.approx(energy - d, rel=1e-14)  # means of x_j^2


@pytest.mark.parametrize("task, equal", [
    (PURE, False),
    (MIXED, False),
    (TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3), False),
    (TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3, homogeneous=True), True),
    (TaskConfig(kind="poly", input_dim=4, context_length=20, degree=1), True),
    (TaskConfig(kind="linear", input_dim=5, context_length=20), True),
    (TaskConfig(kind="linear", input_dim=5, context_length=20, noise_std=0.5), True),
])
def test_affine_bound_is_at_most_the_linear_bound(task, equal):
    """Equal for odd and linear targets (mean zero), strictly lower once targets have a mean."""
    linear, affine = closed_forms.best_linear_loss(task), best_affine_loss(task)
    assert affine <= linear + 1e-12 * max(1.0, linear)
    if equal:
        assert affine == pytest.approx(linear, rel=1e-12, abs=1e-12)
    else:
        # the gap is exactly the mean energy E_beta[(E_x f)^2] = |E[phi]|^2
        gap = float(np.sum(mean(task.target_features) ** 2))
        assert gap > 0
        assert linear - affine == pytest.approx(gap, rel=1e-12)


@pytest.mark.parametrize("task", [PURE, MIXED,
                                  TaskConfig(kind="poly", input_dim=2, context_length=9, degree=3)])
def test_best_predictor_on_x_is_the_linear_bound(task):
    linear = PolyMap.monomials(task.input_dim, [1])
    assert best_predictor_loss(task, linear) == pytest.approx(closed_forms.best_linear_loss(task),
                                                              rel=1e-13)
    # redundant features change nothing (pseudo-inverse)
    doubled = linear.concat(linear)
    assert best_predictor_loss(task, doubled) == pytest.approx(closed_forms.best_linear_loss(task),
                                                               rel=1e-12)


def test_bounds_refuse_what_they_do_not_cover():
    skewed = TaskConfig(kind="linear", input_dim=2, context_length=5, covariance=((2.0, 0.3), (0.3, 1.0)))
    with pytest.raises(ConfigError):
        best_affine_loss(skewed)
    with pytest.raises(ConfigError):
        best_predictor_loss(PURE, PolyMap.monomials(2, [1]))


def test_affine_fit_of_one_target_matches_monte_carlo():
    """For one drawn target, least squares on (1; x) over many x reaches the exact inner minimum
    beta^T (S - C^T T^-1 C) beta whose mean over beta is :func:`best_affine_loss`."""
    gen = torch.Generator().manual_seed(0)
    beta = torch.randn(MIXED.target_features.num_outputs, generator=gen, dtype=torch.float64)
    x = torch.randn(400_000, 3, generator=gen, dtype=torch.float64)
    f = MIXED.target_features(x) @ beta
    design = torch.cat([torch.ones(len(x), 1, dtype=torch.float64), x], dim=1)
    solution = torch.linalg.lstsq(design, f.unsqueeze(1)).solution
    residual = float(((design @ solution).squeeze(1) - f).pow(2).mean())
    # exact inner minimum for this beta: the energy of the non-affine part of f
    phi = MIXED.target_features
    psi = PolyMap.monomials(3, [0, 1])
    s, c = second_moment(phi), second_moment(psi, phi)
    b = beta.numpy()
    exact = float(b @ (s - c.T @ np.linalg.solve(second_moment(psi), c)) @ b)
    assert residual == pytest.approx(exact, rel=0.02)


def test_finite_n_one_step_reference_is_above_the_bound():
    """At n = 20 the best one step of linear GD is exact and far above the n -> infinity bound.

    For the linear + quadratic task, psi = x: T = C C^T = I and E[|phi|^2 x x^T] = 33 I, so
    B = (n + 32)/n I, Gamma* = n/(n + 32) I and L*(n) = 15 - 3n/(n + 32) = 12 + 96/(n + 32):
    above the bound 12 by 96/(n + 32) at every n, and equal to it only as n -> infinity.
    """
    x = PolyMap.monomials(3, [1])
    one_step = closed_forms.one_step_gd_optimum(MIXED.target_features, x, 20)
    assert one_step.loss == pytest.approx(closed_forms.linear_gd_optimum(MIXED).loss, rel=1e-14)
    assert one_step.loss == pytest.approx(15 - 3 * 20 / 52, rel=1e-14)
    assert one_step.normalised_loss == pytest.approx(12 / 13, rel=1e-14)
    assert np.allclose(one_step.gamma, 20 / 52 * np.eye(3), rtol=1e-14, atol=0)
    bound = closed_forms.best_linear_loss(MIXED)
    assert one_step.loss > bound
    lengths = [1, 5, 20, 100, 1000, 10**6]
    curve = closed_forms.one_step_gd_optimum_curve(MIXED.target_features, x, lengths)
    assert np.allclose(curve, [12 + 96 / (n + 32) for n in lengths], rtol=1e-13, atol=0)
    assert np.all(np.diff(curve) < 0) and np.all(curve > bound)
    # pure quadratic: x is uncorrelated with every target, the best step is 0 at every n
    pure = closed_forms.one_step_gd_optimum(PURE.target_features, x, 20)
    assert np.array_equal(pure.gamma, np.zeros((3, 3)))
    assert pure.normalised_loss == 1.0
