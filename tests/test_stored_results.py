"""The stored ``reproduce`` rows the Results page shows: current, consistent, dated."""

from __future__ import annotations

import copy
import json
import math
from dataclasses import asdict

import pytest

from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments import reproduce, stored_results
from nlicl_lib.experiments.reproduce import EXPERIMENTS, Row, table_html
from nlicl_lib.experiments.stored_results import (
    STORE_FILE,
    StoredResults,
    load_results,
    stale_rows,
)
from nlicl_lib.theory.values import EXACT_OPTIMUM, LOWER_BOUND, MONTE_CARLO_REFERENCE, OPTIMISED_EXACT
from nlicl_lib.training.settings import PURPOSES, default_train_config

REFERENCE_KINDS = {EXACT_OPTIMUM, OPTIMISED_EXACT, LOWER_BOUND, MONTE_CARLO_REFERENCE}


@pytest.fixture(scope="module")
def stored() -> StoredResults:
    return load_results()


def _stale_message(stale: dict[str, str]) -> str:
    stored = STORE_FILE.relative_to(STORE_FILE.parents[3]).as_posix()
    return (f"stored results out of date; run `make reproduce` and commit {stored}:\n"
            + "\n".join(f"  {name}: {why}" for name, why in stale.items()))


def test_no_stored_row_is_stale(stored):
    stale = stale_rows(stored)
    assert not stale, _stale_message(stale)


def test_each_stored_row_is_consistent(stored):
    assert [row.experiment for row in stored.rows] == list(EXPERIMENTS)  # chapter order, all
    html = table_html(stored.rows)
    for row, raw in zip(stored.rows, stored.data["rows"], strict=True):
        assert row.chapter == EXPERIMENTS[row.experiment].chapter, row.experiment
        assert raw["description"] == EXPERIMENTS[row.experiment].description, row.experiment
        assert row.trained > 0 and row.trained_error >= 0 and row.seconds > 0, row.experiment
        assert row.device == stored.machine["device"], row.experiment
        assert (row.reference is None) == (row.reference_name is None), row.experiment
        if row.reference is None:
            assert raw["ratio"] is None and row.reference_kind is None
        else:
            assert row.reference > 0
            assert row.reference_kind in REFERENCE_KINDS, (row.experiment, row.reference_kind)
            assert f"({row.reference_kind})" in html
            assert math.isclose(raw["ratio"], row.trained / row.reference, rel_tol=1e-12), row.experiment
            assert f"{raw['ratio']:.4f}" in html
        assert raw["seed"] == stored.data["seed"] and raw["settings"]["train"]["seed"] == raw["seed"]
        assert f"{row.trained:.4f}" in html and f"{row.seconds:.1f}" in html


def test_a_changed_setting_makes_only_its_row_stale(stored, monkeypatch):
    original = reproduce.default_train_config

    def longer_for_ch1(task, model, **kwargs):
        config = original(task, model, **kwargs)
        if task.kind == "linear":  # only ch1-lsa-linear
            config = type(config)(**{**asdict(config), "steps": config.steps + 1})
        return config

    monkeypatch.setattr(reproduce, "default_train_config", longer_for_ch1)
    stale = stale_rows(stored)
    assert set(stale) == {"ch1-lsa-linear"}, stale
    steps = stored.data["rows"][0]["settings"]["train"]["steps"]
    assert f"train.steps {steps} -> {steps + 1}" in stale["ch1-lsa-linear"]


def test_changed_code_makes_rows_stale(stored):
    data = copy.deepcopy(stored.data)
    data["library"]["nlicl_lib/training/train.py"] = "0" * 64  # as if stored before an edit
    data["rows"][2]["run_source"] = "0" * 64
    for row in data["rows"]:
        row["key"] = stored_results.row_key({k: row[k] for k in (
            "experiment", "chapter", "seed", "settings", "run_source", "pipeline_source")},
            data["library"])
    stale = stale_rows(StoredResults(stored.rows, data))
    assert set(stale) == set(EXPERIMENTS)
    assert all("nlicl_lib/training/train.py" in why for why in stale.values())
    assert "its run function changed" in stale[data["rows"][2]["experiment"]]
    assert "run function" not in stale[data["rows"][0]["experiment"]]
    del data["rows"][0]
    assert stale_rows(StoredResults(stored.rows[1:], data))[stored.rows[0].experiment] == "no stored row"


def test_planned_settings_are_what_the_experiment_trains_with(monkeypatch):
    seen = []

    def record(task, model, train_config, device, progress=None):
        seen.append({"task": asdict(task), "model": asdict(model), "train": asdict(train_config)})
        raise RuntimeError("stop")

    monkeypatch.setattr(reproduce, "run_experiment", record)
    for name, experiment in EXPERIMENTS.items():
        with pytest.raises(RuntimeError, match="stop"):
            experiment.run("cpu", 3, False)
        planned = reproduce.experiment_settings(name, 3)
        assert {k: planned[k] for k in ("task", "model", "train")} == seen[-1], name
        # and they are the settings of a named purpose
        task, model = TaskConfig(**planned["task"]), ModelConfig(**planned["model"])
        assert any(asdict(default_train_config(task, model, purpose=p, seed=3)) == planned["train"]
                   for p in PURPOSES), name


def test_store_writes_a_file_the_page_reads(tmp_path, monkeypatch):
    def fake_run(names, device, seed, json_dir, progress, threads="auto"):
        return [Row(name, e.chapter, 0.5, 0.01, 0.25 if e.chapter > 1 else None,
                    "theory" if e.chapter > 1 else None, 1.5, "cpu (1 threads)")
                for name, e in EXPERIMENTS.items()]

    monkeypatch.setattr(stored_results, "run_experiments", fake_run)
    path = tmp_path / "reproduce.json"
    stored_results.run_and_store(device="cpu", path=path)
    written = load_results(path)
    assert written.rows == fake_run(None, "cpu", 0, None, None)
    assert json.loads(path.read_text())["rows"][1]["ratio"] == 2.0
    assert stale_rows(written) == {}


