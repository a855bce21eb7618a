"""The greedy block-coordinate reference (Proposition 15): its closed-form conditional loss,
the optimality of each fitted preconditioner, the exact first block."""

import numpy as np
import pytest
import torch

from nlicl_lib import TaskConfig, sample_prompts
from nlicl_lib.core.device import use_threads
from nlicl_lib.core.seeding import STREAM_REFERENCE, STREAM_TEST
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.depth import (
    context_conditional_loss,
    greedy_reference,
    recursion_losses,
    reference_model,
    schedule_features,
)
from nlicl_lib.theory.predictors import block_coordinate_descent, preconditioned_gd

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TASK = TaskConfig(kind="poly", input_dim=3, context_length=30, degree=2)


@pytest.fixture(scope="module")
def reference():
    with use_threads(1):  # a module fixture is set up before the tests' one_torch_thread
        return greedy_reference(TASK, schedule_features(TASK, 3, 4), fit_contexts=6000,
                                test_contexts=3000, batch_size=1500)


def test_conditional_losses_equal_the_constructed_stacks(reference):
    losses = recursion_losses(TASK, reference.features, reference.gammas, 3000, 0, STREAM_TEST,
                              1500)
    assert np.allclose(losses.mean(axis=0), reference.loss, rtol=1e-12)
    for depth in (1, 2, 4):
        model = reference_model(TASK, 3, depth, gammas=reference.gammas)
        conditional = context_conditional_loss(model, TASK)
        prompts = sample_prompts(TASK, 1500, 0, 0, "cpu", STREAM_TEST, torch.float64)
        other = conditional(prompts).numpy()
        assert np.allclose(other, losses[:1500, depth - 1], rtol=1e-9, atol=1e-9)


def test_first_block_is_the_exact_one_step_optimum(reference):
    exact = closed_forms.one_step_gd_optimum(TASK.target_features, reference.features[0], 30)
    assert np.array_equal(reference.gammas[0], exact.gamma)
    assert reference.exact_first == pytest.approx(exact.loss, rel=1e-12)
    assert abs(reference.loss[0] - exact.loss) < 4 * reference.std_error[0]


def test_fit_losses_never_rise_and_each_gamma_is_optimal_on_its_contexts(reference):
    fit = reference.fit_loss
    assert np.all(np.diff(fit) <= 1e-9 * fit[0]), fit
    assert fit[-1] < 0.8 * fit[0]
    features, gammas = reference.features, reference.gammas
    rng = np.random.default_rng(0)
    for ell in (1, 3):
        base = recursion_losses(TASK, features[: ell + 1], gammas[: ell + 1], 6000, 0,
                                STREAM_REFERENCE, 1500)[:, -1].mean()
        assert base == pytest.approx(fit[ell], rel=1e-10)
        direction = rng.standard_normal(gammas[ell].shape)
        direction *= 1e-2 * np.linalg.norm(gammas[ell]) / np.linalg.norm(direction)
        for sign in (1.0, -1.0):
            moved = list(gammas[: ell + 1])
            moved[ell] = gammas[ell] + sign * direction
            other = recursion_losses(TASK, features[: ell + 1], moved, 6000, 0,
                                     STREAM_REFERENCE, 1500)[:, -1].mean()
            assert other > base


@pytest.mark.slow
def test_reference_matches_plain_monte_carlo_where_the_loss_is_light_tailed():
    task = TaskConfig(kind="poly", input_dim=3, context_length=100, degree=2)
    reference = greedy_reference(task, schedule_features(task, 3, 3), fit_contexts=20000,
                                 test_contexts=20000)
    assert reference.worst_share.max() < 0.01
    assert np.all(np.diff(reference.loss) < -3 * reference.gain_std_error[1:])
    model = reference_model(task, 3, 3, gammas=reference.gammas)
    prompts = sample_prompts(task, 100_000, 5, 0, "cpu", STREAM_TEST, torch.float64)
    with torch.no_grad():
        errors = (model(prompts.embed(3)) - prompts.y[:, -1]) ** 2
    monte_carlo, error = float(errors.mean()), float(errors.std() / np.sqrt(errors.numel()))
    gap = abs(monte_carlo - reference.loss[-1])
    assert gap < 4 * np.hypot(error, reference.std_error[-1])


def test_same_features_in_every_block_is_multi_step_preconditioned_gd():
    task = TaskConfig(kind="poly", input_dim=3, context_length=40, degree=2)
    reference = greedy_reference(task, schedule_features(task, 6, 3), fit_contexts=4000,
                                 test_contexts=2000)
    features = reference.features
    assert all(np.array_equal(f.coefficients, features[0].coefficients) for f in features)
    prompts = sample_prompts(task, 64, 1, 0, dtype=torch.float64)
    steps = preconditioned_gd(prompts, reference.gammas, features[0])
    blocks = block_coordinate_descent(prompts, features, reference.gammas)
    assert torch.allclose(steps, blocks, rtol=1e-10, atol=1e-10)


def test_fit_seed_draws_only_the_fitting_contexts(reference):
    """Another fitting sample gives other preconditioners (block 1 is exact) on the same test
    contexts."""
    other = greedy_reference(TASK, reference.features, fit_contexts=6000, test_contexts=3000,
                             batch_size=1500, fit_seed=1)
    same = greedy_reference(TASK, reference.features, fit_contexts=6000, test_contexts=3000,
                            batch_size=1500, fit_seed=0)
    assert np.allclose(same.loss, reference.loss, rtol=1e-12, atol=0)
    assert np.allclose(same.fit_loss, reference.fit_loss, rtol=1e-12, atol=0)
    assert np.array_equal(other.gammas[0], reference.gammas[0])  # numpy's closed form, no draws
    assert not np.allclose(other.gammas[1], reference.gammas[1])
    assert not np.allclose(other.fit_loss[1:], reference.fit_loss[1:])
    # same test contexts, same exact first block
    assert other.loss[0] == pytest.approx(reference.loss[0], rel=1e-12)
    # the test contexts are seed's: other's gammas on them give other's test losses
    losses = recursion_losses(TASK, other.features, other.gammas, 3000, 0, STREAM_TEST, 1500)
    assert np.allclose(losses.mean(axis=0), other.loss, rtol=1e-12)


