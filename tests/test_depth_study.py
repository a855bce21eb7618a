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
    STUDIES,
    budget_pairs,
    load_studies,
    run_study,
    stack_weights,
    summary,
)
from nlicl_lib.experiments.depth_sweep import shape_key

ROOT = Path(__file__).resolve().parents[1]


def run_script(tmp_path, *args) -> dict:
    out = tmp_path / "study.json"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_depth_study.py"), "--only", "d3",
                    *args, "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    return json.loads(out.read_text())["d3"]


def test_committed_file_holds_every_study_and_shape():
    studies = load_studies()
    assert set(studies) == set(STUDIES)
    for name, study in STUDIES.items():
        data = studies[name]
        for m in study.slots:
            assert len(data["references"][str(m)]["loss"]) == study.reference_depth
            for L in study.depths:
                run = data["trained"][shape_key(m, L)]
                assert not run["diverged"] and np.isfinite(run["loss"])


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
        assert fresh["single_block"][m] == pytest.approx(committed["single_block"][m], rel=1e-6)


@pytest.mark.slow
def test_script_reproduces_trained_stacks(tmp_path):
    """Trained alone rather than in the study's ensemble: the same run up to float32 rounding."""
    fresh = run_script(tmp_path, "--parts", "trained", "--shapes", "3:1", "3:2")
    committed = load_studies()["d3"]["trained"]
    for key in ("m3-L1", "m3-L2"):
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
    assert numbers["d3_ref3_last"] == study["references"]["3"]["loss"][-1] / null
    assert numbers["d3_feature_pairs"] == 4
    assert numbers["d3_feature_wins"] == sum(p.narrow_loss < p.wide_loss for p in pairs)
    assert all(isinstance(v, float | int | str) and not isinstance(v, np.floating)
               for v in numbers.values())


def test_bad_requests_are_refused():
    with pytest.raises(ConfigError, match="study"):
        run_study("d7")
    with pytest.raises(ConfigError, match="shapes"):
        run_study("d3", ("trained",), shapes=[(4, 1)])
    with pytest.raises(ConfigError, match="narrow"):
        budget_pairs(load_studies()["d3"], 6, 3, "weights")
    assert DATA_FILE.name == "depth_study.json"
