r"""Live training panels for readers with a kernel (Jupyter, Binder, Colab): ipywidgets.

A chapter builds a :class:`TrainingPanel` in a few lines: which parameters get a control
(:class:`Param`), and a function mapping the controls' values to the run's
``(TaskConfig, ModelConfig, TrainConfig)``. The panel then offers

* a slider (or toggle buttons) per parameter, a **Train** button and a progress bar;
* a line with the device (``device="auto"``: CUDA when present, else MPS, else the CPU) and
  the *expected* time of a run at the current settings, estimated from a few training steps
  timed on this machine at these settings (:meth:`TrainingPanel.measure_step`) and from the
  measured speed of the finished runs;
* a figure, redrawn in place after every run, with the trained result next to its theory:
  left, the last run's training loss and the theory level; right, the test loss of every run
  so far against the panel's main parameter ``x_param``, on the theory curve for the other
  settings of the last run. Losses are normalised by $\mathbb E[y^2]$ (the zero predictor's
  loss).

Runs go through :func:`nlicl_lib.experiments.run.run_experiment`, so a panel's result *is* the
library's result for the same settings. They are synchronous: while one runs, the kernel
handles no other widget message, so a second press of Train or a slider move waits until the
run has ended and cannot mix into it; Train and the controls are also disabled during the run,
the settings are copied when it starts, and the result is tagged with that copy. Settings whose
estimated memory (:func:`estimate_memory_bytes`) exceeds the limit
(:func:`memory_limit_bytes`) are refused with a message before anything is allocated.

Figures are drawn into an ``ipywidgets.Output`` with :func:`nlicl_lib.book.display.show`
(plotly's own renderer, live), so no extra package is needed (plotly's ``go.FigureWidget``
would need ``anywidget``), and only core widgets are used, which Colab's built-in ipywidgets
(7.x) also has.

In the book build (``NLICL_BOOK_BUILD=1``) a panel creates no widgets and shows as static
HTML (:meth:`TrainingPanel.static_html`): a note that it trains when the page runs live, then
its controls, disabled at their defaults, and a disabled Train button. Nothing is trained or
timed and no figure is drawn (the static page has figures with sliders over precomputed
sweeps instead), and the site needs no widget manager.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import torch
from IPython.display import clear_output, display, publish_display_data
from plotly.subplots import make_subplots

from nlicl_lib.book import display as book_display
from nlicl_lib.book.plots import COLORS
from nlicl_lib.core import planning
from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.device import describe_device, resolve_device
from nlicl_lib.core.errors import ConfigError, TrainingDivergedError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.planning import format_bytes
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.run import ExperimentResult, run_experiment
from nlicl_lib.theory.values import TheoryValues, theory_values
from nlicl_lib.training.train import TrainConfig, train

Settings = dict[str, Any]
Configure = Callable[[Settings], tuple[TaskConfig, ModelConfig, TrainConfig]]
Theory = Callable[[TaskConfig, ModelConfig], TheoryValues]

EVAL_BATCH = planning.EVAL_BATCH
"""Prompts per batch of :func:`nlicl_lib.training.evaluate.estimate_loss` (its default)."""
EVAL_TOKENS = EVAL_BATCH * 21
"""Tokens per test batch of a panel: the library's default batch at $n = 20$."""
EVAL_MIN_PROMPTS = 40000
"""Prompts :func:`~nlicl_lib.training.evaluate.estimate_loss` draws at least (its default)."""
MEMORY_CAP_BYTES = 768 * 2**20
"""Most working memory a panel run may take on the CPU. A Binder session has 2 GB for the
server, the kernel and the run; a chapter's kernel takes about 0.5 GB with its own data
(``make notebook-test`` measures it), and the estimate is an upper bound."""
MAX_CURVE_POINTS = 12
"""Theory points drawn along ``x_param`` (every slider position when there are fewer)."""


