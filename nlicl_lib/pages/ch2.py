r"""Chapter 2's page: its runs, figures, tables and the numbers its prose quotes, each trained
result next to its bound or reference (:mod:`nlicl_lib.theory.linearity`).

- :func:`train_lsa_stacks`: LSA stacks of every (form, task, depth), measured on the same test
  prompts relative to the zero predictor (``full``: all of $P_\ell, Q_\ell$ learned; ``sparse``,
  the GD form: $P_\ell = e_D e_D^\top$, only $\Gamma_\ell$ learned); :func:`linear_references`:
  tuned ridge and least squares on $x$, and the exact best single step of linear GD;
- :func:`line_probe_figure`: a trained LSA's predictions along $x(t) = t\,u$ against the target
  and the best linear predictor of that target;
- :func:`bound_figure`: test loss / zero predictor against depth $L$ next to the bound
  $\mathbb E_f[\min_v \mathbb E_x (v^\top x - f(x))^2] / \mathbb E[y^2]$ of every LSA
  (Corollary 7 (cor-linear-bound)), the best single step of linear GD (Theorem 9
  (thm-feature-optimum), $\psi = x$), tuned ridge on $x$ and the zero predictor;
- :func:`results_table`, :func:`finite_context_table`, :func:`diagnosis_table`: the printed tables;
- :func:`prose_values`, :func:`diagnosis_values`: the numbers the prose quotes (``prose`` names).

The page's display helpers, panel and labels, and chapter 1's reading of a trained layer
(:func:`~nlicl_lib.theory.lsa_gd.read_trained_step`), are re-exported here, so the page imports
the package root, :mod:`~nlicl_lib.theory.linearity` and this module only.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.tables import ResultTable
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments import baselines
from nlicl_lib.pages import plots
from nlicl_lib.pages.chapter_exercises import (  # noqa: F401  (the page's exercises)
    check_affine_bound_fraction,
    check_deep_lsa_cannot_beat_zero,
    check_gd_weights,
    check_linear_bound_fraction,
)
from nlicl_lib.pages.display import glue as glue
from nlicl_lib.pages.display import glue_values as glue_values
from nlicl_lib.pages.display import show as show
from nlicl_lib.pages.panels import attention_alone_panel as attention_alone_panel
from nlicl_lib.theory import closed_forms, predictors
from nlicl_lib.theory.linearity import LabelDiagnosis, LineProbe
from nlicl_lib.theory.lsa_gd import read_trained_step as read_trained_step
from nlicl_lib.training.evaluate import LossEstimate, test_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainResult, train

AXIS_TOP = 1.06
"""Top of the y axis of :func:`bound_figure` (test loss / zero predictor); a value above it is
drawn at the top with its number and an arrow."""

SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def number(value: float, digits: int = 3) -> str:
    """A number for a label: `digits` significant digits, a power of ten written out."""
    if abs(value) < 1e4:
        return f"{value:.{digits}g}"
    mantissa, exponent = f"{value:.{digits - 1}e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def pm(mean: float, error: float) -> str:
    """mean ± error, both to the error's second significant digit"""
    if not error > 0 or error >= 10:
        return f"{mean:.3g} ± {error:.2g}"
    places = 1 - int(np.floor(np.log10(error)))
    return f"{mean:.{places}f} ± {error:.{places}f}"


def paired(loss: LossEstimate) -> str:
    """A paired loss / zero predictor, ± one standard error, to 4 decimals."""
    return f"{loss.normalised:.4f} ± {loss.normalised_std_error:.4f}"


@dataclass
class TrainedModel:
    """One trained model of a sweep with its paired test loss."""

    model_config: ModelConfig
    model: InContextRegressor
    training: TrainResult
    test: LossEstimate


@dataclass
class StackSweep:
    """``trained[form_label, task_name, L]``: the :class:`TrainedModel` of each run, in the
    order of training; ``seconds``: wall time of training and testing them."""

    trained: dict[tuple[str, str, int], TrainedModel]
    seconds: float

    @property
    def train_seconds(self) -> float:
        """Training time summed over the groups of runs trained at once (each run's share)."""
        return sum(t.training.seconds / t.training.trained_with for t in self.trained.values())


