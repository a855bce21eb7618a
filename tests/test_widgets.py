"""The live training panel (nlicl_lib.pages.widgets), driven from Python as a reader would drive it:
move sliders, press Train with a tiny budget, read the figure and the messages; and the
panel's static HTML in the book build, which creates no widgets."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest
import torch

from nlicl_lib import (
    ConfigError,
    ModelConfig,
    TaskConfig,
    TrainConfig,
    TrainingDivergedError,
    run_experiment,
)
from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.device import describe_device, resolve_device
from nlicl_lib.pages.panel_figure import smooth_curve
from nlicl_lib.pages.panel_params import Param
from nlicl_lib.pages.panel_plan import (
    MEMORY_CAP_BYTES,
    estimate_memory_bytes,
    eval_batch_size,
    format_seconds,
    memory_limit_bytes,
)
from nlicl_lib.pages.panels import PANELS
from nlicl_lib.pages.widgets import TrainingPanel


@pytest.fixture(autouse=True)
def live(monkeypatch):
    """Panels behave as in a live kernel (not the book build), on one CPU thread (the test
    machine is shared; one thread keeps the tiny runs fast and the results identical)."""
    monkeypatch.delenv("NLICL_BOOK_BUILD", raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def configure(settings):
    task = TaskConfig(kind="poly", input_dim=2, context_length=settings["n"], degree=2)
    model = ModelConfig(kind="lsa", depth=settings["depth"])
    train = TrainConfig(steps=settings["steps"], batch_size=64,
                        learning_rate=settings["lr"] / settings["depth"])
    return task, model, train


def small_panel(**kwargs) -> TrainingPanel:
    params = [
        Param("depth", "depth L", 1, 1, 3),
        Param("n", "context length n", 8, 4, 32, step=4),
        Param("lr", "learning rate", 0.02, 0.001, 1000.0, log=True),
        Param("steps", "training steps", 5, 2, 50),
    ]
    return TrainingPanel(params, configure, x_param="depth", **kwargs)


def trained_trace(fig):
    return next(t for t in fig.data if t.name.startswith("trained"))


def test_train_button_updates_the_figure_with_the_librarys_result():
    panel = small_panel()
    panel.redraw()
    before = panel.last_figure
    assert not any(t.name.startswith("trained") for t in before.data)
    theory_names = {t.name for t in before.data}
    assert (f"best linear predictor (bound for attention alone, {ref('cor-linear-bound')})"
            in theory_names)

    panel.set(n=12, steps=6)
    panel.train_button.click()
    assert panel.last_error is None, panel.last_error
    assert len(panel.results) == 1
    result = panel.results[0]
    assert result.settings == {"depth": 1, "n": 12, "lr": pytest.approx(0.02), "steps": 6}
    assert panel.progress.value == panel.progress.max == 6

    expected = run_experiment(*configure(result.settings), device="cpu", progress=False,
                              relative_error=panel.relative_error)
    after = panel.last_figure
    assert after.to_json() != before.to_json()
    trace = trained_trace(after)
    assert list(trace.x) == [1]
    assert trace.y[0] == pytest.approx(expected.normalised_test_loss, rel=1e-6)
    training = next(t for t in after.data if t.name.startswith("training loss"))
    steps, smooth = smooth_curve(expected.training.loss_history / expected.theory.null_loss)
    np.testing.assert_allclose(training.y, smooth, rtol=1e-6)
    # the theory curve along depth sits next to it, at the run's other settings
    bound = [t for t in after.data if t.name.startswith("best linear") and len(t.x) == 3]
    assert bound and bound[0].y[0] == pytest.approx(
        expected.theory.bound_loss / expected.theory.null_loss)
    assert "Trained in" in panel.status.value and "depth L = 1" in panel.status.value


def test_runs_accumulate_along_x_param():
    panel = small_panel()
    panel.train()
    panel.set(depth=2)
    panel.train()
    trace = trained_trace(panel.last_figure)
    assert list(trace.x) == [1, 2]
    # a run at other settings (n) is not drawn with them
    panel.set(n=16)
    panel.train()
    assert list(trained_trace(panel.last_figure).x) == [2]


def test_train_press_and_slider_move_during_a_run_do_not_mix(monkeypatch):
    panel = small_panel()
    original = panel._on_step
    seen = {}

    def reader_meddles(step, loss, steps, stride):
        if step == 1:
            seen["disabled"] = (panel.train_button.disabled,
                                all(c.disabled for c in panel.controls.values()))
            panel.set(depth=3, n=20)     # a slider moved during the run
            panel.train_button.click()   # and Train pressed again
            seen["error"] = panel.last_error
        return original(step, loss, steps, stride)

    monkeypatch.setattr(panel, "_on_step", reader_meddles)
    panel.train_button.click()
    assert seen["disabled"] == (True, True)
    assert "one run at a time" in seen["error"]
    assert len(panel.results) == 1
    result = panel.results[0]
    assert result.settings["depth"] == 1 and result.settings["n"] == 8
    assert result.model_config.depth == 1 and result.task.context_length == 8
    assert not panel.train_button.disabled
    assert not any(c.disabled for c in panel.controls.values())
    assert "depth L = 1" in panel.last_figure.layout.title.text
    # the next press uses the moved sliders
    monkeypatch.setattr(panel, "_on_step", original)
    panel.train_button.click()
    assert panel.results[-1].settings["depth"] == 3
    assert panel.results[-1].task.context_length == 20


def test_settings_that_do_not_fit_in_memory_are_refused():
    panel = small_panel(memory_cap=2**20)
    plan = panel.plan()
    assert plan.memory_bytes > plan.memory_limit
    assert "Refused" in plan.problem and "MiB" in plan.problem
    panel.train_button.click()
    assert panel.results == []
    assert "Refused" in panel.last_error and "Refused" in panel.status.value
    with pytest.raises(ConfigError, match="Refused"):
        panel.train()


def test_settings_configure_rejects_are_refused_with_a_message():
    def strict(settings):
        if settings["depth"] > 1:
            raise ConfigError("depth", settings["depth"], "1 in this panel")
        return configure(settings)

    panel = TrainingPanel([Param("depth", "depth L", 1, 1, 3),
                           Param("n", "n", 8, 4, 8), Param("lr", "lr", 0.02, 0.01, 0.1),
                           Param("steps", "steps", 3, 2, 5)], strict)
    panel.set(depth=2)
    panel.train_button.click()
    assert panel.results == [] and "not accepted" in panel.last_error
    panel.redraw()  # the theory curve leaves out what configure rejects
    assert all(len(t.x) <= 2 for t in panel.last_figure.data)


def test_a_diverging_run_is_reported_not_raised(monkeypatch):
    def diverges(*args, **kwargs):
        raise TrainingDivergedError(3, float("nan"), 1000.0)

    monkeypatch.setattr("nlicl_lib.pages.widgets.run_experiment", diverges)
    panel = small_panel()
    panel.set(lr=1000.0)
    panel.train_button.click()
    assert panel.results == []
    assert panel.last_error is not None
    assert "diverged" in panel.status.value and "smaller learning rate" in panel.last_error
    assert panel.progress.bar_style == "danger"
    assert not panel.train_button.disabled and not panel.running


def test_expected_time_is_measured_at_the_current_settings():
    panel = small_panel()
    assert panel.plan().expected_seconds is None  # nothing measured yet
    per_step = panel.measure_step()
    assert per_step > 0
    plan = panel.plan()
    assert plan.expected_seconds >= plan.train_config.steps * per_step
    panel._displayed = True  # as after display: the label shows the estimate
    panel._refresh_estimate()
    assert "Expected time" in panel.estimate_label.value
    assert "estimate" in panel.estimate_label.value
    result = panel.train()
    # after a run, the estimate for the same settings comes from its measured time
    assert panel.plan().expected_seconds == pytest.approx(result.seconds, rel=0.5)


def test_device_is_auto_and_named():
    panel = small_panel()
    assert panel.device == resolve_device("auto")
    assert describe_device(panel.device) in panel.device_label.value


class PanelHTML(HTMLParser):
    """The elements of a static panel, in document order: (tag, attributes, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[list] = []
        self.open: list[list] = []

    def handle_starttag(self, tag, attrs):
        element = [tag, dict(attrs), ""]
        self.elements.append(element)
        if tag not in ("input", "br"):
            self.open.append(element)

    def handle_endtag(self, tag):
        while self.open and self.open.pop()[0] != tag:
            pass

    def handle_data(self, data):
        for element in self.open:
            element[2] += data

    def find(self, tag, **attrs):
        return [e for e in self.elements
                if e[0] == tag and all(e[1].get(k) == v for k, v in attrs.items())]


def book_build_display(monkeypatch, panel: TrainingPanel) -> list[tuple[dict, dict]]:
    published, shown = [], []
    for module in ("nlicl_lib.pages.widgets", "nlicl_lib.pages.display"):
        monkeypatch.setattr(f"{module}.publish_display_data",
                            lambda data, metadata=None: published.append((data, metadata)))
    monkeypatch.setattr("nlicl_lib.pages.widgets.display", lambda *objs: shown.extend(objs))
    panel._ipython_display_()
    assert shown == []  # no widget view
    return published


def test_in_the_book_build_the_panel_creates_no_widgets_and_never_trains(monkeypatch):
    monkeypatch.setenv("NLICL_BOOK_BUILD", "1")
    created = []
    monkeypatch.setattr("ipywidgets.Widget.open", lambda widget: created.append(widget))
    panel = small_panel()
    assert not panel.live and panel.widget is None
    assert created == []  # the kernel would save any widget it creates into the notebook
    assert panel.settings == {"depth": 1, "n": 8, "lr": 0.02, "steps": 5}
    panel.set(depth=2)
    assert panel.settings["depth"] == 2 and panel.plan().problem is None
    panel._on_click()
    panel.redraw()
    assert panel.results == [] and panel.last_figure is None
    assert panel._step_seconds == {}
    assert len(book_build_display(monkeypatch, panel)) == 1
    assert created == []
    with pytest.raises(ConfigError, match="train.*called in the book build.*runs live"):
        panel.train()


def test_in_the_book_build_the_panel_shows_as_static_html(monkeypatch):
    monkeypatch.setenv("NLICL_BOOK_BUILD", "1")
    panel = TrainingPanel([Param("depth", "depth L", 2, 1, 3),
                           Param("noise", "label noise σ", 0.5, 0.0, 2.0, step=0.25),
                           Param("lr", "learning rate", 0.02, 1e-4, 1.0, log=True, step=0.1,
                                 help="Adam's peak learning rate"),
                           Param("act", "GLU activation", "silu", options=("none", "silu"))],
                          configure, title="A <small> panel")
    [(data, _)] = book_build_display(monkeypatch, panel)
    assert set(data) == {"text/html", "text/plain"}
    html = data["text/html"]
    assert html.startswith('<div class="nlicl-static-panel"')
    assert "A &lt;small&gt; panel" in html and "<small>" not in html
    parsed = PanelHTML()
    parsed.feed(html)
    elements = parsed.elements

    # the notice comes first, before the title and every control
    [note] = parsed.find("p", role="note")
    assert "trains only when the chapter runs live" in note[2]
    assert all(word in note[2] for word in ("Binder", "Colab", "Jupyter", "built"))
    first_control = min(elements.index(e) for e in elements if e[0] in ("input", "fieldset"))
    assert elements.index(note) < first_control
    title = next(e for e in elements if e[0] == "strong")
    assert elements.index(note) < elements.index(title) < first_control
    assert title[2] == "A <small> panel"

    # one disabled control per parameter, at its default, with a label tied to it
    labels = {e[1]["for"]: e[2] for e in parsed.find("label")}
    sliders = parsed.find("input", type="range")
    assert len(sliders) == 3 and all("disabled" in s[1] for s in sliders)
    by_label = {labels[s[1]["id"]]: s[1] for s in sliders}
    assert set(by_label) == {"depth L", "label noise σ", "learning rate"}
    depth, noise, lr = by_label["depth L"], by_label["label noise σ"], by_label["learning rate"]
    assert (depth["min"], depth["max"], depth["step"], depth["value"]) == ("1", "3", "1", "2")
    assert (noise["min"], noise["max"], noise["step"], noise["value"]) == ("0", "2", "0.25", "0.5")
    # the log slider runs over the exponent, as ipywidgets' FloatLogSlider, and says its value
    assert (lr["min"], lr["max"], lr["step"]) == ("-4", "0", "0.1")
    assert float(lr["value"]) == pytest.approx(np.log10(0.02))
    assert lr["aria-valuetext"] == "0.02"
    shown = {e[1]["for"]: e[2] for e in parsed.find("output")}
    assert [shown[by_label[name]["id"]] for name in ("depth L", "label noise σ",
                                                      "learning rate")] == ["2", "0.5", "0.02"]
    # options: the toggle buttons become a group of radio buttons named by a legend
    [group] = parsed.find("fieldset")
    assert "disabled" in group[1]
    [legend] = parsed.find("legend")
    assert legend[2] == "GLU activation"
    radios = parsed.find("input", type="radio")
    assert [labels[r[1]["id"]] for r in radios] == ["none", "silu"]
    assert all("disabled" in r[1] for r in radios)
    assert [("checked" in r[1]) for r in radios] == [False, True]
    # a parameter's help is the control's tooltip, as in the widget
    assert [e[1]["title"] for e in elements if "title" in e[1]] == ["Adam's peak learning rate"]

    # the device and time lines, then a visibly disabled Train button
    text = html.replace("&#x27;", "'")
    assert "Device: chosen when the page runs live" in text and "Expected time" in text
    [button] = parsed.find("button")
    assert button[2] == "Train" and "disabled" in button[1]
    assert button[1]["aria-disabled"] == "true"
    assert elements.index(button) > max(elements.index(s) for s in sliders + radios)
    assert "depth L: 2" in data["text/plain"] and "(disabled)" in data["text/plain"]


def test_static_panels_on_one_page_have_distinct_ids(monkeypatch):
    monkeypatch.setenv("NLICL_BOOK_BUILD", "1")
    first, second = small_panel().static_html(), small_panel().static_html()
    ids = [re.findall(r'id="([^"]+)"', html) for html in (first, second)]
    assert len(set(ids[0] + ids[1])) == len(ids[0]) + len(ids[1])


def test_live_display_draws_the_theory_and_the_estimate(monkeypatch):
    panel = small_panel()
    shown, drawn = [], []
    monkeypatch.setattr("nlicl_lib.pages.widgets.display", lambda *objs: shown.extend(objs))
    monkeypatch.setattr("nlicl_lib.pages.display.show", lambda fig: drawn.append(fig))
    panel._ipython_display_()
    assert shown == [panel.widget]
    assert len(drawn) == 1 and drawn[0] is panel.last_figure
    assert "Expected time" in panel.estimate_label.value
    panel.set(depth=2)  # a slider move re-estimates
    assert len(panel._step_seconds) == 2
    panel.train_button.click()
    assert len(drawn) == 2 and trained_trace(drawn[-1]).y[0] == panel.results[0].normalised_test_loss


def test_params_validate():
    with pytest.raises(ConfigError):
        Param("n", "n", 50, 1, 10)
    with pytest.raises(ConfigError):
        Param("act", "activation", "relu", options=("none", "silu"))
    with pytest.raises(ConfigError):
        Param("lr", "lr", 0.1, 0.0, 1.0, log=True)
    with pytest.raises(ConfigError):
        TrainingPanel([Param("n", "n", 5, 1, 10)] * 2, configure)
    assert Param("k", "k", 2, 1, 30).grid(max_points=5) == [1, 8, 15, 23, 30]
    assert Param("a", "a", "x", options=["x", "y"]).grid() == ["x", "y"]
    slider = Param("lr", "learning rate", 0.01, 1e-4, 1.0, log=True).make_widget()
    assert type(slider).__name__ == "FloatLogSlider" and slider.value == pytest.approx(0.01)


def test_memory_estimate_grows_with_the_run_and_limit_is_capped():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    small = estimate_memory_bytes(task, ModelConfig(kind="glu-lsa"), TrainConfig(batch_size=1000))
    longer = estimate_memory_bytes(TaskConfig(kind="poly", input_dim=3, context_length=80, degree=2),
                                   ModelConfig(kind="glu-lsa"), TrainConfig(batch_size=10000))
    bigger = estimate_memory_bytes(task, ModelConfig(kind="glu-lsa", depth=4),
                                   TrainConfig(batch_size=50000))
    assert 0 < small < longer and small < bigger
    assert memory_limit_bytes(torch.device("cpu")) <= MEMORY_CAP_BYTES
    assert format_seconds(3.21) == "3.2 s" and format_seconds(125) == "2 min 5 s"
    # long contexts are tested in smaller batches: the panels' longest fits the cap
    assert eval_batch_size(task) == 20000
    long = TaskConfig(kind="poly", input_dim=3, context_length=160, degree=2)
    assert eval_batch_size(long) * 161 <= 20000 * 21
    assert estimate_memory_bytes(long, ModelConfig(kind="glu-lsa"),
                                 TrainConfig(batch_size=500)) < MEMORY_CAP_BYTES


@pytest.mark.slow
@pytest.mark.parametrize("chapter", sorted(PANELS))
def test_chapter_panels_train_at_a_tiny_budget(chapter):
    panel = PANELS[chapter](device="cpu")
    assert panel.plan().problem is None  # the defaults fit
    panel.set(steps=panel.params["steps"].minimum)
    panel.train_button.click()
    assert panel.last_error is None, panel.last_error
    result = panel.results[-1]
    trace = trained_trace(panel.last_figure)
    assert trace.y[-1] == result.normalised_test_loss
    assert result.theory == panel.theory_at(panel.settings)
    assert result.normalised_test_loss > 0 and result.experiment.training.steps == 100
    if chapter == "ch3":  # the panel's run is the library's run for the same settings
        task = panel.configure()[0]
        expected = run_experiment(*panel.configure(), device="cpu", progress=False,
                                  relative_error=panel.relative_error,
                                  eval_batch_size=eval_batch_size(task))
        assert result.experiment.test_loss == pytest.approx(expected.test_loss, rel=1e-6)
        assert result.normalised_theory == pytest.approx(
            expected.theory.theory_loss / expected.theory.null_loss)


def test_a_stacks_test_batch_is_a_quarter_of_the_token_budget():
    long = TaskConfig(kind="poly", input_dim=3, context_length=100, degree=2)
    stack = ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="x")
    assert eval_batch_size(long, stack) * 101 <= 20000 * 21 // 4
    assert eval_batch_size(long, ModelConfig(kind="glu-lsa")) == eval_batch_size(long)
