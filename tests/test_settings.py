"""One source of training settings: panels, studies, ``reproduce`` and the CLI train as
:func:`nlicl_lib.training.settings.default_train_config` says, or name the purpose or the
override that makes them differ."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import pytest

from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments import studies
from nlicl_lib.pages.panels import PANELS
from nlicl_lib.training.settings import BASE, base_settings, default_train_config

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)

#: the purpose each chapter's panel trains with
PANEL_PURPOSES = {"ch1": "default", "ch2": "panel-ch2", "ch3": "one-block", "ch4": "panel-ch4",
                  "ch5": "panel-ch5"}


def test_the_defaults_of_each_kind_and_the_rate_over_the_depth():
    for kind in BASE:
        one = default_train_config(QUADRATIC, ModelConfig(kind=kind))
        deep = default_train_config(QUADRATIC, ModelConfig(kind=kind, depth=3))
        assert deep.learning_rate == pytest.approx(one.learning_rate / 3, rel=1e-15)
    panel = PANELS["ch5"](device="cpu")  # a panel divides its slider's rate by the depth too
    _, model, train = panel.configure({**panel.settings, "depth": 4, "learning_rate": 0.04})
    assert model.depth == 4 and train.learning_rate == pytest.approx(0.01, rel=1e-15)


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


def test_the_depth_study_data_was_trained_with_the_study_settings():
    stored = json.loads(studies.STUDY_FILE.read_text())
    assert set(stored) == set(studies.STUDIES)
    for name, study in stored.items():
        assert study["training"] == asdict(studies.STUDY_TRAINING), name
    assert studies.STUDY_TRAINING == default_train_config(
        studies.STUDIES["d3"].task, ModelConfig(kind="glu-lsa"), purpose="depth-study", seed=0)


ROOT = Path(__file__).resolve().parents[1]


def _code_cells(page: Path) -> list[str]:
    return re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", page.read_text(), re.S)


def test_pages_train_with_the_settings_or_in_an_exercise():
    found = []
    for page in sorted((ROOT / "book").glob("*.md")):
        for cell in _code_cells(page):
            if "TrainConfig(" in cell and "exercise" not in cell:
                found.append(f"{page.name}: {cell.strip().splitlines()[0]}")
    assert not found, found


