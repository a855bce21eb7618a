"""Chapter 5's page module: the residual stream against the recursion (Theorem 13, Remark 14)
and the cubic study."""

from __future__ import annotations

import pytest
import torch

from nlicl_lib import ModelConfig, TaskConfig, TrainConfig, build_model, sample_prompts
from nlicl_lib.pages import ch5
from nlicl_lib.theory import depth
from nlicl_lib.training.evaluate import ERROR_BARS

TASK = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
SLOTS = 3


@pytest.fixture(scope="module")
def stacks():
    schedule = depth.monomial_schedule(3, SLOTS, 3)
    gammas = depth.random_gammas(3 + SLOTS, len(schedule))
    constructed = depth.deep_glu_lsa(3, schedule, gammas, SLOTS, glu_reads="x")
    fresh = build_model(ModelConfig(kind="glu-lsa", depth=3, feature_slots=SLOTS, glu_reads="x"),
                        TASK)
    return schedule, gammas, constructed, fresh


@pytest.fixture(scope="module")
def shown():
    return sample_prompts(TASK, 1, seed=11, step=0, dtype=torch.float64)


def test_the_page_measures_theorem_13_and_remark_14(stacks, shown):
    schedule, gammas, constructed, fresh = stacks
    prompts = sample_prompts(TASK, 16, seed=7, step=0, dtype=torch.float64)
    assert depth.stream_recursion_gap(constructed, schedule, gammas, prompts) < 1e-12
    assert depth.stack_recursion_gap(fresh, shown) < 1e-12
    assert depth.dense_attention_gap(constructed, shown.x[0], shown.y[0]) > 0.01


def test_the_cubic_study_beats_one_block_only_with_all_monomials():
    cubic_task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    config = TrainConfig(steps=5, batch_size=32, learning_rate=0.02, seed=0)
    study = ch5.cubic_study(cubic_task, 10, config, test_prompts=50, fit_contexts=100,
                            test_contexts=100, batch_size=100)
    assert study.all_monomials == 19 and study.all_features < study.one_block
    values = ch5.cubic_values(study)
    _, two = study.keys
    low, high = (study.sweep.loss[two] + s * ERROR_BARS * study.sweep.std_error[two]
                 for s in (-1, 1))
    expected = ("below" if high < study.all_features else "above" if low > study.all_features
                else "within two standard errors of")
    assert values["cubic_trained_vs_all"] == expected
    assert set(values) == {"cubic_two_vs_one", "cubic_trained_vs_all", "cubic_reference_vs_all"}
    # block 2's units multiply an input by a stored quadratic slot: how depth raises the degree
    assert "x1*slot1[x1^2]" in ch5.cubic_construction_report(input_dim=3, slots=10)


