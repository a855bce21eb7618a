"""Chapter 4's page module: trained blocks against the best block of their size
(Proposition 12), and the saturation curves against the closed form of item 5."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib import ModelConfig, TaskConfig, TrainConfig, default_train_config
from nlicl_lib.core.device import use_threads
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
    task = TaskConfig(kind="poly", input_dim=2, context_length=10, degree=2)
    config = TrainConfig(steps=STEPS, batch_size=64, learning_rate=0.02, seed=0)
    with use_threads(1):
        references = one_block_references(task)
        sweep = ch4.capacity_sweep(task, SIZES, SIZES, config, progress=False)
        saturation = ch4.saturation_sweep([2], [10], config, progress=False)
    return task, config, references, sweep, saturation


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
    *_, saturation = computed
    values = ch4.increment_values(saturation)
    curve = saturation.curves[2]
    drops = -np.diff([curve.slot_loss[m] for m in range(4)])
    assert list(drops) == pytest.approx([values["norm_drop_d2"], values["square_drop_d2"],
                                         values["cross_drop_d2"]], rel=1e-8)
    assert 0 <= values["closed_form_gap"] < 1e-9


def test_embedding_counts_monomials_exactly():
    cubic = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    values = ch4.embedding_values(cubic)
    assert values["slots_d10_k3"] == 55 + 220 and values["slots_d10_k4"] == 55 + 220 + 715
    assert 0 < values["cubic_bound"] < 1
    short = ch4.short_context_values(input_dim=2, context_length=10)
    assert short["kernel_d2_n10"] < short["linear_d2_n10"] < 1


SATURATION_DIMS, SATURATION_LENGTHS = [3, 4, 5], [20, 30, 45]


@pytest.fixture(scope="module")
def saturation_references():
    """The chapter's exact references (no training): about 5 s for d = 3, 4, 5."""
    with use_threads(1):
        return ch4.saturation_sweep(SATURATION_DIMS, SATURATION_LENGTHS, None)


@pytest.mark.slow  # saturation_references (5 to 10 s) and the tests below that share it
@pytest.mark.parametrize("d", SATURATION_DIMS)
def test_saturation_curve_is_the_proposition(saturation_references, d):
    """Proposition 12 at d = 3, 4, 5: the kernel optimum at m = p2, strictly falling below."""
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
    """Item 5: the L-BFGS curve equals l_0 minus the m largest eigenvalues of S_E^3 K_E^-1."""
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
    """Chapter 4's trained markers (purpose "short-sweeps"): at or above the exact curve, within
    5% of it (8% for the full block). Measured 2026-12-07 over seeds 0 to 3, and at seed 0 with
    the GLU's W3 orthogonalised in float32 and in float64 (a change of rounding size): at most
    1.030 (1.061 for the full block); the rounding-sized change alone moved one marker from
    1.016 to 1.030, so the training's own spread, not the CPU, sets these margins."""
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
                assert value <= best[size] * (1.08 if size == p2 else 1.05)
