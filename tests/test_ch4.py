"""Chapter 4's page module (nlicl_lib.pages.ch4): the trained blocks against the best block of
their size (Proposition 12 (prop-capacity)), the saturation curves at d = 3, 4, 5 against the
closed form of item 5, and the tables, values and figures, on cheap real computations (the
quadratic task in d = 2, p2 = 3, blocks trained for 30 steps)."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
import torch

from nlicl_lib import ModelConfig, TaskConfig, TrainConfig, default_train_config
from nlicl_lib.core.monomials import monomial_count
from nlicl_lib.pages import ch4
from nlicl_lib.theory.capacity import (
    ExactBlockLoss,
    best_feature_subspace,
    best_glu_features,
    one_block_references,
    slot_increments,
)
from nlicl_lib.theory.closed_forms import linear_gd_optimum, one_step_kernel_gd_optimum

SIZES = [1, 2, 3, 4]
STEPS = 30
QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def computed():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    task = TaskConfig(kind="poly", input_dim=2, context_length=10, degree=2)
    config = TrainConfig(steps=STEPS, batch_size=64, learning_rate=0.02, seed=0)
    references = one_block_references(task)
    sweep = ch4.capacity_sweep(task, SIZES, SIZES, config, progress=False)
    saturation = ch4.saturation_sweep([2], [10], config, progress=False)
    torch.set_num_threads(threads)
    return task, config, references, sweep, saturation


def _panels(fig) -> list[list]:
    """The traces of each slider panel, in the order of the figure's slider grid."""
    owner = fig.layout.meta["nlicl_sliders"]["panel_of_trace"]
    return [[t for t, p in zip(fig.data, owner, strict=True) if p == k]
            for k in range(max(owner) + 1)]


def _names(traces) -> list[str]:
    return [t.name for t in traces]


def test_the_tables_fit_78_columns(computed):
    _, config, references, sweep, saturation = computed
    texts = [ch4.references_report(references),
             ch4.sweep_report(sweep, config, references.normaliser),
             ch4.saturation_report(saturation), ch4.increment_report(saturation),
             ch4.embedding_table([2, 50], [2, 4])]
    for text in texts:
        assert max(len(line) for line in text.splitlines()) <= 78


def test_trained_blocks_are_at_or_above_their_references(computed):
    _, _, references, sweep, saturation = computed
    values = ch4.sweep_values(sweep, references)
    assert values["min_ratio"] >= 1 - 1e-9  # no block beats the best of its size
    assert values["distinct_blocks"] == 6  # (m, h) = (1..3, 3) slots, (3, 1..2) units, (4, 4)
    assert ch4.references_values(references)["monomial_gap"] == "equal"  # m = p2: all monomials
    found = ch4.saturation_values(saturation)
    assert found["units_match"] == "h = d"  # d = 2 units write ||x||^2 (Proposition 12, item 1)
    assert found["sat_min_ratio"] >= 1 - 1e-9


def test_increment_values_are_the_closed_form_and_match_the_curve(computed):
    """Proposition 12 (prop-capacity), item 5 at d = 2 (p2 = 3): one drop per kind of slot, and
    the L-BFGS curve equals l_0 minus the sum of the largest increments."""
    *_, saturation = computed
    values = ch4.increment_values(saturation)
    curve = saturation.curves[2]
    drops = -np.diff([curve.slot_loss[m] for m in range(4)])
    assert list(drops) == pytest.approx([values["norm_drop_d2"], values["square_drop_d2"],
                                         values["cross_drop_d2"]], rel=1e-8)
    assert values["increment_order"] == "|x|^2 > contrasts of the squares > cross terms"
    assert 0 <= values["closed_form_gap"] < 1e-9


def test_capacity_figure_draws_the_trained_blocks_on_their_references(computed):
    _, _, references, sweep, _ = computed
    slots, widths = _panels(ch4.capacity_figure(sweep, references))
    assert _names(slots) == ["trained block (exact test loss)",
                             "best span the block can write", "best m monomials",
                             "full one-step kernel GD (m = h = p₂)", "no slots: linear GD on x",
                             "saturates at m = p₂ = 3"]
    assert _names(widths) == [n for n in _names(slots) if n != "best m monomials"]
    norm = references.normaliser
    assert list(slots[0].y) == [sweep.slots_loss[m] / norm for m in SIZES]
    assert list(slots[1].y) == [sweep.subspace[m].loss / norm for m in SIZES]
    assert list(widths[1].y) == [sweep.glu[h].loss / norm for h in SIZES]


