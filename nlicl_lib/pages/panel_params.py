"""The parameters of a live training panel and their controls: one job, what a reader can set.

A chapter's panel says which parameters get a control (:class:`Param`: a slider, a log-scale
slider or toggle buttons) and passes a :data:`Configure` function that maps the controls'
values, the :data:`Settings` ``{param.name: value}``, to the run's
``(TaskConfig, ModelConfig, TrainConfig)``. Only core ipywidgets are made, which Colab's
built-in ipywidgets (7.x) also has. The same parameters give the points where the theory curve
is drawn (:meth:`Param.grid`) and the text that names a run's settings
(:func:`describe_settings`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import ipywidgets as widgets
import numpy as np

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.training.train import TrainConfig

Settings = dict[str, Any]
Configure = Callable[[Settings], tuple[TaskConfig, ModelConfig, TrainConfig]]

MAX_CURVE_POINTS = 12
"""Theory points drawn along ``x_param`` (every slider position when there are fewer)."""


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

    def make_widget(self) -> widgets.ValueWidget:
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


def describe_settings(params: Mapping[str, Param], settings: Settings) -> str:
    """``"depth L = 2, degree k = 2"``: each setting after its parameter's label, floats to 3
    significant digits."""
    parts = []
    for name, value in settings.items():
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        parts.append(f"{params[name].label} = {shown}")
    return ", ".join(parts)
