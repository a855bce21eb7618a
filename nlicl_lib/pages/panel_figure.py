r"""The figure of a live panel: one job, the trained result drawn next to its theory.

Left, the last run's training loss (a moving average, :func:`smooth_curve`), its test loss and
the theory levels at its settings; right, the test loss of every run so far against the panel's
main parameter ``x_param``, on the theory curve for the other settings of the last run (only
the runs whose other settings match are drawn). Before the first run the figure shows the
theory alone. Losses are normalised by $\mathbb E[y^2]$ (the zero predictor's loss,
``null_loss``), so the zero predictor sits at 1.

A finished run is a :class:`PanelResult`: the library's
:class:`~nlicl_lib.experiments.run.ExperimentResult` with the panel's theory values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.run import ExperimentResult
from nlicl_lib.pages.panel_params import Configure, Param, Settings, describe_settings
from nlicl_lib.pages.plots import COLORS
from nlicl_lib.theory.values import TheoryValues
from nlicl_lib.training.train import TrainConfig

TheoryAt = Callable[[Settings], TheoryValues | None]
"""The theory values at some settings (``None`` where ``configure`` rejects them)."""


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


def theory_levels(values: TheoryValues) -> list[tuple[float, str, dict]]:
    """The levels drawn for ``values``, each ``(loss / E[y²], name, line style)``: the theory
    loss, the best linear predictor's (a bound for attention alone; GLU blocks go below it)
    and the zero predictor's, 1."""
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


def panel_figure(results: Sequence[PanelResult], settings: Settings, *,
                 params: Mapping[str, Param], x_param: str, title: str, configure: Configure,
                 theory_at: TheoryAt, log_y: bool = True, theory_curve: bool = True
                 ) -> go.Figure:
    """The figure for ``results`` (the runs so far, oldest first; before the first run: the
    theory alone at ``settings``, the controls' current values).

    ``params`` and ``x_param`` name the axes and the settings; ``configure`` gives the number
    of steps before the first run; ``theory_at`` the theory values at some settings.
    ``theory_curve=False`` draws the theory only at the settings of the runs instead of along
    the whole range of ``x_param``; ``log_y`` puts the losses on a log axis.
    """
    latest = results[-1] if results else None
    reference = dict(latest.settings if latest else settings)
    x = params[x_param]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14, subplot_titles=(
        "training loss of the last run", f"test loss against {x.label}"))
    heading = describe_settings(params, reference) if latest else "theory only (press Train)"
    fig.update_layout(
        template="plotly_white", paper_bgcolor="white", plot_bgcolor="white",
        font={"color": "#222222", "size": 13}, height=460,
        margin={"l": 60, "r": 20, "t": 90, "b": 40},
        legend={"orientation": "h", "y": -0.2, "x": 0, "bgcolor": "rgba(255,255,255,0.9)"},
        title={"text": f"{title}: {heading}", "x": 0.02, "font": {"size": 14}})
    fig.update_yaxes(type="log" if log_y else "linear", title_text="loss / E[y²]",
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
            steps_max = configure(reference)[2].steps
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
    now = theory_at(reference)
    if now is not None:
        for value, name, style in theory_levels(now):
            fig.add_trace(go.Scatter(x=[0, steps_max], y=[value, value], mode="lines",
                                     name=name, line=style, legendgroup=name,
                                     showlegend=False), 1, 1)

    # right: the theory curve along x_param, and every run whose other settings match
    curves: dict[str, tuple[list, list, dict]] = {}
    matching = [r for r in results
                if all(r.settings[k] == v for k, v in reference.items() if k != x_param)]
    along = x.grid() if theory_curve else sorted(
        {r.settings[x_param] for r in matching} | {reference[x_param]},
        key=lambda v: x.grid().index(v) if x.options is not None else v)
    for value in along:
        values = theory_at({**reference, x_param: value})
        for level, name, style in theory_levels(values) if values else []:
            xs, ys, _ = curves.setdefault(name, ([], [], style))
            xs.append(value)
            ys.append(level)
    for name, (xs, ys, style) in curves.items():
        mode = "lines" if theory_curve and len(xs) > 2 else "lines+markers"
        fig.add_trace(go.Scatter(x=xs, y=ys, mode=mode, name=name, line=style,
                                 marker={"symbol": "line-ew-open", "size": 14},
                                 legendgroup=name), 1, 2)
    if matching:
        fig.add_trace(go.Scatter(
            x=[r.settings[x_param] for r in matching],
            y=[r.normalised_test_loss for r in matching],
            error_y={"type": "data", "array": [r.normalised_std_error for r in matching],
                     "visible": True},
            mode="markers", name="trained: test loss of each run",
            marker={"color": COLORS["trained"], "size": 10}), 1, 2)
    return fig
