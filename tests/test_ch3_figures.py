"""Chapter 3's page (nlicl_lib.pages.ch3) and the kernel theory it draws on
(nlicl_lib.theory.kernel): every figure holds the trained result next to its theory reference,
on small synthetic inputs or cheap exact computations."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.pages import ch3
from nlicl_lib.theory import closed_forms, constructions, kernel
from nlicl_lib.training.train import TrainConfig

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
INITS = ["small", "normal", "large"]
LABELS = list(closed_forms.kernel_features(3, 2).names)


@pytest.fixture(scope="module")
def optimum() -> closed_forms.OneStepOptimum:
    return closed_forms.one_step_kernel_gd_optimum(QUADRATIC)


def names(fig: go.Figure) -> list[str]:
    return [trace.name for trace in fig.data]


def usage(values: list[float]) -> kernel.DirectionUsage:
    """A synthetic usage record over the six quadratic monomials (d = 3)."""
    phi2 = PolyMap.monomials(3, [2])
    return kernel.DirectionUsage(np.linspace(1.0, 0.2, 6), np.array(values),
                                 PolyMap(phi2.exponents, np.eye(6)))


# --- figures ------------------------------------------------------------------------------------


def test_gamma_examples_one_heatmap_per_gamma_with_the_optimum_last(optimum):
    gammas = ch3.example_gammas(optimum.gamma)
    fig = ch3.gamma_examples_figure(gammas, LABELS)
    assert [t.type for t in fig.data] == ["heatmap"] * 4 and names(fig) == list(gammas)
    np.testing.assert_array_equal(fig.data[-1].z, optimum.gamma)
    assert fig.data[0].zmin == -fig.data[0].zmax  # symmetric about 0
    with pytest.raises(ConfigError, match="gammas"):
        ch3.gamma_examples_figure({"bad": np.eye(3)}, LABELS)


def test_one_over_n_figure_holds_each_degree_and_the_limit():
    lengths = kernel.rate_lengths([10, 20, 40], largest=1000, points=9)
    rates = kernel.one_over_n_rates([1, 2], lengths)
    fig = ch3.one_over_n_figure(rates, trained=(10, 40))
    for k in (1, 2):
        curve = next(t for t in fig.data if t.name.startswith(f"degree {k}: n L*(n)/c"))
        np.testing.assert_array_equal(curve.y, rates[k].scaled)
    assert list(fig.data[-1].y) == [1, 1]  # the limit of n L*(n) / c


def test_initialisations_figure_has_one_point_per_seed_the_optimum_and_the_plateaus():
    ratios = {init: [1.0, 1.2, 1.5] for init in INITS}
    usage_of = {init: [usage([1.0] * 6), usage([1.0] * 5 + [0.0]), usage([0.0] * 6)] for init in INITS}
    plateaus = {1: 1.1, 2: 1.2, 3: 1.3}
    fig = ch3.initialisations_figure(ratios, usage_of, [100, 101, 102], plateaus)
    assert [list(t.y) for t in fig.data[:3]] == [ratios[init] for init in INITS]
    assert [t.text[1].endswith("5 of 6 directions used") for t in fig.data[:3]] == [True] * 3
    assert [list(t.y) for t in fig.data[3:]] == [[1.0, 1.0]] + [[v, v] for v in plateaus.values()]


def test_directions_figure_draws_strength_usage_and_the_optimal_usage_per_block():
    blocks = {name: kernel.BlockSummary(usage(values), 1.01, 1.0)
              for name, values in [("a", [1.0] * 6), ("b", [1.0] * 5 + [0.01])]}
    fig = ch3.directions_figure(blocks)
    assert [t.type for t in fig.data] == ["bar", "bar", "scatter"] * 2
    assert list(fig.data[4].y) == [1.0] * 5 + [0.01] and list(fig.data[2].y) == [1.0, 1.0]


def test_kernel_comparison_figure_puts_the_trained_k_next_to_the_optimum(optimum):
    learned = optimum.gamma * 1.1
    fig = ch3.kernel_comparison_figure(learned, optimum.gamma, LABELS)
    np.testing.assert_array_equal(fig.data[0].z, learned)
    np.testing.assert_array_equal(fig.data[1].z, optimum.gamma)
    assert fig.data[0].zmax == fig.data[1].zmax == np.abs(optimum.gamma).max()
    with pytest.raises(ConfigError, match="learned"):
        ch3.kernel_comparison_figure(np.eye(3), optimum.gamma, LABELS)


def _grid_inputs():
    degrees, contexts = [1, 2], [10, 20]
    grid = {(k, n): [0.5 / n, 0.6 / n] for k in degrees for n in contexts}
    block_opt = {(k, n): 0.4 / n for k in degrees for n in contexts}
    full_opt = {(k, n): 0.3 / n for k in degrees for n in contexts}
    rates = {k: kernel.OneOverNRate(c=40.0, null=4.0, lengths=np.array(contexts),
                                    scaled=np.array([0.5, 0.7])) for k in degrees}
    krr = {(k, n): 1e-5 if n == 20 else 0.05 for k in degrees for n in contexts}
    return degrees, contexts, grid, block_opt, full_opt, rates, krr


def test_context_length_figure_holds_trained_theory_bounds_and_kernel_ridge_per_degree():
    degrees, contexts, grid, block_opt, full_opt, rates, krr = _grid_inputs()
    fig = ch3.context_length_figure(grid, block_opt, full_opt, rates, krr, degrees, contexts,
                                    floor=1e-3)
    assert len(fig.data) == 6 * len(degrees)
    first = fig.data[:6]
    assert list(first[0].y) == [np.median(grid[1, n]) for n in contexts]
    assert list(first[1].y) == grid[1, 10] + grid[1, 20]  # each seed
    assert list(first[2].y) == [block_opt[1, n] for n in contexts]
    assert list(first[3].y) == [full_opt[1, n] for n in contexts]
    assert list(first[4].y) == [1.0, 0.5]  # min(c/n, E[y^2]) / E[y^2] with c/E[y^2] = 10
    assert list(first[5].y) == [0.05, 1e-3]  # KRR, clipped at the floor


def test_degree_figure_puts_the_trained_median_between_the_two_optima():
    degrees, _, grid, block_opt, full_opt, _, _ = _grid_inputs()
    fig = ch3.degree_figure(grid, block_opt, full_opt, degrees, 20)
    assert [list(t.y) for t in fig.data] == [[np.median(grid[k, 20]) for k in degrees],
                                             [block_opt[k, 20] for k in degrees],
                                             [full_opt[k, 20] for k in degrees]]
    with pytest.raises(ConfigError, match="context_length"):
        ch3.degree_figure(grid, block_opt, full_opt, degrees, 30)


# --- theory -------------------------------------------------------------------------------------


def test_the_block_is_the_gd_step_to_rounding_and_bad_gammas_fail_first():
    prompts = sample_prompts(QUADRATIC, batch_size=64, seed=1, step=0, dtype=torch.float64)
    gammas = {"kernel": constructions.polynomial_kernel_gamma(3, 0.5),
              "random": np.random.default_rng(0).standard_normal((9, 9))}
    check = kernel.construction_check(prompts, gammas, linear_weight=0.5)
    assert check.largest < 1e-12 and check.is_kernel == {"kernel": True, "random": False}
    with pytest.raises(ConfigError, match=r"gammas\['bad'\]"):
        kernel.construction_check(prompts, {"bad": np.eye(4)})


def test_anisotropic_gamma_with_unit_scales_is_the_isotropic_kernel():
    np.testing.assert_array_equal(kernel.anisotropic_kernel_gamma([1.0, 1.0, 1.0]),
                                  constructions.polynomial_kernel_gamma(3, 0.0))
    diagonal = np.diag(kernel.anisotropic_kernel_gamma([1.0, 0.5, 0.25]))
    assert diagonal[3:].tolist() == [1.0, 1.0, 0.5, 0.25, 0.25, 0.0625]  # x1², x1x2, ..., x3²


def test_spans_rates_and_plateaus(optimum):
    pure2 = TaskConfig(kind="poly", input_dim=2, context_length=20, degree=2, homogeneous=True)
    losses = kernel.span_losses(pure2, {"own": [2], "with x": [1, 2], "wider": [2, 4]})
    assert losses["with x"] == pytest.approx(losses["own"], rel=1e-12)  # x is uncorrelated
    assert losses["wider"] < losses["own"]
    rates = kernel.one_over_n_rates([1], np.array([10, 100, 1000]))
    assert np.all(np.diff(rates[1].scaled) > 0) and np.all(rates[1].scaled < 1)
    plateaus = kernel.lost_cross_term_plateaus(QUADRATIC, optimum.loss)
    assert 1 < plateaus[1] < plateaus[2] < plateaus[3]


def test_untrained_blocks_have_not_moved_and_large_is_normal_scaled_up():
    seeds = [100, 101]
    models = {init: [build_model(ModelConfig(kind="glu-lsa", glu_init=init), QUADRATIC, seed=s)
                     for s in seeds] for init in INITS}
    usage_of = {init: [usage([1.0] * 6)] * 2 for init in INITS}
    movement = kernel.glu_weight_movement(models, seeds, QUADRATIC, usage_of)
    assert all(row["change"] == 0.0 and row["moved"] == 0.0 for row in movement.movement.values())
    assert movement.scaled_gap < 1e-6 and movement.lost == {init: 0 for init in INITS}


def test_kernel_weight_scan_brackets_the_best_weight():
    moments = closed_forms.gd_moments(QUADRATIC.target_features, closed_forms.kernel_features(3, 2), 20)
    found = ch3.kernel_weight_values(moments, np.round(np.arange(0.0, 6.0 + 1e-9, 0.5), 2))
    assert found["ex31_low"] <= found["ex31_best"] <= found["ex31_high"] and found["ex31_best_gap"] > 0


# --- the runs -----------------------------------------------------------------------------------


def test_study_groups_the_runs_it_trained(optimum):
    study = ch3.train_glu_kernel_study(QUADRATIC, [10, 20], [2], [0], INITS, [100, 101],
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
