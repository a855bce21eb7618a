"""Trainings of chapters 2 and 3 against their theory, end to end through the command line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.cli import main
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.feature_analysis import live_span_optimum, slot_feature_directions
from nlicl_lib.theory.values import exact_model_loss
from nlicl_lib.training.one_block import Run, train_one_block_runs
from nlicl_lib.training.train import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def run_cli(tmp_path, *args: str) -> dict:
    out = tmp_path / "result.json"
    assert main([*args, "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_theory_command_reports_bound_and_kernel_optimum(tmp_path):
    data = run_cli(tmp_path, "theory", "--task", "poly", "--degree", "2", "--d", "3",
                   "--model", "glu-lsa")
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    assert data["theory_loss"] == pytest.approx(closed_forms.one_step_kernel_gd_optimum(task).loss)
    assert data["bound_loss"] == pytest.approx(12.0) and data["null_loss"] == pytest.approx(15.0)
    data = run_cli(tmp_path, "theory", "--task", "poly", "--degree", "2", "--d", "3",
                   "--homogeneous", "--model", "lsa", "--depth", "3")
    assert data["theory_loss"] is None and data["bound_loss"] == pytest.approx(data["null_loss"])


@pytest.mark.slow
@pytest.mark.parametrize("depth", [1, 3])
def test_trained_lsa_cannot_beat_zero_on_the_pure_quadratic_task(tmp_path, depth):
    # default learning rate (0.02 / depth) and clipping; depth 3 with fewer, smaller steps
    shorter = [] if depth == 1 else ["--steps", "300", "--batch", "1000"]
    data = run_cli(tmp_path, "train", "--task", "poly", "--degree", "2", "--homogeneous",
                   "--d", "3", "--n", "20", "--depth", str(depth), "--no-progress", *shorter)
    assert math.isfinite(data["test_loss"])
    assert data["normalised_test_loss"] >= 0.98
    assert data["bound_loss"] == pytest.approx(data["null_loss"])  # best linear predictor: 0


@pytest.mark.slow
def test_trained_glu_lsa_reaches_the_kernel_gd_optimum_from_the_command_line(tmp_path):
    data = run_cli(tmp_path, "train", "--task", "poly", "--degree", "2", "--d", "3", "--n", "20",
                   "--model", "glu-lsa", "--no-progress")
    assert data["config"]["model"]["feature_slots"] == 6 == data["config"]["model"]["glu_width"]
    assert data["test_loss_method"] == "exact"
    assert 1.0 <= data["ratio_to_theory"] <= 1.03
    # the Monte Carlo estimate of the same model agrees with the exact loss
    assert abs(data["test_loss_monte_carlo"] - data["test_loss"]) < 4 * data["test_loss_std_error"]


@pytest.mark.slow
def test_initialisation_decides_whether_every_feature_direction_survives():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    runs = [Run(task, ModelConfig(kind="glu-lsa", glu_init=init), seed=s, data_seed=0)
            for init in ("large", "small") for s in range(3)]
    result = train_one_block_runs(runs, TrainConfig(steps=1000, batch_size=500, learning_rate=0.01))
    optimum = closed_forms.one_step_kernel_gd_optimum(task).loss
    for run, model in zip(runs, result.models, strict=True):
        loss = exact_model_loss(model, task)
        directions = slot_feature_directions(model)
        if run.model.glu_init == "large":
            assert loss / optimum < 1.01 and directions.rank() == 6
        else:  # small weights: directions die, and the loss sits on what the live ones allow
            assert directions.rank() < 6 and loss / optimum > 1.02
        assert loss >= live_span_optimum(task, model).loss * (1 - 1e-9)
        assert np.isfinite(result.training[0].loss_history).all()
