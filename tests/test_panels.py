"""The live training panels: a press of Train runs the library's run; bad settings are refused
by name; in the book build a panel is a static HTML card."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
import pytest

from nlicl_lib import ConfigError, ModelConfig, TaskConfig, TrainConfig, TrainingDivergedError, run_experiment
from nlicl_lib.core.device import use_threads
from nlicl_lib.core.planning import SIZE_PARAMS, eval_batch_size
from nlicl_lib.pages import panels
from nlicl_lib.pages.panels import PANELS, Param, TrainingPanel


@pytest.fixture(autouse=True)
def live(monkeypatch):
    monkeypatch.delenv("NLICL_BOOK_BUILD", raising=False)
    with use_threads(1):
        yield


def configure(settings):
    task = TaskConfig(kind="poly", input_dim=2, context_length=settings["n"], degree=2)
    model = ModelConfig(kind="lsa", depth=settings["depth"])
    return task, model, TrainConfig(steps=settings["steps"], batch_size=64,
                                    learning_rate=settings["lr"] / settings["depth"])


def small_panel(**kwargs) -> TrainingPanel:
    return TrainingPanel("A small panel", [
        Param("depth", "depth L", 1, 1, 3),
        Param("n", "context length n", 8, 4, 32, step=4),
        Param("lr", "learning rate", 0.02, 0.001, 1000.0, log=True, step=0.1),
        Param("steps", "training steps", 5, 2, 50),
    ], configure, device="cpu", **kwargs)


def traces(panel, name):
    return [t for t in panel.figure().data if t.name.startswith(name)]


def test_a_controls_values_are_its_grid_and_each_passes_its_check():
    params = small_panel().params
    assert params["depth"].values() == [1, 2, 3]
    assert params["n"].values() == [4, 8, 12, 16, 20, 24, 28, 32]
    rates = params["lr"].values()  # over the exponent, as FloatLogSlider: 10^-3 ... 10^3
    assert len(rates) == 61 and rates[0] == 0.001 and rates[-1] == 1000.0
    np.testing.assert_allclose(np.diff(np.log10(rates)), 0.1, rtol=1e-9)
    for param in params.values():
        for value in param.values():
            param.check(value)
    assert Param("mode", "mode", "a", options=("a", "b")).values() == ["a", "b"]


def test_a_press_trains_the_librarys_run_and_shows_its_loss_next_to_the_theory():
    panel = small_panel()
    assert "cpu (1 thread)" in panel.plan_line.value and "s</b> of training" in panel.plan_line.value
    panel.controls["n"].value = 12
    panel.train_button.click()
    assert panel.last_error is None, panel.last_error
    (result,) = panel.results
    assert result.settings == {"depth": 1, "n": 12, "lr": pytest.approx(0.02), "steps": 5}
    assert panel.progress.value == panel.progress.max == 5
    expected = run_experiment(*configure(result.settings), device="cpu", progress=False,
                              relative_error=panels.RELATIVE_ERROR)
    assert result.normalised_test_loss == pytest.approx(expected.normalised_test_loss, rel=1e-6)
    bound = expected.theory.bound_loss / expected.theory.null_loss
    assert f"best linear predictor {bound:.4g}" in panel.status.value
    [trained] = traces(panel, "trained")
    assert list(trained.x) == [1] and trained.y[0] == result.normalised_test_loss
    [level, curve] = traces(panel, "best linear predictor")
    assert level.y[0] == pytest.approx(bound) and curve.y[0] == pytest.approx(bound)
    assert "last run's speed" in panel.plan_line.value

    # runs gather along x_param; a run at other settings is drawn without them
    panel.train(depth=2)
    assert list(traces(panel, "trained")[0].x) == [1, 2]
    panel.train(n=16)
    assert list(traces(panel, "trained")[0].x) == [2]


def test_bad_settings_are_refused_by_name_before_anything_runs(monkeypatch):
    def nothing_may_run(*args, **kwargs):
        raise AssertionError("a refused setting started a run")

    monkeypatch.setattr(panels, "run_experiment", nothing_may_run)
    panel = small_panel()
    with pytest.raises(ConfigError, match=r"depth=9 is not allowed: a whole number from 1 to 3"):
        panel.train(depth=9)
    with pytest.raises(ConfigError, match="lr='fast'"):
        panel.train(lr="fast")
    with pytest.raises(ConfigError, match="param='width'"):
        panel.train(width=2)
    assert panel.settings["depth"] == 1  # nothing was moved
    # a combination the chapter's configure refuses
    with pytest.raises(ConfigError, match="depth=4 is not allowed: at most 3 for cubic tasks"):
        PANELS["ch5"](device="cpu").train(degree=3, depth=4)
    # a run above the memory limit: the size to shrink, as the command line names it
    tight = small_panel(memory_cap=2**20)
    assert "Not accepted" in tight.plan_line.value
    with pytest.raises(ConfigError, match="a run that fits in memory") as refused:
        tight.train()
    assert refused.value.param in SIZE_PARAMS
    tight.train_button.click()  # a press shows it instead of raising
    assert tight.results == [] and "Not trained" in tight.status.value


def test_a_diverging_run_is_reported_and_the_panel_stays_usable(monkeypatch):
    def diverges(*args, **kwargs):
        raise TrainingDivergedError(3, float("nan"), 1000.0)

    monkeypatch.setattr(panels, "run_experiment", diverges)
    panel = small_panel()
    panel.train_button.click()
    assert panel.results == [] and "smaller learning rate" in panel.last_error
    assert "diverged" in panel.status.value and panel.progress.bar_style == "danger"
    assert not panel.train_button.disabled


def test_the_longest_contexts_and_deepest_stacks_fit_the_panels_memory():
    ch3 = PANELS["ch3"](device="cpu")
    ch3.configure({**ch3.settings, "context_length": 160})
    ch5 = PANELS["ch5"](device="cpu")
    ch5.configure({**ch5.settings, "depth": 8, "feature_slots": 6})
    long = TaskConfig(kind="poly", input_dim=3, context_length=100, degree=2)
    assert eval_batch_size(long, ModelConfig(kind="glu-lsa", depth=2)) * 101 <= 20000 * 21 // 4
    assert eval_batch_size(long, ModelConfig(kind="glu-lsa")) * 101 <= 20000 * 21


class Elements(HTMLParser):
    """A static card's elements in document order: [tag, attributes, text]."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.all: list[list] = []
        self.open: list[list] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.all.append([tag, dict(attrs), ""])
        if tag != "input":
            self.open.append(self.all[-1])

    def handle_endtag(self, tag):
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        for element in self.open:
            element[2] += data

    def find(self, tag, **attrs):
        return [e for e in self.all if e[0] == tag and all(e[1].get(k) == v for k, v in attrs.items())]


