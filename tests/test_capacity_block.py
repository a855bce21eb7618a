"""Chapter 4: what one block with m slots and width h can reach (Proposition 12 (prop-capacity)),
exactly, and trained blocks against it."""

import numpy as np
import pytest
import torch

from nlicl_lib.capacity import (
    ExactBlockLoss,
    best_coordinate_subset,
    best_feature_subspace,
    best_glu_features,
    capacity_sweep,
    required_embedding,
)
from nlicl_lib.monomials import PolyMap, monomial_count
from nlicl_lib.tasks import TaskConfig
from nlicl_lib.theory import linear_gd_optimum, one_step_gd_optimum, one_step_kernel_gd_optimum
from nlicl_lib.train import TrainConfig

QUADRATIC = TaskConfig("poly", 3, 20, 2)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("task", [QUADRATIC, TaskConfig("poly", 3, 10, 2, homogeneous=True,
                                                        noise_std=0.5),
                                  TaskConfig("poly", 2, 15, 3)])
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
    sweep = capacity_sweep(QUADRATIC, [2, 3, 6], [2], TrainConfig(steps=600, batch_size=1000),
                           progress=False)
    for m in (2, 3):
        reference = sweep.subspace[m].loss
        assert sweep.slots_loss[m] >= reference * (1 - 1e-9)
        assert sweep.slots_loss[m] <= reference * 1.05
    assert sweep.width_loss[2] >= sweep.glu[2].loss * (1 - 1e-9)
    assert sweep.slots_loss[6] <= 1.05 * sweep.kernel_optimum
