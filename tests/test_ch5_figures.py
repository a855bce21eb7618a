"""Chapter 5's residual-stream figure (nlicl_lib.pages.ch5_figures) and the analysis behind the
page (nlicl_lib.theory.ch5_analysis, nlicl_lib.experiments.ch5_studies), on cheap real
computations: constructed and freshly initialised stacks on one prompt, small greedy
references, the committed depth studies, and a cubic study trained for a few steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib import ModelConfig, TaskConfig, TrainConfig, build_model, sample_prompts
from nlicl_lib.pages import ch5_figures, depth_figures
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.experiments import ch5_studies, depth_study
from nlicl_lib.theory import ch5_analysis, depth
from nlicl_lib.theory.closed_forms import null_loss

TASK = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
SLOTS = 3


@pytest.fixture(scope="module")
def stacks():
    schedule = depth.monomial_schedule(3, SLOTS, 3)
    gammas = ch5_analysis.random_gammas(3 + SLOTS, len(schedule))
    constructed = depth.deep_glu_lsa(3, schedule, gammas, SLOTS, glu_reads="x")
    fresh = build_model(ModelConfig(kind="glu-lsa", depth=3, feature_slots=SLOTS, glu_reads="x"),
                        TASK)
    return schedule, gammas, constructed, fresh


@pytest.fixture(scope="module")
def shown():
    return sample_prompts(TASK, 1, seed=11, step=0, dtype=torch.float64)


def test_random_gammas_are_the_seeded_normal_draws():
    gammas = ch5_analysis.random_gammas(6, 2, scale=0.05, seed=0)
    rng = np.random.default_rng(0)
    expected = [0.05 * rng.standard_normal((6, 6)) for _ in range(2)]
    assert all(np.array_equal(g, e) for g, e in zip(gammas, expected, strict=True))
    with pytest.raises(ConfigError, match="count"):
        ch5_analysis.random_gammas(6, 0)


def test_the_construction_is_the_recursion_in_float64(stacks):
    schedule, gammas, constructed, _ = stacks
    prompts = sample_prompts(TASK, 16, seed=7, step=0, dtype=torch.float64)
    assert ch5_analysis.stream_recursion_gap(constructed, schedule, gammas, prompts) < 1e-12
    with pytest.raises(ConfigError, match="schedule"):
        ch5_analysis.stream_recursion_gap(constructed, schedule[:2], gammas[:2], prompts)
    report = ch5_analysis.construction_report(schedule, constructed.blocks[1].glu,
                                              ["x1", "x2", "x3"])
    lines = report.splitlines()
    assert lines[0] == "block 1 writes phi_1 = (x1^2, x2^2, x3^2)"
    # block 2 replaces the squares by the cross terms: +x1 x2 into slot 1, -x1^2 out of it
    assert "  x1*x2  ->  slots += (1, 0, 0)" in lines
    assert "  x1*x1  ->  slots += (-1, 0, 0)" in lines


def test_residual_stream_figure_draws_the_stream_next_to_the_recursion(stacks, shown):
    _, _, constructed, fresh = stacks
    residuals = ch5_analysis.stream_residuals({"constructed": constructed, "fresh": fresh},
                                              shown.x[0], shown.y[0])
    for name in ("constructed", "fresh"):  # Theorem 13: GD-form attention, GLUs reading x
        gap = (residuals.labels_seen[name] - residuals.requeried[name]).abs().max()
        assert float(gap) < 1e-12 and residuals.labels_seen[name].shape == (4, 20)
    fig = ch5_figures.residual_stream_figure(residuals)
    owner = fig.layout.meta["nlicl_sliders"]["panel_of_trace"]
    assert len(fig.data) == 2 * 4 * 3 and max(owner) == 7
    first = [t for t, p in zip(fig.data, owner, strict=True) if p == 2]  # constructed, ℓ = 2
    assert [t.name for t in first] == ["labels y_i (block 0)",
                                       "label entry of token i after block ℓ",
                                       "y_i − prediction of the first ℓ blocks"]
    assert list(first[0].y) == residuals.labels_seen["constructed"][0].tolist()
    assert list(first[1].y) == residuals.labels_seen["constructed"][2].tolist()
    assert list(first[2].y) == residuals.requeried["constructed"][2].tolist()
    assert first[2].marker.symbol == "circle-open" and list(first[0].x) == list(range(1, 21))
    assert fig.layout.meta["nlicl_sliders"]["names"] == ["depth-3 stack", "after block ℓ"]
    assert fig.layout.xaxis.title.text == "context example i"
    assert fig.layout.yaxis.title.text == "label entry"
    report = residuals.report().splitlines()
    assert report[0].endswith("mean r_i^2 after blocks 0..3") and len(report) == 3
    with pytest.raises(ValueError, match="same blocks"):
        short = ch5_analysis.StreamResiduals({"a": torch.zeros(4, 20), "b": torch.zeros(3, 20)},
                                             {"a": torch.zeros(4, 20), "b": torch.zeros(3, 20)})
        ch5_figures.residual_stream_figure(short)


def test_dense_attention_breaks_the_identity_and_a_stack_reads_as_its_recursion(stacks, shown):
    _, _, constructed, fresh = stacks
    assert ch5_analysis.dense_attention_gap(constructed, shown.x[0], shown.y[0]) > 0.01
    report = ch5_analysis.trained_stack_report(fresh, shown).splitlines()
    assert float(report[1].split()[-1]) < 1e-12
    assert len(report) == 3 + SLOTS  # one quadratic form per slot


def test_greedy_reference_table_and_values():
    reference = depth.greedy_reference(TASK, depth.schedule_features(TASK, SLOTS, 3),
                                       fit_contexts=200, test_contexts=100)
    lines = ch5_analysis.greedy_reference_report(reference, SLOTS).splitlines()
    assert lines[0] == "n = 20, m = 3: greedy reference, loss / E[y²]" and len(lines) == 5
    values = ch5_analysis.greedy_reference_values(reference, "short")
    assert values["short_fit_last"] == float(reference.fit_loss[-1] / null_loss(TASK))
    assert values["short_best_depth"] == int(np.argmin(reference.loss)) + 1
    assert reference.fit_loss[-1] <= reference.fit_loss[0]  # the fit can only fall


def test_study_tables_quote_the_committed_studies():
    studies = depth_study.load_studies()
    study, wide5 = studies["d3"], studies["d5"]
    table = ch5_studies.study_report(study).splitlines()
    assert len(table) == 3 + max(study["depths"])
    run = study["trained"]["m3-L8"]
    assert table[-1].split()[:2] == ["8", f"{run['loss'] / study['null_loss']:.4f}"]
    assert table[3 + 4].split()[1] == "-"  # depth 5 was not trained
    pairs = ch5_studies.budget_report(study, narrow=3, wide=6).splitlines()
    assert pairs[0].startswith("at most the same weights") and "( 126)" in pairs[1]
    narrow = ch5_studies.narrow_study_report(wide5).splitlines()
    assert narrow[1] == "  with all 15 " + f"{wide5['kernel_optimum'] / wide5['null_loss']:.4f}" \
        + " (D = 21)"
    null = wide5["null_loss"]
    five, fifteen = wide5["trained"]["m5-L8"]["loss"], wide5["trained"]["m15-L8"]["loss"]
    assert narrow[-1].split()[0] == "8" and narrow[-1].split()[-2] == f"{five / fifteen:.2f}"
    assert narrow[-1].split()[5] == f"{fifteen / null:.4f}"
    spread = ch5_studies.reference_spread_report(study).splitlines()
    samples = np.array(study["references"]["6"]["fit_samples"]["loss"]) / study["null_loss"]
    row = spread[-1].split()
    assert row[0] == "8" and row[1:1 + len(samples)] == [f"{v:.4f}" for v in samples[:, -1]]
    assert row[1 + len(samples)] == f"{np.median(samples[:, -1]):.4f}"
    for text in (table, pairs, narrow, spread):
        assert max(map(len, text)) <= 78


def test_depth_figure_draws_both_token_sizes_and_the_references_spread():
    study = depth_study.load_studies()["d5"]
    fig = depth_figures.depth_figure(study, "d = 5")
    names = [trace.name for trace in fig.data]
    assert "trained, m = 5 slots" in names and "trained, m = 15 slots" in names
    wide = fig.data[names.index("L steps of kernel GD, best Γ (m = 15)")]
    samples = depth_study.reference_samples(study, 15)
    errors = np.array(study["references"]["15"]["fit_samples"]["std_error"]) / study["null_loss"]
    assert np.allclose(wide.y, samples.mean(axis=0))
    assert np.allclose(np.array(wide.y) + np.array(wide.error_y.array),
                       (samples + 2 * errors).max(axis=0))
    assert np.allclose(np.array(wide.y) - np.array(wide.error_y.arrayminus),
                       (samples - 2 * errors).min(axis=0))
    assert wide.error_y.symmetric is False


def test_cubic_study_and_its_construction():
    cubic_task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    config = TrainConfig(steps=5, batch_size=32, learning_rate=0.02, seed=0)
    study = ch5_studies.cubic_study(cubic_task, 10, config, test_prompts=50, fit_contexts=100,
                                    test_contexts=100, batch_size=100)
    assert study.all_monomials == 19 and study.all_features < study.one_block
    values = study.prose_values()
    assert values["cubic_depth2"] == study.sweep.normalised("m10-L2")
    assert values["cubic_trained_vs_all"] in ("below", "above", "within two standard errors of")
    assert study.side_of_all_features(0.0, 0.0) == "below"
    assert study.side_of_all_features(2 * study.all_features, 0.0) == "above"
    assert study.report().splitlines()[-1].startswith("one GD step on all 19 monomials")
    with pytest.raises(ConfigError, match="task"):
        ch5_studies.cubic_study(TASK, 10, config, 50, 100, 100, 100)
    listing = ch5_analysis.cubic_construction_report(input_dim=3, slots=10)
    assert "x1*slot1[x1^2]" in listing and "x1 x2 x3" in listing
    assert max(len(line) for line in listing.splitlines()) <= ch5_analysis.PRINT_WIDTH


def test_training_curves_have_two_short_sliders():
    # one slider over every run had 24 steps, about 9 px each on a phone: two sliders, the
    # study and its slots, then the depth, each step a target a finger can hit
    studies = depth_study.load_studies()
    fig = depth_figures.curves_figure(studies, "curves")
    steps = [len(slider.steps) for slider in fig.layout.sliders]
    shapes = sum(len(study["slots"]) for study in studies.values())
    assert steps == [shapes, len(studies["d3"]["depths"])] and max(steps) <= 8
    assert len(fig.data) == 3 * shapes * len(studies["d3"]["depths"])
    broken = {**studies, "d3": {**studies["d3"], "depths": [1, 2]}}
    with pytest.raises(ConfigError, match="studies"):
        depth_figures.curves_figure(broken, "curves")
