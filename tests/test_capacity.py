"""Chapter 4's theory (Proposition 12): what one block with m slots and width h can reach,
and the closed form of item 5 against moments computed here."""

import numpy as np
import pytest
import torch

from nlicl_lib.core.device import use_threads
from nlicl_lib.core.monomials import PolyMap, gaussian_moment, monomial_count, second_moment
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.capacity import (
    SLOT_DIRECTIONS,
    ExactBlockLoss,
    best_coordinate_subset,
    best_feature_subspace,
    degree_two_bound,
    one_block_references,
    slot_increments,
)
from nlicl_lib.theory.closed_forms import (
    linear_gd_optimum,
    one_step_gd_optimum,
    one_step_kernel_gd_optimum,
)

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
CHAPTER = [(3, 20), (4, 30), (5, 45)]  # chapter 4's (d, n)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _task(d: int, n: int, **kwargs) -> TaskConfig:
    return TaskConfig(kind="poly", input_dim=d, context_length=n, degree=2, **kwargs)


@pytest.fixture(scope="module")
def references():
    """Chapter 4's table: every size m = 0..6, h = 1..6 at d = 3, n = 20 (about 5 s)."""
    with use_threads(1):
        return one_block_references(QUADRATIC)


@pytest.mark.parametrize("task", [QUADRATIC, _task(3, 10, homogeneous=True, noise_std=0.5),
                                  TaskConfig(kind="poly", input_dim=2, context_length=15, degree=3)])
def test_differentiable_loss_equals_the_closed_form(task):
    loss = ExactBlockLoss(task)
    rng = np.random.default_rng(0)
    quadratics = PolyMap.monomials(task.input_dim, [2])
    for m in (1, 2, quadratics.num_outputs):
        coef = rng.standard_normal((m, quadratics.num_outputs))
        features = PolyMap.monomials(task.input_dim, [1]).concat(
            PolyMap(quadratics.exponents, coef))
        expected = one_step_gd_optimum(task.target_features, features, task.context_length,
                                       task.noise_std).loss
        assert float(loss(torch.as_tensor(coef))) == pytest.approx(expected, rel=1e-10)


def test_end_points_are_the_closed_forms(references):
    p2 = monomial_count(3, 2)
    linear = linear_gd_optimum(QUADRATIC).loss
    assert references.linear == pytest.approx(linear, rel=1e-12)
    assert best_coordinate_subset(QUADRATIC, 0).loss == pytest.approx(linear, rel=1e-12)
    kernel = one_step_kernel_gd_optimum(QUADRATIC).loss
    assert references.kernel == pytest.approx(kernel, rel=1e-12)
    assert best_feature_subspace(QUADRATIC, p2 + 2).loss == pytest.approx(kernel, rel=1e-12)
    assert references.units[p2].loss == pytest.approx(kernel, rel=1e-12)


def test_reference_curves_are_ordered_and_strictly_above_the_kernel_optimum(references):
    p2 = references.p2
    loss = ExactBlockLoss(QUADRATIC)
    rng = np.random.default_rng(1)
    for m in range(1, p2):
        subspace = references.subspace[m].loss
        coordinate = references.coordinate[m].loss
        glu = references.units[m].loss  # m units, p2 slots
        assert references.kernel < subspace <= coordinate + 1e-9
        assert subspace <= glu + 1e-9 and glu <= coordinate + 1e-9  # monomials are products
        assert subspace < references.subspace[m - 1].loss
        random = min(float(loss(torch.as_tensor(rng.standard_normal((m, p2)))))
                     for _ in range(20))
        assert subspace <= random
    # one slot: the best quadratic form (|x|^2-like) beats every monomial, and every product
    # (a^T x)(b^T x) of one GLU unit, which cannot be a definite form
    assert references.subspace[1].loss < references.units[1].loss - 0.5


def test_what_chapter_4_reads_off_its_table_of_best_spans(references):
    p2 = references.p2
    span = references.subspace
    monomials = {m: references.coordinate[m].loss for m in range(p2 + 1)}
    units = {h: references.units[h].loss for h in range(1, p2 + 1)}
    # the best single slot is |x|^2 = x1^2 + x2^2 + x3^2 (up to scale), and its loss is the
    # closed form of Theorem 9 (thm-feature-optimum) on psi = (x; |x|^2)
    quadratics = PolyMap.monomials(3, [2])
    norm = PolyMap(quadratics.exponents, np.array([[1.0, 0, 0, 1, 0, 1]]))
    closed = one_step_gd_optimum(QUADRATIC.target_features,
                                 PolyMap.monomials(3, [1]).concat(norm), 20).loss
    assert span[1].loss == pytest.approx(closed, rel=1e-9)
    found = span[1].features.coefficients[0]
    cosine = abs(found @ norm.coefficients[0]) / np.linalg.norm(found) / np.sqrt(3)
    assert cosine == pytest.approx(1.0, abs=1e-6)
    # every slot lowers the best loss, the first one most
    gains = [span[m - 1].loss - span[m].loss for m in range(1, p2 + 1)]
    assert min(gains) > 0 and gains[0] == max(gains)
    # one or two units do no better than one or two monomials (they cannot write |x|^2) ...
    for h in (1, 2):
        assert units[h] == pytest.approx(monomials[h], rel=1e-9)
        assert units[h] > span[h].loss * 1.04
    # ... and from three on, the best monomials and the best units reach the best span
    for m in range(3, p2 + 1):
        assert monomials[m] == pytest.approx(span[m].loss, rel=1e-9)
        assert units[m] == pytest.approx(span[m].loss, rel=1e-9)
    # one slot or unit short of p2 misses the full optimum by more than exercise 4.3's 2%
    assert min(span[p2 - 1].loss, units[p2 - 1]) > 1.02 * references.kernel


def test_degree_two_bound():
    """Item 4: zero for a quadratic target; for a cubic one the part orthogonal to x."""
    assert degree_two_bound(QUADRATIC) == pytest.approx(0.0, abs=1e-9)
    cubic_1d = TaskConfig(kind="poly", input_dim=1, context_length=20, degree=3)
    assert degree_two_bound(cubic_1d) == pytest.approx(6.0, rel=1e-12)
    cubic = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    cubes = PolyMap.monomials(3, [3])
    s33 = np.trace(second_moment(cubes))
    cx3 = second_moment(PolyMap.monomials(3, [1]), cubes)
    assert degree_two_bound(cubic) == pytest.approx(s33 - np.sum(cx3**2), rel=1e-12)
    for n in (5, 20, 1000):
        task = TaskConfig(kind="poly", input_dim=3, context_length=n, degree=3)
        kernel2 = one_step_kernel_gd_optimum(task, PolyMap.monomials(3, [1, 2])).loss
        assert degree_two_bound(cubic) < kernel2



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
    result = slot_increments(_task(d, n, noise_std=noise))
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
    result = slot_increments(task)
    p2 = monomial_count(task.input_dim, 2)
    assert result.losses.shape == (p2 + 1,)
    assert result.loss(0) == pytest.approx(linear_gd_optimum(task).loss, rel=1e-12)
    kernel = one_step_kernel_gd_optimum(task).loss
    assert result.loss(p2) == pytest.approx(kernel, rel=1e-12)
    assert result.loss(p2 + 3) == result.loss(p2)
    for m in range(1, min(p2, 3)):
        assert result.loss(m) == pytest.approx(best_feature_subspace(task, m).loss, rel=1e-9)