# --- parameters ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One control of a panel.

    ``name`` is the key in the settings dict; ``label`` the text next to the control (give
    the paper's symbol, e.g. ``"depth L"``). Numbers get a slider from ``minimum`` to
    ``maximum`` by ``step`` (``log=True``: a log-scale slider, for a positive float such as a
    learning rate); ``options`` gives toggle buttons instead. The type of ``default`` decides
    between an integer and a float slider.
    """

    name: str
    label: str
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    options: tuple | None = None
    log: bool = False
    help: str = ""

    def __post_init__(self) -> None:
        if self.options is not None:
            object.__setattr__(self, "options", tuple(self.options))
            if self.default not in self.options:
                raise ConfigError(self.name, self.default, "one of " + repr(self.options))
            return
        if self.minimum is None or self.maximum is None:
            raise ConfigError(self.name, None, "a minimum and a maximum (or options)")
        if not self.minimum <= self.default <= self.maximum:
            raise ConfigError(self.name, self.default,
                              f"a default between {self.minimum} and {self.maximum}")
        if self.log and (self.minimum <= 0 or self.is_int):
            raise ConfigError(self.name, self.minimum, "a positive float range for log=True")

    @property
    def is_int(self) -> bool:
        return (self.options is None and isinstance(self.default, int)
                and not isinstance(self.default, bool))

    def make_widget(self):
        """The ipywidgets control (core widgets only: Colab's ipywidgets 7 has them too)."""

        common = {"description": self.label, "style": {"description_width": "initial"},
                  "layout": widgets.Layout(width="auto", max_width="460px")}
        if self.options is not None:
            control = widgets.ToggleButtons(
                options=list(self.options), value=self.default, description=self.label,
                style={"description_width": "initial", "button_width": "auto"})
        elif self.is_int:
            control = widgets.IntSlider(value=self.default, min=int(self.minimum),
                                        max=int(self.maximum), step=int(self.step or 1),
                                        continuous_update=False, **common)
        elif self.log:
            control = widgets.FloatLogSlider(
                value=self.default, base=10, min=math.log10(self.minimum),
                max=math.log10(self.maximum), step=self.step or 0.1,
                continuous_update=False, readout_format=".3g", **common)
        else:
            control = widgets.FloatSlider(
                value=self.default, min=self.minimum, max=self.maximum,
                step=self.step or (self.maximum - self.minimum) / 100,
                continuous_update=False, readout_format=".3g", **common)
        # ipywidgets 8 calls it `tooltip`, 7 (Colab's) `description_tooltip`
        tooltip = "tooltip" if control.has_trait("tooltip") else "description_tooltip"
        setattr(control, tooltip, self.help or self.label)
        return control

    def grid(self, max_points: int = MAX_CURVE_POINTS) -> list:
        """Where the theory curve is drawn: every option or slider position, or
        ``max_points`` values spread over the range."""
        if self.options is not None:
            return list(self.options)
        if self.is_int:
            values = list(range(int(self.minimum), int(self.maximum) + 1, int(self.step or 1)))
            if len(values) > max_points:
                picks = np.unique(np.round(np.linspace(0, len(values) - 1, max_points)))
                values = [values[int(i)] for i in picks]
            return values
        if self.log:
            return [float(v) for v in np.geomspace(self.minimum, self.maximum, max_points)]
        return [float(v) for v in np.linspace(self.minimum, self.maximum, max_points)]


# --- memory --------------------------------------------------------------------------------


def eval_batch_size(task: TaskConfig) -> int:
    """Prompts per batch of a panel's test-loss estimate: the library's 20 000 up to $n = 20$,
    fewer for longer contexts, so that a batch holds at most :data:`EVAL_TOKENS` tokens."""
    return max(1000, min(EVAL_BATCH, EVAL_TOKENS // (task.context_length + 1)))


def estimate_memory_bytes(task: TaskConfig, model: ModelConfig, train_config: TrainConfig
                          ) -> int:
    r"""Peak working memory of a panel's run, in bytes (float32): the larger of a training step
    and a batch of the test-loss estimate (:func:`eval_batch_size` prompts), as
    :func:`nlicl_lib.core.planning.estimate` counts it (the command line's check uses the same
    count). ``bench/panel_memory.py`` compares it with the measured peak."""
    return planning.estimate(task, model, train_config.batch_size, eval_batch_size(task)).peak_bytes


def memory_limit_bytes(device: torch.device, cap: int | None = MEMORY_CAP_BYTES) -> int:
    """The largest run a panel accepts on ``device``: half its free memory
    (:func:`nlicl_lib.core.planning.available_memory_bytes`), and on the CPU at most ``cap``
    (:data:`MEMORY_CAP_BYTES`)."""
    limit = planning.memory_limit_bytes(device, fraction=0.5, cap=cap)
    return limit if limit is not None else (cap or MEMORY_CAP_BYTES)


def format_seconds(seconds: float) -> str:
    """``"0.8 s"``, ``"14 s"``, ``"2 min 5 s"``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {int(round(seconds % 60))} s"


# --- results -------------------------------------------------------------------------------


@dataclass
class PanelResult:
    """One finished run: the settings copied when it started, its configs, the library's
    :class:`~nlicl_lib.experiments.run.ExperimentResult` and the panel's theory values."""

    settings: Settings
    task: TaskConfig
    model_config: ModelConfig
    train_config: TrainConfig
    experiment: ExperimentResult
    theory: TheoryValues
    seconds: float

    @property
    def normalised_test_loss(self) -> float:
        return self.experiment.test_loss / self.theory.null_loss

    @property
    def normalised_std_error(self) -> float:
        if self.experiment.exact_test_loss is not None:
            return 0.0
        return self.experiment.test.std_error / self.theory.null_loss

    @property
    def normalised_theory(self) -> float | None:
        loss = self.theory.theory_loss
        return None if loss is None else loss / self.theory.null_loss

    @property
    def normalised_bound(self) -> float | None:
        loss = self.theory.bound_loss
        return None if loss is None else loss / self.theory.null_loss


@dataclass
class Plan:
    """What the settings mean before anything runs: the configs, the memory estimate and its
    limit, the expected seconds (``None`` until measured), or the ``problem`` that refuses
    them."""

    settings: Settings
    task: TaskConfig | None = None
    model_config: ModelConfig | None = None
    train_config: TrainConfig | None = None
    memory_bytes: int = 0
    memory_limit: int = 0
    expected_seconds: float | None = None
    problem: str | None = None


def smooth_curve(values: np.ndarray, points: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """(steps, moving average over ~2% of the run), downsampled to at most ``points``; the
    step of each average is its window's last (1-based)."""
    values = np.asarray(values, dtype=float)
    window = max(1, len(values) // 50)
    smooth = np.convolve(values, np.ones(window) / window, mode="valid")
    steps = np.arange(window, len(values) + 1)
    if len(smooth) > points:
        picks = np.unique(np.linspace(0, len(smooth) - 1, points).round().astype(int))
        smooth, steps = smooth[picks], steps[picks]
    return steps, smooth


# --- the static panel of the book build ----------------------------------------------------

STATIC_NOTICE = ("This panel trains only when the chapter runs live: on Binder, on Colab or in "
                 "your own Jupyter (the launch and download buttons at the top of the page). "
                 "Here its controls show the default settings and cannot be changed; the "
                 "figures above show runs computed when the book was built.")
"""The note at the top of a panel in the book build."""
STATIC_DEVICE = "Device: chosen when the page runs live (CUDA when present, otherwise the CPU)."
STATIC_ESTIMATE = ("Expected time: measured when the page runs live; the default settings take "
                   "20 s or less on 2 CPU cores.")

_static_panel_ids = itertools.count()


@dataclass
class StaticControl:
    """A control of a panel in the book build, which creates no ipywidgets: it holds the
    parameter's value, so that :attr:`TrainingPanel.settings` reads the defaults."""

    value: Any
    disabled: bool = True


def _number(value: float) -> str:
    """An HTML attribute value for a number (no float noise: ``0.1``, ``-1.69897``)."""
    return str(int(value)) if float(value).is_integer() else f"{float(value):.6g}"


def shown_value(param: Param, value: Any) -> str:
    """``value`` as the panel's control shows it: an integer, a float to 3 significant
    digits (the sliders' ``readout_format``), or the option."""
    if param.options is None and not param.is_int:
        return f"{float(value):.3g}"
    return str(value)


def static_control_html(param: Param, control_id: str, value: Any = None) -> str:
    """A disabled HTML control for ``param`` at ``value`` (default: the parameter's default),
    labelled like its ipywidget: a range input with the value shown beside it for a slider (on
    a log slider the range runs over the exponent, as ipywidgets' ``FloatLogSlider`` does), a
    group of radio buttons for the toggle buttons of ``options``."""
    value = param.default if value is None else value
    tip = f' title="{escape(param.help)}"' if param.help else ""
    label = escape(param.label)
    if param.options is not None:
        choices = []
        for index, option in enumerate(param.options):
            option_id = f"{control_id}-{index}"
            checked = " checked" if option == value else ""
            choices.append(
                f'<span class="nlicl-static-option"><input type="radio" id="{option_id}" '
                f'name="{control_id}" value="{escape(str(option))}"{checked} disabled>'
                f'<label for="{option_id}">{escape(str(option))}</label></span>')
        return (f'<fieldset class="nlicl-static-control nlicl-static-choice" id="{control_id}" '
                f'{tip} disabled><legend>{label}</legend>'
                f'<span class="nlicl-static-options">{"".join(choices)}</span></fieldset>')
    if param.is_int:
        low, high, step, position = (int(param.minimum), int(param.maximum),
                                     int(param.step or 1), int(value))
    elif param.log:
        low, high = math.log10(param.minimum), math.log10(param.maximum)
        step, position = param.step or 0.1, math.log10(value)
    else:
        low, high, position = param.minimum, param.maximum, value
        step = param.step or (param.maximum - param.minimum) / 100
    shown = escape(shown_value(param, value))
    return (f'<div class="nlicl-static-control nlicl-static-slider"{tip}>'
            f'<label for="{control_id}">{label}</label>'
            f'<input type="range" id="{control_id}" min="{_number(low)}" max="{_number(high)}" '
            f'step="{_number(step)}" value="{_number(position)}" aria-valuetext="{shown}" disabled>'
            f'<output for="{control_id}">{shown}</output></div>')


# --- the panel -----------------------------------------------------------------------------


class TrainingPanel:
    """A live training panel; display it as a cell's last value (or with ``display``).

    ``params``: the controls. ``configure(settings)`` returns ``(TaskConfig, ModelConfig,
    TrainConfig)`` for ``settings = {param.name: value}``; it may raise
    :class:`~nlicl_lib.core.errors.ConfigError` for a combination it does not accept (shown as a
    message). ``theory(task, model_config)`` gives the theory values drawn and compared
    (default :func:`nlicl_lib.theory.values.theory_values`). ``x_param`` names the parameter on
    the x axis of the results plot (default: the first). ``memory_cap`` bounds a CPU run's
    memory (see :func:`memory_limit_bytes`). ``theory_curve=False`` draws the theory only at
    the settings of the runs (for theory that takes seconds, e.g. a Monte Carlo reference)
    instead of along the whole range of ``x_param``. ``relative_error`` is the Monte Carlo accuracy
    of the test loss (at 0.05 it is measured on 40 000 prompts in most settings, about 1%
    standard error; :func:`~nlicl_lib.training.evaluate.estimate_loss` draws more when needed).
    """

    def __init__(
        self,
        params: Sequence[Param],
        configure: Configure,
        *,
        theory: Theory | None = None,
        x_param: str | None = None,
        title: str = "Train it yourself",
        device: str = "auto",
        relative_error: float = 0.05,
        memory_cap: int | None = MEMORY_CAP_BYTES,
        log_y: bool = True,
        theory_curve: bool = True,
    ):

        names = [p.name for p in params]
        if not names or len(set(names)) != len(names):
            raise ConfigError("params", names, "at least one Param, with distinct names")
        self.params = {p.name: p for p in params}
        self._configure = configure
        self._theory = theory or theory_values
        self.x_param = x_param or names[0]
        if self.x_param not in self.params:
            raise ConfigError("x_param", self.x_param, "one of " + ", ".join(names))
        self.title = title
        self.device = resolve_device(device)
        self.relative_error = relative_error
        self.memory_cap = memory_cap
        self.log_y = log_y
        self.theory_curve = theory_curve
        self.live = not book_display.in_book_build()
        self.results: list[PanelResult] = []
        self.running = False
        self.last_error: str | None = None
        self.last_figure: go.Figure | None = None
        self._displayed = False
        self._theory_cache: dict[tuple, TheoryValues] = {}
        self._step_seconds: dict[tuple, float] = {}
        self._test_seconds: dict[tuple, float] = {}
        if not self.live:
            # The book build creates no ipywidgets: the executing kernel saves every widget it
            # creates (shown or not) into the notebook, and myst-nb then loads a widget manager
            # on the page. The panel shows as static HTML instead (static_html).
            self.controls = {name: StaticControl(p.default) for name, p in self.params.items()}
            self.widget = None
            return

        self.controls = {name: p.make_widget() for name, p in self.params.items()}
        # Default style and no icon: ipywidgets' "primary" blue fails the book's contrast check,
        # and icons need Font Awesome files that the static site's widget manager cannot find.
        self.train_button = widgets.Button(description="Train",
                                           tooltip="Train a model at these settings")
        self.progress = widgets.IntProgress(value=0, min=0, max=1, description="progress",
                                            style={"description_width": "initial"})
        self.device_label = widgets.HTML()
        self.estimate_label = widgets.HTML()
        self.status = widgets.HTML()
        self.output = widgets.Output()
        self.train_button.on_click(self._on_click)
        for control in self.controls.values():
            control.observe(self._on_change, names="value")
        self.widget = widgets.VBox([
            widgets.HTML(f"<b>{escape(title)}</b>"),
            widgets.VBox(list(self.controls.values())),
            self.device_label,
            self.estimate_label,
            widgets.HBox([self.train_button, self.progress]),
            self.status,
            self.output,
        ])
        self.device_label.value = f"Device: <b>{escape(describe_device(self.device))}</b>"

    # -- settings --------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """The controls' current values, ``{param.name: value}`` (a copy)."""
        return {name: control.value for name, control in self.controls.items()}

    def set(self, **values: Any) -> None:
        """Move controls from code, e.g. ``panel.set(depth=3)`` (as a reader would)."""
        for name, value in values.items():
            if name not in self.controls:
                raise ConfigError("param", name, "one of " + ", ".join(self.controls))
            self.controls[name].value = value

    def configure(self, settings: Settings | None = None
                  ) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        """The configs of a run at ``settings`` (default: the current ones)."""
        return self._configure(dict(self.settings if settings is None else settings))

    def plan(self, settings: Settings | None = None) -> Plan:
        """Configs, memory estimate and expected time at ``settings`` (default: the current
        ones), or the problem that refuses them. Measures nothing."""
        plan = Plan(dict(self.settings if settings is None else settings))
        try:
            plan.task, plan.model_config, plan.train_config = self._configure(dict(plan.settings))
        except ConfigError as error:
            plan.problem = f"These settings are not accepted: {error}"
            return plan
        plan.memory_bytes = estimate_memory_bytes(plan.task, plan.model_config,
                                                  plan.train_config)
        plan.memory_limit = memory_limit_bytes(self.device, self.memory_cap)
        if plan.memory_bytes > plan.memory_limit:
            plan.problem = (f"Refused: a run at these settings needs about "
                            f"{format_bytes(plan.memory_bytes)} of memory, more than the "
                            f"{format_bytes(plan.memory_limit)} this panel allows on "
                            f"{self.device.type}. Choose a shorter context, a smaller batch "
                            "or a lower degree.")
            return plan
        key = self._speed_key(plan)
        if key in self._step_seconds:
            plan.expected_seconds = self._expected(plan, self._step_seconds[key],
                                                   self._test_seconds.get(key))
        return plan

    # -- time estimate ---------------------------------------------------------------------

    @staticmethod
    def _speed_key(plan: Plan) -> tuple:
        return (plan.task, plan.model_config, plan.train_config.batch_size)

    @staticmethod
    def _expected(plan: Plan, per_step: float, test_seconds: float | None) -> float:
        if test_seconds is None:
            # the test loss: at least EVAL_MIN_PROMPTS prompts, forward only (a third of the
            # work of a training step per prompt)
            test_seconds = per_step * EVAL_MIN_PROMPTS / plan.train_config.batch_size / 3
        return plan.train_config.steps * per_step + test_seconds

    def measure_step(self, settings: Settings | None = None, warmup: int = 1,
                     steps: int = 5, max_seconds: float = 0.5) -> float | None:
        """Seconds per training step at ``settings``, timed here (cached per task, model and
        batch size): ``warmup`` untimed steps (allocation, thread start-up), then up to
        ``steps`` steps or ``max_seconds``. ``None`` for settings that are refused."""
        plan = self.plan(settings)
        if plan.problem:
            return None
        key = self._speed_key(plan)
        if key not in self._step_seconds:
            model = build_model(plan.model_config, plan.task, self.device,
                                seed=plan.train_config.seed)
            stamps: list[float] = []

            def clock(step: int, loss: float) -> bool:
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                if step + 1 >= warmup:
                    stamps.append(time.perf_counter())
                return len(stamps) > steps or (len(stamps) > 1
                                               and stamps[-1] - stamps[0] > max_seconds)

            probe = TrainConfig(steps=warmup + steps + 1, batch_size=plan.train_config.batch_size,
                                learning_rate=plan.train_config.learning_rate,
                                seed=plan.train_config.seed)
            train(model, plan.task, probe, self.device, progress=False, callback=clock)
            self._step_seconds[key] = (stamps[-1] - stamps[0]) / max(1, len(stamps) - 1)
        return self._step_seconds[key]

    def _refresh_estimate(self) -> Plan:
        """Update the expected-time line for the current settings (timing them if needed)."""
        plan = self.plan()
        if not self.live:
            return plan
        if not plan.problem and plan.expected_seconds is None:
            try:
                self.measure_step()
            except Exception as error:  # noqa: BLE001 - an estimate must not break the panel
                self.estimate_label.value = f"Expected time: not measured ({escape(str(error))})"
                return plan
            plan = self.plan()
        if plan.problem:
            self.estimate_label.value = f"<b>{escape(plan.problem)}</b>"
        else:
            self.estimate_label.value = (
                f"Expected time at these settings: about "
                f"<b>{format_seconds(plan.expected_seconds)}</b> for "
                f"{plan.train_config.steps} steps of {plan.train_config.batch_size} prompts and "
                "the test (an estimate from training steps timed on this machine).")
        return plan

    # -- training --------------------------------------------------------------------------

    def train(self, settings: Settings | None = None) -> PanelResult:
        """Train at ``settings`` (default: the current ones), redraw, return the result.

        Raises :class:`~nlicl_lib.core.errors.ConfigError` when the settings are refused (too much
        memory, a combination ``configure`` rejects) or a run is already in progress, and
        lets training errors through (the Train button shows them as messages instead).
        """
        if not self.live:
            raise ConfigError("train", "called in the book build",
                              "panels train only when the chapter runs live (Binder, Colab, "
                              "Jupyter); the book's figures show runs computed by its cells")
        if self.running:
            raise ConfigError("train", "pressed during a run",
                              "one run at a time: wait for this one to finish")
        plan = self.plan(settings)
        if plan.problem:
            raise ConfigError("settings", plan.settings, plan.problem)
        self.running = True
        self._set_controls_enabled(False)
        steps = plan.train_config.steps
        self.progress.max = steps
        self.progress.value = 0
        self.progress.bar_style = ""
        self.status.value = (f"Training on {escape(describe_device(self.device))}: "
                             f"{steps} steps, then the test loss …")
        stride = max(1, steps // 100)
        start = time.perf_counter()
        try:
            result = run_experiment(
                plan.task, plan.model_config, plan.train_config, self.device,
                progress=False, relative_error=self.relative_error,
                callback=lambda step, loss: self._on_step(step, loss, steps, stride),
                eval_batch_size=eval_batch_size(plan.task))
            theory = self.theory_at(plan.settings)
        except BaseException:
            self.progress.bar_style = "danger"
            raise
        finally:
            self.running = False
            self._set_controls_enabled(True)
        elapsed = time.perf_counter() - start
        self.progress.value = steps
        self.progress.bar_style = "success"
        # the measured speed of this run replaces the few-step timing for these settings
        key = self._speed_key(plan)
        self._step_seconds[key] = result.training.seconds / result.training.steps
        self._test_seconds[key] = max(0.0, elapsed - result.training.seconds)
        result.model = None  # keep the panel light: the losses and the history stay
        panel_result = PanelResult(plan.settings, plan.task, plan.model_config,
                                   plan.train_config, result, theory, elapsed)
        self.results.append(panel_result)
        self.status.value = self._summary(panel_result)
        self.redraw()
        if self.live and self._displayed:
            self._refresh_estimate()
        return panel_result

    def _on_step(self, step: int, loss: float, steps: int, stride: int) -> bool:
        """Training callback: moves the progress bar every ~1% of the run."""
        if step % stride == 0 or step == steps - 1:
            self.progress.value = step + 1
        return False

    def _set_controls_enabled(self, enabled: bool) -> None:
        self.train_button.disabled = not enabled
        for control in self.controls.values():
            control.disabled = not enabled

    def _on_click(self, _button: Any = None) -> None:
        """The Train button: train, and show any problem as a message instead of raising."""
        if not self.live:
            return
        try:
            self.train()
            self.last_error = None
        except ConfigError as error:
            self.last_error = (error.allowed if error.param in ("settings", "train")
                               else str(error))
            self.status.value = f"<b>{escape(self.last_error)}</b>"
        except TrainingDivergedError as error:
            self.last_error = str(error)
            self.status.value = f"<b>Training diverged:</b> {escape(self.last_error)}"
        except Exception as error:  # noqa: BLE001 - a widget callback must not fail silently
            self.last_error = f"{type(error).__name__}: {error}"
            self.status.value = f"<b>The run failed:</b> {escape(self.last_error)}"

    def _on_change(self, _change: Any = None) -> None:
        if self.live and self._displayed and not self.running:
            self._refresh_estimate()

    def _summary(self, result: PanelResult) -> str:
        text = (f"Trained in {format_seconds(result.seconds)} on "
                f"{escape(result.experiment.device)} ({escape(self.describe(result.settings))}): "
                f"test loss <b>{result.normalised_test_loss:.4g}</b> × E[y²]")
        theory = result.normalised_theory
        if theory is not None:
            text += (f"; theory ({escape(result.theory.theory_name or '')}) "
                     f"<b>{theory:.4g}</b>, ratio {result.normalised_test_loss / theory:.3f}")
        bound = result.normalised_bound
        if bound is not None:
            text += f"; best linear predictor {bound:.4g}"
        return text + "."

    def describe(self, settings: Settings) -> str:
        """``"depth L = 2, degree k = 2"``."""
        parts = []
        for name, value in settings.items():
            shown = f"{value:.3g}" if isinstance(value, float) else str(value)
            parts.append(f"{self.params[name].label} = {shown}")
        return ", ".join(parts)

    # -- figure ----------------------------------------------------------------------------

    def theory_at(self, settings: Settings) -> TheoryValues | None:
        """Theory values at ``settings`` (cached; ``None`` if ``configure`` rejects them)."""
        try:
            task, model_config, _ = self._configure(dict(settings))
        except ConfigError:
            return None
        key = (task, model_config)  # the training settings do not change the theory
        if key not in self._theory_cache:
            self._theory_cache[key] = self._theory(task, model_config)
        return self._theory_cache[key]

    def figure(self) -> go.Figure:
        """The figure for the runs so far (before the first run: the theory alone)."""
        latest = self.results[-1] if self.results else None
        reference = dict(latest.settings if latest else self.settings)
        x = self.params[self.x_param]
        fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14, subplot_titles=(
            "training loss of the last run", f"test loss against {x.label}"))
        heading = self.describe(reference) if latest else "theory only (press Train)"
        fig.update_layout(
            template="plotly_white", paper_bgcolor="white", plot_bgcolor="white",
            font={"color": "#222222", "size": 13}, height=460,
            margin={"l": 60, "r": 20, "t": 90, "b": 40},
            legend={"orientation": "h", "y": -0.2, "x": 0, "bgcolor": "rgba(255,255,255,0.9)"},
            title={"text": f"{self.title}: {heading}", "x": 0.02, "font": {"size": 14}})
        fig.update_yaxes(type="log" if self.log_y else "linear", title_text="loss / E[y²]",
                         showline=True, linecolor="#444", gridcolor="#e6e6e6")
        fig.update_xaxes(showline=True, linecolor="#444", gridcolor="#e6e6e6")
        fig.update_xaxes(title_text="training step", row=1, col=1)
        fig.update_xaxes(title_text=x.label, row=1, col=2,
                         type="category" if x.options is not None else ("log" if x.log else None))

        # left: the last run's training curve, its test loss and the theory levels
        if latest:
            steps_max = latest.train_config.steps
        else:
            try:
                steps_max = self.configure(reference)[2].steps
            except ConfigError:
                steps_max = 1
        if latest:
            history = latest.experiment.training.loss_history / latest.theory.null_loss
            steps, smooth = smooth_curve(history)
            fig.add_trace(go.Scatter(x=steps.tolist(), y=smooth.tolist(), mode="lines",
                                     name="training loss (moving average)",
                                     line={"color": COLORS["trained"], "width": 2}), 1, 1)
            fig.add_trace(go.Scatter(x=[steps_max], y=[latest.normalised_test_loss],
                                     mode="markers", name="test loss, last run",
                                     marker={"color": COLORS["trained2"], "size": 12,
                                             "symbol": "diamond"}), 1, 1)
        now = self.theory_at(reference)
        if now is not None:
            for value, name, style in self._levels(now):
                fig.add_trace(go.Scatter(x=[0, steps_max], y=[value, value], mode="lines",
                                         name=name, line=style, legendgroup=name,
                                         showlegend=False), 1, 1)

        # right: the theory curve along x_param, and every run whose other settings match
        curves: dict[str, tuple[list, list, dict]] = {}
        matching = [r for r in self.results
                    if all(r.settings[k] == v for k, v in reference.items() if k != self.x_param)]
        along = x.grid() if self.theory_curve else sorted(
            {r.settings[self.x_param] for r in matching} | {reference[self.x_param]},
            key=lambda v: x.grid().index(v) if x.options is not None else v)
        for value in along:
            values = self.theory_at({**reference, self.x_param: value})
            for level, name, style in self._levels(values) if values else []:
                xs, ys, _ = curves.setdefault(name, ([], [], style))
                xs.append(value)
                ys.append(level)
        for name, (xs, ys, style) in curves.items():
            mode = "lines" if self.theory_curve and len(xs) > 2 else "lines+markers"
            fig.add_trace(go.Scatter(x=xs, y=ys, mode=mode, name=name, line=style,
                                     marker={"symbol": "line-ew-open", "size": 14},
                                     legendgroup=name), 1, 2)
        if matching:
            fig.add_trace(go.Scatter(
                x=[r.settings[self.x_param] for r in matching],
                y=[r.normalised_test_loss for r in matching],
                error_y={"type": "data", "array": [r.normalised_std_error for r in matching],
                         "visible": True},
                mode="markers", name="trained: test loss of each run",
                marker={"color": COLORS["trained"], "size": 10}), 1, 2)
        return fig

    @staticmethod
    def _levels(values: TheoryValues) -> list[tuple[float, str, dict]]:
        null = values.null_loss
        levels = []
        if values.theory_loss is not None:
            levels.append((values.theory_loss / null, f"theory: {values.theory_name}",
                           {"color": COLORS["theory"], "width": 2, "dash": "dash"}))
        if values.bound_loss is not None:  # a bound for attention alone; GLU blocks go below it
            levels.append((values.bound_loss / null,
                           f"best linear predictor (bound for attention alone, "
                           f"{ref('cor-linear-bound')})",
                           {"color": COLORS["bound"], "width": 2, "dash": "dot"}))
        levels.append((1.0, "zero predictor", {"color": COLORS["baseline"], "width": 1.5,
                                               "dash": "dashdot"}))
        return levels

    def redraw(self) -> None:
        """Recompute the figure (:attr:`last_figure`) and, once the panel is shown, redraw it
        in place. In the book build there is no figure."""
        if not self.live:
            return
        self.last_figure = self.figure()
        if not self._displayed:
            return

        with self.output:
            clear_output(wait=True)
            book_display.show(self.last_figure)

    # -- display ---------------------------------------------------------------------------

    def static_html(self) -> str:
        """The panel as static HTML, shown in the book build instead of its widgets: the note
        that it trains only live (``role="note"``), the title, each control disabled at its
        setting (the default; :func:`static_control_html`), the device and expected-time lines
        and a disabled Train button, in a ``<div class="nlicl-static-panel">``."""
        panel_id = f"nlicl-panel-{next(_static_panel_ids)}"
        controls = "".join(static_control_html(param, f"{panel_id}-{name}",
                                               self.controls[name].value)
                           for name, param in self.params.items())
        return (f'<div class="nlicl-static-panel" id="{panel_id}">'
                f'<p class="nlicl-static-notice" role="note">{escape(STATIC_NOTICE)}</p>'
                f'<p class="nlicl-static-title"><strong>{escape(self.title)}</strong></p>'
                f'<div class="nlicl-static-controls">{controls}</div>'
                f'<p class="nlicl-static-line">{escape(STATIC_DEVICE)}</p>'
                f'<p class="nlicl-static-line">{escape(STATIC_ESTIMATE)}</p>'
                '<p class="nlicl-static-actions"><button type="button" disabled '
                'aria-disabled="true">Train</button></p></div>')

    def static_text(self) -> str:
        """The ``text/plain`` fallback of :meth:`static_html`."""
        lines = [STATIC_NOTICE, self.title]
        lines += [f"  {p.label}: {shown_value(p, self.controls[name].value)}"
                  for name, p in self.params.items()]
        return "\n".join([*lines, STATIC_DEVICE, STATIC_ESTIMATE, "[Train] (disabled)"])

    def _ipython_display_(self) -> None:

        if not self.live:
            publish_display_data({"text/html": self.static_html(),
                                  "text/plain": self.static_text()})
            return
        display(self.widget)
        if not self._displayed:
            self._displayed = True
            self.status.value = "Computing the theory and timing a few training steps …"
            try:
                self.redraw()
                self._refresh_estimate()
                self.status.value = "Move the sliders, then press Train."
            except Exception as error:  # noqa: BLE001 - show it, keep the controls usable
                self.status.value = (f"<b>The panel could not draw its figure:</b> "
                                     f"{escape(f'{type(error).__name__}: {error}')}")
