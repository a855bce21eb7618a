"""The stored studies (chapter 4's full blocks, chapter 5's depth study; the free stacks are in
test_free_stacks.py): the stored files are what the scripts make, and the pages' sentences
follow from them."""

import json
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments import studies
from nlicl_lib.experiments.studies import (
    CONVERGED,
    FIT_SAMPLES,
    HISTORY_WINDOW,
    STUDIES,
    STUDY_TRAINING,
    TEST_SAMPLES,
    TRAINED_TEST_CONTEXTS,
    budget_pairs,
    converged,
    load_studies,
    reference_estimates,
    reference_samples,
    sample_falls,
    shape_key,
    stack_weights,
    trained_estimate,
)
from nlicl_lib.pages import ch4
from nlicl_lib.theory.capacity import slot_increments
from nlicl_lib.training.train import train

ROOT = Path(__file__).resolve().parents[1]


def run_script(tmp_path, *args, study: str = "d3") -> dict:
    out = tmp_path / "study.json"
    # one torch thread: the slow tests run one per core (pytest-xdist)
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_depth_study.py"), "--only", study,
                    "--threads", "1", *args, "--out", str(out)], check=True, cwd=ROOT,
                   capture_output=True)
    return json.loads(out.read_text())[study]


def test_stored_file_holds_every_study_and_shape():
    stored = load_studies()
    assert set(stored) == set(STUDIES)
    for name, study in STUDIES.items():
        data = stored[name]
        for m in study.slots:
            assert np.shape(data["references"][str(m)]["loss"]) == (FIT_SAMPLES, study.reference_depth)
            for L in study.depths:
                run = data["trained"][shape_key(m, L)]
                assert np.isfinite(run["loss"]["mean"])  # train raises on a diverged run
                assert run["parameters"] == stack_weights(data["task"]["input_dim"], m, L)


def test_references_are_stored_for_independent_samples():
    """Every reference is fitted and measured on FIT_SAMPLES independent samples: block 1 is
    exact (the same Gamma in every sample), so its sample means differ by test contexts alone;
    the joined estimate is their count-weighted mean."""
    assert FIT_SAMPLES >= 3
    for name, study in load_studies().items():
        for m, ref in study["references"].items():
            losses = np.array(ref["loss"])
            assert losses.shape == (FIT_SAMPLES, STUDIES[name].reference_depth), (name, m)
            assert ref["seeds"] == list(range(FIT_SAMPLES))
            assert ref["test_contexts"] >= 100_000
            for a in range(FIT_SAMPLES):
                for b in range(a):
                    assert not np.allclose(losses[a], losses[b], rtol=1e-6), (name, m)
            joined = reference_estimates(study, int(m))
            assert [e.mean for e in joined] == pytest.approx(
                (losses / study["null_loss"]).mean(axis=0), rel=1e-12)
            assert np.allclose(reference_samples(study, int(m)), losses / study["null_loss"])


def test_a_rise_is_counted_per_sample():
    falls = sample_falls([[1.0, 0.5, 0.4, 0.3], [1.0, 0.6, 0.65, 0.2], [1.0, 0.55, 0.5, 0.35]])
    assert (falls.samples, falls.falling, falls.rises) == (3, 2, {3: 1})


def test_references_fall_with_depth_and_start_at_the_exact_block():
    for study in load_studies().values():
        for ref in study["references"].values():
            for loss, fit, error, gain_error in zip(ref["loss"], ref["fit_loss"],
                                                    ref["std_error"], ref["gain_std_error"],
                                                    strict=True):
                assert np.all(np.diff(fit) <= 1e-9 * fit[0])
                # on fresh contexts each block's gain is positive or within 3 paired errors of 0
                assert np.all(np.diff(loss) < 3 * np.array(gain_error[1:]))
                assert abs(loss[0] - ref["exact_first"]) < 4 * error[0]


def test_stacks_are_measured_on_independent_test_samples_and_checked_at_half_the_steps():
    for study in load_studies().values():
        assert study["training"] == asdict(STUDY_TRAINING)
        for key, run in study["trained"].items():
            full = trained_estimate(study, run["slots"], run["depth"])
            half = trained_estimate(study, run["slots"], run["depth"], half_steps=True)
            assert len(full.sample_means) == len(half.sample_means) == TEST_SAMPLES
            assert full.num_prompts == TEST_SAMPLES * TRAINED_TEST_CONTEXTS
            assert np.mean(full.sample_means) == pytest.approx(full.mean, rel=1e-9), key
            assert converged(study, run["slots"], run["depth"]) == (
                np.median(run["loss"]["sample_means"])
                > (1 - CONVERGED) * np.median(run["half_steps"]["loss"]["sample_means"]))


