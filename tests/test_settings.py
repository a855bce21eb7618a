"""One source of training settings: panels, studies, ``reproduce`` and the CLI train as
:func:`nlicl_lib.training.settings.default_train_config` says, or name the purpose or the
override that makes them differ."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments import cli, reproduce, studies
from nlicl_lib.pages.panels import PANELS
from nlicl_lib.training.settings import BASE, PURPOSES, base_settings, default_train_config
from nlicl_lib.training.train import TrainConfig

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)

#: the purpose each chapter's panel trains with
PANEL_PURPOSES = {"ch1": "default", "ch2": "panel-ch2", "ch3": "one-block", "ch4": "panel-ch4",
                  "ch5": "panel-ch5"}


def test_the_defaults_of_each_kind_and_the_rate_over_the_depth():
    for kind, settings in BASE.items():
        for depth in (1, 3):
            config = default_train_config(QUADRATIC, ModelConfig(kind=kind, depth=depth))
            assert config.steps == settings["steps"]
            assert config.batch_size == settings["batch_size"]
            assert config.learning_rate == pytest.approx(settings["learning_rate"] / depth, rel=1e-15)
    assert default_train_config(QUADRATIC, ModelConfig(kind="lsa"), steps=None, seed=4) == TrainConfig(
        steps=600, batch_size=2000, learning_rate=0.02, seed=4)


def test_every_purpose_names_only_training_fields():
    fields = set(asdict(TrainConfig(steps=1, batch_size=1, learning_rate=0.1)))
    for purpose, overrides in PURPOSES.items():
        assert set(overrides) <= fields, purpose
        for kind in BASE:
            default_train_config(QUADRATIC, ModelConfig(kind=kind), purpose=purpose)


@pytest.mark.parametrize("chapter", sorted(PANELS))
def test_each_panel_at_its_defaults_trains_as_its_purpose_says(chapter):
    panel = PANELS[chapter](device="cpu")
    task, model, train = panel.configure()
    assert train == default_train_config(task, model, purpose=PANEL_PURPOSES[chapter],
                                         seed=train.seed)
    # the sliders start at the purpose's settings, so a reader sees the rate of one block
    assert panel.settings["steps"] == base_settings(model.kind, PANEL_PURPOSES[chapter])["steps"]
    assert panel.settings["learning_rate"] == base_settings(model.kind, PANEL_PURPOSES[chapter])[
        "learning_rate"]


def test_a_panel_divides_the_slider_rate_by_the_depth():
    panel = PANELS["ch5"](device="cpu")
    _, model, train = panel.configure({**panel.settings, "depth": 4, "learning_rate": 0.04})
    assert model.depth == 4 and train.learning_rate == pytest.approx(0.01, rel=1e-15)


def test_the_depth_study_data_was_trained_with_the_study_settings():
    """The stored study (what chapter 5 draws) and the settings agree; retraining with other
    settings without regenerating the data fails here."""
    stored = json.loads(studies.STUDY_FILE.read_text())
    assert set(stored) == set(studies.STUDIES)
    for name, study in stored.items():
        assert study["training"] == asdict(studies.STUDY_TRAINING), name
    assert studies.STUDY_TRAINING == default_train_config(
        studies.STUDIES["d3"].task, ModelConfig(kind="glu-lsa"), purpose="narrow-stacks", seed=0)


def test_reproduce_trains_with_the_named_purposes(monkeypatch):
    seen = []

    def record(task, model, train_config, device, progress=None):
        seen.append((task, model, train_config))
        raise RuntimeError("stop")

    monkeypatch.setattr(reproduce, "run_experiment", record)
    for name, experiment in reproduce.EXPERIMENTS.items():
        with pytest.raises(RuntimeError, match="stop"):
            experiment.run("cpu", 7, False)
        task, model, train = seen[-1]
        purposes = [p for p in PURPOSES
                    if default_train_config(task, model, purpose=p, seed=7) == train]
        assert purposes, f"{name} trains with settings of no purpose: {train}"


def test_the_cli_trains_with_the_defaults_unless_a_flag_says_otherwise(monkeypatch):
    seen = []

    def record(task, model, train_config, *args, **kwargs):
        seen.append((task, model, train_config))
        raise RuntimeError("stop")

    monkeypatch.setattr(cli, "run_experiment", record)
    for argv, overrides in ((["train", "--model", "glu-lsa", "--task", "poly"], {}),
                            (["train", "--model", "lsa", "--steps", "50", "--lr", "0.5"],
                             {"steps": 50, "learning_rate": 0.5})):
        with pytest.raises(RuntimeError, match="stop"):
            cli.main(argv)
        task, model, train = seen[-1]
        assert train == default_train_config(task, model, seed=train.seed, **overrides)


def test_unknown_purpose_or_kind_is_refused_by_name():
    with pytest.raises(ConfigError, match="purpose"):
        default_train_config(QUADRATIC, ModelConfig(kind="lsa"), purpose="fast")
    with pytest.raises(ConfigError, match="kind"):
        base_settings("mlp")
    with pytest.raises(ConfigError, match="model_config"):
        default_train_config(QUADRATIC, "lsa")


ROOT = Path(__file__).resolve().parents[1]


def _code_cells(page: Path) -> list[str]:
    return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", page.read_text(), re.S)


def test_pages_train_with_the_settings_or_in_an_exercise():
    """A page's own runs take default_train_config (with a purpose); only an exercise, whose
    question is the settings, writes a TrainConfig itself."""
    found = []
    for page in sorted((ROOT / "book").glob("*.md")):
        for cell in _code_cells(page):
            if "TrainConfig(" in cell and "exercise" not in cell:
                found.append(f"{page.name}: {cell.strip().splitlines()[0]}")
    assert not found, found


def test_the_library_builds_train_configs_only_in_training():
    found = []
    for path in sorted((ROOT / "nlicl_lib").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("nlicl_lib/training/"):
            continue
        if re.search(r"\bTrainConfig\(", path.read_text()):
            found.append(rel)
    assert not found, f"modules building their own TrainConfig: {found}"