def test_in_the_book_build_a_panel_is_a_static_card_with_its_controls_disabled(monkeypatch):
    monkeypatch.setenv("NLICL_BOOK_BUILD", "1")
    created, published = [], []
    monkeypatch.setattr("ipywidgets.Widget.open", lambda widget: created.append(widget))
    monkeypatch.setattr(panels, "publish_display_data", lambda data: published.append(data))
    panel = PANELS["ch2"]()
    panel._ipython_display_()
    assert created == []  # the kernel would save any widget into the notebook
    with pytest.raises(ConfigError, match="called in the book build"):
        panel.train()
    [data] = published
    html = data["text/html"]
    card = Elements(html)
    assert card.all[0][1]["class"] == "nlicl-static-panel"
    assert card.all[1][1]["role"] == "note" and "trains only when the chapter runs live" in card.all[1][2]
    inputs = card.find("input")
    assert len(inputs) == 5 + len(panels.TARGETS) and all("disabled" in e[1] for e in inputs)
    # the learning rate's slider runs over the exponent, as ipywidgets' FloatLogSlider
    [rate] = [e for e in inputs if e[1].get("min") == "-4"]
    assert float(rate[1]["value"]) == pytest.approx(np.log10(panel.settings["learning_rate"]))
    [button] = card.find("button")
    assert button[2] == "Train" and "disabled" in button[1]
    ids = [e[1]["id"] for e in card.all if "id" in e[1]]
    again = [e[1]["id"] for e in Elements(panel.static_html()).all if "id" in e[1]]
    assert len(set(ids + again)) == len(ids) + len(again)  # two panels on a page never clash


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(PANELS))
def test_chapter_panels_train_at_a_tiny_budget(chapter):
    panel = PANELS[chapter](device="cpu")
    panel.controls["steps"].value = 100
    panel.train_button.click()
    assert panel.last_error is None, panel.last_error
    (result,) = panel.results
    assert result.experiment.training.steps == 100 and result.normalised_test_loss > 0
    assert result.theory == panel.theory_at(panel.settings)
    if chapter == "ch3":  # the panel's run is the library's run for the same settings
        task, model, train = panel.configure()
        expected = run_experiment(task, model, train, device="cpu", progress=False,
                                  relative_error=panels.RELATIVE_ERROR,
                                  eval_batch_size=eval_batch_size(task, model))
        assert result.experiment.test_loss == pytest.approx(expected.test_loss, rel=1e-6)
        assert result.normalised_theory == pytest.approx(
            expected.theory.theory_loss / expected.theory.null_loss)
