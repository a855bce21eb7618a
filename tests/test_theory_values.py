"""Every branch of ``theory_values``, ``exact_model_loss`` and ``slot_feature_degree``
against the closed form it stands for (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap, monomial_count
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.capacity import best_block, slot_increments
from nlicl_lib.theory.constructions import gd_lsa, kernel_glu_lsa
from nlicl_lib.theory.depth import bcd_reference_loss
from nlicl_lib.theory.values import (
    EXACT_OPTIMUM,
    OPTIMISED_EXACT,
    exact_model_loss,
    meets_capacity_bound,
    slot_feature_degree,
    theory_values,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
LINEAR = TaskConfig(kind="linear", input_dim=3, context_length=20)
COVARIANCE = ((2.0, 0.5, 0.0), (0.5, 1.0, 0.0), (0.0, 0.0, 0.5))
GLU_LSA = ModelConfig(kind="glu-lsa")


# --- theory_values -------------------------------------------------------------------------------

@pytest.mark.parametrize("noise_std", [0.0, 0.5])
def test_lsa_depth_one_on_a_linear_task_is_theorem_5(noise_std):
    """Isotropic: L* = d(d + 1 + s^2)/(n + d + 1 + s^2) (Theorem 5 (thm-linear-optimum))."""
    task = TaskConfig(kind="linear", input_dim=3, context_length=20, noise_std=noise_std)
    values = theory_values(task, ModelConfig(kind="lsa"))
    s2 = noise_std**2
    assert values.theory_loss == pytest.approx(3 * (4 + s2) / (24 + s2), rel=1e-12)
    assert values.theory_loss == closed_forms.linear_gd_optimum(task).loss
    assert values.null_loss == 3.0 and values.bound_loss is None


def test_lsa_depth_one_with_a_covariance_is_the_general_formula():
    """Theorem 5 with a covariance Sigma, the loss of Gamma* written out."""
    task = TaskConfig(kind="linear", input_dim=3, context_length=20, covariance=COVARIANCE)
    values = theory_values(task, ModelConfig(kind="lsa"))
    sigma, n = np.array(COVARIANCE), 20
    trace = np.trace(sigma)
    gamma = np.linalg.inv((n + 1) / n * sigma + trace / n * np.eye(3))
    b = (n + 1) / n * sigma @ sigma + trace / n * sigma
    loss = trace - 2 * np.trace(sigma @ gamma @ sigma) + np.trace(gamma.T @ sigma @ gamma @ b)
    assert values.theory_loss == pytest.approx(loss, rel=1e-12)
    assert values.null_loss == pytest.approx(trace, rel=1e-15)
    assert values.bound_loss is None


@pytest.mark.parametrize("homogeneous", [False, True])
def test_lsa_depth_one_on_a_polynomial_task_is_one_step_gd_on_x(homogeneous):
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2,
                      homogeneous=homogeneous)
    values = theory_values(task, ModelConfig(kind="lsa"))
    on_x = closed_forms.one_step_gd_optimum(task.target_features, PolyMap.monomials(3, [1]), 20)
    assert values.theory_loss == pytest.approx(on_x.loss, rel=1e-12)
    assert values.bound_loss == closed_forms.best_linear_loss(task)
    if homogeneous:  # x is uncorrelated with every even monomial: Gamma* = 0, the zero predictor
        assert (values.null_loss, values.bound_loss) == (12.0, pytest.approx(12.0, rel=1e-12))
        assert values.theory_loss == pytest.approx(12.0, rel=1e-12)
    else:  # E[y^2] = 3 + 12; the best linear predictor removes the linear part
        assert (values.null_loss, values.bound_loss) == (15.0, pytest.approx(12.0, rel=1e-12))
        assert values.bound_loss < values.theory_loss < values.null_loss


@pytest.mark.parametrize(("slots", "width", "noise_std"), [(None, None, 0.0), (8, 7, 0.0),
                                                           (None, None, 0.5)])
def test_one_covering_glu_lsa_block_is_one_step_gd_on_x_and_phi2(slots, width, noise_std):
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, noise_std=noise_std)
    values = theory_values(task, ModelConfig(kind="glu-lsa", feature_slots=slots, glu_width=width))
    expected = closed_forms.one_step_gd_optimum(task.target_features,
                                                closed_forms.kernel_features(3, 2), 20, noise_std)
    assert values.theory_loss == pytest.approx(expected.loss, rel=1e-12)
    # for a quadratic task these are the target's own monomials: the kernel optimum
    assert values.theory_loss == pytest.approx(closed_forms.one_step_kernel_gd_optimum(task).loss,
                                               rel=1e-12)
    assert values.bound_loss == pytest.approx(12.0, rel=1e-12)


def test_one_covering_block_on_a_cubic_task_uses_degree_two_features_only():
    task = TaskConfig(kind="poly", input_dim=2, context_length=20, degree=3)
    values = theory_values(task, GLU_LSA)
    expected = closed_forms.one_step_gd_optimum(task.target_features,
                                                closed_forms.kernel_features(2, 2), 20).loss
    assert values.theory_loss == pytest.approx(expected, rel=1e-12)
    assert values.theory_loss > closed_forms.one_step_kernel_gd_optimum(task).loss * 1.01


@pytest.mark.parametrize(("slots", "width"), [(2, None), (6, 2), (3, 6)])
def test_one_block_with_fewer_slots_or_units_is_the_best_block(slots, width):
    values = theory_values(QUADRATIC, ModelConfig(kind="glu-lsa", feature_slots=slots,
                                                  glu_width=width))
    m = slots
    h = slots if width is None else width
    assert values.theory_loss == pytest.approx(best_block(QUADRATIC, m, h).loss, rel=1e-9)
    kernel = closed_forms.one_step_kernel_gd_optimum(QUADRATIC).loss
    assert kernel < values.theory_loss < closed_forms.linear_gd_optimum(QUADRATIC).loss


@pytest.mark.parametrize(("depth", "slots"), [(2, 3), (2, 6)])
def test_deeper_glu_lsa_is_the_greedy_reference(depth, slots):
    values = theory_values(QUADRATIC, ModelConfig(kind="glu-lsa", depth=depth,
                                                  feature_slots=slots))
    loss, _ = bcd_reference_loss(QUADRATIC, slots, depth, fit_contexts=50_000,
                                 test_prompts=20_000)
    assert values.theory_loss == loss  # deterministic: the same seeds and sizes
    # a second block can only help: below the best single block of the same slots
    single = theory_values(QUADRATIC, ModelConfig(kind="glu-lsa", feature_slots=slots))
    assert values.theory_loss < single.theory_loss
    assert values.bound_loss == pytest.approx(12.0, rel=1e-12)


NOISY = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, noise_std=0.5)
QUARTIC = TaskConfig(kind="poly", input_dim=2, context_length=20, degree=4)
LINEAR_COV = TaskConfig(kind="linear", input_dim=3, context_length=20, covariance=COVARIANCE)


@pytest.mark.parametrize(("task", "config"), [
    pytest.param(QUADRATIC, ModelConfig(kind="lsa", depth=2), id="deep-lsa"),
    pytest.param(LINEAR, ModelConfig(kind="lsa", depth=3), id="deep-lsa-linear"),
    pytest.param(NOISY, ModelConfig(kind="glu-lsa", depth=2), id="noisy-deep"),
    pytest.param(QUARTIC, ModelConfig(kind="glu-lsa", depth=2), id="deep-degree-4"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", depth=2, glu_reads="all"), id="deep-reads-all"),
    pytest.param(LINEAR_COV, GLU_LSA, id="covariance"),
    pytest.param(LINEAR_COV, ModelConfig(kind="glu-lsa", feature_slots=1), id="covariance-few-slots"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", activation="silu"), id="silu"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", feature_slots=2, activation="gelu"),
                 id="gelu-few-slots"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", glu_reads="x+slots"), id="reads-slots"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", feature_slots=2, attention="full"),
                 id="dense-few-slots"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", depth=2, attention="full"), id="dense-deep"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", attention="full"), id="dense-one-block"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", glu_writes="all"), id="writes-all"),
])
def test_no_exact_value_where_theory_gives_none(task, config):
    values = theory_values(task, config)
    assert values.theory_loss is None and values.theory_name is None
    assert values.null_loss == closed_forms.null_loss(task)
    expected_bound = closed_forms.best_linear_loss(task) if task.kind == "poly" else None
    assert values.bound_loss == expected_bound


# --- exact_model_loss ----------------------------------------------------------------------------

def _float64(config: ModelConfig, task: TaskConfig, seed: int = 0):
    return build_model(config, task, seed=seed, dtype=torch.float64)


@pytest.mark.parametrize("task", [LINEAR, QUADRATIC, NOISY])
def test_exact_loss_of_a_sparse_lsa_at_its_optimum_is_theorem_5(task):
    gamma = closed_forms.linear_gd_optimum(task).gamma
    model = gd_lsa(3, [gamma], attention="sparse")
    assert exact_model_loss(model, task) == pytest.approx(closed_forms.linear_gd_optimum(task).loss,
                                                          rel=1e-10)
    # empty slots add nothing, whatever Gamma holds on them
    wide = gd_lsa(3, [gamma], feature_slots=2, attention="sparse")
    with torch.no_grad():
        wide.blocks[0].lsa.gamma[3:, :] = 1.0
        wide.blocks[0].lsa.gamma[:, 3:] = -2.0
    assert exact_model_loss(wide, task) == pytest.approx(exact_model_loss(model, task), rel=1e-12)


def test_exact_loss_of_a_random_sparse_lsa_is_the_gd_loss_of_its_gamma():
    model = _float64(ModelConfig(kind="lsa", attention="sparse", attention_init_std=0.3), QUADRATIC)
    gamma = model.blocks[0].lsa.gamma.detach().numpy()
    expected = closed_forms.one_step_gd_loss(gamma, QUADRATIC.target_features,
                                             PolyMap.monomials(3, [1]), 20)
    assert exact_model_loss(model, QUADRATIC) == pytest.approx(expected, rel=1e-12)
    assert expected > closed_forms.linear_gd_optimum(QUADRATIC).loss * 1.001


@pytest.mark.parametrize("task", [QUADRATIC, NOISY])
def test_exact_loss_of_the_kernel_construction_is_the_kernel_optimum(task):
    optimum = closed_forms.one_step_kernel_gd_optimum(task)
    model = kernel_glu_lsa(3, optimum.gamma)
    assert exact_model_loss(model, task) == pytest.approx(optimum.loss, rel=1e-10)
    # any other Gamma on the same features does worse, by the loss formula of Theorem 9
    # (thm-feature-optimum)
    with torch.no_grad():
        model.blocks[0].lsa.gamma.mul_(0.9)
    assert exact_model_loss(model, task) > optimum.loss * (1 + 1e-6)


@pytest.mark.parametrize(("task", "config"), [
    pytest.param(QUADRATIC, ModelConfig(kind="lsa", depth=2, attention="sparse"), id="depth-2"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", depth=2), id="glu-depth-2"),
    pytest.param(LINEAR_COV, ModelConfig(kind="lsa", attention="sparse"), id="covariance"),
    pytest.param(QUADRATIC, ModelConfig(kind="lsa"), id="dense-lsa"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", attention="full"), id="dense-glu-lsa"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", activation="silu"), id="silu"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", glu_reads="x+slots"), id="reads-slots"),
    pytest.param(QUADRATIC, ModelConfig(kind="glu-lsa", glu_writes="all"), id="writes-all"),
])
def test_no_exact_loss_outside_one_polynomial_block(task, config):
    assert exact_model_loss(_float64(config, task), task) is None


# --- slot_feature_degree -------------------------------------------------------------------------

@pytest.mark.parametrize(("config", "degree"), [
    (ModelConfig(kind="lsa", depth=2), 0),
    (ModelConfig(kind="glu-lsa"), 2),
    (ModelConfig(kind="glu-lsa", depth=3, glu_reads="x"), 2),
    (ModelConfig(kind="glu-lsa", glu_reads="x+slots"), 2),
    (ModelConfig(kind="glu-lsa", depth=3, glu_reads="x+slots"), 8),
    (ModelConfig(kind="glu-lsa", depth=4, glu_reads="all"), 16),
])
def test_slot_feature_degree_doubles_with_each_block_reading_the_slots(config, degree):
    assert slot_feature_degree(build_model(config, QUADRATIC)) == degree


def test_two_block_degree_is_that_of_the_stack_features():
    """The counted degree is the true one: along a ray t x the slots of a two-block stack reading
    the slots are a polynomial in t of degree exactly 4 (t^1..t^5 fitted through five points)."""
    model = _float64(ModelConfig(kind="glu-lsa", depth=2, glu_reads="x+slots", glu_init="large"),
                     QUADRATIC)
    p2 = monomial_count(3, 2)
    x = torch.randn(1, 2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    scales = np.arange(1.0, 6.0)
    slots = []
    for t in scales:
        z = torch.cat([t * x, x.new_zeros(1, 2, p2 + 1)], dim=-1)
        _, stream = model(z, return_stream=True)
        slots.append(stream["block2.glu"][0, 0, 3:3 + p2].detach().numpy())
    powers = np.linalg.solve(scales[:, None] ** np.arange(1, 6)[None, :], np.array(slots))
    size = np.abs(powers).max()
    assert slot_feature_degree(model) == 4
    assert np.abs(powers[4]).max() < 1e-9 * size  # no t^5
    assert np.abs(powers[3]).max() > 1e-3 * size  # a t^4 part


def test_a_block_is_called_optimal_only_where_it_meets_the_proven_bound():
    # l_min(m, h) (prop-capacity, items 1 and 5) is a lower bound for every block of that size;
    # three units write the three squares, the best 3-dim span, so m = h = 3 reaches it; one unit
    # cannot write |x|^2, the best single slot, so m = h = 1 stays above it
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    reached = theory_values(task, ModelConfig(kind="glu-lsa", feature_slots=3, glu_width=3))
    assert reached.theory_kind == EXACT_OPTIMUM
    assert reached.theory_loss == pytest.approx(slot_increments(task).loss(3), rel=1e-9)
    short = theory_values(task, ModelConfig(kind="glu-lsa", feature_slots=1, glu_width=1))
    assert short.theory_kind == OPTIMISED_EXACT
    assert short.theory_loss > slot_increments(task).loss(1) * (1 + 1e-6)
    assert not meets_capacity_bound(TaskConfig(kind="poly", input_dim=3, context_length=20,
                                               degree=3), ModelConfig(kind="glu-lsa"), 1.0)


