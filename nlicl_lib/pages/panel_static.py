"""A live panel as static HTML in the book build: one job, what the site shows where no kernel runs.

In the book build (``NLICL_BOOK_BUILD=1``) a panel creates no widgets: the executing kernel
would save every widget it creates (shown or not) into the notebook, and myst-nb would then load
a widget manager on the page. The panel shows as static HTML instead
(:func:`static_panel_html`, with a ``text/plain`` fallback :func:`static_panel_text`): a note
that it trains when the page runs live, then its controls, disabled at their settings
(:func:`static_control_html`), and a disabled Train button. Nothing is trained or timed and no
figure is drawn (the static page has figures with sliders over precomputed sweeps instead), and
the site needs no widget manager. A :class:`StaticControl` holds each control's value meanwhile.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

from nlicl_lib.pages.panel_params import Param, Settings

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
    parameter's value, so that :attr:`nlicl_lib.pages.widgets.TrainingPanel.settings` reads the
    defaults."""

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


def static_panel_html(title: str, params: Mapping[str, Param], settings: Settings) -> str:
    """The panel as static HTML: the note that it trains only live (``role="note"``), the
    title, each control disabled at its setting (:func:`static_control_html`), the device and
    expected-time lines and a disabled Train button, in a ``<div class="nlicl-static-panel">``
    with an id of its own on the page."""
    panel_id = f"nlicl-panel-{next(_static_panel_ids)}"
    controls = "".join(static_control_html(param, f"{panel_id}-{name}", settings[name])
                       for name, param in params.items())
    return (f'<div class="nlicl-static-panel" id="{panel_id}">'
            f'<p class="nlicl-static-notice" role="note">{escape(STATIC_NOTICE)}</p>'
            f'<p class="nlicl-static-title"><strong>{escape(title)}</strong></p>'
            f'<div class="nlicl-static-controls">{controls}</div>'
            f'<p class="nlicl-static-line">{escape(STATIC_DEVICE)}</p>'
            f'<p class="nlicl-static-line">{escape(STATIC_ESTIMATE)}</p>'
            '<p class="nlicl-static-actions"><button type="button" disabled '
            'aria-disabled="true">Train</button></p></div>')


def static_panel_text(title: str, params: Mapping[str, Param], settings: Settings) -> str:
    """The ``text/plain`` fallback of :func:`static_panel_html`."""
    lines = [STATIC_NOTICE, title]
    lines += [f"  {p.label}: {shown_value(p, settings[name])}" for name, p in params.items()]
    return "\n".join([*lines, STATIC_DEVICE, STATIC_ESTIMATE, "[Train] (disabled)"])
