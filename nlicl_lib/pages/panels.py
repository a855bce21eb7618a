r"""The chapters' live training panels, one function each (:data:`PANELS`), so that a page shows
its panel in one line and the tests and ``bench/panel_times.py`` drive the panels readers get.

A :class:`TrainingPanel` is ipywidgets' Button-and-Output pattern: a control per :class:`Param`,
a line with the device and the expected time, **Train** with a progress bar, a status line, and
an ``Output`` where each run is drawn next to its theory. A press plans the run as the command
line does (:mod:`nlicl_lib.core.planning`): settings ``configure`` refuses, or whose peak memory
is above the panel's limit, raise a ConfigError naming the parameter before anything is built;
the expected time is the run's work at one CPU thread's measured rate (then at the last run's).
It trains with :func:`~nlicl_lib.experiments.run.run_experiment` (a panel's result *is* the
library's) and compares with :func:`~nlicl_lib.theory.values.theory_values`, losses over
$\mathbb E[y^2]$. Runs are synchronous: a second press or a slider move waits until a run ends.
Only core widgets are used (Colab's ipywidgets 7 has them).

In the book build (``NLICL_BOOK_BUILD=1``) a panel creates no widgets (the kernel would save them
into the notebook, and the site has no widget manager): it shows a static HTML card, a note that
it trains when the chapter runs live, its controls disabled at their defaults and a disabled
Train button (:meth:`TrainingPanel.static_html`).
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
from IPython.display import clear_output, display, publish_display_data
from plotly.subplots import make_subplots

from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.device import choose_threads, describe_device, resolve_device, use_threads
from nlicl_lib.core.errors import ConfigError, TrainingDivergedError, format_bytes
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.planning import SECONDS_PER_WORK_UNIT, check_fits, eval_batch_size, memory_limit_bytes, work_units
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.run import ExperimentResult, run_experiment
from nlicl_lib.pages import display as page_display
from nlicl_lib.pages.plots import COLORS, baseline_trace, book_layout, bound_trace, theory_trace, trained_trace
from nlicl_lib.theory.values import TheoryValues, theory_values
from nlicl_lib.training.settings import base_settings, default_train_config
from nlicl_lib.training.train import TrainConfig

Settings = dict[str, Any]
Configure = Callable[[Settings], tuple[TaskConfig, ModelConfig, TrainConfig]]

INPUT_DIM = 3
"""$d$ of every panel but chapter 1's: $p_2 = 6$ quadratic monomials, so one full GLU-LSA block
has $m = h = 6$."""
TARGETS = ("all degrees ≤ k", "only degree k")
DEPTH_CONTEXT_LENGTH = 100
"""$n$ of the depth panel, as in chapter 5's study: at $n = 20$ a deep stack's loss rests on rare
contexts."""
PANEL_REFERENCE_CONTEXTS = 10_000
"""Fitting contexts of the depth panel's greedy reference (the library's default is 50,000).
At 20,000, chapter 5 run with Colab's versions and its panel pressed peaked at 934 to 959 MiB,
at the test's limit of 10^9 bytes (954 MiB); the reference's memory grows with its contexts."""
MEMORY_CAP_BYTES = 768 * 2**20
"""Most working memory a panel's run may take on the CPU. A Binder session has 2 GB for the
server, the kernel and the run; a chapter's kernel takes about 0.5 GB with its own data
(``make notebook-test`` measures it), and the estimate is an upper bound."""
RELATIVE_ERROR = 0.05
"""Monte Carlo accuracy of a panel's test loss: 40,000 prompts in most settings, about 1%."""

STATIC_NOTICE = ("This panel trains only when the chapter runs live: on Binder, on Colab or in "
                 "your own Jupyter (the launch and download buttons at the top of the page). "
                 "Here its controls show the default settings and cannot be changed; the "
                 "figures above show runs computed when the book was built.")
