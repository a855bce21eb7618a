"""``reproduce``: one table, one JSON per experiment, identical numbers for the same seed."""

from __future__ import annotations

import json

import pytest

from nlicl_lib import ConfigError
from nlicl_lib.experiments.cli import main
from nlicl_lib.experiments.reproduce import EXPERIMENTS, format_table, run_experiments, table_html


def test_every_chapter_has_an_experiment():
    assert {e.chapter for e in EXPERIMENTS.values()} == {1, 2, 3, 4, 5}


def test_unknown_experiment_is_refused(tmp_path):
    with pytest.raises(ConfigError) as info:
        run_experiments(["nope"], json_dir=tmp_path / "out")
    assert info.value.param == "experiment"
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_same_seed_same_numbers(tmp_path):
    first = run_experiments(["ch1-lsa-linear"], "cpu", seed=0, json_dir=tmp_path, progress=False)
    second = run_experiments(["ch1-lsa-linear"], "cpu", seed=0, progress=False)
    assert [r.trained for r in first] == [r.trained for r in second]
    assert [r.reference for r in first] == [r.reference for r in second]
    data = json.loads((tmp_path / "ch1-lsa-linear.json").read_text())
    assert data["experiment"] == "ch1-lsa-linear"
    assert data["trained_loss"] / data["null_loss"] == first[0].trained
    assert abs(first[0].ratio - 1) < 0.03  # the 1-layer LSA reaches Theorem 5 (thm-linear-optimum)
    table = format_table(first)
    assert "ch1-lsa-linear" in table and f"{first[0].ratio:.4f}" in table
    assert "<th scope=\"row\">" in table_html(first)


def test_cli_lists_and_requires_a_choice(capsys):
    assert main(["reproduce", "--list"]) == 0
    assert "ch1-lsa-linear" in capsys.readouterr().out
    assert main(["reproduce"]) == 2
    assert "--all" in capsys.readouterr().err
