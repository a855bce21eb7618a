r"""Chapter 5's figures of the depth study (:mod:`nlicl_lib.experiments.depth_study` data), each trained
result drawn next to the reference it is compared with.

- :func:`depth_figure`: normalised loss against depth $L$ for every slot count of a study:
  trained stacks, the greedy references (Proposition 15 (prop-greedy-reference); mean and spread
  over their fitting samples, :func:`reference_spread`), the best single
  block with $m$ slots and the best single block of any size (Proposition 12 (prop-capacity));
- :func:`weights_figure`: the same trained stacks and references against their number of
  trained weights, $L\,\big((d + m)^2 + 2hd + mh\big)$ with $h = m$
  (:func:`nlicl_lib.experiments.depth_study.stack_weights`);
- :func:`curves_figure`: the training curves, one slider step per run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import plotly.graph_objects as go

from nlicl_lib.pages.plots import (
    COLORS,
    PALETTE,
    baseline_trace,
    bound_trace,
    new_figure,
    slider_figure,
    theory_trace,
    trained_trace,
)
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.experiments.depth_study import reference_samples, stack_weights
from nlicl_lib.experiments.depth_sweep import shape_key


def _normalised(study: dict, values: Iterable[float]) -> list[float]:
    return [float(v) / study["null_loss"] for v in values]


def _trained(study: dict, m: int) -> tuple[list[int], list[float], list[float]]:
    depths = list(study["depths"])
    runs = [study["trained"][shape_key(m, L)] for L in depths]
    return (depths, _normalised(study, [r["loss"] for r in runs]),
            _normalised(study, [2 * r["std_error"] for r in runs]))


def reference_spread(study: dict, m: int) -> tuple[list[int], np.ndarray, np.ndarray,
                                                    np.ndarray]:
    """The greedy reference with ``m`` slots per depth, normalised: the mean over its fitting
    samples, and the lowest and highest of every sample's estimate ∓ 2 standard errors (over
    the test contexts): the error bars of the figures."""
    samples = reference_samples(study, m)
    errors = np.asarray(study["references"][str(m)]["fit_samples"]["std_error"]) / study[
        "null_loss"]
    return (list(range(1, samples.shape[1] + 1)), samples.mean(axis=0),
            (samples - 2 * errors).min(axis=0), (samples + 2 * errors).max(axis=0))


def _reference_name(study: dict, m: int) -> str:
    if m >= study["p2"]:
        return f"L steps of kernel GD, best Γ (m = {study['p2']})"
    return f"block-coordinate reference, m = {m}"


def _trace_pairs(study: dict, x_of: Callable[[int, int], float]) -> list[go.Scatter]:
    traces = []
    for index, m in enumerate(study["slots"]):
        color = PALETTE[index]
        depths, loss, error = _trained(study, m)
        traces.append(trained_trace([x_of(m, L) for L in depths], loss,
                                    f"trained, m = {m} slots", color=color, error_y=error))
        depths, mean, low, high = reference_spread(study, m)
        traces.append(theory_trace([x_of(m, L) for L in depths], mean.tolist(),
                                   _reference_name(study, m), color=color,
                                   dash="dash" if index == 0 else "longdash",
                                   error_y={"type": "data", "symmetric": False,
                                            "array": (high - mean).tolist(),
                                            "arrayminus": (mean - low).tolist(),
                                            "visible": True}))
    return traces


def depth_figure(study: dict, title: str) -> go.Figure:
    """Normalised test loss against depth for every slot count of ``study``, with the best
    single block of each size as horizontal lines. Error bars: 2 standard errors of a trained
    stack; a reference's span its fitting samples' estimates ± 2 standard errors
    (:func:`reference_spread`), its line their mean."""
    fig = new_figure(title, "depth L (blocks)", "test loss / E[y²]", log_y=True)
    fig.update_yaxes(dtick="D2")  # labels at 1, 2, 5 of each decade: two decades stay readable
    for trace in _trace_pairs(study, lambda m, L: L):
        fig.add_trace(trace)
    last = max(study["depths"])
    for m in study["slots"]:
        if m < study["p2"]:
            single = _normalised(study, [study["single_block"][str(m)]] * 2)
            fig.add_trace(bound_trace([1, last], single,
                                      f"best single block, m = {m} (any width)"))
    fig.add_trace(baseline_trace([1, last], _normalised(study, [study["kernel_optimum"]] * 2),
                                 f"best single block of any size (m = {study['p2']})"))
    return fig


def weights_figure(study: dict, title: str) -> go.Figure:
    """The trained stacks and references of ``study`` against their trained weights."""
    d = study["task"]["input_dim"]
    fig = new_figure(title, "trained weights of the stack", "test loss / E[y²]", log_x=True,
                     log_y=True)
    fig.update_xaxes(dtick="D2")
    fig.update_yaxes(dtick="D2")
    for trace in _trace_pairs(study, lambda m, L: stack_weights(d, m, L)):
        fig.add_trace(trace)
    return fig


def curves_figure(studies: dict[str, dict], title: str) -> go.Figure:
    """Training curves (batch loss, mean of every ``history_window`` steps) of every run, with
    the run's final test loss and its reference at the same depth. Two sliders, the study and
    its slot count, then the depth $L$ (the studies share their depths): each has few enough
    steps that a finger can hit every one on a phone (one slider over every run had 24)."""
    depth_lists = {tuple(study["depths"]) for study in studies.values()}
    if len(depth_lists) != 1:
        raise ConfigError("studies", sorted(depth_lists), "studies trained at the same depths")
    depths = list(next(iter(depth_lists)))
    panels, shapes = {}, []
    for study in studies.values():
        window = study["history_window"]
        for m in study["slots"]:
            shape = f"d={study['task']['input_dim']}, m={m}"
            shapes.append(shape)
            for L in depths:
                run = study["trained"][shape_key(m, L)]
                curve = _normalised(study, run["history"])
                steps = (np.arange(len(curve)) + 1) * window
                reference = float(reference_samples(study, m)[:, L - 1].mean())
                panels[(shape, L)] = [
                    trained_trace(steps, curve, "batch loss (mean of 25 steps)", mode="lines"),
                    trained_trace([steps[-1]], [run["loss"] / study["null_loss"]],
                                  "test loss after training", color=COLORS["trained2"],
                                  mode="markers", marker={"size": 10}),
                    theory_trace([steps[0], steps[-1]], [reference] * 2,
                                 "reference of the same shape"),
                ]
    base = new_figure(title, "training step", "loss / E[y²]", log_y=True)
    return slider_figure(base, panels, ["study, slots", "depth L"], [shapes, depths])
