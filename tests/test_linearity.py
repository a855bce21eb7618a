"""Chapter 2 (nlicl_lib.theory.linearity): attention alone is linear in the query, so no LSA
beats the best linear predictor (Corollary 7); the exact bounds and the probes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap, mean, second_moment
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.theory import closed_forms, linearity
from nlicl_lib.theory.constructions import gd_lsa

PURE = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, homogeneous=True)
MIXED = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
PURE2 = TaskConfig(kind="poly", input_dim=2, context_length=10, degree=2, homogeneous=True)
MIXED2 = TaskConfig(kind="poly", input_dim=2, context_length=10, degree=2)


def test_bounds_are_the_exact_moments():
    # d = 3: E[y^2] = 3 E[x_j^4] + 3 E[x_j^2 x_k^2] = 12; a constant explains the squares' means, 3
    assert linearity.task_bounds(PURE) == (12.0, 12.0, 9.0)
    # linear + quadratic: x explains the linear part (3 of 15), the constant 3 more
    assert linearity.task_bounds(MIXED) == (15.0, 12.0, 9.0)
    # d = 2: E[y^2] = 2 (linear) + 2 * 3 (squares) + 1 (cross)
    assert linearity.task_bounds(MIXED2) == (9.0, 7.0, 5.0)


@pytest.mark.parametrize("task, equal", [
    (PURE, False),
    (MIXED, False),
    (TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3), False),
    (TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3, homogeneous=True), True),
    (TaskConfig(kind="poly", input_dim=4, context_length=20, degree=1), True),
    (TaskConfig(kind="linear", input_dim=5, context_length=20, noise_std=0.5), True),
])
def test_affine_bound_is_at_most_the_linear_bound(task, equal):
    linear, affine = closed_forms.best_linear_loss(task), linearity.best_affine_loss(task)
    # the gap is exactly the mean energy E_beta[(E_x f)^2] = |E[phi]|^2
    gap = 0.0 if equal else float(np.sum(mean(task.target_features) ** 2))
    assert equal or gap > 0
    assert linear - affine == pytest.approx(gap, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("task", [PURE, MIXED,
                                  TaskConfig(kind="poly", input_dim=2, context_length=9, degree=3)])
def test_best_predictor_on_x_is_the_linear_bound(task):
    linear = PolyMap.monomials(task.input_dim, [1])
    bound = closed_forms.best_linear_loss(task)
    assert linearity.best_predictor_loss(task, linear) == pytest.approx(bound, rel=1e-13)
    # redundant features change nothing (pseudo-inverse)
    assert linearity.best_predictor_loss(task, linear.concat(linear)) == pytest.approx(bound, rel=1e-12)


def test_affine_fit_of_one_target_matches_monte_carlo():
    gen = torch.Generator().manual_seed(0)
    beta = torch.randn(MIXED.target_features.num_outputs, generator=gen, dtype=torch.float64)
    x = torch.randn(400_000, 3, generator=gen, dtype=torch.float64)
    f = MIXED.target_features(x) @ beta
    design = torch.cat([torch.ones(len(x), 1, dtype=torch.float64), x], dim=1)
    solution = torch.linalg.lstsq(design, f.unsqueeze(1)).solution
    residual = float(((design @ solution).squeeze(1) - f).pow(2).mean())
    phi, psi = MIXED.target_features, PolyMap.monomials(3, [0, 1])
    s, c = second_moment(phi), second_moment(psi, phi)
    b = beta.numpy()
    exact = float(b @ (s - c.T @ np.linalg.solve(second_moment(psi), c)) @ b)
    assert residual == pytest.approx(exact, rel=0.02)


def test_finite_n_one_step_reference_is_above_the_bound():
    """psi = x on the linear + quadratic task: L*(n) = 12 + 96/(n + 32), above the bound 12."""
    x = PolyMap.monomials(3, [1])
    one_step = closed_forms.one_step_gd_optimum(MIXED.target_features, x, 20)
    assert one_step.loss == pytest.approx(closed_forms.linear_gd_optimum(MIXED).loss, rel=1e-14)
    assert one_step.loss == pytest.approx(15 - 3 * 20 / 52, rel=1e-14)
    assert np.allclose(one_step.gamma, 20 / 52 * np.eye(3), rtol=1e-14, atol=0)
    lengths = [1, 5, 20, 100, 1000, 10**6]
    curve = linearity.one_step_curve(MIXED, lengths)
    assert np.allclose(curve, [(12 + 96 / (n + 32)) / 15 for n in lengths], rtol=1e-13, atol=0)
    assert np.all(np.diff(curve) < 0) and np.all(curve > 12 / 15)
    # pure quadratic: x is uncorrelated with every target, the best step is 0 at every n
    pure = closed_forms.one_step_gd_optimum(PURE.target_features, x, 20)
    assert np.array_equal(pure.gamma, np.zeros((3, 3))) and pure.normalised_loss == 1.0


def test_random_lsa_stacks_are_linear_in_the_query_and_a_glu_is_not():
    gaps, glu_gap = linearity.linearity_gaps(MIXED2, [1, 2, 3], num_prompts=64, seed=3)
    assert list(gaps) == [1, 2, 3] and max(gaps.values()) < 1e-12
    assert glu_gap > 1e-2


def test_probe_directions_follow_the_prompt_s_coefficients():
    exps = PURE2.target_features.exponents
    beta = torch.tensor([[{(2, 0): 1.0, (1, 1): 0.0, (0, 2): -3.0}[tuple(a)] for a in exps]])
    one = Prompts(torch.zeros(1, 11, 2), torch.zeros(1, 11), beta)
    assert np.abs(linearity.probe_direction(PURE2, one)) == pytest.approx([0.0, 1.0])  # |-3| > 1
    # x1 x2 alone: B = [[0, 1/2], [1/2, 0]], eigenvalues -1/2 and 1/2 along the diagonals
    cross = Prompts(one.x, one.y, torch.tensor([[0.0, 1.0, 0.0]]))
    assert np.abs(linearity.steepest_direction(PURE2, cross)) == pytest.approx([2**-0.5] * 2)
    mixed = Prompts(one.x, one.y, torch.tensor([[3.0, -4.0, 5.0, 6.0, 7.0]]))
    assert linearity.probe_direction(MIXED2, mixed) == pytest.approx([0.6, -0.8])


def test_line_probes_of_a_gd_stack_are_straight_and_follow_the_linear_part():
    prompts = sample_prompts(MIXED2, batch_size=1, seed=11, step=0, dtype=torch.float64)
    offsets = np.linspace(-2.5, 2.5, 41)
    probes = linearity.line_probes({1: gd_lsa(2, [0.5]), 2: gd_lsa(2, [0.5, 0.5])}, MIXED2,
                                   prompts, offsets)
    # the best linear predictor of y = beta^T (x; phi_2) is the linear part of beta
    direction = prompts.coefficients[0, :2].numpy()
    assert np.allclose(linearity.best_linear_weights(MIXED2, prompts.coefficients), direction)
    for probe in probes.values():
        assert probe.curvature < 1e-12
        assert np.allclose(probe.best_linear, offsets * np.linalg.norm(direction))
        second_difference = np.diff(probe.targets, 2)  # the target is a parabola
        assert np.allclose(second_difference, second_difference[0]) and abs(second_difference[0]) > 0
    assert np.isfinite(linearity.slope_ratio(probes[1]))
    line = linearity.LineProbe(offsets, 2 * offsets, offsets**2, 4 * offsets)
    assert linearity.slope_ratio(line) == 0.5


def test_label_diagnosis_finds_a_superlinear_part_only_outside_the_gd_form():
    diagnostic = linearity.diagnostic_prompts(MIXED2, 5000, seed=0, quantile=0.99)
    assert int(diagnostic.largest.sum()) == 50 and diagnostic.labels.dtype == torch.float64
    null = closed_forms.null_loss(MIXED2)
    history = np.linspace(20.0, 10.0, 30)
    gd = linearity.label_diagnosis(gd_lsa(2, [0.3, 0.3], dtype=torch.float32), diagnostic,
                                   history, null, last_steps=10)
    assert gd.superlinear < 1e-4  # linear in the labels up to float32 rounding
    assert gd.training == pytest.approx(history[-10] / null) and 0 < gd.share <= 1
    full = build_model(ModelConfig(kind="lsa", depth=2, attention_init_std=0.5), MIXED2, seed=1)
    assert linearity.label_diagnosis(full, diagnostic, history, null).superlinear > 1e-2
