"""Chapter 5's page module (nlicl_lib.pages.ch5) on cheap real computations: the residual
stream against the recursion (Theorem 13 (thm-depth-bcd), Remark 14 (rem-full-attention)), the
figures of the stored depth studies, the cubic study, and the widths of what the page prints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib import ModelConfig, TaskConfig, TrainConfig, build_model, sample_prompts
from nlicl_lib.pages import ch5
from nlicl_lib.theory import depth

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


def test_residual_stream_figure_draws_the_stream_next_to_the_recursion(stacks, shown):
    _, _, constructed, fresh = stacks
    residuals = depth.stream_residuals({"constructed": constructed, "fresh": fresh},
                                       shown.x[0], shown.y[0])
    for name in ("constructed", "fresh"):  # Theorem 13: GD-form attention, GLUs reading x
        gap = (residuals.labels_seen[name] - residuals.requeried[name]).abs().max()
        assert float(gap) < 1e-12 and residuals.labels_seen[name].shape == (4, 20)
    fig = ch5.residual_stream_figure(residuals)
    owner = fig.layout.meta["nlicl_sliders"]["panel_of_trace"]
    assert len(fig.data) == 2 * 4 * 3 and max(owner) == 7
    first = [t for t, p in zip(fig.data, owner, strict=True) if p == 2]  # constructed, ℓ = 2
    assert list(first[0].y) == residuals.labels_seen["constructed"][0].tolist()
    assert list(first[1].y) == residuals.labels_seen["constructed"][2].tolist()
    assert list(first[2].y) == residuals.requeried["constructed"][2].tolist()


def test_depth_figure_draws_both_token_sizes_and_the_references_spread():
    study = ch5.load_studies()["d5"]
    fig = ch5.depth_figure(study, "d = 5")
    names = [trace.name for trace in fig.data]
    assert "trained, m = 5 slots" in names and "trained, m = 15 slots" in names
    wide = fig.data[names.index("L steps of kernel GD, best Γ (m = 15)")]
    samples = np.array(study["references"]["15"]["fit_samples"]["loss"]) / study["null_loss"]
    errors = np.array(study["references"]["15"]["fit_samples"]["std_error"]) / study["null_loss"]
    assert np.allclose(wide.y, samples.mean(axis=0))
    assert np.allclose(np.array(wide.y) + np.array(wide.error_y.array),
                       (samples + 2 * errors).max(axis=0))
    assert np.allclose(np.array(wide.y) - np.array(wide.error_y.arrayminus),
                       (samples - 2 * errors).min(axis=0))


def test_training_curves_have_two_short_sliders():
    # one slider over every run had 24 steps, about 9 px each on a phone
    studies = ch5.load_studies()
    fig = ch5.curves_figure(studies, "curves")
    steps = [len(slider.steps) for slider in fig.layout.sliders]
    shapes = sum(len(study["slots"]) for study in studies.values())
    assert steps == [shapes, len(studies["d3"]["depths"])] and max(steps) <= 8


def test_the_cubic_study_beats_one_block_only_with_all_monomials():
    cubic_task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    config = TrainConfig(steps=5, batch_size=32, learning_rate=0.02, seed=0)
    study = ch5.cubic_study(cubic_task, 10, config, test_prompts=50, fit_contexts=100,
                            test_contexts=100, batch_size=100)
    assert study.all_monomials == 19 and study.all_features < study.one_block
    assert ch5.cubic_values(study)["cubic_depth2"] == study.sweep.normalised("m10-L2")
    # block 2's units multiply an input by a stored quadratic slot: how depth raises the degree
    assert "x1*slot1[x1^2]" in ch5.cubic_construction_report(input_dim=3, slots=10)


def test_what_the_page_prints_fits_78_columns():
    studies = ch5.load_studies()
    printed = [ch5.study_report(studies["d3"]), ch5.budget_report(studies["d3"], 3, 6),
               ch5.narrow_study_report(studies["d5"]), ch5.reference_spread_report(studies["d5"]),
               ch5.free_stack_report(ch5.load_free_stacks()),
               ch5.cubic_construction_report(input_dim=3, slots=10)]
    assert max(len(line) for text in printed for line in text.splitlines()) <= 78