def train_lsa_stacks(tasks: Mapping[str, TaskConfig], forms: Mapping[str, str], depths: Sequence[int],
                     steps: int, batch_size: int, test_prompts: int, seed: int = 0) -> StackSweep:
    r"""Train an LSA of every depth $L$ in ``depths``, attention form ``forms[label]`` (``"full"`` or
    ``"sparse"``) and task ``tasks[name]`` with the default settings (peak rate divided by $L$),
    ``steps`` steps of ``batch_size`` prompts, all at once
    (:func:`~nlicl_lib.training.train.train`), each then measured on the same ``test_prompts``
    test prompts (:func:`~nlicl_lib.training.evaluate.test_loss`)."""
    keys = [(form, name, depth) for form in forms for name in tasks for depth in depths]
    runs = [(tasks[name], ModelConfig(kind="lsa", depth=depth, attention=forms[form]))
            for form, name, depth in keys]
    start = time.perf_counter()
    models = [build_model(config, task, seed=seed) for task, config in runs]
    results = train(models, [task for task, _ in runs],
                    [default_train_config(task, config, seed=seed, steps=steps,
                                          batch_size=batch_size) for task, config in runs],
                    progress=False)
    trained = {key: TrainedModel(config, model, result,
                                 test_loss(model, task, test_prompts, seed=seed))
               for key, (task, config), model, result in zip(keys, runs, models, results,
                                                              strict=True)}
    return StackSweep(trained, time.perf_counter() - start)


@dataclass
class LinearReferences:
    r"""Per task name: ``ridge[name]`` (tuned ridge on $x$) and ``one_step[name]`` (exact best single
    step of linear GD); ``least_squares``: least squares on $x$ on the task named ``least_squares_task``."""

    ridge: dict[str, baselines.TunedRidge]
    least_squares: LossEstimate
    least_squares_task: str
    one_step: dict[str, closed_forms.OneStepOptimum]


def linear_references(tasks: Mapping[str, TaskConfig], least_squares_task: str, test_prompts: int,
                      seed: int = 0) -> LinearReferences:
    r"""The references linear in the query at each task's $n$: ridge $\hat w = (X^\top X + n\lambda
    I)^{-1} X^\top y$ with $\lambda$ tuned on validation prompts, least squares ($\lambda = 0$, float64,
    on ``tasks[least_squares_task]`` only) on the first ``test_prompts`` test prompts of ``seed``,
    and $\Gamma^*, \mathcal L^*$ of one GD step on $x$ (Theorem 9 (thm-feature-optimum), $\psi = x$)."""
    ridge_x = {name: baselines.tuned_ridge(task, seed=seed, test_prompts=test_prompts)
               for name, task in tasks.items()}
    least_squares_x = test_loss(predictors.least_squares, tasks[least_squares_task],
                                test_prompts, seed=seed, dtype=torch.float64)
    one_step = {name: closed_forms.linear_gd_optimum(task) for name, task in tasks.items()}
    return LinearReferences(ridge_x, least_squares_x, least_squares_task, one_step)


def results_table(trained: Mapping[tuple[str, str, int], TrainedModel]) -> ResultTable:
    """One row per (form, task, L): the paired test loss / zero predictor ± one standard error and
    the worst prompt's squared error / E[y²]. A table (HTML in the book, text printed)."""
    rows = tuple((f"{form}, {name}, L = {depth}",
                  pm(run.test.normalised, run.test.normalised_std_error), f"{run.test.worst:.3g}")
                 for (form, name, depth), run in trained.items())
    return ResultTable(("attention, task, depth", "loss / zero predictor", "worst prompt / E[y²]"),
                       rows, caption="Trained attention-only stacks against the zero predictor")


def line_probe_figure(probes: Mapping[tuple[int, str], LineProbe], depths: Sequence[int],
                      task_names: Sequence[str]) -> go.Figure:
    r"""``probes[L, name]`` drawn as three curves against $t$: the target $f(x(t))$ (theory), the best
    linear predictor of that target (bound) and the trained LSA of depth $L$ (full $P, Q$); sliders
    for the depth and the task."""
    panels = {}
    for (depth, name), probe in probes.items():
        offsets = probe.offsets
        panels[depth, name] = [
            plots.theory_trace(offsets, probe.targets, "target f(x(t)) (this prompt)"),
            plots.bound_trace(offsets, probe.best_linear, "best linear predictor of this target"),
            plots.trained_trace(offsets, probe.predictions,
                                f"trained LSA, depth {depth} (full P, Q)", mode="lines"),
        ]
    base = plots.new_figure("Prediction along a line in query space",
                            "t, along the line x(t) = t u", "prediction", height=470)
    return plots.slider_figure(base, panels, ["depth L", "task"], [list(depths), list(task_names)])


