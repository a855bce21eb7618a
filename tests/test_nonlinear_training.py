"""Trainings of chapters 2 and 3 against their theory, end to end through the command line."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.cli import main
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.kernel import live_span_optimum, slot_feature_directions
from nlicl_lib.theory.values import exact_model_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainConfig, train

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
    shorter = {} if depth == 1 else {"steps": 300, "batch_size": 1000}
    flags = [] if depth == 1 else ["--steps", "300", "--batch", "1000"]
    data = run_cli(tmp_path, "train", "--task", "poly", "--degree", "2", "--homogeneous",
                   "--d", "3", "--n", "20", "--depth", str(depth), "--no-progress", *flags)
    null, error = data["null_loss"], data["test_loss_std_error"]
    assert data["test_loss_method"] == "monte-carlo" and 0 < error < 0.02 * null
    assert data["bound_loss"] == pytest.approx(null, rel=1e-12)  # best linear predictor: 0
    assert data["test_loss"] >= null - 4 * error  # cannot beat zero (Monte Carlo allowance)
    assert data["test_loss"] <= 1.03 * null + 4 * error  # and stays at it
    if depth == 1:  # one step of linear GD: Gamma* = 0, the optimum is the zero predictor
        assert data["theory_loss"] == pytest.approx(null, rel=1e-12)
        assert data["ratio_to_theory"] == pytest.approx(data["normalised_test_loss"], rel=1e-12)
    else:
        assert data["theory_loss"] is None and data["ratio_to_theory"] is None
    # the control: the same model and settings on the linear task (d = 3, n = 20)
    linear = TaskConfig(kind="linear", input_dim=3, context_length=20)
    config = ModelConfig(kind="lsa", depth=depth)
    settings = default_train_config(linear, config, **shorter)
    assert asdict(settings) == data["config"]["train"]
    history = train(build_model(config, linear, seed=0), linear, settings, progress=False
                    ).loss_history / closed_forms.null_loss(linear)
    assert history[:20].mean() > 0.8 and history[-20:].mean() < 0.2


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
    runs = [(init, s) for init in ("large", "small") for s in range(3)]
    models = [build_model(ModelConfig(kind="glu-lsa", glu_init=init), task, seed=s)
              for init, s in runs]
    results = train(models, task, TrainConfig(steps=1000, batch_size=500, learning_rate=0.01),
                    progress=False)
    optimum = closed_forms.one_step_kernel_gd_optimum(task).loss
    for (init, _), model, record in zip(runs, models, results, strict=True):
        loss = exact_model_loss(model, task)
        directions = slot_feature_directions(model)
        if init == "large":
            assert loss / optimum < 1.01 and directions.rank() == 6
        else:  # small weights: directions die, and the loss sits on what the live ones allow
            assert directions.rank() < 6 and loss / optimum > 1.02
        assert loss >= live_span_optimum(task, model).loss * (1 - 1e-9)
        # this run's own record (train raises on a non-finite loss, so finiteness says
        # nothing): it trained, from 1 to 4500 times E[y^2] (large) or about E[y^2] (small)
        # down to at most 3/4 of that, and its last batches, 50,000 training prompts, agree
        # with its exact loss to 5%
        assert record.config["seed"] == 0 and record.null_loss == 15.0
        history = record.loss_history
        assert history.shape == (1000,)
        assert history[-100:].mean() < 0.75 * history[:10].mean()
        assert history[-100:].mean() == pytest.approx(loss, rel=0.05)