STATIC_DEVICE = "Device: chosen when the page runs live (CUDA when present, otherwise the CPU)."
STATIC_ESTIMATE = ("Expected time: planned when the page runs live; the default settings take "
                   "20 s or less on 2 CPU cores.")
_static_ids = itertools.count()
IN_PAGE_TIMES = Path(__file__).resolve().parents[1] / "experiments" / "data" / "in-page-times.json"
"""The in-page runs' times at each panel's defaults, measured in headless Chromium by
``bench/in_page_times.py --store`` (with the machine and its load): the static card quotes its
chapter's, for the in-page trainer (hidden until the page finds it can train)."""


def in_page_time(chapter: str) -> str | None:
    """The sentence the static card shows about its default in-page run, from
    :data:`IN_PAGE_TIMES` (``None`` without a measurement)."""
    if not IN_PAGE_TIMES.exists():
        return None
    stored = json.loads(IN_PAGE_TIMES.read_text())
    run = stored["chapters"].get(chapter)
    if run is None:
        return None
    return (f"In the browser: the default settings trained and tested in {run['seconds']:.0f} s "
            f"on the machine that measured the book ({stored['machine']}, {stored['date']}); "
            "your device may be faster or slower.")


@dataclass(frozen=True)
class Param:
    """One control: a slider from ``minimum`` to ``maximum`` by ``step`` (of integers when
    ``default`` is an int; ``log``: over the exponent, for a learning rate), or toggle buttons
    for ``options``. ``label`` names it as the text does (``"depth L"``); ``help`` is its
    tooltip."""

    name: str
    label: str
    default: Any
    minimum: float = 0
    maximum: float = 1
    step: float = 1
    options: tuple = ()
    log: bool = False
    help: str = ""

    def check(self, value: Any) -> None:
        """A ConfigError naming the parameter unless the control can take ``value`` (a widget
        would clamp it silently)."""
        if self.options:
            allowed, ok = "one of " + ", ".join(map(repr, self.options)), value in self.options
        else:
            number = int if isinstance(self.default, int) else (int, float)
            allowed = (f"{'a whole number' if number is int else 'a number'} from "
                       f"{self.minimum:g} to {self.maximum:g}")
            ok = (isinstance(value, number) and not isinstance(value, bool)
                  and self.minimum <= value <= self.maximum)
        if not ok:
            raise ConfigError(self.name, value, allowed)

    def values(self) -> list[Any]:
        """Every value the control can take, in its order: the options, or the slider's grid
        from ``minimum`` by ``step`` (over the exponent for a log slider). The in-page panel
        keys its entries by the index (:mod:`nlicl_lib.pages.in_page`)."""
        if self.options:
            return list(self.options)
        low, high = ((math.log10(self.minimum), math.log10(self.maximum)) if self.log
                     else (self.minimum, self.maximum))
        grid = [low + i * self.step for i in range(int(round((high - low) / self.step)) + 1)]
        if self.log:
            return [float(f"{10 ** v:.12g}") for v in grid]
        if isinstance(self.default, int):
            return [int(round(v)) for v in grid]
        return [round(v, 12) for v in grid]

    def shown(self, value: Any) -> str:
        """``value`` as the control shows it (floats to 3 significant digits)."""
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    def widget(self) -> widgets.ValueWidget:
        style = {"description_width": "initial"}
        if self.options:
            control = widgets.ToggleButtons(options=list(self.options), value=self.default,
                                            description=self.label,
                                            style={**style, "button_width": "auto"})
        else:
            common = {"description": self.label, "style": style, "continuous_update": False,
                      "layout": widgets.Layout(width="auto", max_width="460px")}
            if isinstance(self.default, int):
                control = widgets.IntSlider(value=self.default, min=self.minimum, max=self.maximum,
                                            step=self.step, **common)
            elif self.log:
                control = widgets.FloatLogSlider(value=self.default, min=math.log10(self.minimum),
                                                 max=math.log10(self.maximum), step=self.step,
                                                 readout_format=".3g", **common)
            else:
                control = widgets.FloatSlider(value=self.default, min=self.minimum,
                                              max=self.maximum, step=self.step,
                                              readout_format=".3g", **common)
        # ipywidgets 8 calls it `tooltip`, 7 (Colab's) `description_tooltip`
        setattr(control, "tooltip" if control.has_trait("tooltip") else "description_tooltip",
                self.help or self.label)
        return control

    def static_html(self, control_id: str) -> str:
        """The control disabled at its default, labelled as the widget: a range input with its
        value beside it (over the exponent for a log slider, as ``FloatLogSlider``), or a group
        of radio buttons for ``options``."""
        tip = f' title="{escape(self.help)}"' if self.help else ""
        label = escape(self.label)
        if self.options:
            choices = "".join(
                f'<span class="nlicl-static-option"><input type="radio" id="{control_id}-{i}" '
                f'name="{control_id}" value="{escape(str(option))}"'
                f'{" checked" if option == self.default else ""} disabled>'
                f'<label for="{control_id}-{i}">{escape(str(option))}</label></span>'
                for i, option in enumerate(self.options))
            return (f'<fieldset class="nlicl-static-control nlicl-static-choice" id="{control_id}"'
                    f'{tip} disabled><legend>{label}</legend>'
                    f'<span class="nlicl-static-options">{choices}</span></fieldset>')
        scale = math.log10 if self.log else float
        low, high, value = (scale(v) for v in (self.minimum, self.maximum, self.default))
        shown = escape(self.shown(self.default))
        return (f'<div class="nlicl-static-control nlicl-static-slider"{tip}>'
                f'<label for="{control_id}">{label}</label>'
                f'<input type="range" id="{control_id}" min="{low:.6g}" max="{high:.6g}" '
                f'step="{self.step:.6g}" value="{value:.6g}" aria-valuetext="{shown}" disabled>'
                f'<output for="{control_id}">{shown}</output></div>')


