"""Chapter 5's deep GLU-LSA construction is the block-coordinate recursion of Theorem 13
(float64), and any bilinear stack is the recursion on its own features."""

import numpy as np
import pytest
import torch

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import one_step_gd_optimum
from nlicl_lib.theory.depth import (
    deep_glu_lsa,
    monomial_schedule,
    pad_outputs,
    reference_model,
    stack_as_bcd,
    stack_slot_features,
    with_input,
)
from nlicl_lib.theory.predictors import block_coordinate_descent

pytestmark = pytest.mark.usefixtures("one_torch_thread")


CASES = [  # (degree, slots m, depth L, what the GLUs read, Gamma on the "slots" only or (x; slots))
    (2, 3, 4, "x", "slots"),
    (2, 3, 3, "x+slots", "full"),
    (2, 6, 2, "x", "full"),
    (3, 10, 3, "x+slots", "full"),
    (3, 4, 2, "x+slots", "slots"),
]


@pytest.mark.parametrize("degree,slots,depth,reads,form", CASES)
def test_construction_is_block_coordinate_descent(degree, slots, depth, reads, form):
    d, n = 3, 12
    task = TaskConfig(kind="poly", input_dim=d, context_length=n, degree=degree)
    blocks = monomial_schedule(d, slots, depth, degree)
    rng = np.random.default_rng(depth + slots)
    size = slots if form == "slots" else d + slots
    gammas = [0.1 * rng.standard_normal((size, size)) for _ in blocks]
    model = deep_glu_lsa(d, blocks, gammas, slots, reads)
    prompts = sample_prompts(task, 64, seed=3, step=0, dtype=torch.float64)
    prediction, stream = model(prompts.embed(slots), return_stream=True)
    if form == "slots":  # Q = -blkdiag(0, Gamma, 0): a zero x-block, features phi_l only
        features = [pad_outputs(b, slots) for b in blocks]
    else:
        features = [with_input(pad_outputs(b, slots)) for b in blocks]
    reference, residuals, partial = block_coordinate_descent(prompts, features, gammas,
                                                             return_residuals=True)
    scale = float(prompts.y.abs().max())
    for layer in range(depth):
        glu_out, after = stream[f"block{layer + 1}.glu"], stream[f"block{layer + 1}"]
        # the GLU replaced the previous block's features by phi_l ...
        torch.testing.assert_close(glu_out[..., d:d + slots], pad_outputs(blocks[layer], slots)(
            prompts.x), rtol=0, atol=1e-10 * scale)
        # ... the context labels hold the residuals r^(l), the query slot -sum_l' phi^T Gamma g
        torch.testing.assert_close(after[:, :n, -1], residuals[layer], rtol=0, atol=1e-9 * scale)
        torch.testing.assert_close(after[:, n, -1], -partial[layer], rtol=0, atol=1e-9 * scale)
    torch.testing.assert_close(prediction, reference, rtol=0, atol=1e-9 * scale)


def test_cubic_schedule_reaches_every_cubic_and_the_construction_is_narrow():
    blocks = monomial_schedule(3, 10, 2, 3)
    assert [b.num_outputs for b in blocks] == [6, 10]
    assert blocks[1].exponents.sum(axis=1).tolist() == [3] * 10
    model = deep_glu_lsa(3, blocks, [np.zeros((13, 13))] * 2, 10, "x+slots")
    # block 2: 10 units x_j * (stored quadratic) and 6 units erasing the quadratics
    assert model.blocks[0].glu.width == 16


@pytest.mark.parametrize("reads", ["x", "x+slots"])
def test_any_bilinear_stack_is_the_recursion_on_its_own_features(reads):
    task = TaskConfig(kind="poly", input_dim=3, context_length=10, degree=2)
    # glu_init="small": the default zeroes the slot-reading columns, whose products this checks
    model = build_model(ModelConfig(kind="glu-lsa", depth=3, feature_slots=3, glu_reads=reads,
                                    glu_init="small" if reads != "x" else None,
                                    attention_init_std=0.05), task, seed=1, dtype=torch.float64)
    prompts = sample_prompts(task, 32, seed=0, step=0, dtype=torch.float64)
    prediction, stream = model(prompts.embed(3), return_stream=True)
    slots = stack_slot_features(model)
    for layer, features in enumerate(slots):
        torch.testing.assert_close(stream[f"block{layer + 1}.glu"][..., 3:6], features(prompts.x))
    features, gammas = stack_as_bcd(model)
    reference, residuals, _ = block_coordinate_descent(prompts, features, gammas,
                                                       return_residuals=True)
    torch.testing.assert_close(prediction, reference)
    torch.testing.assert_close(stream["block2"][:, :10, -1], residuals[1])
    assert max(s.exponents.sum(axis=1).max() for s in slots) == (2 if reads == "x" else 8)


def test_reference_model_starts_at_the_exact_one_block_optimum():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    model = reference_model(task, 3, 2)
    first = with_input(pad_outputs(monomial_schedule(3, 3, 1)[0], 3))
    optimum = one_step_gd_optimum(task.target_features, first, 20).gamma
    np.testing.assert_allclose(model.blocks[0].lsa.gamma.detach().numpy(), optimum)
    assert float(model.blocks[1].lsa.gamma.detach().abs().max()) == 0.0


