"""The stored studies (chapter 4's full blocks, chapter 5's depth study; the free stacks are in
test_free_stacks.py): the stored files are what the scripts make, and the pages' sentences
follow from them."""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments import studies
from nlicl_lib.experiments.studies import (
    FIT_SAMPLES,
    STUDIES,
    budget_pairs,
    load_studies,
    reference_samples,
    sample_falls,
    sample_statistics,
    shape_key,
    stack_weights,
)
from nlicl_lib.pages import ch4
from nlicl_lib.pages.ch5 import study_values
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
            assert len(data["references"][str(m)]["loss"]) == study.reference_depth
            for L in study.depths:
                run = data["trained"][shape_key(m, L)]
                assert np.isfinite(run["loss"])  # train raises on a diverged run
                assert run["parameters"] == stack_weights(data["task"]["input_dim"], m, L)


def test_references_are_stored_for_independent_fitting_samples():
    assert FIT_SAMPLES >= 3
    for name, study in load_studies().items():
        for m, ref in study["references"].items():
            samples = ref["fit_samples"]
            losses = np.array(samples["loss"])
            assert losses.shape == (FIT_SAMPLES, STUDIES[name].reference_depth), (name, m)
            assert len(set(samples["fit_seeds"])) == FIT_SAMPLES
            assert np.array_equal(losses[0], ref["loss"])
            assert np.allclose(losses[:, 0], losses[0, 0], rtol=1e-12)
            for a in range(FIT_SAMPLES):
                for b in range(a):
                    assert not np.allclose(losses[a, 1:], losses[b, 1:], rtol=1e-6), (name, m)
            stats = sample_statistics(losses)
            for key in ("mean", "median", "min", "max", "std"):
                assert np.allclose(samples[key], stats[key], rtol=1e-12), (name, m, key)
            assert np.allclose(reference_samples(study, int(m)), losses / study["null_loss"])


def test_the_monotonicity_sentence_follows_from_the_samples():
    study = json.loads(json.dumps(load_studies()["d3"]))
    samples = study["references"]["6"]["fit_samples"]["loss"]
    numbers = study_values(study, "d3")
    assert numbers["d3_ref6_falling"] == sample_falls(samples).falling
    assert numbers["d3_ref6_last"] == pytest.approx(np.mean(np.array(samples)[:, -1])
                                                    / study["null_loss"])
    samples[1][-1] = 2 * samples[1][-2]
    rising = study_values(study, "d3")
    assert rising["d3_ref6_falling"] == sample_falls(samples).falling < FIT_SAMPLES
    assert f"depth {len(samples[1])} (" in rising["d3_ref6_rises"]
    assert rising["d3_ref6_last_max"] == pytest.approx(samples[1][-1] / study["null_loss"])
    falls = sample_falls([[1.0, 0.5, 0.4, 0.3], [1.0, 0.6, 0.65, 0.2], [1.0, 0.55, 0.5, 0.35]])
    assert (falls.samples, falls.falling, falls.rises) == (3, 2, {3: 1})


def test_references_fall_with_depth_and_start_at_the_exact_block():
    for study in load_studies().values():
        for ref in study["references"].values():
            loss, gain_error = np.array(ref["loss"]), np.array(ref["gain_std_error"])
            assert np.all(np.diff(ref["fit_loss"]) <= 1e-9 * ref["fit_loss"][0])
            # on fresh contexts each block's gain is positive or within 3 paired errors of 0
            assert np.all(np.diff(loss) < 3 * gain_error[1:])
            assert abs(loss[0] - ref["exact_first"]) < 4 * ref["std_error"][0]


def test_budget_pairs_match_equal_features_and_at_most_equal_weights():
    study = load_studies()["d3"]
    pairs = budget_pairs(study, 3, 6, "features")
    assert [(p.narrow_depth, p.wide_depth) for p in pairs] == [(2, 1), (4, 2), (6, 3), (8, 4)]
    assert all(p.narrow_budget == p.wide_budget for p in pairs)
    assert all(p.narrow_budget <= p.wide_budget for p in budget_pairs(study, 3, 6, "weights"))
    assert study_values(study, "d3")["d3_feature_pairs"] == 4
    assert study_values(load_studies()["d5"], "d5")["d5_depth_gain"] > 1


@pytest.mark.slow
def test_script_reproduces_the_stored_references(tmp_path):
    fresh, stored = run_script(tmp_path, "--parts", "references"), load_studies()["d3"]
    for m in ("3", "6"):
        for key in ("loss", "std_error", "fit_loss"):
            assert np.allclose(fresh["references"][m][key], stored["references"][m][key],
                               rtol=1e-6), (m, key)
        assert np.allclose(fresh["references"][m]["fit_samples"]["loss"],
                           stored["references"][m]["fit_samples"]["loss"], rtol=1e-6), m
        assert fresh["single_block"][m] == pytest.approx(stored["single_block"][m], rel=1e-6)


@pytest.mark.slow
def test_script_reproduces_the_wide_control_references(tmp_path):
    fresh = run_script(tmp_path, "--parts", "references", "--reference-slots", "15",
                       "--reference-depth", "2", "--fit-samples", "2", study="d5")
    stored = load_studies()["d5"]["references"]["15"]
    assert set(fresh["references"]) == {"15"}
    for key in ("loss", "std_error", "worst_share"):
        assert np.allclose(np.array(fresh["references"]["15"]["fit_samples"][key]),
                           np.array(stored["fit_samples"][key])[:2, :2], rtol=1e-6), key


@pytest.mark.slow
@pytest.mark.parametrize(("study", "slots"), [("d3", 3), ("d5", 15)],
                         ids=["narrow-d3", "wide-control-d5"])
def test_script_reproduces_trained_stacks(tmp_path, study, slots):
    fresh = run_script(tmp_path, "--parts", "trained", "--shapes", f"{slots}:1", f"{slots}:2",
                       study=study)
    stored = load_studies()[study]["trained"]
    for key in (f"m{slots}-L1", f"m{slots}-L2"):
        a, b = fresh["trained"][key], stored[key]
        assert a["parameters"] == b["parameters"]
        assert a["loss"] == pytest.approx(b["loss"], rel=0.01), key
        assert abs(a["loss"] - b["loss"]) < 3 * b["std_error"] + 1e-3 * b["loss"], key


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