@dataclass
class PanelResult:
    """One run: the settings it started with, the library's result, the panel's theory values
    and the seconds it took (training, test and theory)."""

    settings: Settings
    experiment: ExperimentResult
    theory: TheoryValues
    seconds: float

    @property
    def normalised_test_loss(self) -> float:
        return self.experiment.test_loss / self.theory.null_loss

    @property
    def normalised_theory(self) -> float | None:
        loss = self.theory.theory_loss
        return None if loss is None else loss / self.theory.null_loss


def theory_levels(theory: TheoryValues) -> list[tuple[float, str, str]]:
    """What the theory says at a run's settings, each ``(loss / E[y²], name, kind)``, ``kind``
    one of ``"theory"``, ``"bound"``, ``"baseline"`` (the zero predictor): what a panel draws
    beside its run, live or in the page (:mod:`nlicl_lib.pages.in_page`)."""
    levels = []
    if theory.theory_loss is not None:
        levels.append((theory.theory_loss / theory.null_loss, f"theory: {theory.theory_name}",
                       "theory"))
    if theory.bound_loss is not None:  # a bound for attention alone; GLU blocks go below it
        levels.append((theory.bound_loss / theory.null_loss, "best linear predictor (bound for "
                       f"attention alone, {ref('cor-linear-bound')})", "bound"))
    return [*levels, (1.0, "zero predictor", "baseline")]


LEVEL_TRACES: dict[str, Callable[..., go.Scatter]] = {
    "theory": theory_trace, "bound": bound_trace, "baseline": baseline_trace}


def _levels(theory: TheoryValues) -> list[tuple[float, str, Callable[..., go.Scatter]]]:
    """:func:`theory_levels`, each with its plotly trace."""
    return [(value, name, LEVEL_TRACES[kind]) for value, name, kind in theory_levels(theory)]


