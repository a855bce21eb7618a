"""Chapter 5's precomputed depth study: the committed data file is what the script makes (a
subset rerun here), and the numbers the chapter quotes follow from it."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.experiments.depth_study import (
    DATA_FILE,
    FIT_SAMPLES,
    STUDIES,
    budget_pairs,
    load_studies,
    reference_samples,
    run_study,
    sample_falls,
    sample_statistics,
    side_of_spread,
    stack_weights,
    summary,
)
from nlicl_lib.experiments.depth_sweep import shape_key

ROOT = Path(__file__).resolve().parents[1]


def run_script(tmp_path, *args, study: str = "d3") -> dict:
    out = tmp_path / "study.json"
    # one torch thread: the slow tests run one per core (pytest-xdist)
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_depth_study.py"), "--only", study,
                    "--threads", "1", *args, "--out", str(out)], check=True, cwd=ROOT,
                   capture_output=True)
    return json.loads(out.read_text())[study]


def test_committed_file_holds_every_study_and_shape():
    studies = load_studies()
    assert set(studies) == set(STUDIES)
    for name, study in STUDIES.items():
        data = studies[name]
        for m in study.slots:
            assert len(data["references"][str(m)]["loss"]) == study.reference_depth
            for L in study.depths:
                run = data["trained"][shape_key(m, L)]
                assert np.isfinite(run["loss"])  # train raises on a diverged run
    assert STUDIES["d5"].slots == (5, 15)  # the depth-matched wide control: all p_2 slots


def test_references_are_stored_for_independent_fitting_samples():
    """At least three fitting samples per reference, each its own seed; block 1 is exact and
    the test contexts are shared, so the samples agree there and differ from block 2 on; the
    stored statistics are those of the stored samples; sample 0 is the reference's loss."""
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


def test_sample_statistics_and_falls_on_synthetic_samples():
    losses = np.array([[1.0, 0.5, 0.4, 0.3], [1.0, 0.6, 0.65, 0.2], [1.0, 0.55, 0.5, 0.35]])
    stats = sample_statistics(losses)
    assert stats["median"] == [1.0, 0.55, 0.5, 0.3] and stats["max"][2] == 0.65
    assert stats["std"][0] == 0.0 and stats["mean"][3] == pytest.approx(0.85 / 3)
    falls = sample_falls(losses)
    assert (falls.samples, falls.falling, falls.rises) == (3, 2, {3: 1})
    assert falls.rise_text() == "depth 3 (1 of 3 samples)"
    assert sample_falls(losses[[0, 2]]).rise_text() == "no depth"
    with pytest.raises(ConfigError, match="losses"):
        sample_falls(np.ones(4))
    assert side_of_spread(0.1, 0.01, np.array([0.3, 0.4]), np.array([0.01, 0.01])) == "below"
    assert side_of_spread(0.5, 0.01, np.array([0.3, 0.4]), np.array([0.01, 0.01])) == "above"
    assert side_of_spread(0.35, 0.01, np.array([0.3, 0.4]), np.zeros(2)) == \
        "within the spread of"


def test_the_monotonicity_sentence_follows_from_the_samples():
    """The page's sentence on the references' fall is computed from the stored samples: make
    one sample rise at the last block and the summary says so."""
    study = json.loads(json.dumps(load_studies()["d3"]))
    samples = study["references"]["6"]["fit_samples"]["loss"]
    numbers = summary(study, "d3")
    falls = sample_falls(samples)
    assert numbers["d3_ref6_falling"] == falls.falling
    assert numbers["d3_ref6_rises"] == falls.rise_text()
    assert numbers["d3_ref6_last"] == pytest.approx(np.mean(np.array(samples)[:, -1])
                                                    / study["null_loss"])
    samples[1][-1] = 2 * samples[1][-2]
    rising = summary(study, "d3")
    assert rising["d3_ref6_falling"] == sample_falls(samples).falling < FIT_SAMPLES
    assert f"depth {len(samples[1])} (" in rising["d3_ref6_rises"]
    assert rising["d3_ref6_last_max"] == pytest.approx(samples[1][-1] / study["null_loss"])


def test_references_fall_with_depth_and_start_at_the_exact_block():
    for study in load_studies().values():
        for ref in study["references"].values():
            loss, gain_error = np.array(ref["loss"]), np.array(ref["gain_std_error"])
            assert np.all(np.diff(ref["fit_loss"]) <= 1e-9 * ref["fit_loss"][0])
            # on fresh contexts each block's gain is positive or within 3 paired errors of 0
            assert np.all(np.diff(loss) < 3 * gain_error[1:])
            assert abs(loss[0] - ref["exact_first"]) < 4 * ref["std_error"][0]