def test_training_curves_have_one_panel_per_sweep_and_size(computed):
    _, config, references, sweep, _ = computed
    panels = _panels(ch4.training_curves_figure(sweep, references, window=5))
    assert len(panels) == 2 * len(SIZES)
    for panel in panels:
        assert len(panel[0].x) == config.steps - 5 + 1 and panel[0].x[-1] == config.steps
    history = sweep.history[("width", 2)]
    width2 = panels[len(SIZES) + 1]  # the grid runs over (vary, size): width, h = 2
    assert width2[0].y[0] == pytest.approx(np.mean(history[:5]) / references.normaliser,
                                           rel=1e-12)
    assert width2[1].y[0] == sweep.glu[2].loss / references.normaliser


def test_saturation_figure_has_a_panel_per_dimension_and_sweep(computed):
    *_, saturation = computed
    slots, widths = _panels(ch4.saturation_figure(saturation))
    curve = saturation.curves[2]
    assert list(slots[0].y) == list(curve.slot_loss.values())
    assert _names(widths)[1] == "best block with h slots"
    assert list(widths[2].x) == list(curve.trained_widths)


def test_embedding_counts_monomials_exactly():
    fig = ch4.embedding_figure([2, 3], max_input_dim=10)
    assert list(fig.data[2].y) == [comb(d + 1, 2) + comb(d + 2, 3) for d in range(1, 11)]
    assert fig.data[3].y[-1] == pytest.approx(1000 / 6, rel=1e-15)
    cubic = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    values = ch4.embedding_values(cubic)
    assert values["slots_d10_k3"] == 55 + 220 and values["slots_d10_k4"] == 55 + 220 + 715
    assert 0 < values["cubic_bound"] < 1
    short = ch4.short_context_values(input_dim=2, context_length=10)
    assert short["kernel_d2_n10"] < short["linear_d2_n10"] < 1


@pytest.mark.slow
def test_trained_blocks_sit_on_or_above_their_references():
    """Each trained block lies between the exact best block of its size (Proposition 12
    (prop-capacity): no block of that size does better) and 1.05 times it; and a trained block
    with h units beats the best block with h - 1 units (h = 0: no slots, the linear optimum),
    so training uses every unit it is given (measured: 11.79 < 13.85, 10.41 < 11.76,
    8.98 < 10.22 at h = 1, 2, 3)."""
    sweep = ch4.capacity_sweep(QUADRATIC, [2, 3, 6], [1, 2, 3],
                               TrainConfig(steps=600, batch_size=1000), progress=False)
    for m in (2, 3):
        reference = sweep.subspace[m].loss
        assert reference * (1 - 1e-9) <= sweep.slots_loss[m] <= reference * 1.05
    fewer = {0: linear_gd_optimum(QUADRATIC).loss,
             **{h: sweep.glu[h].loss for h in sweep.width_values}}
    for h in (1, 2, 3):
        assert sweep.glu[h].loss * (1 - 1e-9) <= sweep.width_loss[h] <= sweep.glu[h].loss * 1.05
        assert sweep.width_loss[h] < fewer[h - 1]
    kernel = one_step_kernel_gd_optimum(QUADRATIC).loss
    assert kernel * (1 - 1e-9) <= sweep.slots_loss[6] <= 1.05 * kernel


# --- the saturation at d = 3, 4, 5 (chapter 4's figure) -----------------------------------------

SATURATION_DIMS, SATURATION_LENGTHS = [3, 4, 5], [20, 30, 45]


