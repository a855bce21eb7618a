r"""The one test-loss estimator on several models,
:func:`nlicl_lib.training.evaluate.test_loss`: every model's samples equal its own loss
measured alone on the same test prompts (float64, 1e-10), whatever its slots $m$, width $h$ and
depth $L$, and the standard error is $\hat s / \sqrt N$ with $\hat s^2 = \frac1N \sum_j (e_j - \bar e)^2$."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.seeding import STREAM_TEST
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.depth import context_conditional_loss
from nlicl_lib.theory.values import exact_model_loss
from nlicl_lib.training.evaluate import (
    conditional_squared_errors,
    model_predictor,
    test_loss,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TASK = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, noise_std=0.3)
#: members of different sizes: (slots m, width h, depth L, what the GLUs read)
SHAPES = [(2, 3, 1, "x"), (6, 6, 1, "x"), (3, 2, 2, "x"), (4, 4, 2, "x+slots")]
NUM_PROMPTS, BATCH = 1100, 500  # the last batch is short: 500, 500, 100


@pytest.fixture(scope="module")
def members():
    models = []
    for seed, (m, h, depth, reads) in enumerate(SHAPES):
        config = ModelConfig(kind="glu-lsa", feature_slots=m, glu_width=h, depth=depth,
                             glu_reads=reads, attention_init_std=0.05)
        models.append(build_model(config, TASK, seed=seed, dtype=torch.float64))
    return models


def losses_of(models, task, num_prompts, batch_size, seed=0, integrate="task+query",
              return_samples=False):
    """Means and standard errors of ``test_loss`` as arrays (and the samples)."""
    losses, samples = test_loss(models, task, num_prompts, seed=seed, batch_size=batch_size,
                                integrate=integrate, return_samples=True)
    mean = np.array([loss.mean for loss in losses])
    error = np.array([loss.std_error for loss in losses])
    return (mean, error, samples) if return_samples else (mean, error)


@torch.no_grad()
def _own(sample_one, num_prompts: int = NUM_PROMPTS, seed: int = 0) -> np.ndarray:
    """One member's samples on the test stream, drawn in the batches of the estimator."""
    out, drawn, step = [], 0, 0
    while drawn < num_prompts:
        size = min(BATCH, num_prompts - drawn)
        prompts = sample_prompts(TASK, size, seed, step, "cpu", STREAM_TEST, torch.float64)
        out.append(sample_one(prompts).numpy())
        drawn += size
        step += 1
    return np.concatenate(out)


def _plain(model):
    predict = model_predictor(model)
    return lambda prompts: (predict(prompts) - prompts.query_label) ** 2


def _task_integrated(model):
    return lambda prompts: conditional_squared_errors(model_predictor(model), prompts, TASK)


@pytest.mark.parametrize(("integrate", "alone"), [("none", _plain), ("task", _task_integrated),
                                                  ("task+query", context_conditional_loss)],
                         ids=["none", "task", "task+query"])
def test_each_member_is_its_own_loss_on_the_same_prompts(members, integrate, alone):
    mean, error, samples = losses_of(members, TASK, NUM_PROMPTS, BATCH,
                                              integrate=integrate, return_samples=True)
    assert samples.shape == (len(members), NUM_PROMPTS) and mean.shape == error.shape == (4,)
    for e, model in enumerate(members):
        sampler = alone(model, TASK) if alone is context_conditional_loss else alone(model)
        own = _own(sampler)
        assert np.allclose(samples[e], own, rtol=1e-10, atol=1e-12 * own.mean())
        assert mean[e] == pytest.approx(own.mean(), rel=1e-10)
        # the standard error: population standard deviation over sqrt(N)
        spread = math.sqrt(np.mean((own - own.mean()) ** 2))
        assert error[e] == pytest.approx(spread / math.sqrt(NUM_PROMPTS), rel=1e-9)


def test_integrating_out_agrees_with_plain_monte_carlo_and_the_exact_loss(members):
    """Three estimators of the same loss (each unbiased) agree within their errors; for a depth-1
    member the exact loss (Theorem 9 (thm-feature-optimum)) lies within them too. The integrated
    estimates are the more precise."""
    plain, plain_error = losses_of(members, TASK, 10000, 5000, integrate="none")
    exact, exact_error = losses_of(members, TASK, 10000, 5000)
    assert np.all(exact_error < plain_error)
    assert np.all(np.abs(plain - exact) < 4 * np.hypot(plain_error, exact_error))
    for e, model in enumerate(members[:2]):
        assert abs(exact[e] - exact_model_loss(model, TASK)) < 4 * exact_error[e]


def test_a_member_alone_is_the_same_as_in_the_stack(members):
    alone = losses_of(members[2:3], TASK, 1000, 500, integrate="none")
    together = losses_of(members, TASK, 1000, 500, integrate="none")
    assert alone[0][0] == pytest.approx(together[0][2], rel=1e-12)
    assert alone[1][0] == pytest.approx(together[1][2], rel=1e-12)


def test_another_seed_draws_other_prompts(members):
    first, _ = losses_of(members[:1], TASK, 500, 500, seed=0, integrate="none")
    second, _ = losses_of(members[:1], TASK, 500, 500, seed=1, integrate="none")
    assert first[0] != second[0]
    assert second[0] == pytest.approx(_own(_plain(members[0]), 500, seed=1).mean(), rel=1e-10)


def test_an_unknown_integration_is_refused(members):
    with pytest.raises(ConfigError) as error:
        losses_of(members, TASK, 100, 100, integrate="query")
    assert error.value.param == "integrate"
