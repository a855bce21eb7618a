"""``test_loss`` on several models: each model's samples are its own loss on the same prompts,
and the standard error is the population standard deviation over sqrt(N)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.seeding import STREAM_TEST
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.depth import context_conditional_loss
from nlicl_lib.training.evaluate import (
    ERROR_BARS,
    LossEstimate,
    combine_samples,
    conditional_squared_errors,
    intervals_separate,
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




def test_independent_test_samples_pool_to_the_one_sample_estimate(members):
    """K samples of N prompts are the first K N prompts of the stream: the pooled mean is the
    mean of all of them (float64 identity), the sample means are those of the K stretches, and
    the between-sample standard error is their standard deviation over sqrt(K)."""
    k, per = 3, 400
    whole, samples = test_loss(members, TASK, k * per, batch_size=BATCH, integrate="task+query",
                               return_samples=True)
    parts = test_loss(members, TASK, per, batch_size=BATCH, integrate="task+query",
                      test_samples=k)
    for one, split, row in zip(whole, parts, samples, strict=True):
        stretches = row.reshape(k, per).mean(axis=1)
        assert split.num_prompts == k * per
        assert split.mean == pytest.approx(one.mean, rel=1e-12)
        assert split.sample_means == pytest.approx(stretches, rel=1e-12)
        assert split.median == pytest.approx(np.median(stretches), rel=1e-12)
        assert split.between_std_error == pytest.approx(stretches.std(ddof=1) / math.sqrt(k),
                                                        rel=1e-12)
        # pooled over prompts: each stretch's variance about its own mean, so a little smaller
        assert split.std_error == pytest.approx(one.std_error, rel=0.05)
        assert split.worst_share == pytest.approx(one.worst_share, rel=1e-12)
        low, high = split.interval
        assert high - split.mean == pytest.approx(ERROR_BARS * split.error)
        assert split.error == max(split.std_error, split.between_std_error)


def test_intervals_separate_only_when_they_do_not_overlap():
    a = LossEstimate(1.0, 0.1, 100)
    assert not intervals_separate(a, LossEstimate(1.0 + 3.9 * 0.1, 0.1, 100))
    assert intervals_separate(a, LossEstimate(1.0 + 4.1 * 0.1, 0.1, 100))
    # the between-sample spread widens an interval whose pooled error is small
    wide = combine_samples([LossEstimate(v, 0.01, 100) for v in (1.3, 1.5, 1.7)])
    assert wide.error == pytest.approx(wide.between_std_error) and wide.error > 0.1
    assert not intervals_separate(wide, LossEstimate(1.3, 0.01, 100))
    assert intervals_separate(LossEstimate(1.5, 0.01, 100), LossEstimate(1.3, 0.01, 100))