@pytest.mark.parametrize(("study", "slots", "depth"), [("d3", 3, 2), ("d5", 15, 1)],
                         ids=["narrow-d3", "wide-control-d5"])
def test_rerunning_the_start_of_a_stored_stack_gives_its_stored_curve(study, slots, depth):
    """The first two stored windows of the training curve, rerun alone (the study trains its
    stacks together: each takes the steps it takes alone)."""
    spec = STUDIES[study]
    model = build_model(ModelConfig(kind="glu-lsa", depth=depth, feature_slots=slots,
                                    glu_reads="x"), spec.task, seed=STUDY_TRAINING.seed)
    config = replace(STUDY_TRAINING, learning_rate=STUDY_TRAINING.learning_rate / depth)
    steps = 2 * HISTORY_WINDOW
    result = train(model, spec.task, config, progress=False,
                   callback=lambda step, loss: step + 1 >= steps)
    windows = np.asarray(result.loss_history[:steps]).reshape(-1, HISTORY_WINDOW).mean(axis=1)
    stored = load_studies()[study]["trained"][shape_key(slots, depth)]["history"][:2]
    np.testing.assert_allclose(windows, stored, rtol=1e-4)


def test_budget_pairs_match_equal_features_and_at_most_equal_weights():
    study = load_studies()["d3"]
    pairs = budget_pairs(study, 3, 6, "features")
    assert [(p.narrow_depth, p.wide_depth) for p in pairs] == [(2, 1), (4, 2), (6, 3), (8, 4)]
    assert all(p.narrow_budget == p.wide_budget for p in pairs)
    assert all(p.narrow_budget <= p.wide_budget for p in budget_pairs(study, 3, 6, "weights"))


@pytest.mark.slow
@pytest.mark.parametrize(("study", "slots"), [("d3", 3), ("d5", 15)])
def test_script_reproduces_the_stored_references(tmp_path, study, slots):
    """The first two samples of the first two blocks (the greedy reference's first blocks do
    not depend on the later ones)."""
    fresh = run_script(tmp_path, "--parts", "references", "--reference-slots", str(slots),
                       "--reference-depth", "2", "--fit-samples", "2", study=study)
    stored = load_studies()[study]["references"][str(slots)]
    assert set(fresh["references"]) == {str(slots)}
    for key in ("loss", "std_error", "worst_share", "fit_loss"):
        assert np.allclose(np.array(fresh["references"][str(slots)][key]),
                           np.array(stored[key])[:2, :2], rtol=1e-6), key
    assert fresh["single_block"][str(slots)] == pytest.approx(
        load_studies()[study]["single_block"][str(slots)], rel=1e-9)


# chapter 4's full blocks


@pytest.fixture(scope="module")
def full() -> dict:
    return studies.load_full_blocks()


def test_stored_full_blocks_were_made_with_the_named_settings(full):
    assert full["seeds"] == studies.FULL_BLOCK_SEEDS
    assert list(full["tasks"]) == [str(d) for d, _ in studies.FULL_BLOCK_TASKS]
    for (d, n), entry in zip(studies.FULL_BLOCK_TASKS, full["tasks"].values(), strict=True):
        task = TaskConfig(kind="poly", input_dim=d, context_length=n, degree=2)
        assert entry["task"] == asdict(task)
        assert entry["training"] == asdict(studies.full_block_training(task))
        best = slot_increments(task)
        assert entry["one_short"] == pytest.approx(best.loss(best.p2 - 1) / best.loss(best.p2),
                                                   rel=1e-12)


def test_rerunning_the_start_of_a_full_block_gives_the_stored_losses(full):
    """Seed 0 at d = 3, two windows: alone it rounds unlike in the stored mapped pass (float32)."""
    entry, steps = full["tasks"]["3"], 2 * studies.HISTORY_WINDOW
    task = TaskConfig(**entry["task"])
    model = build_model(ModelConfig(kind="glu-lsa", feature_slots=6, glu_width=6), task, seed=0)
    result = train(model, task, studies.full_block_training(task, 0), progress=False,
                   callback=lambda step, loss: step + 1 >= steps)
    windows = result.loss_history.reshape(2, -1).mean(axis=1)
    np.testing.assert_allclose(windows, entry["runs"][0]["history"][:2], rtol=1e-4)


def test_chapter_4_s_sentences_on_the_full_blocks_follow_from_them(full):
    claims = ch4.full_block_claims(full)
    assert claims.alive_below_short and claims.dead_cross_only and claims.dead_weakest
    assert claims.used_is_one_short and claims.dead_counts == {1}
    values = ch4.full_block_values(full)
    assert all(values[f"alive_d{d}"] >= 1 for d, _ in studies.FULL_BLOCK_TASKS)
    assert values["plateau_gap"] < 0.01