def bound_figure(trained: Mapping[tuple[str, str, int], TrainedModel], tasks: Mapping[str, TaskConfig],
                 forms: Sequence[str], depths: Sequence[int], refs: LinearReferences) -> go.Figure:
    r"""Test loss / zero predictor against depth (two standard errors) of both ``forms`` on each task
    (a slider step per task), with the bound for every LSA, the exact best single step of linear GD
    at $L = 1$, tuned ridge on $x$ and the zero predictor. Values above :data:`AXIS_TOP` (diverged
    runs) are drawn at the top as a triangle, labelled with their value and an arrow (every second
    label of a form a line lower), with no error bar and a hover text that gives the value."""
    colors = [plots.COLORS["trained"], plots.COLORS["trained2"], plots.COLORS["trained3"],
              plots.COLORS["trained4"]][:len(forms)]
    base = plots.new_figure("Trained LSA against the linear bound",
                            "depth L (layers of attention)", "test loss / zero predictor", height=520)
    base.update_xaxes(tickvals=list(depths))
    base.update_yaxes(range=[0.76, AXIS_TOP + 0.01])
    panels = {}
    count = len(depths)
    for name, task in tasks.items():
        traces = []
        for form, color in zip(forms, colors, strict=True):
            runs = [trained[form, name, depth] for depth in depths]
            values = [r.test.normalised for r in runs]
            above = [v > AXIS_TOP for v in values]
            shown = [min(v, AXIS_TOP) for v in values]
            # every second diverged run's label a line lower: neighbours' labels would overlap
            # on a phone (about 75 px between depths)
            order = list(itertools.accumulate(above))
            text = [("<br>" if count % 2 == 0 else "") + f"{number(v, 2)} ↑" if high else ""
                    for v, high, count in zip(values, above, order, strict=True)]
            # a diverged run's error bar (as large as its loss) would cross the whole chart
            # and blow up the autoscaled view: it gets none, and a marker of its own
            traces.append(plots.trained_trace(
                depths, shown, f"trained LSA, {form} (±2 s.e.)", color=color,
                mode="lines+markers+text", text=text, textposition="bottom left",
                marker={"symbol": ["triangle-up" if high else "circle" for high in above],
                        "size": [13 if high else 7 for high in above]},
                hovertext=[f"diverged: {number(v, 2)} × the zero predictor's loss, above the chart"
                           if high else f"{v:.4f} ± {2 * r.test.normalised_std_error:.4f}"
                           for v, high, r in zip(values, above, runs, strict=True)],
                hoverinfo="text+name",
                error_y=[0.0 if high else 2 * r.test.normalised_std_error
                         for high, r in zip(above, runs, strict=True)]))
        null = closed_forms.null_loss(task)
        traces += [
            plots.theory_trace([0.8, 1.2], [refs.one_step[name].loss / null] * 2,
                               f"best linear GD step, n = {task.context_length} "
                               f"({ref('thm-feature-optimum')})"),
            plots.baseline_trace(depths, [refs.ridge[name].test.normalised] * count,
                                 f"tuned ridge on x, n = {task.context_length}", dash="longdash"),
            plots.bound_trace(depths, [closed_forms.best_linear_loss(task) / null] * count,
                              f"best linear predictor ({ref('cor-linear-bound')})"),
            plots.baseline_trace(depths, [1.0] * count, "zero predictor"),
        ]
        panels[(name,)] = traces
    return plots.slider_figure(base, panels, ["task"], [list(tasks)])


def _off_chart_text(exploded: Sequence[int]) -> str:
    """What the prose says of the full stacks at the depths ``exploded`` (their loss above
    :data:`AXIS_TOP`): which depths, no numbers (the figure and the table carry them)."""
    if not exploded:
        return ("no stack on the linear + quadratic task ends above the zero predictor on the "
                "test prompts of this run")
    depths = " and ".join(str(d) for d in exploded)
    return (f"the {'stack' if len(exploded) == 1 else 'stacks'} of depth {depths} on the linear"
            f" + quadratic task {'ends' if len(exploded) == 1 else 'end'} far worse than the zero"
            " predictor on the test prompts")


def prose_values(trained: Mapping[tuple[str, str, int], TrainedModel], tasks: Mapping[str, TaskConfig],
                 forms: Mapping[str, str], depths: Sequence[int]) -> dict[str, float | str]:
    r"""The values the prose after :func:`bound_figure` quotes, by ``prose`` name:
    ``pure_max_gap``, the largest distance of a trained model's loss on the pure quadratic task from
    the zero predictor's (both forms, every depth); $\mathbb E[y_{\text{quad}}^2]$ and
    $\mathbb E[y_{\text{lin}}^2]$ of the linear + quadratic task and their ratio ``noise_ratio``
    (the noise-to-signal of the linear part); ``gd_form_gain``, the GD form's gain from $L = 1$ to
    the deepest; ``off_chart_text``, which full stacks end above :data:`AXIS_TOP`."""
    mixed_name, pure_name = "linear + quadratic", "pure quadratic"
    values: dict[str, float | str] = {}
    values["pure_max_gap"] = max(abs(trained[form, pure_name, d].test.normalised - 1.0)
                                 for form in forms for d in depths)
    mixed = tasks[mixed_name]
    quad_energy = closed_forms.best_linear_loss(mixed)  # E[y^2] of the quadratic part
    lin_energy = closed_forms.null_loss(mixed) - quad_energy
    values["quad_energy"] = quad_energy
    values["lin_energy"] = lin_energy
    values["noise_ratio"] = quad_energy / lin_energy
    values["off_chart_text"] = _off_chart_text(
        [d for d in sorted(depths) if trained["full P, Q", mixed_name, d].test.normalised > AXIS_TOP])
    values["gd_form_gain"] = (trained["GD form", mixed_name, min(depths)].test.normalised
                              - trained["GD form", mixed_name, max(depths)].test.normalised)
    return values


