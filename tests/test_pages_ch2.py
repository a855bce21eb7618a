"""Chapter 2's page module: its runs, bound figure and prose numbers against the exact bounds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from nlicl_lib import TaskConfig
from nlicl_lib.core.device import use_threads
from nlicl_lib.pages import ch2
from nlicl_lib.theory import closed_forms, linearity

D, N = 2, 10
DEPTHS = [1, 3]
FORMS = {"full P, Q": "full", "GD form": "sparse"}
PURE = TaskConfig(kind="poly", input_dim=D, context_length=N, degree=2, homogeneous=True)
MIXED = TaskConfig(kind="poly", input_dim=D, context_length=N, degree=2)
TASKS = {"pure quadratic": PURE, "linear + quadratic": MIXED}


@pytest.fixture(scope="module")
def computed():
    with use_threads(1):
        sweep = ch2.train_lsa_stacks(TASKS, FORMS, DEPTHS, steps=20, batch_size=64,
                                     test_prompts=2000, seed=0)
        refs = ch2.linear_references(TASKS, "linear + quadratic", test_prompts=2000, seed=0)
    return sweep, refs


def _panels(fig) -> list[list]:
    owner = fig.layout.meta["nlicl_sliders"]["panel_of_trace"]
    return [[t for t, p in zip(fig.data, owner, strict=True) if p == k] for k in range(max(owner) + 1)]


def test_runs_and_references(computed):
    sweep, refs = computed
    assert list(sweep.trained) == [(f, n, L) for f in FORMS for n in TASKS for L in DEPTHS]
    assert sweep.trained["GD form", "pure quadratic", 3].model_config.attention == "sparse"
    assert refs.least_squares.num_prompts == 2000
    one = refs.one_step["linear + quadratic"]
    assert one.normalised_loss == closed_forms.linear_gd_optimum(MIXED).normalised_loss
    assert np.all(refs.one_step["pure quadratic"].gamma == 0)  # the best linear step predicts 0


def test_bound_figure_and_prose_set_each_form_against_the_bound(computed):
    sweep, refs = computed
    panels = _panels(ch2.bound_figure(sweep.trained, TASKS, list(FORMS), DEPTHS, refs))
    assert panels[1][4].y == (7 / 9,) * len(DEPTHS) and panels[0][4].y == (1.0,) * len(DEPTHS)
    values = ch2.prose_values(sweep.trained, TASKS, FORMS, DEPTHS)
    assert (values["quad_energy"], values["lin_energy"], values["noise_ratio"]) == (7.0, 2.0, 3.5)
    pure = [sweep.trained[f, "pure quadratic", L].test.normalised for f in FORMS for L in DEPTHS]
    assert values["pure_max_gap"] == pytest.approx(max(abs(v - 1) for v in pure), abs=1e-15)
    gain = (sweep.trained["GD form", "linear + quadratic", 1].test.normalised
            - sweep.trained["GD form", "linear + quadratic", 3].test.normalised)
    assert values["gd_form_gain"] == pytest.approx(gain, abs=1e-15)
    mixed_runs = {(f, L): sweep.trained[f, "linear + quadratic", L].test for f in FORMS for L in DEPTHS}
    lines = ch2.finite_context_table(MIXED, linearity.one_step_curve(MIXED, [N, 100]), [N, 100],
                                     refs, mixed_runs).splitlines()
    assert lines[1].endswith(f"{7 / 9:.4f}")
    # a diverged run (6.8e10 times the zero predictor's loss, an error bar as large) is drawn
    # at the top of the chart, with no error bar
    high = dict(sweep.trained)
    high["full P, Q", "pure quadratic", 3] = SimpleNamespace(test=SimpleNamespace(
        normalised=6.8e10, normalised_std_error=3e10))
    first = _panels(ch2.bound_figure(high, TASKS, list(FORMS), DEPTHS, refs))[0][0]
    assert first.y[1] == ch2.AXIS_TOP and first.error_y.array[1] == 0.0
    assert first.text[1] == "6.8 × 10¹⁰ ↑" and first.marker.symbol[1] == "triangle-up"
    # the prose names the full stacks that went above the chart, and only those
    high["full P, Q", "linear + quadratic", 3] = high["full P, Q", "pure quadratic", 3]
    text = ch2.prose_values(high, TASKS, FORMS, DEPTHS)["off_chart_text"]
    assert text.startswith("the stack of depth 3 on the linear + quadratic task ends far worse")
    if max(v.test.normalised for k, v in sweep.trained.items() if k[0] == "full P, Q"
           and k[1] == "linear + quadratic") <= ch2.AXIS_TOP:
        assert values["off_chart_text"].startswith("no stack")