@pytest.fixture(scope="module")
def saturation_references():
    """The chapter's exact references (no training): about 5 s for d = 3, 4, 5."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return ch4.saturation_sweep(SATURATION_DIMS, SATURATION_LENGTHS, None)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow  # saturation_references (5 to 10 s) and the tests below that share it
@pytest.mark.parametrize("d", SATURATION_DIMS)
def test_saturation_curve_is_the_proposition(saturation_references, d):
    """Proposition 12 (prop-capacity) at d = 3, 4, 5: equal to the kernel optimum at m = p2 (to
    1e-9), strictly decreasing below, flat above; units never beat slots, and match them from
    h = d on."""
    curve = saturation_references.curves[d]
    p2, task = curve.p2, curve.task
    assert (task.input_dim, p2) == (d, monomial_count(d, 2))
    assert list(curve.slot_loss) == list(curve.width_loss) == list(range(p2 + 3))
    assert curve.trained_slots == {} and curve.trained_widths == {}
    kernel = one_step_kernel_gd_optimum(task)
    assert curve.null_loss == pytest.approx(kernel.null_loss, rel=1e-12)
    assert curve.kernel == pytest.approx(kernel.normalised_loss, rel=1e-9)
    assert curve.linear == pytest.approx(linear_gd_optimum(task).normalised_loss, rel=1e-9)
    assert curve.slot_loss[0] == curve.width_loss[0] == curve.linear
    slots = [curve.slot_loss[m] for m in range(p2 + 1)]
    assert np.all(-np.diff(slots) > 1e-4)  # strictly, by a visible step
    for m in range(p2, p2 + 3):
        assert curve.slot_loss[m] == pytest.approx(curve.kernel, rel=1e-12)
        assert curve.width_loss[m] == pytest.approx(curve.kernel, rel=1e-12)
    for h in range(1, p2 + 3):
        assert curve.width_loss[h] >= curve.slot_loss[h] * (1 - 1e-9)
    assert curve.units_match_from() == d
    assert curve.width_loss[d - 1] > curve.slot_loss[d - 1] * 1.01
    # every optimum is at or below random spans of the same size (an upper bound that holds
    # whatever the optimiser did)
    loss = ExactBlockLoss(task)
    rng = np.random.default_rng(d)
    for m in (1, p2 // 2, p2 - 1):
        random = min(float(loss(torch.as_tensor(rng.standard_normal((m, p2)))))
                     for _ in range(10))
        assert curve.slot_loss[m] <= random / curve.null_loss * (1 + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("d", SATURATION_DIMS)
def test_the_curve_falls_by_the_eigenvalues_of_item_5(saturation_references, d):
    """Proposition 12 (prop-capacity), item 5: the L-BFGS curve l_m of every size m = 0..p2 + 2
    equals the closed form l_0 - (sum of the m largest eigenvalues of S_E^3 K_E^{-1}), and its
    drops are the increments: once |x|^2, d - 1 times a contrast of squares, p2 - d times the
    same cross-term value, then zero."""
    curve = saturation_references.curves[d]
    closed = slot_increments(curve.task)
    assert closed.null_loss == pytest.approx(curve.null_loss, rel=1e-14)
    for m, found in curve.slot_loss.items():
        assert found == pytest.approx(closed.loss(m) / closed.null_loss, rel=1e-9, abs=0)
    drops = -np.diff([curve.slot_loss[m] for m in sorted(curve.slot_loss)]) * curve.null_loss
    p2 = curve.p2
    assert drops[:p2] == pytest.approx(closed.increments, rel=1e-7)
    assert np.ptp(drops[d:p2]) <= 1e-7 * drops[d]  # the cross-term slots are worth the same
    assert drops[p2 - 1] == pytest.approx(drops[d], rel=1e-7)  # so is the last slot below p2
    assert np.abs(drops[p2:]).max() <= 1e-12 * curve.null_loss  # and nothing after p2


@pytest.mark.slow
def test_saturation_paths_equal_the_full_searches(saturation_references):
    """The warm-started paths find the optima of the default searches (enumeration start plus
    four random starts): every size at d = 3, a few at d = 4."""
    for d, slot_sizes, widths in [(3, range(1, 6), range(1, 6)), (4, (2, 5, 9), (2, 5))]:
        curve = saturation_references.curves[d]
        for m in slot_sizes:
            full = best_feature_subspace(curve.task, m).normalised_loss
            assert curve.slot_loss[m] == pytest.approx(full, rel=1e-9)
        for h in widths:
            full = best_glu_features(curve.task, curve.p2, h).normalised_loss
            assert curve.width_loss[h] == pytest.approx(full, rel=1e-9)


@pytest.mark.slow
def test_the_chapter_s_trained_blocks_at_d_3_4_5():
    """What chapter 4 says of its trained markers, under the chapter's own settings (purpose
    "short-sweeps", seed 0): every block is at or above its exact curve; the blocks of 1 and
    ceil(p2/2) slots or units are within 3% of it (measured: at most 1.0263); the full blocks
    (m = h = p2) within 7% of the kernel optimum (measured 1.0023, 1.0246, 1.0514), which is
    why the page does not let them show the last slot (one cross-term drop: 1.033, 1.028 and
    1.026 times the kernel optimum). A size in both sweeps trains once."""
    config = default_train_config(QUADRATIC, ModelConfig(kind="glu-lsa"), purpose="short-sweeps",
                                  seed=0)
    sweep = ch4.saturation_sweep(SATURATION_DIMS, SATURATION_LENGTHS, config, progress=False)
    assert sweep.train_seconds > 0
    for curve in sweep.curves.values():
        p2 = curve.p2
        assert sorted(curve.trained_slots) == [1, (p2 + 1) // 2, p2]
        assert curve.trained_slots[p2] == curve.trained_widths[p2]  # one block, trained once
        for trained, best in [(curve.trained_slots, curve.slot_loss),
                              (curve.trained_widths, curve.width_loss)]:
            for size, value in trained.items():
                assert value >= best[size] * (1 - 1e-9)
                assert value <= best[size] * (1.07 if size == p2 else 1.03)