def finite_context_table(task: TaskConfig, one_step_curve: np.ndarray, context_lengths: Sequence[int],
                         refs: LinearReferences, mixed_runs: Mapping[tuple[str, int], LossEstimate]) -> str:
    r"""The references at the task's $n$ (bound at $n \to \infty$, best single step, least squares,
    tuned ridge) next to the best depth of each attention form, then the best single step at the
    larger $n$ of ``context_lengths[1:]`` (``one_step_curve`` normalised, one value per $n$)."""
    forms = list(dict.fromkeys(form for form, _ in mixed_runs))
    depths = list(dict.fromkeys(depth for _, depth in mixed_runs))
    best_depth = {form: min(depths, key=lambda L: mixed_runs[form, L].normalised) for form in forms}
    n = context_lengths[0]
    rows = [
        ("best linear predictor, n → ∞ (exact)",
         f"{closed_forms.best_linear_loss(task) / closed_forms.null_loss(task):.4f}"),
        (f"best step of linear GD, n = {n} (exact, {ref('thm-feature-optimum')}, ψ = x)",
         f"{one_step_curve[0]:.4f}"),
        (f"least squares on x, n = {n} (Monte Carlo)", paired(refs.least_squares)),
        (f"ridge on x, tuned penalty, n = {n} (Monte Carlo)",
         paired(refs.ridge[refs.least_squares_task].test)),
    ]
    rows += [(f"trained LSA, {form}, best depth L = {best_depth[form]}",
              paired(mixed_runs[form, best_depth[form]])) for form in forms]
    lines = [f"{'linear + quadratic task, loss / zero predictor':57s} value"]
    lines += [f"{label:57s} {value}" for label, value in rows]
    lines.append("best single step of linear GD at larger n (exact):\n  " + ", ".join(
        f"n = {m:,}: {v:.4f}" for m, v in zip(context_lengths[1:], one_step_curve[1:], strict=True)))
    return "\n".join(lines)


DIAGNOSIS_LEGEND = """
mean, median: squared error / the zero predictor's mean loss, all prompts
worst 0.1%: share of the mean loss carried by the worst 0.1% of prompts
large-label 1%, other 99%: mean loss on the 1% of prompts with the
  largest context labels (mean y_i^2) and on the others
label deg. ≥ 2: median over prompts of
  |p(2y) - 2 p(y) + p(0)| / |p(y)|, with p(y) the prediction for context
  labels y: the part of the prediction of degree two or more in the
  labels, relative to the prediction
train batch: largest training batch loss / E[y^2] in the last 100 steps"""


def diagnosis_table(diagnosis: Mapping[tuple[str, int], LabelDiagnosis]) -> str:
    """One row per (form, L) of :func:`~nlicl_lib.theory.linearity.label_diagnosis`, then what
    each column means."""
    lines = ["form       L  mean      median  worst    large-     other   label     train",
             "                                0.1%     label 1%   99%     deg. ≥ 2  batch"]
    for (form, depth), row in diagnosis.items():
        lines.append(f"{form:9s}  {depth}  {row.mean:<8.3g}  {row.median:.4f}  {row.share:<7.1%}  "
                     f"{row.largest:<9.3g}  {row.rest:.4f}  {row.superlinear:<8.2g}  "
                     f"{row.training:.2f}")
    return "\n".join(lines) + "\n" + DIAGNOSIS_LEGEND


def diagnosis_values(diagnosis: Mapping[tuple[str, int], LabelDiagnosis], worst_depth: int
                     ) -> dict[str, float | str]:
    """The prose's numbers of the diagnosis at ``worst_depth``, by ``prose`` name:
    ``diag_<column>_full`` and ``diag_<column>_gd`` for every column."""
    full, gd = (asdict(diagnosis[form, worst_depth]) for form in ("full P, Q", "GD form"))
    values: dict[str, float | str] = {}
    for key in full:
        values[f"diag_{key}_full"] = full[key]
        values[f"diag_{key}_gd"] = gd[key]
    return values
