"""The learning-rate schedules of ``TrainConfig`` at known steps, worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nlicl_lib.training.train import TrainConfig


def test_constant_is_the_peak_rate_at_every_step():
    config = TrainConfig(steps=100, learning_rate=0.03, schedule="constant")
    assert {config.learning_rate_at(t) for t in (0, 1, 10, 50, 99, 100)} == {0.03}


@pytest.mark.parametrize(("step", "rate"), [
    (0, 0.04 * 0.01),            # warm-up starts at 4% of the peak
    (5, 0.52 * 0.01),            # half-way through the warm-up: 0.04 + 0.96/2
    (9, (0.04 + 0.96 * 0.9) * 0.01),
    (10, 0.01),                  # the peak, where the anneal starts (p = 0)
    (55, 0.505 * 0.01),          # half-way through the anneal: 0.01 + 0.99/2
    (100, 0.0001),               # the end of the anneal: 1% of the peak
])
def test_onecycle_at_known_steps(step, rate):
    config = TrainConfig(steps=100, learning_rate=0.01, schedule="onecycle", warmup_fraction=0.1)
    assert config.learning_rate_at(step) == pytest.approx(rate, rel=1e-14)


def test_onecycle_last_step_and_shape():
    config = TrainConfig(steps=100, learning_rate=0.01, schedule="onecycle", warmup_fraction=0.1)
    last = 0.01 * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * 89 / 90)))
    assert config.learning_rate_at(99) == pytest.approx(last, rel=1e-14)
    rates = np.array([config.learning_rate_at(t) for t in range(100)])
    assert int(np.argmax(rates)) == 10
    assert np.all(np.diff(rates[:11]) > 0) and np.all(np.diff(rates[10:]) < 0)
    assert np.allclose(np.diff(rates[:11]), 0.01 * 0.96 / 10, rtol=1e-12)  # a linear warm-up


@pytest.mark.parametrize(("step", "rate"), [
    (0, 0.02),                   # no warm-up: the peak at the first step
    (25, 0.02 * (0.01 + 0.99 * 0.5 * (1 + math.sqrt(0.5)))),
    (50, 0.02 * 0.505),
    (100, 0.02 * 0.01),
])
def test_cosine_at_known_steps(step, rate):
    config = TrainConfig(steps=100, learning_rate=0.02, schedule="cosine", warmup_fraction=0.5)
    assert config.learning_rate_at(step) == pytest.approx(rate, rel=1e-14)


def test_cosine_ignores_the_warmup_fraction():
    rates = {f: [TrainConfig(steps=40, schedule="cosine", warmup_fraction=f).learning_rate_at(t)
                 for t in range(40)] for f in (0.0, 0.3, 1.0)}
    assert rates[0.0] == rates[0.3] == rates[1.0]


def test_onecycle_without_warmup_steps_is_the_cosine():
    for steps, fraction in ((50, 0.0), (5, 0.1)):
        one = TrainConfig(steps=steps, schedule="onecycle", warmup_fraction=fraction)
        cos = TrainConfig(steps=steps, schedule="cosine")
        assert [one.learning_rate_at(t) for t in range(steps + 1)] == [
            cos.learning_rate_at(t) for t in range(steps + 1)]
        assert one.learning_rate_at(0) == one.learning_rate


def test_onecycle_all_warmup_and_one_step():
    config = TrainConfig(steps=20, learning_rate=0.01, warmup_fraction=1.0)
    assert config.learning_rate_at(19) == pytest.approx(0.01 * (0.04 + 0.96 * 19 / 20), rel=1e-14)
    assert config.learning_rate_at(20) == pytest.approx(0.01, rel=1e-14)
    single = TrainConfig(steps=1, learning_rate=0.01, schedule="cosine")
    assert single.learning_rate_at(0) == 0.01
    assert single.learning_rate_at(1) == pytest.approx(0.0001, rel=1e-14)