class TrainingPanel:
    """A live training panel; display it as a cell's value. ``configure(settings)`` maps the
    controls' values ``{param.name: value}`` to the run's configs (it may raise ConfigError);
    ``theory(task, model)`` gives the values compared (default
    :func:`~nlicl_lib.theory.values.theory_values`); ``x_param`` is the parameter along which
    the runs are drawn (default: the first); ``chapter`` names it for the static site's in-page
    trainer (:mod:`nlicl_lib.pages.in_page`)."""

    def __init__(self, title: str, params: Sequence[Param], configure: Configure, *,
                 x_param: str | None = None, theory: Callable[..., TheoryValues] = theory_values,
                 device: str = "auto", memory_cap: int = MEMORY_CAP_BYTES, chapter: str = ""):
        self.title, self.params = title, {p.name: p for p in params}
        self.chapter = chapter
        self._configure, self._theory = configure, theory
        self.x_param = x_param or params[0].name
        self.device = resolve_device(device)
        self.threads = choose_threads("auto")  # one thread: the book's models are small
        self.memory_cap = memory_cap
        self.seconds_per_unit = SECONDS_PER_WORK_UNIT
        self.results: list[PanelResult] = []
        self.last_error: str | None = None
        self._theory_cache: dict[tuple, TheoryValues] = {}
        self.live = not page_display.in_book_build()
        if not self.live:
            return
        self.controls = {name: p.widget() for name, p in self.params.items()}
        # default style, no icon: "primary" blue fails the book's contrast check
        self.train_button = widgets.Button(description="Train",
                                           tooltip="Train a model at these settings")
        self.progress = widgets.IntProgress(value=0, min=0, max=1, description="progress",
                                            style={"description_width": "initial"})
        self.plan_line, self.status, self.output = widgets.HTML(), widgets.HTML(), widgets.Output()
        self.train_button.on_click(self._on_click)
        for control in self.controls.values():
            control.observe(lambda _change: self._show_plan(), names="value")
        self.widget = widgets.VBox([widgets.HTML(f"<b>{escape(title)}</b>"),
                                    *self.controls.values(), self.plan_line,
                                    widgets.HBox([self.train_button, self.progress]),
                                    self.status, self.output])
        self._show_plan()
        self.status.value = "Move the sliders, then press Train."

    @property
    def settings(self) -> Settings:
        """The controls' values (the defaults in the book build)."""
        if not self.live:
            return {name: p.default for name, p in self.params.items()}
        return {name: control.value for name, control in self.controls.items()}

    def describe(self, settings: Settings) -> str:
        """``"depth L = 2, degree k = 2"``."""
        return ", ".join(f"{self.params[k].label} = {self.params[k].shown(v)}"
                         for k, v in settings.items())

    def configure(self, settings: Settings | None = None
                  ) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        """The run's configs at ``settings`` (default: the controls'), checked before anything
        is built: a ConfigError names the parameter ``configure`` refuses, or the size to
        shrink when the run's peak memory (:func:`~nlicl_lib.core.planning.check_fits`, the
        command line's count) is above the panel's limit."""
        task, model, train = self._configure(dict(self.settings if settings is None else settings))
        limit = memory_limit_bytes(self.device, fraction=0.5, cap=self.memory_cap)
        limit = self.memory_cap if limit is None else limit
        check_fits(task, model, train.batch_size, self.device, limit=limit,
                   eval_batch_size=eval_batch_size(task, model), prefer=self.params,
                   where=f"the {format_bytes(limit)} a panel may take on {self.device.type}")
        return task, model, train

    def theory_at(self, settings: Settings) -> TheoryValues:
        """The theory values at ``settings`` (cached: a deep stack's reference takes seconds)."""
        task, model, _ = self._configure(dict(settings))
        if (task, model) not in self._theory_cache:
            self._theory_cache[task, model] = self._theory(task, model)
        return self._theory_cache[task, model]

    def _show_plan(self) -> None:
        try:
            task, model, train = self.configure()
        except ConfigError as error:
            self.plan_line.value = f"<b>Not accepted:</b> {escape(str(error))}"
            return
        seconds = work_units(task, model, train.steps, train.batch_size) * self.seconds_per_unit
        rate = "the last run's speed" if self.results else "one CPU thread's measured speed"
        self.plan_line.value = (
            f"On <b>{escape(describe_device(self.device, self.threads))}</b>: about "
            f"<b>{seconds:.{0 if seconds >= 10 else 1}f} s</b> of training ({train.steps} steps of {train.batch_size} "
            f"prompts, at {rate}), then the test loss.")

    def experiment(self, task: TaskConfig, model: ModelConfig, train: TrainConfig,
                   callback: Callable[[int, float], bool] | None = None) -> ExperimentResult:
        """Train and test one run as Train does, without the widgets: the library's
        :func:`~nlicl_lib.experiments.run.run_experiment` on the panel's device, tested to a
        standard error of :data:`RELATIVE_ERROR` of the loss, without the theory (the panel's
        own, :meth:`theory_at`, is computed once per setting)."""
        return run_experiment(task, model, train, self.device, progress=False,
                              relative_error=RELATIVE_ERROR, callback=callback,
                              eval_batch_size=eval_batch_size(task, model), theory=False)

    def train(self, **settings: Any) -> PanelResult:
        """Move the controls named in ``settings`` (as a reader would), train at the controls'
        values, show the result next to its theory and return it. Bad settings raise a
        ConfigError naming the parameter before anything runs."""
        if not self.live:
            raise ConfigError("train", "called in the book build", "panels train only when the "
                              "chapter runs live (Binder, Colab, Jupyter)")
        for name, value in settings.items():
            if name not in self.params:
                raise ConfigError("param", name, "one of " + ", ".join(self.params))
            self.params[name].check(value)
        for name, value in settings.items():
            self.controls[name].value = value
        settings = self.settings
        task, model, train = self.configure(settings)
        self.progress.max, self.progress.value, self.progress.bar_style = train.steps, 0, ""
        stride = max(1, train.steps // 100)

        def advance(step: int, _loss: float) -> bool:
            if (step + 1) % stride == 0 or step + 1 == train.steps:
                self.progress.value = step + 1
            return False

        self.train_button.disabled = True
        self.status.value = f"Training {train.steps} steps, then the test loss …"
        start = time.perf_counter()
        try:
            with use_threads(self.threads):
                experiment = self.experiment(task, model, train, callback=advance)
                theory = self.theory_at(settings)
        except BaseException:
            self.progress.bar_style = "danger"
            raise
        finally:
            self.train_button.disabled = False
        self.progress.bar_style = "success"
        experiment.model = None  # keep the panel light: losses and history stay
        result = PanelResult(settings, experiment, theory, time.perf_counter() - start)
        self.results.append(result)
        self.seconds_per_unit = experiment.training.seconds / work_units(
            task, model, train.steps, train.batch_size)
        self.status.value = self._summary(result)
        self._show_plan()
        with self.output:
            clear_output(wait=True)
            page_display.show(self.figure())
        return result

    def _summary(self, result: PanelResult) -> str:
        text = (f"Trained in {result.seconds:.1f} s ({escape(self.describe(result.settings))}): "
                f"test loss <b>{result.normalised_test_loss:.4g}</b> × E[y²]")
        theory = result.normalised_theory
        if theory is not None:
            text += (f"; theory ({escape(result.theory.theory_name or '')}) <b>{theory:.4g}</b>, "
                     f"ratio {result.normalised_test_loss / theory:.3f}")
        if result.theory.bound_loss is not None:
            text += f"; best linear predictor {result.theory.bound_loss / result.theory.null_loss:.4g}"
        return text + "."

    def _on_click(self, _button: Any = None) -> None:
        """The Train button: a problem becomes the status line, not a traceback."""
        try:
            self.train()
            self.last_error = None
            return
        except ConfigError as error:
            self.last_error = error.spelled({k: p.label for k, p in self.params.items()})
        except TrainingDivergedError as error:
            self.last_error = f"training diverged: {error}"
        except Exception as error:  # noqa: BLE001 - a widget callback must not fail silently
            self.last_error = f"{type(error).__name__}: {error}"
        self.status.value = f"<b>Not trained:</b> {escape(self.last_error)}"

    def figure(self) -> go.Figure:
        """Left, the last run's training loss (a moving average over 2% of the run), its test
        loss and the theory levels; right, the test loss of every run whose other settings
        match the last's, against ``x_param``, with the theory at each."""
        last, x = self.results[-1], self.params[self.x_param]
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14, subplot_titles=(
            "training loss of the last run", f"test loss against {x.label}"))
        book_layout(fig, f"{self.title}: {self.describe(last.settings)}", height=460)
        fig.update_yaxes(type="log", title_text="loss / E[y²]", showline=True, linecolor="#444")
        fig.update_xaxes(title_text="training step", row=1, col=1)
        fig.update_xaxes(title_text=x.label, row=1, col=2,
                         type="category" if x.options else ("log" if x.log else None))
        history = last.experiment.training.loss_history / last.theory.null_loss
        window = max(1, len(history) // 50)
        smooth = np.convolve(history, np.ones(window) / window, mode="valid")
        every = max(1, len(smooth) // 300)
        fig.add_trace(trained_trace(np.arange(window, len(history) + 1)[::every], smooth[::every],
                                    "training loss (moving average)", mode="lines"), 1, 1)
        fig.add_trace(trained_trace([len(history)], [last.normalised_test_loss], "test loss",
                                    COLORS["trained2"], mode="markers",
                                    marker={"size": 12, "symbol": "diamond"}), 1, 1)
        for level, name, trace in _levels(last.theory):
            fig.add_trace(trace([0, len(history)], [level, level], name, legendgroup=name), 1, 1)
        runs = sorted((r for r in self.results if all(
            r.settings[k] == v for k, v in last.settings.items() if k != self.x_param)),
            key=lambda r: x.options.index(r.settings[x.name]) if x.options else r.settings[x.name])
        fig.add_trace(trained_trace(
            [r.settings[x.name] for r in runs], [r.normalised_test_loss for r in runs],
            "trained: test loss of each run", mode="markers",
            error_y=[0.0 if r.experiment.exact_test_loss is not None
                     else r.experiment.test.std_error / r.theory.null_loss for r in runs]), 1, 2)
        curves: dict[str, tuple[list, list, Callable[..., go.Scatter]]] = {}
        for run in runs:
            for level, name, trace in _levels(run.theory):
                xs, ys, _ = curves.setdefault(name, ([], [], trace))
                xs.append(run.settings[x.name])
                ys.append(level)
        for name, (xs, ys, trace) in curves.items():
            fig.add_trace(trace(xs, ys, name, legendgroup=name, showlegend=False
                                ).update(mode="lines+markers"), 1, 2)
        return fig

    def static_html(self) -> str:
        """The card the book build shows: the note that the panel trains only live
        (``role="note"``, first), the title, each control disabled at its default, the device
        and time lines and a disabled Train button, with ids of its own on the page."""
        panel_id = f"nlicl-panel-{next(_static_ids)}"
        controls = "".join(p.static_html(f"{panel_id}-{name}") for name, p in self.params.items())
        chapter = f' data-nlicl-chapter="{escape(self.chapter)}"' if self.chapter else ""
        timed = in_page_time(self.chapter) if self.chapter else None
        in_page = (f'<p class="nlicl-static-line nlicl-in-page-time" hidden>{escape(timed)}</p>'
                   if timed else "")
        return (f'<div class="nlicl-static-panel" id="{panel_id}"{chapter}>'
                f'<p class="nlicl-static-notice" role="note">{escape(STATIC_NOTICE)}</p>'
                f'<p class="nlicl-static-title"><strong>{escape(self.title)}</strong></p>'
                f'<div class="nlicl-static-controls">{controls}</div>'
                f'<p class="nlicl-static-line">{escape(STATIC_DEVICE)}</p>'
                f'<p class="nlicl-static-line">{escape(STATIC_ESTIMATE)}</p>{in_page}'
                '<p class="nlicl-static-actions"><button type="button" disabled '
                'aria-disabled="true">Train</button></p></div>')

    def _ipython_display_(self) -> None:
        if self.live:
            display(self.widget)
            return
        text = "\n".join([STATIC_NOTICE, self.title, *(f"  {p.label}: {p.shown(p.default)}"
                                                      for p in self.params.values()),
                          STATIC_DEVICE, STATIC_ESTIMATE, "[Train] (disabled)"])
        publish_display_data({"text/html": self.static_html(), "text/plain": text})


# --- the chapters' panels ------------------------------------------------------------------


def _training(kind: str, purpose: str, max_steps: int = 3000) -> list[Param]:
    """The steps and learning-rate sliders, at the settings of ``purpose``
    (:func:`~nlicl_lib.training.settings.base_settings`), so that a panel left at its defaults
    trains as :func:`~nlicl_lib.training.settings.default_train_config` says."""
    settings = base_settings(kind, purpose)
    return [
        Param("steps", "training steps", settings["steps"], 100, max_steps, step=100,
              help="Adam steps on fresh prompts; more steps get closer to the theory"),
        Param("learning_rate", "learning rate", settings["learning_rate"], 1e-4, 1.0, log=True,
              step=0.1, help="Adam's peak learning rate (divided by the depth for deep stacks)"),
    ]


def _train(task: TaskConfig, model: ModelConfig, purpose: str, s: Settings, **overrides: Any
           ) -> TrainConfig:
    return default_train_config(task, model, purpose=purpose, steps=s["steps"],
                                learning_rate=s["learning_rate"] / model.depth, **overrides)


def lsa_gd_panel(device: str = "auto") -> TrainingPanel:
    """Chapter 1: one LSA layer on linear regression against the best one-step GD (Theorem 5
    (thm-linear-optimum))."""

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        task = TaskConfig(kind="linear", input_dim=s["input_dim"],
                          context_length=s["context_length"], noise_std=s["noise_std"])
        model = ModelConfig(kind="lsa")
        return task, model, _train(task, model, "default", s)

    return TrainingPanel("One LSA layer on linear tasks", [
        Param("context_length", "context length n", 20, 5, 80, step=5),
        Param("input_dim", "input dimension d", 5, 1, 10),
        Param("noise_std", "label noise σ", 0.0, 0.0, 2.0, step=0.25),
        *_training("lsa", "default"),
    ], configure, device=device, chapter="ch1")


def attention_alone_panel(device: str = "auto") -> TrainingPanel:
    """Chapter 2: LSA stacks of any depth on polynomial tasks against the linear bound
    (Corollary 7 (cor-linear-bound))."""

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        task = TaskConfig(kind="poly", input_dim=INPUT_DIM, context_length=s["context_length"],
                          degree=s["degree"], homogeneous=s["target"] == TARGETS[1])
        model = ModelConfig(kind="lsa", depth=s["depth"])
        return task, model, _train(task, model, "panel-ch2", s)

    return TrainingPanel("Attention alone (LSA stacks)", [
        Param("depth", "depth L", 1, 1, 4),
        Param("degree", "degree k", 2, 1, 3),
        Param("target", "target", TARGETS[0], options=TARGETS,
              help="every monomial of degree 1..k, or only those of degree k"),
        Param("context_length", "context length n", 20, 10, 80, step=10),
        *_training("lsa", "panel-ch2", 2000),
    ], configure, device=device, chapter="ch2")


def glu_kernel_panel(device: str = "auto") -> TrainingPanel:
    r"""Chapter 3: one GLU-LSA block on quadratic tasks against the best one-step GD on
    $(x; \phi_2)$ (Theorem 9 (thm-feature-optimum)), with the chapter's training settings and
    its three GLU initialisations (``"small"`` can lose feature directions)."""

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        task = TaskConfig(kind="poly", input_dim=INPUT_DIM, context_length=s["context_length"],
                          degree=2)
        model = ModelConfig(kind="glu-lsa", activation=s["activation"], glu_init=s["glu_init"])
        return task, model, _train(task, model, "one-block", s, seed=s["seed"])

    return TrainingPanel("One GLU-LSA block on quadratic tasks", [
        Param("context_length", "context length n", 20, 10, 160, step=10),
        Param("glu_init", "GLU initialisation", "large", options=("large", "normal", "small")),
        Param("activation", "GLU activation", "none", options=("none", "silu", "gelu"),
              help="'none' is the bilinear GLU of the theory; silu and gelu gate one branch"),
        Param("seed", "seed", 0, 0, 9, help="initialisation and training prompts"),
        *_training("glu-lsa", "one-block"),
    ], configure, device=device, chapter="ch3")


def block_size_panel(device: str = "auto") -> TrainingPanel:
    r"""Chapter 4: one block with $m$ slots and width $h$ against the best block of that size
    (Proposition 12 (prop-capacity)), the full step on $(x; \phi_2)$ once $m, h \ge p_2$."""

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        task = TaskConfig(kind="poly", input_dim=INPUT_DIM, context_length=20, degree=2)
        model = ModelConfig(kind="glu-lsa", feature_slots=s["feature_slots"],
                            glu_width=s["glu_width"])
        return task, model, _train(task, model, "panel-ch4", s)

    return TrainingPanel("How big one block must be", [
        Param("feature_slots", "feature slots m", 3, 1, 8),
        Param("glu_width", "GLU width h", 3, 1, 8),
        *_training("glu-lsa", "panel-ch4"),
    ], configure, device=device, chapter="ch4")


def depth_panel(device: str = "auto") -> TrainingPanel:
    """Chapter 5: stacks of $L$ narrow blocks against the greedy block-coordinate reference
    (Proposition 15 (prop-greedy-reference), Monte Carlo), on contexts of
    :data:`DEPTH_CONTEXT_LENGTH` examples."""

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        if s["degree"] == 3 and s["depth"] > 3:
            raise ConfigError("depth", s["depth"],
                              "at most 3 for cubic tasks (GLUs that read their slots multiply "
                              "degrees: at depth 4 the features reach degree 16 and overflow)")
        if s["degree"] == 3 and s["depth"] > 1 and s["feature_slots"] < 3:
            raise ConfigError("feature_slots", s["feature_slots"],
                              "at least 3 for cubic tasks (a block must keep x_j x_k to "
                              "multiply it by x_l)")
        task = TaskConfig(kind="poly", input_dim=INPUT_DIM, context_length=DEPTH_CONTEXT_LENGTH,
                          degree=s["degree"])
        model = ModelConfig(kind="glu-lsa", depth=s["depth"], feature_slots=s["feature_slots"],
                            glu_reads="x" if s["degree"] == 2 or s["depth"] == 1 else "x+slots")
        return task, model, _train(task, model, "panel-ch5", s)

    def theory(task: TaskConfig, model: ModelConfig) -> TheoryValues:
        # fewer fitting contexts: a live run (Binder, Colab) must stay under 1 GB
        return theory_values(task, model, reference_contexts=PANEL_REFERENCE_CONTEXTS)

    return TrainingPanel("Depth: stacks of narrow blocks", [
        Param("depth", "depth L", 2, 1, 8),
        Param("feature_slots", "feature slots m", 3, 1, 6),
        Param("degree", "degree k", 2, 2, 3),
        *_training("glu-lsa", "panel-ch5", 2000),
    ], configure, theory=theory, device=device, chapter="ch5")


PANELS = {"ch1": lsa_gd_panel, "ch2": attention_alone_panel, "ch3": glu_kernel_panel,
          "ch4": block_size_panel, "ch5": depth_panel}
"""Chapter -> its panel (what ``bench/panel_times.py`` and the tests go through)."""
