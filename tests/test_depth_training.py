"""Chapter 5, trained: depth beats one narrow block, and on a cubic task one block of the same
size; the one-block estimates agree with the exact loss (Theorem 9)."""

import pytest

from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.studies import depth_sweep, shape_key
from nlicl_lib.training.train import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def check_one_block_estimate(sweep, slots):
    key = shape_key(slots, 1)
    estimate, error, exact = sweep.loss[key], sweep.std_error[key], sweep.exact[key]
    assert abs(estimate - exact) < 3 * error
    assert error < 0.005 * exact


@pytest.mark.slow
def test_depth_three_beats_one_narrow_block():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    sweep = depth_sweep(task, [(3, 1), (3, 3)], TrainConfig(steps=400, batch_size=500),
                        test_prompts=20000, progress=False)
    check_one_block_estimate(sweep, 3)
    one, three = sweep.exact["m3-L1"], sweep.loss["m3-L3"]
    assert three < 0.85 * one
    assert three + 2 * sweep.std_error["m3-L3"] < one
    assert sweep.parameters == {"m3-L1": 63, "m3-L3": 189}


@pytest.mark.slow
def test_depth_two_learns_a_cubic_task_one_block_cannot():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
    sweep = depth_sweep(task, [(10, 1), (10, 2)], TrainConfig(steps=400, batch_size=250),
                        test_prompts=20000, progress=False)
    check_one_block_estimate(sweep, 10)
    one, two = sweep.exact["m10-L1"], sweep.loss["m10-L2"]
    assert two < 0.85 * one
    assert two + 2 * sweep.std_error["m10-L2"] < one
