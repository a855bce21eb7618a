"""nlicl_lib.theory.gd_steps: tuned L-step GD and the preconditioner read off trained LSA weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import linear_gd_optimum, linear_gd_optimum_isotropic
from nlicl_lib.theory.constructions import gd_lsa
from nlicl_lib.theory.gd_steps import (
    coefficients_from_steps,
    effective_gamma,
    gd_steps_loss,
    relative_distance,
    sample_spectrum,
    spurious_weights,
    tune_gd_steps,
)
from nlicl_lib.theory.predictors import preconditioned_gd
from nlicl_lib.training.evaluate import test_loss

F64 = torch.float64


@pytest.fixture(scope="module")
def noisy_sample():
    task = TaskConfig(kind="linear", input_dim=5, context_length=20, noise_std=0.5)
    return sample_spectrum(task, max_power=3, num_prompts=40_000, seed=1)


def test_coefficients_are_the_product_polynomial():
    steps = [0.3, 0.7, 1.9]
    c = coefficients_from_steps(steps)
    for lam in (0.0, 0.4, 2.5):
        product = np.prod([1 - g * lam for g in steps])
        assert 1 + sum(ck * lam ** (k + 1) for k, ck in enumerate(c)) == pytest.approx(product)


def test_one_tuned_step_is_the_closed_form_optimum(noisy_sample):
    tuned = tune_gd_steps(noisy_sample, 1)
    scale, loss = linear_gd_optimum_isotropic(5, 20, 0.5)
    # the sample's moments carry a Monte Carlo error of a fraction of a percent
    assert tuned.step_sizes[0] == pytest.approx(scale, rel=0.01)
    assert abs(tuned.loss - loss) < 4 * tuned.std_error
    # the sample loss of the exact closed-form step agrees with the closed form too
    at_scale, error = gd_steps_loss([scale], noisy_sample)
    assert abs(at_scale - loss) < 4 * error


def test_tuned_steps_minimise_the_sample_loss_and_match_explicit_gd(noisy_sample):
    tuned = tune_gd_steps(noisy_sample, 3)
    assert tuned.real_roots and tuned.steps == 3
    # a minimum: moving any step size raises the loss on the same sample
    for index in range(3):
        for factor in (0.95, 1.05):
            moved = list(tuned.step_sizes)
            moved[index] *= factor
            assert gd_steps_loss(moved, noisy_sample)[0] > tuned.loss
    # more steps never hurt when they are tuned
    assert tune_gd_steps(noisy_sample, 2).loss > tuned.loss
    # the recursion's loss is the loss of explicit GD with those steps on fresh prompts
    task = noisy_sample.task
    estimate = test_loss(lambda p: preconditioned_gd(p, list(tuned.step_sizes)), task,
                             seed=2, relative_error=0.02, dtype=F64)
    # both are Monte Carlo estimates; compare the excess loss to the explicit GD loss
    assert abs(estimate.mean - tuned.loss) < 4 * np.hypot(estimate.std_error, tuned.std_error)


def test_general_covariance_one_step_matches_theory():
    covariance = ((1.5, 0.4), (0.4, 0.6))
    task = TaskConfig(kind="linear", input_dim=2, context_length=6, noise_std=0.3,
                      covariance=covariance)
    sample = sample_spectrum(task, max_power=1, num_prompts=40_000, seed=3)
    tuned = tune_gd_steps(sample, 1)
    # the best scalar step size is within the matrix optimum's reach: its loss is no lower
    assert tuned.loss > linear_gd_optimum(task).loss - 4 * tuned.std_error
    estimate = test_loss(lambda p: preconditioned_gd(p, list(tuned.step_sizes)), task,
                             seed=4, relative_error=0.01, dtype=F64)
    assert abs(estimate.mean - tuned.loss) < 4 * np.hypot(estimate.std_error, tuned.std_error)


def test_effective_gamma_of_the_construction():
    gamma = np.array([[0.5, 0.1, 0.0], [0.2, 0.7, -0.1], [0.0, 0.3, 0.9]])
    layer = gd_lsa(3, [gamma]).blocks[0].lsa
    assert np.allclose(effective_gamma(layer, 3), gamma)
    assert spurious_weights(layer, 3) == {"label_free": 0.0, "label_squared": 0.0}
    assert relative_distance(effective_gamma(layer, 3), gamma) < 1e-12


def test_effective_gamma_is_the_label_odd_part_of_any_layer():
    """For random P, Q the part of y_hat that is odd in the labels is x_q^T Gamma_eff g."""
    d, n = 4, 12
    task = TaskConfig(kind="linear", input_dim=d, context_length=n)
    model = build_model(ModelConfig(attention_init_std=0.5), task, seed=8, dtype=F64)
    prompts = sample_prompts(task, 64, seed=9, step=0, dtype=F64)
    z = prompts.embed()
    flipped = z.clone()
    flipped[:, :n, -1] *= -1
    odd = 0.5 * (model(z) - model(flipped))
    g = torch.einsum("bi,bid->bd", prompts.y[:, :n], prompts.x[:, :n]) / n
    gamma = torch.as_tensor(effective_gamma(model.blocks[0].lsa, d))
    expected = torch.einsum("bd,de,be->b", prompts.x[:, n], gamma, g)
    assert float((odd - expected).abs().max().detach()) < 1e-10 * float(expected.abs().max())
