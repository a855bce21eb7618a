r"""Live training panels for readers with a kernel (Jupyter, Binder, Colab): ipywidgets.

A chapter builds a :class:`TrainingPanel` in a few lines: which parameters get a control
(:class:`~nlicl_lib.pages.panel_params.Param`), and a function mapping the controls' values to
the run's ``(TaskConfig, ModelConfig, TrainConfig)``. The panel then offers

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

This module is the controller: it builds the widgets, trains with progress, reports a refused
setting, a divergence or a failure as a message, and redraws. Each of its other jobs has a
module of its own:

* :mod:`nlicl_lib.pages.panel_params`: the parameters and their controls;
* :mod:`nlicl_lib.pages.panel_plan`: the memory estimate, its limit and the expected time;
* :mod:`nlicl_lib.pages.panel_figure`: the figure of the runs against their theory;
* :mod:`nlicl_lib.pages.panel_static`: the static HTML shown in the book build.

Runs go through :func:`nlicl_lib.experiments.run.run_experiment`, so a panel's result *is* the
library's result for the same settings. They are synchronous: while one runs, the kernel
handles no other widget message, so a second press of Train or a slider move waits until the
run has ended and cannot mix into it; Train and the controls are also disabled during the run,
the settings are copied when it starts, and the result is tagged with that copy. Settings whose
estimated memory (:func:`~nlicl_lib.pages.panel_plan.estimate_memory_bytes`) exceeds the limit
(:func:`~nlicl_lib.pages.panel_plan.memory_limit_bytes`) are refused with a message before
anything is allocated.

Figures are drawn into an ``ipywidgets.Output`` with :func:`nlicl_lib.pages.display.show`
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

import time
from collections.abc import Callable, Sequence
from html import escape
from typing import Any

import ipywidgets as widgets
import plotly.graph_objects as go
from IPython.display import clear_output, display, publish_display_data

from nlicl_lib.core.device import choose_threads, describe_device, resolve_device, use_threads
from nlicl_lib.core.errors import ConfigError, TrainingDivergedError
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.run import run_experiment
from nlicl_lib.pages import display as page_display
from nlicl_lib.pages.panel_figure import PanelResult, panel_figure
from nlicl_lib.pages.panel_params import Configure, Param, Settings, describe_settings
from nlicl_lib.pages.panel_plan import (
    MEMORY_CAP_BYTES,
    Plan,
    SpeedKey,
    estimate_html,
    eval_batch_size,
    format_seconds,
    plan_run,
    speed_key,
    time_training_step,
)
from nlicl_lib.pages.panel_static import StaticControl, static_panel_html, static_panel_text
from nlicl_lib.theory.values import TheoryValues, theory_values
from nlicl_lib.training.train import TrainConfig

Theory = Callable[[TaskConfig, ModelConfig], TheoryValues]


class TrainingPanel:
    """A live training panel; display it as a cell's last value (or with ``display``).

    ``params``: the controls. ``configure(settings)`` returns ``(TaskConfig, ModelConfig,
    TrainConfig)`` for ``settings = {param.name: value}``; it may raise
    :class:`~nlicl_lib.core.errors.ConfigError` for a combination it does not accept (shown as a
    message). ``theory(task, model_config)`` gives the theory values drawn and compared
    (default :func:`nlicl_lib.theory.values.theory_values`). ``x_param`` names the parameter on
    the x axis of the results plot (default: the first). ``memory_cap`` bounds a CPU run's
    memory (see :func:`~nlicl_lib.pages.panel_plan.memory_limit_bytes`). ``theory_curve=False``
    draws the theory only at the settings of the runs (for theory that takes seconds, e.g. a
    Monte Carlo reference) instead of along the whole range of ``x_param``. ``relative_error``
    is the Monte Carlo accuracy of the test loss (at 0.05 it is measured on 40 000 prompts in
    most settings, about 1% standard error; :func:`~nlicl_lib.training.evaluate.test_loss`
    draws more when needed). ``threads``: torch's intra-op threads while the panel trains
    (:func:`~nlicl_lib.core.device.choose_threads`; ``"auto"``: one, as these models are small).
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
        threads: int | str = "auto",
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
        # torch's intra-op threads while this panel trains or times a step (restored after):
        # one for the book's small models (nlicl_lib.core.device.choose_threads)
        self.threads = choose_threads(threads)
        self.relative_error = relative_error
        self.memory_cap = memory_cap
        self.log_y = log_y
        self.theory_curve = theory_curve
        self.live = not page_display.in_book_build()
        self.results: list[PanelResult] = []
        self.running = False
        self.last_error: str | None = None
        self.last_figure: go.Figure | None = None
        self._displayed = False
        self._theory_cache: dict[tuple, TheoryValues] = {}
        self._step_seconds: dict[SpeedKey, float] = {}
        self._test_seconds: dict[SpeedKey, float] = {}
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
        self.device_label.value = (f"Device: <b>{escape(describe_device(self.device, self.threads))}"
                                   "</b>")

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

    def describe(self, settings: Settings) -> str:
        """``"depth L = 2, degree k = 2"``."""
        return describe_settings(self.params, settings)

    # -- plan and time estimate ------------------------------------------------------------

    def plan(self, settings: Settings | None = None) -> Plan:
        """Configs, memory estimate and expected time at ``settings`` (default: the current
        ones), or the problem that refuses them (:func:`~nlicl_lib.pages.panel_plan.plan_run`).
        Measures nothing."""
        return plan_run(self.settings if settings is None else settings, self._configure,
                        self.device, self.memory_cap, self._step_seconds, self._test_seconds)

    def measure_step(self, settings: Settings | None = None, warmup: int = 1,
                     steps: int = 5, max_seconds: float = 0.5) -> float | None:
        """Seconds per training step at ``settings``, timed here (cached per task, model and
        batch size): ``warmup`` untimed steps (allocation, thread start-up), then up to
        ``steps`` steps or ``max_seconds``. ``None`` for settings that are refused."""
        plan = self.plan(settings)
        if plan.problem:
            return None
        key = speed_key(plan)
        if key not in self._step_seconds:
            with use_threads(self.threads):
                self._step_seconds[key] = time_training_step(plan, self.device, warmup, steps,
                                                             max_seconds)
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
        self.estimate_label.value = estimate_html(plan)
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
        self.status.value = (f"Training on {escape(describe_device(self.device, self.threads))}: "
                             f"{steps} steps, then the test loss …")
        stride = max(1, steps // 100)
        start = time.perf_counter()
        try:
            with use_threads(self.threads):
                result = run_experiment(
                    plan.task, plan.model_config, plan.train_config, self.device,
                    progress=False, relative_error=self.relative_error,
                    callback=lambda step, loss: self._on_step(step, loss, steps, stride),
                    eval_batch_size=eval_batch_size(plan.task, plan.model_config),
                    # the panel's theory is theory_at's, computed once per setting (for a deep
                    # stack a Monte Carlo reference: computing it here too cost ~300 MiB)
                    theory=False)
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
        key = speed_key(plan)
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
        """The figure for the runs so far (before the first run: the theory alone); see
        :func:`~nlicl_lib.pages.panel_figure.panel_figure`."""
        return panel_figure(self.results, self.settings, params=self.params,
                            x_param=self.x_param, title=self.title, configure=self.configure,
                            theory_at=self.theory_at, log_y=self.log_y,
                            theory_curve=self.theory_curve)

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
            page_display.show(self.last_figure)

    # -- display ---------------------------------------------------------------------------

    def static_html(self) -> str:
        """The panel as static HTML, shown in the book build instead of its widgets: the note
        that it trains only live (``role="note"``), the title, each control disabled at its
        setting (the default; :func:`~nlicl_lib.pages.panel_static.static_control_html`), the
        device and expected-time lines and a disabled Train button, in a
        ``<div class="nlicl-static-panel">``."""
        return static_panel_html(self.title, self.params, self.settings)

    def static_text(self) -> str:
        """The ``text/plain`` fallback of :meth:`static_html`."""
        return static_panel_text(self.title, self.params, self.settings)

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
