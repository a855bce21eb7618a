"""Chapter 3's statements on the one-step optimum (Theorem 9, Corollary 10, Propositions 8 and
11, Exercise 3.2), in float64 against exact rational computations where there are some."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from nlicl_lib.core.monomials import PolyMap, moment_matrix, squared_norm
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.pages.ch3 import context_length_grid
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.constructions import polynomial_kernel_gamma

PURE_QUADRATIC_2D = TaskConfig(kind="poly", input_dim=2, context_length=20, degree=2, homogeneous=True)
QUADRATIC_3D = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)  # chapter 3's task
CUBIC_3D = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)


# --- exact rational versions of the formulas (monomial moments are integers) -------------------

def _integer_matrix(values: np.ndarray) -> sympy.Matrix:
    rounded = np.rint(values)
    assert np.array_equal(rounded, values), "Gaussian moments of monomials are integers"
    return sympy.Matrix(rounded.astype(np.int64).tolist())


def _exact_moments(target: PolyMap, features: PolyMap, n: int):
    """T, C, tr S, B of Theorem 9 as rational matrices, for identity monomial maps."""
    assert target.num_outputs == target.exponents.shape[0]  # identity maps: moments are integers
    t = _integer_matrix(moment_matrix(features.exponents, features.exponents))
    c = _integer_matrix(moment_matrix(features.exponents, target.exponents))
    trace_s = sum(_integer_matrix(moment_matrix(target.exponents, target.exponents)).diagonal())
    weight = squared_norm(target)  # |phi|^2 = sum_a x^(2 alpha_a), integer coefficients
    fourth = sympy.zeros(t.shape[0], t.shape[1])
    for coefficient, alpha in zip(weight.coefficients[0], weight.exponents, strict=True):
        if coefficient:
            shifted = moment_matrix(features.exponents + alpha, features.exponents)
            fourth += int(coefficient) * _integer_matrix(shifted)
    b = sympy.Rational(n - 1, n) * c * c.T + fourth / n
    return t, c, trace_s, b


def _exact_optimum(target: PolyMap, features: PolyMap, n: int):
    t, c, trace_s, b = _exact_moments(target, features, n)
    gamma = t.inv() * c * c.T * b.inv()
    loss = trace_s - (gamma * c * c.T).trace()
    return gamma, loss, trace_s


# --- Theorem 9 and Corollary 10 -----------------------------------------------------------------

def test_features_outside_the_targets_span_lower_the_optimum_strictly():
    """d = 2, n = 20, pure quadratic: 0.4256 on phi_2, 0.2879 on (phi_2; phi_4) (chapter 3)."""
    target = PURE_QUADRATIC_2D.target_features
    own = closed_forms.one_step_gd_optimum(target, PolyMap.monomials(2, [2]), 20)
    wider = closed_forms.one_step_gd_optimum(target, PolyMap.monomials(2, [2, 4]), 20)
    assert own.normalised_loss == pytest.approx(0.4256, abs=1e-4)
    assert wider.normalised_loss == pytest.approx(0.2879, abs=1e-4)
    for optimum, degrees in ((own, [2]), (wider, [2, 4])):
        _, exact_loss, trace_s = _exact_optimum(target, PolyMap.monomials(2, degrees), 20)
        assert optimum.normalised_loss == pytest.approx(float(exact_loss / trace_s), rel=1e-12)
    assert wider.loss < own.loss - 0.1 * own.null_loss
    # x lies outside span phi_2 too, but is uncorrelated with every even monomial: no gain
    with_x = closed_forms.one_step_gd_optimum(target, PolyMap.monomials(2, [1, 2]), 20)
    assert with_x.loss == pytest.approx(own.loss, rel=1e-12)


@pytest.mark.parametrize("task", [QUADRATIC_3D, PURE_QUADRATIC_2D, CUBIC_3D],
                         ids=["quadratic-3d", "pure-quadratic-2d", "cubic-3d"])
def test_the_general_formula_is_s_b_inverse_when_psi_is_phi(task):
    phi = task.target_features
    n = task.context_length
    general = closed_forms.one_step_gd_optimum(phi, phi, n)
    moments = closed_forms.gd_moments(phi, phi, n)
    s = moments.s_pp
    same_span = s @ np.linalg.inv(moments.b)  # Corollary 10: S B^-1
    scale = np.abs(same_span).max()
    assert np.abs(general.gamma - same_span).max() <= 1e-10 * scale
    loss = np.trace(s) - np.trace(s @ s @ s @ np.linalg.inv(moments.b))
    assert general.loss == pytest.approx(loss, rel=1e-10)
    gamma, exact_loss, _ = _exact_optimum(phi, phi, n)
    assert np.abs(general.gamma - np.array(gamma, dtype=np.float64)).max() <= 1e-10 * scale
    assert general.loss == pytest.approx(float(exact_loss), rel=1e-10)


def test_the_general_formula_differs_from_s_b_inverse_when_psi_is_larger():
    phi = PURE_QUADRATIC_2D.target_features
    wider = PolyMap.monomials(2, [2, 4])  # phi_2 first, then phi_4
    general = closed_forms.one_step_gd_optimum(phi, wider, 20)
    moments = closed_forms.gd_moments(phi, phi, 20)
    padded = np.zeros_like(general.gamma)
    padded[:3, :3] = moments.s_pp @ np.linalg.inv(moments.b)  # S B^-1, zero on phi_4
    assert np.linalg.norm(general.gamma - padded) > 0.1 * np.linalg.norm(padded)
    # S B^-1 padded with zeros is still admissible on the wider features, and worse
    wider_moments = closed_forms.gd_moments(phi, wider, 20)
    padded_loss = closed_forms.gd_loss_from_moments(padded, wider_moments)
    assert padded_loss == pytest.approx(closed_forms.one_step_gd_optimum(phi, phi, 20).loss, rel=1e-10)
    assert general.loss < padded_loss - 0.1 * general.null_loss
    # and the exact rational optimum on the wider features is the float64 one
    gamma, exact_loss, _ = _exact_optimum(phi, wider, 20)
    assert general.loss == pytest.approx(float(exact_loss), rel=1e-10)
    assert np.abs(general.gamma - np.array(gamma, dtype=np.float64)).max() <= 1e-10


def test_the_optimum_depends_on_the_features_only_through_their_span():
    phi = QUADRATIC_3D.target_features
    rng = np.random.default_rng(3)
    mixed = phi.transform(rng.standard_normal((phi.num_outputs, phi.num_outputs)))
    assert closed_forms.one_step_gd_optimum(phi, mixed, 20).loss == pytest.approx(
        closed_forms.one_step_gd_optimum(phi, phi, 20).loss, rel=1e-9)


# --- when k_Gamma is a kernel (Proposition 8) ---------------------------------------------------

def test_the_quadratic_tasks_optimal_gamma_is_symmetric_positive_definite():
    optimum = closed_forms.one_step_kernel_gd_optimum(QUADRATIC_3D)
    check = closed_forms.kernel_check(optimum.gamma)
    assert check.asymmetry < 1e-14
    assert check.is_kernel()
    gamma, _, _ = _exact_optimum(QUADRATIC_3D.target_features, QUADRATIC_3D.target_features, 20)
    assert gamma == gamma.T  # exactly symmetric in rationals
    eigenvalues = sorted(gamma.eigenvals(multiple=True))
    assert eigenvalues[0] == sympy.Rational(50, 381) and eigenvalues[-1] == sympy.Rational(5, 13)
    assert check.min_eigenvalue == pytest.approx(50 / 381, rel=1e-12)
    assert check.max_eigenvalue == pytest.approx(5 / 13, rel=1e-12)


def test_the_cubic_tasks_optimal_gamma_is_not_a_kernel():
    optimum = closed_forms.one_step_kernel_gd_optimum(CUBIC_3D)
    check = closed_forms.kernel_check(optimum.gamma)
    gamma, _, _ = _exact_optimum(CUBIC_3D.target_features, CUBIC_3D.target_features, 20)
    difference = gamma - gamma.T
    exact_asymmetry = sympy.sqrt(sum(v**2 for v in difference) / sum(v**2 for v in gamma))
    assert check.asymmetry == pytest.approx(float(exact_asymmetry), rel=1e-10)
    assert check.asymmetry > 1.0
    assert check.min_eigenvalue < -0.1 * check.max_eigenvalue
    assert not check.is_kernel()


def test_kernel_check_on_known_matrices():
    assert closed_forms.kernel_check(np.diag([1.0, 2.0, 0.0])).is_kernel()
    assert not closed_forms.kernel_check(np.diag([1.0, -1e-3])).is_kernel()
    rotation = np.array([[0.0, -1.0], [1.0, 0.0]])
    assert closed_forms.kernel_check(rotation).asymmetry == pytest.approx(2.0)
    assert closed_forms.kernel_check(np.zeros((2, 2))).asymmetry == 0.0


# --- Proposition 11 -----------------------------------------------------------------------------

LENGTHS = np.unique(np.concatenate([np.arange(1, 200), np.geomspace(200, 100_000, 60).round()])
                    ).astype(int)


@pytest.mark.parametrize("task", [TaskConfig(kind="linear", input_dim=3, context_length=20), QUADRATIC_3D, CUBIC_3D],
                         ids=["linear", "quadratic", "cubic"])
def test_the_optimum_is_below_c_over_n_and_below_the_zero_predictor(task):
    phi = task.target_features if task.kind == "poly" else PolyMap.monomials(3, [1])
    c = closed_forms.one_step_gd_asymptote(task)
    losses = closed_forms.one_step_gd_optimum_curve(phi, phi, LENGTHS)
    assert losses.dtype == np.float64
    assert np.all(LENGTHS * losses / c <= 1.0)
    assert np.all(losses <= closed_forms.null_loss(task))
    # n L*(n) / c rises towards 1: within 1e-3 at n = 1e5 for the linear and quadratic tasks,
    # whose crossover c / E[y^2] is 4 and 28.56; the cubic's is 167.6, so it needs 10x more
    assert np.all(np.diff(LENGTHS * losses) > 0)
    far = 100_000 if task.degree <= 2 else 1_000_000
    far_loss = closed_forms.one_step_gd_optimum_curve(phi, phi, [far])[0]
    assert far * far_loss / c == pytest.approx(1.0, abs=1e-3)


def test_the_curve_is_the_optimum_at_each_n():
    phi = QUADRATIC_3D.target_features
    lengths = [1, 7, 20, 160, 5000]
    curve = closed_forms.one_step_gd_optimum_curve(phi, phi, lengths)
    single = [closed_forms.one_step_gd_optimum(phi, phi, n).loss for n in lengths]
    np.testing.assert_allclose(curve, single, rtol=1e-13)


@pytest.mark.parametrize("task", [QUADRATIC_3D, CUBIC_3D, PURE_QUADRATIC_2D],
                         ids=["quadratic", "cubic", "pure-quadratic-2d"])
def test_gamma_s_inverse_has_loss_exactly_c_over_n(task):
    phi = task.target_features
    c = closed_forms.one_step_gd_asymptote(task)
    moments = closed_forms.feature_moments(phi, phi)
    s_inverse = np.linalg.inv(moments.s_pp)
    for n in (1, 10, 20, 160, 100_000):
        loss = closed_forms.gd_loss_from_moments(s_inverse, moments.at(n))
        assert loss == pytest.approx(c / n, rel=1e-10)
    zero = closed_forms.gd_loss_from_moments(np.zeros_like(s_inverse), moments.at(20))
    assert zero == closed_forms.null_loss(task)


def test_the_linear_task_reaches_its_closed_form():
    """Theorem 5: L* = d(d+1)/(n+d+1), so n L*/c = n/(n + d + 1) and the crossover is d + 1."""
    phi = PolyMap.monomials(3, [1])
    lengths = np.array([1, 4, 20, 1000])
    curve = closed_forms.one_step_gd_optimum_curve(phi, phi, lengths)
    np.testing.assert_allclose(curve, 12 / (lengths + 4), rtol=1e-12)


def test_over_chapter_3s_context_lengths_the_fall_is_slower_than_one_over_n():
    phi = QUADRATIC_3D.target_features
    c = closed_forms.one_step_gd_asymptote(QUADRATIC_3D)
    assert c / closed_forms.null_loss(QUADRATIC_3D) == pytest.approx(28.56, rel=1e-12)
    lengths = np.array(context_length_grid(10, 160))
    losses = closed_forms.one_step_gd_optimum_curve(phi, phi, lengths)
    slopes = np.diff(np.log(losses)) / np.diff(np.log(lengths))
    assert np.all((slopes > -0.8) & (slopes < -0.3)), slopes
    assert slopes[0] > -0.4 and slopes[-1] < -0.7  # steepening towards -1
    assert np.all(np.diff(slopes) < 0)


# --- Exercise 3.2's solution --------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_exercise_3_2_seed_1_large_keeps_every_direction_and_normal_loses_one():
    from nlicl_lib import ModelConfig, TrainConfig, run_experiment
    from nlicl_lib.theory.kernel import direction_usage

    optimum = closed_forms.one_step_kernel_gd_optimum(QUADRATIC_3D)
    used = {}
    for init in ("large", "normal"):
        result = run_experiment(QUADRATIC_3D, ModelConfig(kind="glu-lsa", glu_init=init),
                                TrainConfig(steps=1000, batch_size=500, learning_rate=0.01, seed=1),
                                progress=False)
        usage = direction_usage(result.model, optimum.gamma).usage
        used[init] = int(np.sum(usage > 0.5))
        if init == "large":
            assert usage.min() > 0.9
            assert result.test_loss / optimum.loss < 1.01
        else:
            assert result.test_loss / optimum.loss > 1.02  # stalls on the one-direction plateau
    assert used == {"large": 6, "normal": 5}


def test_best_step_size_is_the_minimum_along_gamma():
    """best_step_size: c* = B / A and L(c* Gamma) = tr S - B^2 / A, against a fine scan of c."""
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    moments = closed_forms.gd_moments(task.target_features, closed_forms.kernel_features(3, 2), 20)
    gamma = polynomial_kernel_gamma(3, 2.5)
    step, loss = closed_forms.best_step_size(gamma, moments)
    scan = [closed_forms.gd_loss_from_moments(c * gamma, moments)
            for c in step * np.linspace(0.9, 1.1, 201)]
    assert loss == pytest.approx(min(scan), rel=1e-12)
    assert loss <= min(scan) + 1e-12
    # the page's former three-evaluation form gives the same step
    plus, minus = (closed_forms.gd_loss_from_moments(s * gamma, moments) for s in (1, -1))
    curvature = (plus + minus) / 2 - moments.s_ff_trace
    assert step == pytest.approx((minus - plus) / 4 / curvature, rel=1e-12)
