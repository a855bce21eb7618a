"""Chapter 3's figure builders (nlicl_lib.pages.ch3_figures), its analysis (theory.ch3_analysis)
and its studies (experiments.ch3_studies): every figure holds the trained result next to its
theory reference, on small synthetic inputs or cheap exact computations."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from nlicl_lib.pages import ch3_figures
from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.experiments import ch3_studies
from nlicl_lib.theory import ch3_analysis, closed_forms, constructions
from nlicl_lib.theory.closed_forms import gd_moments
from nlicl_lib.theory.feature_analysis import DirectionUsage
from nlicl_lib.training.train import TrainConfig

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
INITS = ["small", "normal", "large"]


@pytest.fixture(scope="module")
def optimum() -> closed_forms.OneStepOptimum:
    return closed_forms.one_step_kernel_gd_optimum(QUADRATIC)


def names(fig: go.Figure) -> list[str]:
    return [trace.name for trace in fig.data]


def usage(values: list[float]) -> DirectionUsage:
    """A synthetic usage record over the six quadratic monomials (d = 3)."""
    phi2 = PolyMap.monomials(3, [2])
    return DirectionUsage(np.linspace(1.0, 0.2, 6), np.array(values), PolyMap(phi2.exponents, np.eye(6)))


def summary(values: list[float]) -> ch3_analysis.BlockSummary:
    return ch3_analysis.BlockSummary(usage(values), 1.01, 1.0)


# --- figures ------------------------------------------------------------------------------------


def test_gamma_examples_one_heatmap_per_gamma_with_the_optimum_last(optimum):
    gammas = ch3_analysis.example_gammas(optimum.gamma)
    labels = list(closed_forms.kernel_features(3, 2).names)
    fig = ch3_figures.gamma_examples_figure(gammas, labels)
    assert [t.type for t in fig.data] == ["heatmap"] * 4 and names(fig) == list(gammas)
    assert [step["label"] for step in fig.layout.sliders[0].steps] == list(gammas)
    titles = fig.layout.meta["nlicl_sliders"]["titles"]
    assert ref("cor-same-span") in titles[-1] and "Γ*" in titles[-1]
    np.testing.assert_array_equal(fig.data[-1].z, optimum.gamma)
    # the features in the figures' one spelling (Unicode indices and powers, as in p₂)
    assert list(fig.data[0].x[:5]) == ["x₁", "x₂", "x₃", "x₁²", "x₁x₂"] == list(fig.data[0].y[:5])
    assert fig.data[0].zmin == -fig.data[0].zmax  # symmetric about 0
    with pytest.raises(ConfigError, match="gammas"):
        ch3_figures.gamma_examples_figure({"bad": np.eye(3)}, labels)


def test_one_over_n_figure_holds_each_degree_its_crossover_and_the_limit():
    lengths = ch3_analysis.rate_lengths([10, 20, 40], largest=1000, points=9)
    rates = ch3_analysis.one_over_n_rates([1, 2], lengths)
    fig = ch3_figures.one_over_n_figure(rates, trained=(10, 40))
    got = names(fig)
    assert got[0] == "trained context lengths (10 to 40)"
    for k in (1, 2):
        curve = next(t for t in fig.data if t.name.startswith(f"degree {k}: n L*(n)/c"))
        np.testing.assert_array_equal(curve.y, rates[k].scaled)
        assert curve.line.dash == "dash"  # a theory curve
        crossover = f"degree {k}: n× = c / E[y²] = {rates[k].crossover:.1f}"
        assert (crossover in got) == (rates[k].crossover >= lengths[0])
    limit = fig.data[-1]
    assert limit.name == f"1: the limit of n L*(n)/c ({ref('prop-one-over-n')})" and list(limit.y) == [1, 1]
    assert fig.layout.xaxis.title.text == "context length n" and fig.layout.xaxis.type == "log"
    assert fig.layout.yaxis.title.text == "n L*(n) / c"


def test_initialisations_figure_has_one_point_per_seed_the_optimum_and_the_plateaus():
    seeds = [100, 101, 102]
    ratios = {init: [1.0, 1.2, 1.5] for init in INITS}
    usage_of = {init: [usage([1.0] * 6), usage([1.0] * 5 + [0.0]), usage([0.0] * 6)] for init in INITS}
    plateaus = {1: 1.1, 2: 1.2, 3: 1.3}
    fig = ch3_figures.initialisations_figure(ratios, usage_of, seeds, plateaus)
    assert names(fig)[:3] == [f"{init} init, one point per seed" for init in INITS]
    assert [len(t.y) for t in fig.data[:3]] == [3, 3, 3]
    assert list(fig.data[0].text) == ["seed 100: 1.0000, 6 of 6 directions used",
                                      "seed 101: 1.2000, 5 of 6 directions used",
                                      "seed 102: 1.5000, 0 of 6 directions used"]
    theory = fig.data[3]
    assert theory.name.startswith("best one-step GD on (x; φ₂)") and list(theory.y) == [1.0, 1.0]
    assert [list(t.y) for t in fig.data[4:]] == [[v, v] for v in plateaus.values()]
    assert fig.data[4].name.startswith("1 cross-term direction lost")
    assert "directions lost" in fig.data[5].name
    assert list(fig.layout.xaxis.ticktext) == INITS and fig.layout.yaxis.type == "log"
    assert fig.layout.yaxis.title.text == "loss / optimum"


def test_directions_figure_draws_strength_usage_and_the_optimal_usage_per_block():
    blocks = {"block a": summary([1.0] * 6), "block b": summary([1.0] * 5 + [0.01])}
    fig = ch3_figures.directions_figure(blocks)
    assert len(fig.data) == 6 and [t.type for t in fig.data[:3]] == ["bar", "bar", "scatter"]
    assert names(fig)[:2] == ["strength σₖ / σ₁", "usage: block's weight / optimal weight"]
    assert list(fig.data[4].y) == [1.0] * 5 + [0.01]
    assert fig.data[2].name == f"usage of the optimal Γ* ({ref('cor-same-span')})"
    assert list(fig.data[2].y) == [1.0, 1.0]
    assert list(fig.layout.xaxis.ticktext) == [f"e{k}" for k in range(1, 7)]
    assert fig.layout.xaxis.title.text == "direction (strongest first)"
    assert fig.layout.title.text.startswith("The six directions")


def test_kernel_comparison_figure_puts_the_trained_k_next_to_the_optimum(optimum):
    labels = list(closed_forms.kernel_features(3, 2).names)
    learned = optimum.gamma * 1.1
    fig = ch3_figures.kernel_comparison_figure(learned, optimum.gamma, labels)
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]
    np.testing.assert_array_equal(fig.data[0].z, learned)
    np.testing.assert_array_equal(fig.data[1].z, optimum.gamma)
    assert [a.text for a in fig.layout.annotations] == ["trained K", "optimal Γ*"]
    assert list(fig.data[0].x[-3:]) == ["x₂²", "x₂x₃", "x₃²"] == list(fig.data[1].y[-3:])
    assert fig.data[0].zmax == fig.data[1].zmax == np.abs(optimum.gamma).max()
    with pytest.raises(ConfigError, match="learned"):
        ch3_figures.kernel_comparison_figure(np.eye(3), optimum.gamma, labels)


def _grid_inputs():
    degrees, contexts = [1, 2], [10, 20]
    grid = {(k, n): [0.5 / n, 0.6 / n] for k in degrees for n in contexts}
    block_opt = {(k, n): 0.4 / n for k in degrees for n in contexts}
    full_opt = {(k, n): 0.3 / n for k in degrees for n in contexts}
    rates = {k: ch3_analysis.OneOverNRate(c=40.0, null=4.0, lengths=np.array(contexts),
                                          scaled=np.array([0.5, 0.7])) for k in degrees}
    krr = {(k, n): 1e-5 if n == 20 else 0.05 for k in degrees for n in contexts}
    return degrees, contexts, grid, block_opt, full_opt, rates, krr


def test_context_length_figure_holds_trained_theory_bounds_and_kernel_ridge_per_degree():
    degrees, contexts, grid, block_opt, full_opt, rates, krr = _grid_inputs()
    fig = ch3_figures.context_length_figure(grid, block_opt, full_opt, rates, krr, degrees, contexts,
                                            floor=1e-3)
    assert len(fig.data) == 6 * len(degrees)
    first = fig.data[:6]
    assert first[0].name == "trained block, median of 2 seeds"
    assert list(first[0].y) == [np.median(grid[1, n]) for n in contexts]
    assert list(first[1].y) == grid[1, 10] + grid[1, 20]  # each seed
    assert first[2].name == "best one-step GD on (x; φ₂)"
    assert list(first[2].y) == [block_opt[1, n] for n in contexts]
    assert first[3].name == "best one-step GD, monomials of degree ≤ 1"
    assert list(first[4].y) == [1.0, 0.5]  # min(c/n, E[y^2]) / E[y^2] with c/E[y^2] = 10
    assert list(first[5].y) == [0.05, 1e-3]  # KRR, clipped at the floor
    assert [list(s["args"][1].values())[0] for s in fig.layout.sliders[0].steps] == [
        f"One block against one-step GD, k = {k}" for k in degrees]
    assert fig.layout.xaxis.title.text == "context length n"
    assert fig.layout.yaxis.title.text == "test loss / E[y²]" and fig.layout.yaxis.type == "log"


def test_degree_figure_puts_the_trained_median_between_the_two_optima():
    degrees, contexts, grid, block_opt, full_opt, _, _ = _grid_inputs()
    fig = ch3_figures.degree_figure(grid, block_opt, full_opt, degrees, 20)
    assert names(fig) == ["trained block (median of 2 seeds)",
                          "best one-step GD on (x; φ₂)",
                          "best one-step GD, monomials of degree ≤ k"]
    assert list(fig.data[0].y) == [np.median(grid[k, 20]) for k in degrees]
    assert list(fig.data[1].y) == [block_opt[k, 20] for k in degrees]
    assert list(fig.data[2].y) == [full_opt[k, 20] for k in degrees]
    assert fig.layout.xaxis.title.text == "target degree k" and fig.layout.title.text.startswith("Loss at n = 20")
    with pytest.raises(ConfigError, match="context_length"):
        ch3_figures.degree_figure(grid, block_opt, full_opt, degrees, 30)


# --- analysis -----------------------------------------------------------------------------------


def test_the_block_is_the_gd_step_to_rounding_and_bad_gammas_fail_first():
    prompts = sample_prompts(QUADRATIC, batch_size=64, seed=1, step=0, dtype=torch.float64)
    gammas = {"kernel": constructions.polynomial_kernel_gamma(3, 0.5),
              "random": np.random.default_rng(0).standard_normal((9, 9))}
    check = ch3_analysis.construction_check(prompts, gammas, linear_weight=0.5)
    assert check.largest < 1e-12 and check.is_kernel == {"kernel": True, "random": False}
    assert all(len(line) <= 78 for line in check.report().splitlines())
    with pytest.raises(ConfigError, match=r"gammas\['bad'\]"):
        ch3_analysis.construction_check(prompts, {"bad": np.eye(4)})


def test_anisotropic_gamma_with_unit_scales_is_the_isotropic_kernel():
    np.testing.assert_array_equal(ch3_analysis.anisotropic_kernel_gamma([1.0, 1.0, 1.0]),
                                  constructions.polynomial_kernel_gamma(3, 0.0))
    diagonal = np.diag(ch3_analysis.anisotropic_kernel_gamma([1.0, 0.5, 0.25]))
    assert diagonal[3:].tolist() == [1.0, 1.0, 0.5, 0.25, 0.25, 0.0625]  # x1², x1x2, ..., x3²
    with pytest.raises(ConfigError, match="scales"):
        ch3_analysis.anisotropic_kernel_gamma([])


def test_spans_rates_and_plateaus(optimum):
    pure2 = TaskConfig(kind="poly", input_dim=2, context_length=20, degree=2, homogeneous=True)
    losses = ch3_analysis.span_losses(pure2, {"own": [2], "with x": [1, 2], "wider": [2, 4]})
    assert losses["with x"] == pytest.approx(losses["own"], rel=1e-12)  # x is uncorrelated
    assert losses["wider"] < losses["own"]
    rates = ch3_analysis.one_over_n_rates([1], np.array([10, 100, 1000]))
    assert np.all(np.diff(rates[1].scaled) > 0) and np.all(rates[1].scaled < 1)
    plateaus = ch3_analysis.lost_cross_term_plateaus(QUADRATIC, optimum.loss)
    assert 1 < plateaus[1] < plateaus[2] < plateaus[3]
    with pytest.raises(ConfigError, match="counts"):
        ch3_analysis.lost_cross_term_plateaus(QUADRATIC, optimum.loss, counts=(4,))


def test_untrained_blocks_have_not_moved_and_large_is_normal_scaled_up():
    seeds = [100, 101]
    models = {init: [build_model(ModelConfig(kind="glu-lsa", glu_init=init), QUADRATIC, seed=s)
                     for s in seeds] for init in INITS}
    usage_of = {init: [usage([1.0] * 6)] * 2 for init in INITS}
    movement = ch3_analysis.glu_weight_movement(models, seeds, QUADRATIC, usage_of)
    assert all(row["change"] == 0.0 and row["moved"] == 0.0 for row in movement.movement.values())
    assert movement.scaled_gap < 1e-6 and movement.lost == {init: 0 for init in INITS}
    assert all(len(line) <= 78 for line in movement.report().splitlines())
    with pytest.raises(ConfigError, match="models"):
        ch3_analysis.glu_weight_movement({"small": models["small"]}, seeds, QUADRATIC, usage_of)


def test_describe_block_names_each_dead_direction_within_78_characters():
    phi2 = PolyMap.monomials(3, [2])
    text = ch3_analysis.describe_block("normal init, worst seed", summary([1.0] * 5 + [0.0]), phi2)
    assert "5 of 6 directions used" in text and "dead e6" in text
    assert "share of each monomial inside the used span" in text
    assert all(len(line) <= 78 for line in text.splitlines())


def test_kernel_weight_scan_brackets_the_best_weight():
    moments = gd_moments(QUADRATIC.target_features, closed_forms.kernel_features(3, 2), 20)
    found = ch3_analysis.kernel_weight_values(moments, np.round(np.arange(0.0, 6.0 + 1e-9, 0.5), 2))
    assert found["ex31_low"] <= found["ex31_best"] <= found["ex31_high"] and found["ex31_best_gap"] > 0
    with pytest.raises(ConfigError, match="weights"):
        ch3_analysis.kernel_weight_values(moments, np.array([0.0]))


# --- studies ------------------------------------------------------------------------------------


def test_study_groups_the_runs_it_trained(optimum):
    study = ch3_studies.train_glu_kernel_study(
        QUADRATIC, [10, 20], [2], [0], INITS, [100, 101],
        TrainConfig(steps=2, batch_size=8, learning_rate=0.01))
    assert len(study.runs) == 2 + 6 + 3 == len(study.exact)
    grid = study.grid()
    assert list(grid) == [(2, 10), (2, 20)]
    assert grid[2, 20] == [study.exact[1] / closed_forms.null_loss(QUADRATIC)]
    ratios, models = study.by_init(optimum.loss)
    assert list(ratios) == INITS and ratios["large"][1] == study.exact[7] / optimum.loss
    assert models["small"][0] is study.models[2]
    blocks, losses = study.exercise_blocks()
    assert list(blocks) == INITS and losses["large"] == study.exact[-1]
    with pytest.raises(ConfigError, match="inits"):
        ch3_studies.train_glu_kernel_study(QUADRATIC, [10], [2], [0], ["huge"], [1],
                                           TrainConfig(steps=2, batch_size=8))
