"""Chapter 1's figures (nlicl_lib.pages.ch1_figures) and the analysis behind them
(nlicl_lib.theory.ch1_analysis, nlicl_lib.experiments.ch1_studies), on cheap real computations:
linear tasks in d = 3 with n = 8, layers trained for 30 steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib import TaskConfig, TrainConfig, sample_prompts
from nlicl_lib.pages import ch1_figures
from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.experiments import ch1_studies
from nlicl_lib.theory import ch1_analysis, closed_forms
from nlicl_lib.theory.constructions import gd_lsa

D, N = 3, 8
DEPTHS = [1, 2]
NOISE = [0.0, 0.5]


@pytest.fixture(scope="module")
def computed():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    task = TaskConfig(kind="linear", input_dim=D, context_length=N)
    config = TrainConfig(steps=30, batch_size=64, learning_rate=0.04, seed=1)
    first = ch1_studies.train_one_layer(task, seed=0, train_config=config)
    sweep = ch1_studies.train_depth_sweep(D, N, DEPTHS, NOISE, config, seed=1)
    tuned = ch1_analysis.tuned_gd_losses(D, N, DEPTHS, NOISE, num_prompts=4000, seed=0)
    torch.set_num_threads(threads)
    return task, first, sweep, tuned


def test_construction_is_gd_to_rounding_and_a_wrong_step_is_not():
    task = TaskConfig(kind="linear", input_dim=D, context_length=N, noise_std=0.5)
    prompts = sample_prompts(task, batch_size=200, seed=1, step=0, dtype=torch.float64)
    gammas = ch1_analysis.random_preconditioners(D, count=3, seed=0)
    assert len(gammas) == 3 and all(g.shape == (D, D) for g in gammas)
    assert not np.allclose(gammas[0], gammas[0].T)  # non-symmetric, as the page says
    check = ch1_analysis.construction_check(prompts, gammas)
    assert check.one_layer < 1e-13 and check.all_layers < 1e-13
    assert len(check.residual_labels) == 3 and max(check.residual_labels) < 1e-13
    # the check can fail: the layers' steps against other steps differ by O(1)
    other = ch1_analysis.construction_check(prompts, [2 * g for g in gammas])
    wrong = ch1_analysis.max_relative_difference(
        gd_lsa(D, gammas[:1])(prompts.embed()).detach(), gd_lsa(D, [2 * gammas[0]])(prompts.embed()).detach())
    assert other.one_layer < 1e-13 and wrong == pytest.approx(0.5, rel=1e-9)
    report = ch1_figures.construction_report(check).splitlines()
    assert report[0].startswith("1 layer vs 1 GD step") and report[1].startswith("3 layers vs 3 GD steps")
    assert len(report) == 5 and max(map(len, report)) <= 78
    with pytest.raises(ConfigError, match="gammas"):
        ch1_analysis.construction_check(prompts, [])


def test_reading_the_construction_gives_its_own_step_exactly():
    scale, _ = closed_forms.linear_gd_optimum_isotropic(D, N)
    layer = gd_lsa(D, [scale]).blocks[0].lsa
    step = ch1_analysis.read_trained_step(layer, D, gamma_star=scale)
    np.testing.assert_array_equal(step.gamma_eff, scale * np.eye(D))
    assert step.distance == 0.0 and step.spurious == {"label_free": 0.0, "label_squared": 0.0}
    half = ch1_analysis.read_trained_step(layer, D, gamma_star=2 * scale)
    assert half.distance == pytest.approx(0.5, rel=1e-12)
    assert ch1_analysis.input_row_norms(gd_lsa(D, [scale, scale]), D) == [0.0, 0.0]
    text = ch1_figures.trained_step_report(step)
    assert f"Gamma* = n/(n+d+1) I = {scale:.4f} I" in text and "-0." not in text
    with pytest.raises(ConfigError, match="gamma_star"):
        ch1_analysis.read_trained_step(layer, D, gamma_star=np.eye(D + 1))


def test_tuned_gd_at_one_step_is_the_closed_form(computed):
    _, _, _, tuned = computed
    assert set(tuned) == {(s, L) for s in NOISE for L in DEPTHS}
    for sigma in NOISE:
        scale, optimum = closed_forms.linear_gd_optimum_isotropic(D, N, sigma)
        one = tuned[sigma, 1]
        assert abs(one.loss - optimum) < 4 * one.std_error + 1e-9
        assert one.step_sizes[0] == pytest.approx(scale, rel=0.05)
        assert tuned[sigma, 2].loss < one.loss  # a second step helps
    lines = ch1_figures.tuned_steps_report(tuned, DEPTHS).splitlines()
    assert [line.split(":")[0] for line in lines] == ["L=1", "L=2"]


def test_training_figure_holds_the_trained_curves_next_to_the_optimum(computed):
    task, first, _, _ = computed
    _, optimum = closed_forms.linear_gd_optimum_isotropic(D, N)
    normaliser = closed_forms.null_loss(task)
    fig = ch1_figures.training_figure(task, first.training, first.test, optimum, normaliser)
    names = [t.name for t in fig.data]
    assert names[:2] == ["batch loss", "batch loss, mean of 25 steps"]
    assert names[2] == f"best one-step GD ({ref('thm-linear-optimum')})" and names[3] == "zero predictor"
    assert names[4].startswith("test loss") and len(names) == 5
    assert fig.data[2].y == (optimum / normaliser,) * 2 and fig.data[2].line.dash == "dash"
    assert len(fig.data[0].x) == first.training.steps and len(fig.data[1].x) == first.training.steps - 24
    assert fig.layout.xaxis.title.text == "training step" and fig.layout.yaxis.title.text == "loss / E[y²]"
    assert fig.layout.title.text == f"Training one LSA layer (d={D}, n={N})"
    report = ch1_figures.one_layer_report(first, optimum).splitlines()
    assert report[0].startswith("trained 30 steps of batch 64") and max(map(len, report)) <= 78
    with pytest.raises(ConfigError, match="window"):
        ch1_figures.training_figure(task, first.training, first.test, optimum, normaliser, window=31)


def test_weights_figure_puts_the_trained_layer_above_the_construction(computed):
    _, first, _, _ = computed
    scale, _ = closed_forms.linear_gd_optimum_isotropic(D, N)
    trained = first.model.blocks[0].lsa
    fig = ch1_figures.weights_figure(trained, gd_lsa(D, [scale]).blocks[0].lsa)
    assert [t.name for t in fig.data] == ["trained P / p<sub>DD</sub>", "trained Q · p<sub>DD</sub>",
                                         "construction P", "construction Q"]
    assert list(fig.data[0].x) == ["x₁", "x₂", "x₃", "y"]  # one spelling: Unicode indices
    p = trained.P.detach().double().numpy()
    np.testing.assert_allclose(fig.data[0].z, p / p[-1, -1])
    assert fig.data[0].z[-1][-1] == 1.0  # rescaled by its corner
    assert np.asarray(fig.data[3].z)[:D, :D] == pytest.approx(-scale * np.eye(D))
    assert {t.zmax for t in fig.data} == {max(np.abs(np.asarray(t.z)).max() for t in fig.data)}
    with pytest.raises(ConfigError, match="construction"):
        ch1_figures.weights_figure(trained, gd_lsa(D + 1, [scale]).blocks[0].lsa)


def test_depth_figure_and_table_set_trained_stacks_against_tuned_gd(computed):
    task, _, sweep, tuned = computed
    assert sweep.runs == [(s, L) for s in NOISE for L in DEPTHS]
    assert set(sweep.bayes) == {0.5}  # no noise: the Bayes loss is exactly 0
    assert sweep.model(0.5, 2) is sweep.models[3] and len(sweep.model(0.0, 2).blocks) == 2
    assert sweep.thread_seconds > 0
    normaliser = closed_forms.null_loss(task)
    fig = ch1_figures.depth_figure(DEPTHS, NOISE, sweep.trained, tuned, sweep.bayes, normaliser)
    owner = fig.layout.meta["nlicl_sliders"]["panel_of_trace"]
    panels = [[t for t, p in zip(fig.data, owner, strict=True) if p == k] for k in range(2)]
    assert [t.name for t in panels[0]] == ["trained LSA (all of P, Q), ±2 s.e.",
                                           "L steps of GD, tuned step sizes"]
    assert [t.name for t in panels[1]][-1] == "Bayes optimum (ridge, nλ = σ²)" and len(panels[1]) == 3
    assert panels[1][1].y == tuple(tuned[0.5, L].loss / normaliser for L in DEPTHS)
    assert panels[1][0].y == tuple(sweep.trained[0.5, L].mean / normaliser for L in DEPTHS)
    assert fig.layout.xaxis.title.text == "layers L" and fig.layout.yaxis.title.text == "test loss / E[y²]"
    table = ch1_figures.depth_table(DEPTHS, NOISE, sweep.trained, tuned, sweep.bayes, D, N)
    assert len(table.rows) == len(sweep.runs) and max(map(len, table.splitlines())) <= 78
    exact = closed_forms.linear_gd_optimum_isotropic(D, N, 0.5)[1]
    assert table.rows[2][3] == f"{exact:.4f}" and table.rows[0][-1] == "0 (exact)"
    html = table._repr_html_()  # a real table in the book, one row per run
    assert html.count("<tr>") == 1 + len(sweep.runs) and 'class="nlicl-table"' in html
    with pytest.raises(ConfigError, match="bayes"):
        ch1_figures.depth_figure(DEPTHS, NOISE, sweep.trained, tuned, {}, normaliser)
    with pytest.raises(ConfigError, match="trained, tuned"):
        ch1_figures.depth_table([1, 2, 3], NOISE, sweep.trained, tuned, sweep.bayes, D, N)


def test_pm_rounds_to_the_error_s_second_digit_and_bad_input_is_named():
    assert ch1_figures.pm(0.123456, 0.0123) == "0.123 ± 0.012"
    assert ch1_figures.pm(1.5, 0.0) == "1.5000 ± 0.0000"
    with pytest.raises(ConfigError, match="input_dim"):
        ch1_analysis.random_preconditioners(0, count=2)
    with pytest.raises(ConfigError, match="noise_levels"):
        ch1_studies.train_depth_sweep(D, N, [1], [-0.1], TrainConfig(steps=1))
    with pytest.raises(ConfigError, match="task"):
        ch1_studies.train_one_layer("linear")
