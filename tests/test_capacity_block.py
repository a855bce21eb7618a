"""Chapter 4: what one block with m slots and width h can reach (Proposition 12 (prop-capacity)),
exactly, and trained blocks against it."""

import numpy as np
import pytest
import torch

from nlicl_lib.core.monomials import PolyMap, monomial_count, second_moment
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.capacity_sweeps import capacity_sweep, saturation_sweep
from nlicl_lib.theory.capacity import (
    ExactBlockLoss,
    best_coordinate_subset,
    best_feature_subspace,
    best_glu_features,
    degree_two_bound,
    required_embedding,
    slot_increments,
)
from nlicl_lib.theory.closed_forms import (
    linear_gd_optimum,
    one_step_gd_optimum,
    one_step_kernel_gd_optimum,
)
from nlicl_lib.training.train import TrainConfig

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("task", [QUADRATIC, TaskConfig(kind="poly", input_dim=3, context_length=10, degree=2,
                                                        homogeneous=True,
                                                        noise_std=0.5),
                                  TaskConfig(kind="poly", input_dim=2, context_length=15, degree=3)])
def test_differentiable_loss_equals_the_closed_form(task):
    loss = ExactBlockLoss(task)
    rng = np.random.default_rng(0)
    quadratics = PolyMap.monomials(task.input_dim, [2])
    for m in (1, 2, quadratics.num_outputs):
        coef = rng.standard_normal((m, quadratics.num_outputs))
        features = PolyMap.monomials(task.input_dim, [1]).concat(
            PolyMap(quadratics.exponents, coef))
        expected = one_step_gd_optimum(task.target_features, features, task.context_length,
                                       task.noise_std).loss
        value = float(loss(torch.as_tensor(coef)))
        assert value == pytest.approx(expected, rel=1e-10)


def test_end_points_are_the_closed_forms():
    p2 = monomial_count(3, 2)
    assert best_coordinate_subset(QUADRATIC, 0).loss == pytest.approx(
        linear_gd_optimum(QUADRATIC).loss, rel=1e-12)
    kernel = one_step_kernel_gd_optimum(QUADRATIC).loss
    for m in (p2, p2 + 2):
        assert best_feature_subspace(QUADRATIC, m).loss == pytest.approx(kernel, rel=1e-12)
    assert best_glu_features(QUADRATIC, p2, p2).loss == pytest.approx(kernel, rel=1e-12)


def test_reference_curves_are_ordered_and_strictly_above_the_kernel_optimum():
    p2 = monomial_count(3, 2)
    kernel = one_step_kernel_gd_optimum(QUADRATIC).loss
    loss = ExactBlockLoss(QUADRATIC)
    rng = np.random.default_rng(1)
    previous = best_coordinate_subset(QUADRATIC, 0).loss
    for m in range(1, p2):
        subspace = best_feature_subspace(QUADRATIC, m).loss
        coordinate = best_coordinate_subset(QUADRATIC, m).loss
        glu = best_glu_features(QUADRATIC, p2, m).loss  # m units, p2 slots
        assert kernel < subspace <= coordinate + 1e-9
        assert subspace <= glu + 1e-9 and glu <= coordinate + 1e-9  # monomials are products
        assert subspace < previous
        previous = subspace
        random = min(float(loss(torch.as_tensor(rng.standard_normal((m, p2)))))
                     for _ in range(20))
        assert subspace <= random
    # one slot: the best quadratic form (|x|^2-like) beats every monomial, and every product
    # (a^T x)(b^T x) of one GLU unit, which cannot be a definite form
    assert best_feature_subspace(QUADRATIC, 1).loss < best_glu_features(QUADRATIC, 6, 1).loss - 0.5



