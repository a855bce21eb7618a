"""Chapter 2's figures (nlicl_lib.pages.ch2_figures) and the analysis behind them
(nlicl_lib.theory.ch2_analysis, nlicl_lib.experiments.ch2_studies), on cheap real computations:
the quadratic tasks in d = 2 with n = 10, LSA stacks of depth 1 and 3 trained for 20 steps."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from nlicl_lib import Prompts, TaskConfig, sample_prompts
from nlicl_lib.pages import ch2_figures
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.experiments import ch2_studies
from nlicl_lib.theory import ch2_analysis, closed_forms
from nlicl_lib.theory.constructions import gd_lsa
from nlicl_lib.theory.linearity import LineProbe

D, N = 2, 10
DEPTHS = [1, 3]
FORMS = {"full P, Q": "full", "GD form": "sparse"}
PURE = TaskConfig(kind="poly", input_dim=D, context_length=N, degree=2, homogeneous=True)
MIXED = TaskConfig(kind="poly", input_dim=D, context_length=N, degree=2)
TASKS = {"pure quadratic": PURE, "linear + quadratic": MIXED}


@pytest.fixture(scope="module")
def computed():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    sweep = ch2_studies.train_lsa_stacks(TASKS, FORMS, DEPTHS, steps=20, batch_size=64,
                                         test_prompts=2000, seed=0)
    refs = ch2_studies.linear_references(TASKS, "linear + quadratic", test_prompts=2000, seed=0)
    torch.set_num_threads(threads)
    return sweep, refs


def _panels(fig) -> list[list]:
    owner = fig.layout.meta["nlicl_sliders"]["panel_of_trace"]
    return [[t for t, p in zip(fig.data, owner, strict=True) if p == k] for k in range(max(owner) + 1)]


def test_bounds_are_the_exact_moments():
    # d = 2: E[y^2] = 2 (linear) + 2 * 3 (squares) + 1 (cross); a linear predictor explains 2
    assert ch2_analysis.task_bounds(MIXED) == (9.0, 7.0, 5.0)
    null, bound, affine = ch2_analysis.task_bounds(PURE)
    assert bound == null == 7.0 and affine == 5.0  # the squares' means of 1 are affine


def test_attention_alone_is_linear_in_the_query_and_a_glu_is_not():
    gaps, glu_gap = ch2_analysis.linearity_gaps(MIXED, [1, 2, 3], num_prompts=64, seed=3)
    assert list(gaps) == [1, 2, 3] and max(gaps.values()) < 1e-12
    assert glu_gap > 1e-2
    with pytest.raises(ConfigError, match="depths"):
        ch2_analysis.linearity_gaps(MIXED, [])


def test_probe_directions_follow_the_prompt_s_coefficients():
    exps = PURE.target_features.exponents
    beta = torch.tensor([[{(2, 0): 1.0, (1, 1): 0.0, (0, 2): -3.0}[tuple(a)] for a in exps]])
    one = Prompts(torch.zeros(1, N + 1, D), torch.zeros(1, N + 1), beta)
    assert np.abs(ch2_analysis.probe_direction(PURE, one)) == pytest.approx([0.0, 1.0])  # |-3| > 1
    # x1 x2 alone: B = [[0, 1/2], [1/2, 0]], eigenvalues -1/2 and 1/2 along the diagonals
    cross = Prompts(one.x, one.y, torch.tensor([[0.0, 1.0, 0.0]]))
    assert np.abs(ch2_analysis.steepest_direction(PURE, cross)) == pytest.approx([2**-0.5] * 2)
    mixed = Prompts(one.x, one.y, torch.tensor([[3.0, -4.0, 5.0, 6.0, 7.0]]))
    assert ch2_analysis.probe_direction(MIXED, mixed) == pytest.approx([0.6, -0.8])
    with pytest.raises(ConfigError, match="task"):
        ch2_analysis.probe_direction(TaskConfig(kind="linear", input_dim=D, context_length=N), one)


def test_line_probes_of_a_gd_stack_are_straight_and_follow_the_linear_part():
    prompts = sample_prompts(MIXED, batch_size=1, seed=11, step=0, dtype=torch.float64)
    offsets = np.linspace(-2.5, 2.5, 41)
    probes = ch2_analysis.line_probes({1: gd_lsa(D, [0.5]), 2: gd_lsa(D, [0.5, 0.5])}, MIXED,
                                      prompts, offsets)
    assert list(probes) == [1, 2]
    for probe in probes.values():
        assert probe.curvature < 1e-12 and np.ptp(probe.targets - probe.best_linear) > 0.1
    assert np.isfinite(ch2_analysis.slope_ratio(probes[1]))
    line = LineProbe(offsets, 2 * offsets, offsets**2, 4 * offsets)
    assert ch2_analysis.slope_ratio(line) == 0.5
    with pytest.raises(ConfigError, match="probe"):
        ch2_analysis.slope_ratio(LineProbe(offsets, offsets, offsets, 0 * offsets))
    fig = ch2_figures.line_probe_figure({(L, name): probes[L] for L in (1, 2) for name in TASKS},
                                        [1, 2], list(TASKS))
    panels = _panels(fig)
    assert len(panels) == 4
    assert [t.name for t in panels[0]] == ["target f(x(t)) (this prompt)",
                                           "best linear predictor of this target",
                                           "trained LSA, depth 1 (full P, Q)"]
    assert panels[0][0].line.dash == "dash" and panels[0][1].line.dash == "dot"
    assert fig.layout.xaxis.title.text == "t, along the line x(t) = t u"
    assert fig.layout.yaxis.title.text == "prediction"
    with pytest.raises(ConfigError, match="probes"):
        ch2_figures.line_probe_figure({(1, "pure quadratic"): probes[1]}, [1, 2], list(TASKS))


def test_sweep_and_references(computed):
    sweep, refs = computed
    assert list(sweep.trained) == [(f, n, L) for f in FORMS for n in TASKS for L in DEPTHS]
    assert sweep.trained["GD form", "pure quadratic", 3].model_config.attention == "sparse"
    assert sweep.train_seconds > 0 and sweep.seconds > 0
    assert refs.least_squares.num_prompts == 2000 and refs.least_squares_task == "linear + quadratic"
    one = refs.one_step["linear + quadratic"]
    assert one.normalised_loss == closed_forms.linear_gd_optimum(MIXED).normalised_loss
    assert np.all(refs.one_step["pure quadratic"].gamma == 0)  # the best linear step predicts 0
    curve = ch2_analysis.one_step_curve(MIXED, [N, 100, 10_000])
    assert curve[0] == pytest.approx(one.normalised_loss, rel=1e-12)
    assert curve[0] > curve[1] > curve[2] > 7 / 9  # down towards the bound, never below it
    with pytest.raises(ConfigError, match="least_squares_task"):
        ch2_studies.linear_references(TASKS, "cubic", test_prompts=10)


def test_bound_figure_draws_each_form_next_to_the_bound(computed):
    sweep, refs = computed
    fig = ch2_figures.bound_figure(sweep.trained, TASKS, list(FORMS), DEPTHS, refs)
    panels = _panels(fig)
    assert len(panels) == 2
    names = [t.name for t in panels[1]]
    assert names[:2] == ["trained LSA, full P, Q (±2 s.e.)", "trained LSA, GD form (±2 s.e.)"]
    assert names[2].startswith(f"best linear GD step, n = {N} (")
    assert names[3] == f"tuned ridge on x, n = {N}" and names[5] == "zero predictor"
    assert names[4].startswith("best linear predictor (")
    assert panels[1][4].y == (7 / 9,) * len(DEPTHS) and panels[0][4].y == (1.0,) * len(DEPTHS)
    assert fig.layout.yaxis.title.text == "test loss / zero predictor"
    assert fig.layout.xaxis.title.text == "depth L (layers of attention)"
    # a loss above the axis is drawn at its top, with its value and an arrow
    high = dict(sweep.trained)
    high["full P, Q", "pure quadratic", 3] = SimpleNamespace(test=SimpleNamespace(
        normalised=12.5, normalised_std_error=0.1))
    first = _panels(ch2_figures.bound_figure(high, TASKS, list(FORMS), DEPTHS, refs))[0][0]
    assert first.y[1] == ch2_figures.AXIS_TOP and first.text[1] == "12 ↑" and first.text[0] == ""
    with pytest.raises(ConfigError, match="trained"):
        ch2_figures.bound_figure(sweep.trained, TASKS, list(FORMS), [1, 2, 3], refs)


def test_prose_values_and_tables(computed):
    sweep, refs = computed
    values = ch2_figures.prose_values(sweep.trained, TASKS, FORMS, DEPTHS, refs)
    assert list(values)[:4] == ["range_pure_full", "range_pure_sparse", "range_line_full",
                                "range_line_sparse"]
    assert values["pure_l13"].endswith(f"{sweep.trained['full P, Q', 'pure quadratic', 3].test.normalised:.4f}")
    assert {"pure_l13", "one_step_mixed", "quad_energy", "lin_energy", "noise_ratio", "ridge_mixed",
            "ridge_penalty", "off_chart_text", "gd_form_gain"} <= set(values)
    assert (values["quad_energy"], values["lin_energy"], values["noise_ratio"]) == (7.0, 2.0, 3.5)
    with pytest.raises(ConfigError, match="depths"):
        ch2_figures.prose_values(sweep.trained, TASKS, FORMS, [1], refs)
    table = ch2_figures.results_table(sweep.trained)
    assert len(table.rows) == len(sweep.trained)
    assert table._repr_html_().count("<tr>") == 1 + len(sweep.trained)
    mixed_runs = {(f, L): sweep.trained[f, "linear + quadratic", L].test for f in FORMS for L in DEPTHS}
    lines = ch2_figures.finite_context_table(MIXED, ch2_analysis.one_step_curve(MIXED, [N, 100]),
                                             [N, 100], refs, mixed_runs).splitlines()
    assert lines[1].endswith(f"{7 / 9:.4f}") and "n = 100:" in lines[-1]
    assert ch2_figures.number(12345.0) == "1.23 × 10⁴" and ch2_figures.number(0.5) == "0.5"
    assert ch2_figures.loss_range([0.91234, 0.91234]) == "0.9123 at every depth"
    assert ch2_figures.loss_range([0.5, 2e5]) == "0.5000 to 2.00 × 10⁵"
    assert ch2_figures.pm(0.81234, 0.0021) == "0.8123 ± 0.0021"


def test_label_diagnosis_finds_no_superlinear_part_in_the_gd_form(computed):
    sweep, _ = computed
    diagnostic = ch2_analysis.diagnostic_prompts(MIXED, 5000, seed=0, quantile=0.99)
    assert int(diagnostic.largest.sum()) == 50 and diagnostic.labels.dtype == torch.float64
    null = closed_forms.null_loss(MIXED)
    diagnosis = {}
    for form in FORMS:
        for depth in DEPTHS:
            run = sweep.trained[form, "linear + quadratic", depth]
            diagnosis[form, depth] = ch2_analysis.label_diagnosis(
                run.model, diagnostic, run.training.loss_history, null, last_steps=10)
    gd = diagnosis["GD form", 3]
    assert gd["superlinear"] < 1e-4  # linear in the labels up to float32 rounding
    assert 0 < gd["share"] <= 1 and gd["median"] <= gd["mean"] * 10
    history = sweep.trained["GD form", "linear + quadratic", 3].training.loss_history
    assert gd["training"] == pytest.approx(float(np.max(history[-10:]) / null), rel=1e-12)
    table = ch2_figures.diagnosis_table(diagnosis).splitlines()
    assert len(table) == 2 + 4 + 9 and table[2].startswith("full P, Q  1")
    values = ch2_figures.diagnosis_values(diagnosis, worst_depth=3)
    assert values["diag_superlinear_gd"] == gd["superlinear"]
    assert values["diag_largest_text_gd"] == ch2_figures.number(gd["largest"])
    with pytest.raises(ConfigError, match="quantile"):
        ch2_analysis.diagnostic_prompts(MIXED, 100, quantile=1.0)


def test_a_diverged_run_is_marked_at_the_top_without_an_error_bar(computed):
    # a loss of 6.8e10 times the zero predictor's, with an error bar as large, crossed the chart
    sweep, refs = computed
    high = dict(sweep.trained)
    high["full P, Q", "pure quadratic", 3] = SimpleNamespace(test=SimpleNamespace(
        normalised=6.8e10, normalised_std_error=3e10))
    first = _panels(ch2_figures.bound_figure(high, TASKS, list(FORMS), DEPTHS, refs))[0][0]
    bars = first.error_y.array
    assert bars[1] == 0.0 and max(bars) < 1  # no bar taller than the chart
    assert bars[0] == 2 * sweep.trained["full P, Q", "pure quadratic", DEPTHS[0]].test.normalised_std_error
    assert first.y[1] == ch2_figures.AXIS_TOP and first.text[1] == "6.8 × 10¹⁰ ↑"
    assert first.marker.symbol[1] == "triangle-up" and first.marker.symbol[0] == "circle"
    assert "6.8 × 10¹⁰" in first.hovertext[1] and "diverged" in first.hovertext[1]
