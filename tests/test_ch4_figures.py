"""Chapter 4's figures (nlicl_lib.pages.ch4_figures) and the analysis behind them
(nlicl_lib.theory.ch4_analysis, nlicl_lib.experiments.ch4_studies), on cheap real computations:
the quadratic task in d = 2 (p2 = 3), blocks trained for 30 steps."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
import torch

from nlicl_lib import TaskConfig, TrainConfig
from nlicl_lib.pages import ch4_figures
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.experiments import capacity_sweeps, ch4_studies
from nlicl_lib.theory import ch4_analysis
from nlicl_lib.theory.capacity import best_coordinate_subset

SIZES = [1, 2, 3, 4]
STEPS = 30


@pytest.fixture(scope="module")
def computed():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    task = TaskConfig(kind="poly", input_dim=2, context_length=10, degree=2)
    config = TrainConfig(steps=STEPS, batch_size=64, learning_rate=0.02, seed=0)
    references = ch4_analysis.one_block_references(task)
    sweep = capacity_sweeps.capacity_sweep(task, SIZES, SIZES, config, progress=False)
    saturation = capacity_sweeps.saturation_sweep([2], [10], config, progress=False)
    torch.set_num_threads(threads)
    return task, config, references, sweep, saturation


def _panels(fig) -> list[list]:
    """The traces of each slider panel, in the order of the figure's slider grid."""
    owner = fig.layout.meta["nlicl_sliders"]["panel_of_trace"]
    return [[t for t, p in zip(fig.data, owner, strict=True) if p == k]
            for k in range(max(owner) + 1)]


def _names(traces) -> list[str]:
    return [t.name for t in traces]


def test_references_are_the_capacity_module_s_and_ordered(computed):
    task, _, references, _, _ = computed
    assert references.p2 == 3 and sorted(references.subspace) == [0, 1, 2, 3]
    assert sorted(references.units) == [1, 2, 3]
    assert references.kernel == best_coordinate_subset(task, 3).loss
    assert references.linear == references.subspace[0].loss
    losses = [references.subspace[m].loss for m in range(4)]
    # the best span falls with every slot and never beats the kernel step or the best monomials
    assert all(a > b for a, b in zip(losses, losses[1:], strict=False))
    assert losses[-1] == pytest.approx(references.kernel, rel=1e-9)
    for m in range(4):
        assert references.subspace[m].loss <= references.coordinate[m].loss * (1 + 1e-9)
    values = references.prose_values()
    assert values["p2"] == 3 and values["kernel_norm"] == references.kernel / references.normaliser
    assert values["monomial_gap"] == values["unit_gap"] == "equal"  # m = p2 = 3: all monomials
    # the best single slot is ||x||^2 (Proposition 12): equal coefficients on the squares
    assert references.best_single_slot() == "1.00 x1^2 + 1.00 x2^2"


def test_the_tables_fit_78_columns_and_quote_every_size(computed):
    _, config, references, sweep, saturation = computed
    texts = [references.report(), ch4_studies.sweep_report(sweep, config, references.normaliser),
             ch4_studies.saturation_report(saturation), ch4_studies.increment_report(saturation),
             ch4_analysis.embedding_table([2, 50], [2, 4])]
    for text in texts:
        assert max(len(line) for line in text.splitlines()) <= 78
    sweep_rows = ch4_studies.sweep_report(sweep, config, references.normaliser).splitlines()[-4:]
    for m, row in zip(SIZES, sweep_rows, strict=True):
        assert row.split()[0] == str(m)
        assert f"{sweep.slots_loss[m] / references.normaliser:.4f}" in row


def test_sweep_values_are_ratios_to_the_reference_of_each_size(computed):
    _, _, references, sweep, saturation = computed
    ratios = ch4_studies.sweep_ratios(sweep)
    assert len(ratios) == 2 * len(SIZES)
    assert ratios[0] == sweep.slots_loss[1] / sweep.subspace[1].loss
    values = ch4_studies.sweep_values(sweep, references)
    assert values["min_ratio"] == min(ratios) and values["max_ratio"] == max(ratios)
    assert values["distinct_blocks"] == 6  # (m, h) = (1..3, 3) slots, (3, 1..2) units, (4, 4)
    assert values["all_slots_ratio"] == sweep.slots_loss[3] / references.kernel
    found = ch4_studies.saturation_values(saturation)
    assert found["units_match"] == "h = d"  # d = 2 units write ||x||^2 (Proposition 12, item 1)
    assert set(found) == {"sat_min_ratio", "sat_max_ratio", "kernel_d2", "short_d2", "full_d2",
                          "full_above_short", "part_max_ratio", "units_match"}
    curve = saturation.curves[2]
    assert found["part_max_ratio"] == max(
        [curve.trained_slots[v] / curve.slot_loss[v] for v in curve.trained_slots if v < 3]
        + [curve.trained_widths[v] / curve.width_loss[v] for v in curve.trained_widths if v < 3])
    above = curve.trained_slots[3] > curve.slot_loss[2]
    assert found["full_above_short"] == ("d = 2" if above else "none of these d")