def test_what_chapter_4_reads_off_its_table_of_best_spans():
    """The page's statements about the best spans (d = 3, n = 20, quadratic task), exactly."""
    p2 = monomial_count(3, 2)
    span = {m: best_feature_subspace(QUADRATIC, m) for m in range(p2 + 1)}
    monomials = {m: best_coordinate_subset(QUADRATIC, m).loss for m in range(p2 + 1)}
    units = {h: best_glu_features(QUADRATIC, p2, h).loss for h in range(1, p2 + 1)}
    # the best single slot is |x|^2 = x1^2 + x2^2 + x3^2 (up to scale), and its loss is the
    # closed form of Theorem 9 (thm-feature-optimum) on psi = (x; |x|^2)
    quadratics = PolyMap.monomials(3, [2])
    norm = PolyMap(quadratics.exponents, np.array([[1.0, 0, 0, 1, 0, 1]]))
    closed = one_step_gd_optimum(QUADRATIC.target_features,
                                 PolyMap.monomials(3, [1]).concat(norm), 20).loss
    assert span[1].loss == pytest.approx(closed, rel=1e-9)
    found = span[1].features.coefficients[0]
    cosine = abs(found @ norm.coefficients[0]) / np.linalg.norm(found) / np.sqrt(3)
    assert cosine == pytest.approx(1.0, abs=1e-6)
    # every slot lowers the best loss, the first one most
    gains = [span[m - 1].loss - span[m].loss for m in range(1, p2 + 1)]
    assert min(gains) > 0 and gains[0] == max(gains)
    # one or two units do no better than one or two monomials (they cannot write |x|^2) ...
    for h in (1, 2):
        assert units[h] == pytest.approx(monomials[h], rel=1e-9)
        assert units[h] > span[h].loss * 1.04
    # ... and from three on, the best monomials and the best units reach the best span
    for m in range(3, p2 + 1):
        assert monomials[m] == pytest.approx(span[m].loss, rel=1e-9)
        assert units[m] == pytest.approx(span[m].loss, rel=1e-9)
    # one slot or unit short of p2 misses the full optimum by more than exercise 4.3's 2%
    kernel = one_step_kernel_gd_optimum(QUADRATIC).loss
    assert min(span[p2 - 1].loss, units[p2 - 1]) > 1.02 * kernel

def test_required_embedding_counts():
    size = required_embedding(3, 3)
    assert (size.monomials, size.slots, size.token_dim, size.gamma_entries) == (10, 16, 20, 361)
    assert required_embedding(5, 2).slots == 15
    assert required_embedding(10, 4).slots == 55 + 220 + 715


@pytest.mark.slow
def test_trained_blocks_sit_on_or_above_their_references():
    """Each trained block lies between the exact best block of its size (Proposition 12
    (prop-capacity): no block of that size does better) and 1.05 times it; and a trained block
    with h units beats the best block with h - 1 units (h = 0: no slots, the linear optimum),
    so training uses every unit it is given (measured: 11.79 < 13.85, 10.41 < 11.76,
    8.98 < 10.22 at h = 1, 2, 3)."""
    sweep = capacity_sweep(QUADRATIC, [2, 3, 6], [1, 2, 3], TrainConfig(steps=600, batch_size=1000),
                           progress=False)
    for m in (2, 3):
        reference = sweep.subspace[m].loss
        assert sweep.slots_loss[m] >= reference * (1 - 1e-9)
        assert sweep.slots_loss[m] <= reference * 1.05
    assert sweep.linear_optimum == pytest.approx(linear_gd_optimum(QUADRATIC).loss, rel=1e-12)
    fewer = {0: sweep.linear_optimum, **{h: sweep.glu[h].loss for h in sweep.width_values}}
    for h in (1, 2, 3):
        assert sweep.width_loss[h] >= sweep.glu[h].loss * (1 - 1e-9)
        assert sweep.width_loss[h] <= sweep.glu[h].loss * 1.05
        assert sweep.width_loss[h] < fewer[h - 1]
    assert sweep.slots_loss[6] >= sweep.kernel_optimum * (1 - 1e-9)
    assert sweep.slots_loss[6] <= 1.05 * sweep.kernel_optimum


# --- the saturation at d = 3, 4, 5 (chapter 4's figure) -----------------------------------------

SATURATION_DIMS, SATURATION_LENGTHS = [3, 4, 5], [20, 30, 45]


