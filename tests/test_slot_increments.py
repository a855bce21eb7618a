"""Proposition 12 (prop-capacity), item 5: the best loss of one block with r slots falls by one
eigenvalue of S_E^3 K_E^{-1} per slot (nlicl_lib.theory.capacity.slot_increments), checked
against moments computed here and against the library's other exact optima. The comparison with
the L-BFGS curve of every size at d = 3, 4, 5 is in tests/test_capacity_block.py."""

from __future__ import annotations

import numpy as np
import pytest

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.monomials import PolyMap, gaussian_moment, monomial_count
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.capacity import (
    SLOT_DIRECTIONS,
    best_feature_subspace,
    slot_increments,
)
from nlicl_lib.theory.closed_forms import linear_gd_optimum, one_step_kernel_gd_optimum

CHAPTER = [(3, 20), (4, 30), (5, 45)]  # chapter 4's (d, n)


def _task(d: int, n: int, **kwargs) -> TaskConfig:
    return TaskConfig(kind="poly", input_dim=d, context_length=n, degree=2, **kwargs)


def _weighted_moment(d: int, extra: tuple[int, ...]) -> float:
    """E[||phi||^2 x^extra], phi = every monomial of degree 1 and 2, summed monomial by
    monomial from Isserlis' formula (not through the library's moment matrices)."""
    phi = PolyMap.monomials(d, [1, 2])
    return float(sum(gaussian_moment(2 * alpha + np.array(extra)) for alpha in phi.exponents))


@pytest.mark.parametrize(("d", "n"), CHAPTER)
def test_the_cross_term_drops_are_equal_and_one_over_kappa_c(d, n):
    result = slot_increments(_task(d, n))
    p2 = monomial_count(d, 2)
    cross = result.increments[d:]
    assert cross.shape == (p2 - d,)
    assert np.ptp(cross) <= 1e-14 * cross[0]  # equal to float64 precision
    assert np.allclose(-np.diff(result.losses)[d:], cross, rtol=1e-12, atol=0)
    kappa_c = (n - 1) / n + _weighted_moment(d, (2, 2) + (0,) * (d - 2)) / n
    assert cross == pytest.approx(1 / kappa_c, rel=1e-13)
    assert result.groups["cross terms"][:2] == pytest.approx((1 / kappa_c, p2 - d), rel=1e-13)
    if d == 3:  # by hand: 7 + 33 + 15 = 55, kappa_c = 19/20 + 55/20, E[y^2] = 3 + 9 + 3
        assert _weighted_moment(3, (2, 2, 0)) == 55
        assert cross[0] / result.null_loss == pytest.approx(1 / 3.7 / 15, rel=1e-14)


@pytest.mark.parametrize(("d", "n"), CHAPTER)
def test_three_values_with_multiplicities_one_d_minus_one_and_the_cross_terms(d, n):
    result = slot_increments(_task(d, n))
    assert result.order == SLOT_DIRECTIONS  # |x|^2, then the contrasts, then the cross terms
    values = [result.groups[name][0] for name in SLOT_DIRECTIONS]
    assert values[0] > values[1] > values[2] > 0
    expected = np.repeat(values, [1, d - 1, monomial_count(d, 2) - d])
    assert result.increments == pytest.approx(expected, rel=1e-12)
    # s^3 / kappa with s = d + 2, 2, 1 the eigenvalues of S_E on those directions
    for name, s in zip(SLOT_DIRECTIONS, (d + 2, 2, 1), strict=True):
        increment, _, s_found, kappa = result.groups[name]
        assert s_found == pytest.approx(s, rel=1e-14)
        assert increment == pytest.approx(s**3 / kappa, rel=1e-14)


@pytest.mark.parametrize(("d", "n", "noise"), [(*CHAPTER[0], 0.0), (*CHAPTER[2], 0.0), (2, 7, 0.5)])
def test_the_moments_are_block_diagonal_and_commute_on_the_squares_and_cross_terms(d, n, noise):
    """The hypothesis of item 5: S and K have no entry between x and phi_2, and S_E, K_E
    commute, with |x|^2, a contrast of squares and a cross term as common eigenvectors."""
    task = _task(d, n, noise_std=noise)
    result = slot_increments(task)
    s_e, k_e = result.s_even, result.k_even
    commutator = s_e @ k_e - k_e @ s_e
    assert np.abs(commutator).max() <= 1e-13 * np.abs(s_e).max() * np.abs(k_e).max()
    # the library's S_E is the Gaussian moment matrix of the degree-2 monomials
    quadratics = PolyMap.monomials(d, [2]).exponents
    expected = np.array([[gaussian_moment(a + b) for b in quadratics] for a in quadratics])
    assert np.array_equal(s_e, expected)
    # K is block diagonal: E[||phi||^2 x_j x^alpha] is an odd moment for |alpha| = 2
    odd = [_weighted_moment(d, tuple(np.eye(d, dtype=int)[0] + a)) for a in quadratics]
    assert odd == [0.0] * len(odd)
    squares = quadratics.max(axis=1) == 2
    eye = np.eye(len(squares))
    directions = [squares / np.sqrt(d)]  # |x|^2
    if d > 1:
        first, second = np.flatnonzero(squares)[:2]
        directions += [(eye[first] - eye[second]) / np.sqrt(2),  # a contrast of two squares
                       eye[np.flatnonzero(~squares)[0]]]  # a cross term
    for v in directions:
        for matrix in (s_e, k_e):
            image = matrix @ v
            assert np.allclose(image, (v @ image) * v, rtol=0, atol=1e-12 * np.abs(matrix).max())


@pytest.mark.parametrize("task", [_task(3, 20), _task(2, 7, noise_std=0.5), _task(1, 5)])
def test_end_points_and_small_spans_are_the_other_optima(task):
    """l_0 is linear GD, l_p2 the kernel step (Theorem 9 (thm-feature-optimum)), and the
    closed form equals the L-BFGS search over spans at a few sizes."""
    result = slot_increments(task)
    p2 = monomial_count(task.input_dim, 2)
    assert result.losses.shape == (p2 + 1,)
    assert result.loss(0) == pytest.approx(linear_gd_optimum(task).loss, rel=1e-12)
    kernel = one_step_kernel_gd_optimum(task).loss
    assert result.loss(p2) == pytest.approx(kernel, rel=1e-12)
    assert result.loss(p2 + 3) == result.loss(p2)
    for m in range(1, min(p2, 3)):
        assert result.loss(m) == pytest.approx(best_feature_subspace(task, m).loss, rel=1e-9)


def test_bad_input_is_refused():
    with pytest.raises(ConfigError, match="task"):
        slot_increments(TaskConfig(kind="poly", input_dim=2, context_length=10, degree=3))
    with pytest.raises(ConfigError, match="homogeneous"):
        slot_increments(_task(2, 10, homogeneous=True))
    with pytest.raises(ConfigError, match="covariance"):
        slot_increments(_task(2, 10, covariance=((1.0, 0.0), (0.0, 2.0))))
    with pytest.raises(ConfigError, match="task"):
        slot_increments("d=3")
    with pytest.raises(ConfigError, match="slots"):
        slot_increments(_task(2, 10)).loss(-1)