def test_increment_values_are_the_closed_form_and_match_the_curve(computed):
    """Proposition 12 (prop-capacity), item 5 at d = 2 (p2 = 3): one drop per kind of slot, and
    the L-BFGS curve equals l_0 minus the sum of the largest increments."""
    *_, saturation = computed
    values = ch4_studies.increment_values(saturation)
    assert set(values) == {"norm_drop_d2", "square_drop_d2", "cross_drop_d2", "increment_order",
                           "closed_form_gap"}
    curve = saturation.curves[2]
    drops = -np.diff([curve.slot_loss[m] for m in range(4)])
    assert list(drops) == pytest.approx([values["norm_drop_d2"], values["square_drop_d2"],
                                         values["cross_drop_d2"]], rel=1e-8)
    assert values["increment_order"] == "|x|^2 > contrasts of the squares > cross terms"
    assert 0 <= values["closed_form_gap"] < 1e-9
    rows = ch4_studies.increment_report(saturation).splitlines()
    assert rows[-1].split() == ["2", "10", "3", f"{values['norm_drop_d2']:.4f}", "x", "1",
                                f"{values['square_drop_d2']:.4f}", "x", "1",
                                f"{values['cross_drop_d2']:.4f}", "x", "1"]


def test_capacity_figure_draws_the_trained_blocks_on_their_references(computed):
    _, _, references, sweep, _ = computed
    fig = ch4_figures.capacity_figure(sweep, references)
    slots, widths = _panels(fig)
    assert _names(slots) == ["trained block (exact test loss)",
                             "best span the block can write", "best m monomials",
                             "full one-step kernel GD (m = h = p₂)", "no slots: linear GD on x",
                             "saturates at m = p₂ = 3"]
    assert _names(widths) == [n for n in _names(slots) if n != "best m monomials"]
    norm = references.normaliser
    assert list(slots[0].y) == [sweep.slots_loss[m] / norm for m in SIZES]
    assert list(slots[1].y) == [sweep.subspace[m].loss / norm for m in SIZES]
    assert list(widths[1].y) == [sweep.glu[h].loss / norm for h in SIZES]
    assert slots[1].line.dash == "dash" and slots[0].mode == "lines+markers"
    assert fig.layout.xaxis.title.text == "block size: slots m or GLU width h"
    assert fig.layout.yaxis.title.text == "test loss / E[y²]"
    assert fig.layout.meta["nlicl_sliders"]["values"] == [["slots m", "width h"]]


def test_training_curves_have_one_panel_per_sweep_and_size(computed):
    _, config, references, sweep, _ = computed
    fig = ch4_figures.training_curves_figure(sweep, references, window=5)
    panels = _panels(fig)
    assert len(panels) == 2 * len(SIZES)
    for panel in panels:
        assert _names(panel) == ["trained block", "reference (best span of this size)",
                                 "full one-step kernel GD"]
        assert len(panel[0].x) == config.steps - 5 + 1 and panel[0].x[-1] == config.steps
    history = sweep.history[("width", 2)]
    width2 = panels[len(SIZES) + 1]  # the grid runs over (vary, size): width, h = 2
    assert width2[0].y[0] == pytest.approx(np.mean(history[:5]) / references.normaliser,
                                           rel=1e-12)
    assert width2[1].y[0] == sweep.glu[2].loss / references.normaliser
    assert fig.layout.yaxis.title.text == "loss / E[y²] (mean of 5 steps)"
    assert fig.layout.xaxis.title.text == "training step" and fig.layout.yaxis.type == "log"
    with pytest.raises(ConfigError, match="window"):
        ch4_figures.training_curves_figure(sweep, references, window=STEPS + 1)


def test_saturation_figure_has_a_panel_per_dimension_and_sweep(computed):
    *_, saturation = computed
    fig = ch4_figures.saturation_figure(saturation)
    slots, widths = _panels(fig)
    assert _names(slots) == ["best block of this size (exact)", "trained block (exact loss)",
                             "kernel optimum L*((x; φ₂))", "saturates at m = p₂ = 3"]
    assert _names(widths)[:2] == ["best block of this size (exact)", "best block with h slots"]
    curve = saturation.curves[2]
    assert list(slots[0].y) == list(curve.slot_loss.values())
    assert list(widths[2].x) == list(curve.trained_widths)
    assert fig.layout.meta["nlicl_sliders"]["titles"] == ["d = 2: m slots, h = max(m, p₂)",
                                                          "d = 2: h units, m = max(h, p₂)"]
    assert fig.layout.xaxis.title.text == "slots m or GLU width h"


def test_embedding_figure_counts_monomials_exactly():
    fig = ch4_figures.embedding_figure([2, 3], max_input_dim=10)
    # one spelling of indices and powers in figure text: Unicode, as in p₂
    assert _names(fig.data) == ["k = 2: p₂ + … + pₖ", "k = 2: dᵏ / k!",
                                "k = 3: p₂ + … + pₖ", "k = 3: dᵏ / k!"]
    counted = list(fig.data[2].y)
    assert counted == [comb(d + 1, 2) + comb(d + 2, 3) for d in range(1, 11)]
    assert fig.data[3].y[-1] == pytest.approx(1000 / 6, rel=1e-15)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.title.text == "slots m = p₂ + … + pₖ"
    with pytest.raises(ConfigError, match="degree"):
        ch4_figures.embedding_figure([1])


def test_embedding_values_and_short_context_values():
    cubic = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    values = ch4_analysis.embedding_values(cubic)
    assert values["slots_d10_k3"] == 55 + 220 and values["slots_d10_k4"] == 55 + 220 + 715
    assert 0 < values["cubic_bound"] < 1
    table = ch4_analysis.embedding_table([10], [2, 3]).splitlines()
    assert table[2].split() == ["10", "2", "55", "55", "66", "4,225"]
    short = ch4_analysis.short_context_values(input_dim=2, context_length=10)
    assert short["kernel_d2_n10"] < short["linear_d2_n10"] < 1
    with pytest.raises(ConfigError, match="task"):
        ch4_analysis.one_block_references(cubic)
