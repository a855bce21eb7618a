"""Chapter 1 (nlicl_lib.theory.lsa_gd): LSA layers are preconditioned GD steps
(Proposition 4), and the best steps against Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.experiments.run import run_experiment
from nlicl_lib.theory import lsa_gd
from nlicl_lib.theory.closed_forms import linear_gd_optimum, linear_gd_optimum_isotropic
from nlicl_lib.theory.constructions import gd_lsa
from nlicl_lib.theory.predictors import preconditioned_gd
from nlicl_lib.training.evaluate import test_loss
from nlicl_lib.training.train import TrainConfig, train

F64 = torch.float64


@pytest.fixture(scope="module")
def noisy_sample():
    task = TaskConfig(kind="linear", input_dim=5, context_length=20, noise_std=0.5)
    return lsa_gd.sample_spectrum(task, max_power=3, num_prompts=40_000, seed=1)


@pytest.mark.parametrize("noise_std", [0.0, 0.5])
def test_l_layers_are_l_steps_and_labels_become_residuals(noise_std):
    d, n = 4, 15
    task = TaskConfig(kind="linear", input_dim=d, context_length=n, noise_std=noise_std)
    prompts = sample_prompts(task, 128, seed=3, step=0, dtype=F64)
    gammas = lsa_gd.random_preconditioners(d, count=3, seed=4)
    assert not np.allclose(gammas[0], gammas[0].T)  # non-symmetric: catches a transposed Gamma
    check = lsa_gd.construction_check(prompts, gammas)
    assert max(check.one_layer, check.all_layers, *check.residual_labels) < 1e-12
    with torch.no_grad():
        _, stream = gd_lsa(d, gammas)(prompts.embed(), return_stream=True)
        wrong = gd_lsa(d, [2 * gammas[0]])(prompts.embed())
    for layer in range(1, 4):
        tokens = stream[f"block{layer}"]
        # the inputs are untouched, and the query slot holds minus the l-step prediction
        assert torch.equal(tokens[..., :d], prompts.x)
        partial = preconditioned_gd(prompts, gammas[:layer])
        assert lsa_gd.max_relative_difference(-tokens[:, n, -1], partial) < 1e-10
    # the check can fail: layers with other steps differ by O(1)
    assert lsa_gd.max_relative_difference(wrong, preconditioned_gd(prompts, gammas[:1])) == \
        pytest.approx(1.0, rel=1e-9)


def test_isotropic_optimum_matches_monte_carlo():
    d, n = 5, 20
    task = TaskConfig(kind="linear", input_dim=d, context_length=n)
    scale, loss = linear_gd_optimum_isotropic(d, n)
    assert loss == pytest.approx(30 / 26)
    assert np.allclose(linear_gd_optimum(task).gamma, scale * np.eye(d))
    estimate = test_loss(lambda p: preconditioned_gd(p, [scale]), task, seed=11,
                         relative_error=0.006, dtype=F64)
    assert abs(estimate.mean - loss) < 4 * estimate.std_error


def test_general_covariance_optimum_with_noise_matches_monte_carlo():
    covariance = ((2.0, 0.6, 0.0), (0.6, 1.0, -0.3), (0.0, -0.3, 0.5))
    task = TaskConfig(kind="linear", input_dim=3, context_length=8, noise_std=0.7,
                      covariance=covariance)
    optimum = linear_gd_optimum(task)
    sigma_matrix = np.array(covariance)
    expected_gamma = np.linalg.inv(9 / 8 * sigma_matrix + (np.trace(sigma_matrix) + 0.49) / 8
                                   * np.eye(3))
    assert np.allclose(optimum.gamma, expected_gamma)
    estimate = test_loss(lambda p: preconditioned_gd(p, [optimum.gamma]), task, seed=12,
                         relative_error=0.006, dtype=F64)
    assert abs(estimate.mean - optimum.loss) < 4 * estimate.std_error


def test_coefficients_are_the_product_polynomial():
    steps = [0.3, 0.7, 1.9]
    c = lsa_gd.coefficients_from_steps(steps)
    for lam in (0.0, 0.4, 2.5):
        product = np.prod([1 - g * lam for g in steps])
        assert 1 + sum(ck * lam ** (k + 1) for k, ck in enumerate(c)) == pytest.approx(product)


def test_one_tuned_step_is_the_closed_form_optimum(noisy_sample):
    tuned = lsa_gd.tune_gd_steps(noisy_sample, 1)
    scale, loss = linear_gd_optimum_isotropic(5, 20, 0.5)
    # the sample's moments carry a Monte Carlo error of a fraction of a percent
    assert tuned.step_sizes[0] == pytest.approx(scale, rel=0.01)
    assert abs(tuned.loss - loss) < 4 * tuned.std_error
    at_scale, error = lsa_gd.gd_steps_loss([scale], noisy_sample)
    assert abs(at_scale - loss) < 4 * error


def test_tuned_steps_minimise_the_sample_loss_and_match_explicit_gd(noisy_sample):
    tuned = lsa_gd.tune_gd_steps(noisy_sample, 3)
    assert tuned.real_roots and tuned.steps == 3
    # a minimum: moving any step size raises the loss on the same sample
    for index in range(3):
        for factor in (0.95, 1.05):
            moved = list(tuned.step_sizes)
            moved[index] *= factor
            assert lsa_gd.gd_steps_loss(moved, noisy_sample)[0] > tuned.loss
    assert lsa_gd.tune_gd_steps(noisy_sample, 2).loss > tuned.loss  # tuned steps never hurt
    # the recursion's loss is the loss of explicit GD with those steps on fresh prompts
    estimate = test_loss(lambda p: preconditioned_gd(p, list(tuned.step_sizes)), noisy_sample.task,
                         seed=2, relative_error=0.02, dtype=F64)
    assert abs(estimate.mean - tuned.loss) < 4 * np.hypot(estimate.std_error, tuned.std_error)


def test_general_covariance_one_tuned_step_matches_theory():
    task = TaskConfig(kind="linear", input_dim=2, context_length=6, noise_std=0.3,
                      covariance=((1.5, 0.4), (0.4, 0.6)))
    sample = lsa_gd.sample_spectrum(task, max_power=1, num_prompts=40_000, seed=3)
    tuned = lsa_gd.tune_gd_steps(sample, 1)
    # the best scalar step size is within the matrix optimum's reach: its loss is no lower
    assert tuned.loss > linear_gd_optimum(task).loss - 4 * tuned.std_error
    estimate = test_loss(lambda p: preconditioned_gd(p, list(tuned.step_sizes)), task,
                         seed=4, relative_error=0.01, dtype=F64)
    assert abs(estimate.mean - tuned.loss) < 4 * np.hypot(estimate.std_error, tuned.std_error)


def test_reading_the_construction_gives_its_own_step_exactly():
    gamma = np.array([[0.5, 0.1, 0.0], [0.2, 0.7, -0.1], [0.0, 0.3, 0.9]])
    step = lsa_gd.read_trained_step(gd_lsa(3, [gamma]).blocks[0].lsa, 3, gamma_star=gamma)
    assert np.allclose(step.gamma_eff, gamma) and step.distance < 1e-12
    assert step.spurious == {"label_free": 0.0, "label_squared": 0.0}
    scaled = lsa_gd.read_trained_step(gd_lsa(3, [0.4]).blocks[0].lsa, 3, gamma_star=0.8)
    assert scaled.distance == pytest.approx(0.5, rel=1e-12)
    assert lsa_gd.input_row_norms(gd_lsa(3, [0.4, 0.4]), 3) == [0.0, 0.0]


def test_effective_gamma_is_the_label_odd_part_of_any_layer():
    d, n = 4, 12
    task = TaskConfig(kind="linear", input_dim=d, context_length=n)
    model = build_model(ModelConfig(attention_init_std=0.5), task, seed=8, dtype=F64)
    prompts = sample_prompts(task, 64, seed=9, step=0, dtype=F64)
    z = prompts.embed()
    flipped = z.clone()
    flipped[:, :n, -1] *= -1
    odd = 0.5 * (model(z) - model(flipped))
    g = torch.einsum("bi,bid->bd", prompts.y[:, :n], prompts.x[:, :n]) / n
    gamma = torch.as_tensor(lsa_gd.effective_gamma(model.blocks[0].lsa, d))
    expected = torch.einsum("bd,de,be->b", prompts.x[:, n], gamma, g)
    assert float((odd - expected).abs().max().detach()) < 1e-10 * float(expected.abs().max())


@pytest.mark.slow
def test_short_training_reaches_the_optimum(one_torch_thread):
    task = TaskConfig(kind="linear", input_dim=5, context_length=20)
    config = TrainConfig(steps=400, batch_size=2000, learning_rate=0.02, seed=3)
    model = build_model(ModelConfig(), task, seed=3)
    train(model, task, config, progress=False)
    estimate = test_loss(model, task, seed=3, relative_error=0.005)
    optimum = linear_gd_optimum(task).loss
    # within 3% of Theorem 5 (thm-linear-optimum), and not below it
    assert 1 - 4 * estimate.relative_error < estimate.mean / optimum < 1.03


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("learning_rate, passes", [(0.001, False), (0.003, False), (0.01, True),
                                                   (0.2, True)])
def test_exercise_1_1_solution_states_the_working_range(learning_rate, passes):
    """Exercise 1.1's solution: rates 0.01 to 0.2 reach Theorem 5's optimum within 2%."""
    task = TaskConfig(kind="linear", input_dim=5, context_length=20)
    config = TrainConfig(steps=300, batch_size=1000, learning_rate=learning_rate)
    result = run_experiment(task, ModelConfig(kind="lsa"), config, progress=False)
    ratio = result.test_loss / result.theory.theory_loss
    assert (abs(ratio - 1) <= 0.02) == passes, ratio
