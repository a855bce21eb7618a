"""Chapter 3's page module and the kernel theory it draws on, on cheap exact computations."""

from __future__ import annotations

import numpy as np
import pytest

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.pages import ch3
from nlicl_lib.theory import closed_forms, constructions, kernel

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
INITS = ["small", "normal", "large"]


@pytest.fixture(scope="module")
def optimum() -> closed_forms.OneStepOptimum:
    return closed_forms.one_step_kernel_gd_optimum(QUADRATIC)


def usage(values: list[float]) -> kernel.DirectionUsage:
    """A synthetic usage record over the six quadratic monomials (d = 3)."""
    phi2 = PolyMap.monomials(3, [2])
    return kernel.DirectionUsage(np.linspace(1.0, 0.2, 6), np.array(values),
                                 PolyMap(phi2.exponents, np.eye(6)))




def test_anisotropic_gamma_with_unit_scales_is_the_isotropic_kernel():
    np.testing.assert_array_equal(kernel.anisotropic_kernel_gamma([1.0, 1.0, 1.0]),
                                  constructions.polynomial_kernel_gamma(3, 0.0))
    diagonal = np.diag(kernel.anisotropic_kernel_gamma([1.0, 0.5, 0.25]))
    assert diagonal[3:].tolist() == [1.0, 1.0, 0.5, 0.25, 0.25, 0.0625]  # x1², x1x2, ..., x3²


def test_rates_and_plateaus(optimum):
    rates = kernel.one_over_n_rates([1], np.array([10, 100, 1000]))
    assert np.all(np.diff(rates[1].scaled) > 0) and np.all(rates[1].scaled < 1)
    plateaus = kernel.lost_cross_term_plateaus(QUADRATIC, optimum.loss)
    assert 1 < plateaus[1] < plateaus[2] < plateaus[3]


def test_untrained_blocks_have_not_moved_and_large_is_normal_scaled_up():
    seeds = [100, 101]
    models = {init: [build_model(ModelConfig(kind="glu-lsa", glu_init=init), QUADRATIC, seed=s)
                     for s in seeds] for init in INITS}
    usage_of = {init: [usage([1.0] * 6)] * 2 for init in INITS}
    movement = kernel.glu_weight_movement(models, seeds, QUADRATIC, usage_of)
    assert all(row["change"] == 0.0 and row["moved"] == 0.0 for row in movement.movement.values())
    assert movement.scaled_gap < 1e-6 and movement.lost == {init: 0 for init in INITS}


def test_kernel_weight_scan_brackets_the_best_weight():
    moments = closed_forms.gd_moments(QUADRATIC.target_features, closed_forms.kernel_features(3, 2), 20)
    found = ch3.kernel_weight_values(moments, np.round(np.arange(0.0, 6.0 + 1e-9, 0.5), 2))
    assert found["ex31_low"] <= found["ex31_best"] <= found["ex31_high"] and found["ex31_best_gap"] > 0





def test_quartic_features_lower_the_pure_quadratic_optimum_by_about_a_third_and_x_by_nothing():
    """Chapter 3's sentence on the span (the values are printed, not quoted): adding phi_4 lowers
    the best one-step loss on the pure quadratic task (d = 2, n = 20) by about a third, adding x
    leaves it unchanged."""
    pure2 = TaskConfig(kind="poly", input_dim=2, context_length=20, degree=2, homogeneous=True)
    losses = kernel.span_losses(pure2, {"own": [2], "with x": [1, 2], "wider": [2, 4]})
    assert losses["with x"] == pytest.approx(losses["own"], rel=1e-9)
    assert 0.25 <= 1 - losses["wider"] / losses["own"] <= 0.4


def test_the_quadratic_rate_is_not_reached_within_the_trained_context_lengths():
    """Chapter 3: n L*(n) / c for the quadratic task is within 1% of its limit only far beyond
    the longest trained context (the ratio rises with n, so checking the longest suffices)."""
    longest = ch3.context_length_grid(10, 160)[-1]
    rates = kernel.one_over_n_rates([2], np.array([10, longest]))
    assert rates[2].scaled[-1] < 0.99