@pytest.mark.slow
def test_script_reproduces_the_committed_references(tmp_path):
    fresh, committed = run_script(tmp_path, "--parts", "references"), load_studies()["d3"]
    for m in ("3", "6"):
        for key in ("loss", "std_error", "fit_loss"):
            assert np.allclose(fresh["references"][m][key], committed["references"][m][key],
                               rtol=1e-6), (m, key)
        assert np.allclose(fresh["references"][m]["fit_samples"]["loss"],
                           committed["references"][m]["fit_samples"]["loss"], rtol=1e-6), m
        assert fresh["single_block"][m] == pytest.approx(committed["single_block"][m], rel=1e-6)


@pytest.mark.slow
def test_script_reproduces_the_wide_control_references(tmp_path):
    """d = 5, m = 15: the first two blocks of two fitting samples, rerun (the greedy
    reference's first blocks do not depend on the later ones)."""
    fresh = run_script(tmp_path, "--parts", "references", "--reference-slots", "15",
                       "--reference-depth", "2", "--fit-samples", "2", study="d5")
    committed = load_studies()["d5"]["references"]["15"]
    assert set(fresh["references"]) == {"15"}
    for key in ("loss", "std_error", "worst_share"):
        assert np.allclose(np.array(fresh["references"]["15"]["fit_samples"][key]),
                           np.array(committed["fit_samples"][key])[:2, :2], rtol=1e-6), key


@pytest.mark.slow
@pytest.mark.parametrize(("study", "slots"), [("d3", 3), ("d5", 15)],
                         ids=["narrow-d3", "wide-control-d5"])
def test_script_reproduces_trained_stacks(tmp_path, study, slots):
    """Depths 1 and 2 trained alone rather than in the study's ensemble (d = 3 with m = 3; the
    d = 5 wide control with m = 15): the stored runs up to float32 rounding."""
    fresh = run_script(tmp_path, "--parts", "trained", "--shapes", f"{slots}:1", f"{slots}:2",
                       study=study)
    committed = load_studies()[study]["trained"]
    for key in (f"m{slots}-L1", f"m{slots}-L2"):
        a, b = fresh["trained"][key], committed[key]
        assert a["parameters"] == b["parameters"]
        assert a["loss"] == pytest.approx(b["loss"], rel=0.01), key
        assert abs(a["loss"] - b["loss"]) < 3 * b["std_error"] + 1e-3 * b["loss"], key


def test_weights_count_the_trained_parameters():
    for study in load_studies().values():
        d = study["task"]["input_dim"]
        for run in study["trained"].values():
            assert run["parameters"] == stack_weights(d, run["slots"], run["depth"])


def test_budget_pairs_and_summary_follow_from_the_data():
    study = load_studies()["d3"]
    pairs = budget_pairs(study, 3, 6, "features")
    assert [(p.narrow_depth, p.wide_depth) for p in pairs] == [(2, 1), (4, 2), (6, 3), (8, 4)]
    assert all(p.narrow_budget == p.wide_budget for p in pairs)
    weights = budget_pairs(study, 3, 6, "weights")
    assert all(p.narrow_budget <= p.wide_budget for p in weights)
    numbers = summary(study, "d3")
    null = study["null_loss"]
    assert numbers["d3_ref3_last"] == pytest.approx(
        np.mean(study["references"]["3"]["fit_samples"]["loss"], axis=0)[-1] / null)
    assert numbers["d3_feature_pairs"] == 4
    wins = [p for p in pairs if p.narrow_loss < p.wide_loss]
    assert numbers["d3_feature_wins"] == len(wins)
    assert numbers["d3_feature_wins_deeper"] == sum(p.narrow_depth > p.wide_depth for p in wins)
    every_win = wins + [p for p in weights if p.narrow_loss < p.wide_loss]
    ratios = {p.narrow_depth / p.wide_depth for p in every_win}
    assert numbers["d3_win_ratio"] == (f"{ratios.pop():g}" if len(ratios) == 1 else
                                       "no single ratio" if ratios else "no win")
    wide = summary(load_studies()["d5"], "d5")
    assert wide["d5_cost_min"] <= wide["d5_cost_max"] and wide["d5_depth_gain"] > 1
    assert all(isinstance(v, float | int | str) and not isinstance(v, np.floating)
               for v in numbers.values())


def test_bad_requests_are_refused():
    with pytest.raises(ConfigError, match="study"):
        run_study("d7")
    with pytest.raises(ConfigError, match="shapes"):
        run_study("d3", ("trained",), shapes=[(4, 1)])
    with pytest.raises(ConfigError, match="reference_slots"):
        run_study("d3", ("references",), reference_slots=[4])
    with pytest.raises(ConfigError, match="reference_depth"):
        run_study("d3", ("references",), reference_depth=9)
    with pytest.raises(ConfigError, match="fit_samples"):
        run_study("d3", ("references",), fit_samples=0)
    with pytest.raises(ConfigError, match="narrow"):
        budget_pairs(load_studies()["d3"], 6, 3, "weights")
    assert DATA_FILE.name == "depth_study.json"