@pytest.fixture(scope="module")
def saturation_references():
    """The chapter's exact references (no training): about 5 s for d = 3, 4, 5."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return saturation_sweep(SATURATION_DIMS, SATURATION_LENGTHS, None)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow  # saturation_references (5 to 10 s) and the tests below that share it
def test_saturation_sweep_structure(saturation_references):
    sweep = saturation_references
    assert list(sweep.curves) == SATURATION_DIMS
    assert sweep.train_seconds == 0.0 and sweep.reference_seconds > 0
    for d, n in zip(SATURATION_DIMS, SATURATION_LENGTHS, strict=True):
        curve = sweep.curves[d]
        p2 = monomial_count(d, 2)
        assert (curve.task.input_dim, curve.task.context_length, curve.p2) == (d, n, p2)
        assert list(curve.slot_loss) == list(range(p2 + 3))
        assert list(curve.width_loss) == list(range(p2 + 3))
        assert curve.trained_slots == {} and curve.trained_widths == {}
        values = [curve.kernel, curve.linear, curve.null_loss, *curve.slot_loss.values(),
                  *curve.width_loss.values()]
        assert all(type(v) is float for v in values)  # Python floats, as the prose quotes them


@pytest.mark.slow
@pytest.mark.parametrize("d", SATURATION_DIMS)
def test_saturation_curve_is_the_proposition(saturation_references, d):
    """Proposition 12 (prop-capacity) at d = 3, 4, 5: equal to the kernel optimum at m = p2 (to
    1e-9), strictly decreasing below, flat above; units never beat slots, and match them from
    h = d on."""
    curve = saturation_references.curves[d]
    p2, task = curve.p2, curve.task
    kernel = one_step_kernel_gd_optimum(task)
    assert curve.null_loss == pytest.approx(kernel.null_loss, rel=1e-12)
    assert curve.kernel == pytest.approx(kernel.normalised_loss, rel=1e-9)
    assert curve.slot_loss[p2] == pytest.approx(curve.kernel, rel=1e-9)
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
def test_saturation_sweep_trains_blocks_on_or_above_the_curve():
    train = TrainConfig(steps=300, batch_size=500, learning_rate=0.02)
    sweep = saturation_sweep([3], [20], train, trained_sizes=lambda p2: (1, p2))
    curve = sweep.curves[3]
    assert list(curve.trained_slots) == [1, 6] and list(curve.trained_widths) == [1, 6]
    assert curve.trained_slots[6] == curve.trained_widths[6]  # one block, trained once
    assert sweep.train_seconds > 0
    for trained, best in [(curve.trained_slots, curve.slot_loss),
                          (curve.trained_widths, curve.width_loss)]:
        for size, value in trained.items():
            assert value >= best[size] * (1 - 1e-6)
            assert value <= best[size] * 1.1
    assert curve.trained_ratios() == pytest.approx(
        [curve.trained_slots[1] / curve.slot_loss[1], curve.trained_slots[6] / curve.kernel,
         curve.trained_widths[1] / curve.width_loss[1], curve.trained_widths[6] / curve.kernel])


@pytest.mark.slow
def test_the_chapter_s_trained_blocks_at_d_3_4_5():
    """What chapter 4 says of its trained markers, under the chapter's own settings (purpose
    "short-sweeps", seed 0): every block is at or above its exact curve; the blocks of 1 and
    ceil(p2/2) slots or units are within 3% of it (measured with the one trainer: at most
    1.0263; 1.0144 with the old padded ensemble, whose float32 runs were not the blocks' own);
    the full blocks (m = h = p2) within 7% of the kernel optimum (measured 1.0023, 1.0246,
    1.0514), which is
    why the page does not let them show the last slot (one cross-term drop: 1.033, 1.028 and
    1.026 times the kernel optimum)."""
    from nlicl_lib import ModelConfig, default_train_config

    config = default_train_config(QUADRATIC, ModelConfig(kind="glu-lsa"), purpose="short-sweeps",
                                  seed=0)
    sweep = saturation_sweep(SATURATION_DIMS, SATURATION_LENGTHS, config, progress=False)
    for curve in sweep.curves.values():
        p2 = curve.p2
        assert sorted(curve.trained_slots) == [1, (p2 + 1) // 2, p2]
        for trained, best in [(curve.trained_slots, curve.slot_loss),
                              (curve.trained_widths, curve.width_loss)]:
            for size, value in trained.items():
                assert value >= best[size] * (1 - 1e-9)
                assert value <= best[size] * (1.07 if size == p2 else 1.03)


def test_degree_two_bound():
    """Proposition 12 (prop-capacity), item 4: zero for a quadratic target; for the cubic task
    the cubic monomials' part orthogonal to x (6 = Var(x^3 - 3x) at d = 1), below every single
    block's optimum."""
    assert degree_two_bound(QUADRATIC) == pytest.approx(0.0, abs=1e-9)
    assert degree_two_bound(TaskConfig(kind="poly", input_dim=1, context_length=20, degree=3)) == pytest.approx(6.0,
                                                                                                                rel=1e-12)
    cubic = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    cubes = PolyMap.monomials(3, [3])
    s33 = np.trace(second_moment(cubes))
    cx3 = second_moment(PolyMap.monomials(3, [1]), cubes)
    assert degree_two_bound(cubic) == pytest.approx(s33 - np.sum(cx3**2), rel=1e-12)
    for n in (5, 20, 1000):
        kernel2 = one_step_kernel_gd_optimum(TaskConfig(kind="poly", input_dim=3, context_length=n, degree=3),
                                             PolyMap.monomials(3, [1, 2])).loss
        assert degree_two_bound(cubic) < kernel2
