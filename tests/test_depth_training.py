"""Chapter 5, trained: with m < p_2 slots, depth 3 beats depth 1; on a cubic task depth 2 beats
one block of the same size, which can only write quadratic features. The sweeps' test losses
integrate the task and the query out exactly; for the one-block models they must agree with the
exact loss, Theorem 9 (thm-feature-optimum) with the model's own features and Gamma."""

import pytest

from nlicl_lib.depth import depth_sweep
from nlicl_lib.tasks import TaskConfig
from nlicl_lib.train import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def check_one_block_estimate(sweep):
    estimate, error, exact = sweep.loss["depth1"], sweep.std_error["depth1"], sweep.exact["depth1"]
    print(f"depth 1: estimate {estimate / sweep.null_loss:.5f} +- {error / sweep.null_loss:.5f},"
          f" exact {exact / sweep.null_loss:.5f}")
    assert abs(estimate - exact) < 3 * error
    assert error < 0.005 * exact


@pytest.mark.slow
def test_depth_three_beats_one_narrow_block():
    task = TaskConfig("poly", 3, 20, 2)
    sweep = depth_sweep(task, 3, [1, 3], TrainConfig(steps=400, batch_size=500),
                        reference_depths=[], test_prompts=20000, progress=False)
    assert not any(sweep.diverged.values())
    check_one_block_estimate(sweep)
    assert sweep.loss["depth3"] < 0.85 * sweep.exact["depth1"]
    assert sweep.loss["depth3"] + 2 * sweep.std_error["depth3"] < sweep.exact["depth1"]


@pytest.mark.slow
def test_depth_two_learns_a_cubic_task_one_block_cannot():
    task = TaskConfig("poly", 3, 20, 3)
    sweep = depth_sweep(task, 10, [1, 2], TrainConfig(steps=400, batch_size=250),
                        reference_depths=[], test_prompts=20000, progress=False)
    check_one_block_estimate(sweep)
    assert sweep.loss["depth2"] < 0.85 * sweep.exact["depth1"]
    assert sweep.loss["depth2"] + 2 * sweep.std_error["depth2"] < sweep.exact["depth1"]
