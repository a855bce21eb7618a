"""Chapter 5's free stacks (full attention, GLUs reading and writing the whole token): the
committed numbers come from a reproducible run, and the measure of the block-coordinate picture
is 1 exactly where Theorem 13 (thm-depth-bcd) holds and below 1 where it does not."""

from dataclasses import asdict

import numpy as np
import pytest
import torch

from nlicl_lib.core.tasks import sample_prompts
from nlicl_lib.experiments import free_stack
from nlicl_lib.theory import depth
from nlicl_lib.theory.ch5_analysis import random_gammas
from nlicl_lib.training.evaluate import test_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import train


@pytest.fixture(scope="module")
def stored() -> dict:
    return free_stack.load_free_stacks()


def test_committed_file_was_made_with_the_named_settings(stored):
    assert stored["depths"] == list(free_stack.DEPTHS)
    assert stored["seed"] == free_stack.SEED
    assert stored["training"] == asdict(free_stack.free_training(1))
    for key, row in stored["rows"].items():
        L = int(key)
        assert row["learning_rate"] == pytest.approx(free_stack.free_training(L).learning_rate)
        assert free_stack.free_training(L) == default_train_config(
            free_stack.TASK, free_stack.free_model_config(L), purpose="free-stacks", seed=0)
        assert len(row["agreement"]) == len(row["gd_form_agreement"]) == L
        for name in ("loss", "std_error", "reference_loss", "gd_form_loss"):
            assert np.isfinite(row[name]) and row[name] > 0, name


def test_rerunning_the_start_of_the_shallowest_run_gives_the_stored_losses(stored):
    """The same model, settings and seed: the first stored batch losses again (the schedule is
    the full run's; the run is stopped after the stored head)."""
    L = min(stored["depths"])
    head = stored["rows"][str(L)]["history_head"]
    model = free_stack.build_free_stack(L)
    result = train(model, free_stack.TASK, free_stack.free_training(L), progress=False,
                   callback=lambda step, loss: step + 1 >= len(head))
    np.testing.assert_allclose(result.loss_history, head, rtol=1e-4)


def test_the_stored_weights_give_the_stored_test_loss(stored):
    """The deepest free stack's loss recomputed from its stored weights, on the first test
    prompts of the same stream (all of them: its mean is the stored one)."""
    L = max(stored["depths"])
    row = stored["rows"][str(L)]
    model = free_stack.free_stack_from_json(L, row["weights"])
    full = test_loss(model, free_stack.TASK, free_stack.TEST_PROMPTS, seed=free_stack.SEED)
    assert full.mean == pytest.approx(row["loss"], rel=1e-4)
    assert full.std_error == pytest.approx(row["std_error"], rel=1e-3)


def test_agreement_is_one_for_a_gd_form_stack_in_float64():
    task = free_stack.TASK
    model = depth.reference_model(task, 3, 3, gammas=random_gammas(6, 3, scale=0.05, seed=1))
    prompts = sample_prompts(task, 16, 5, 0, dtype=torch.float64)
    agreement = free_stack.stream_agreement(model.double(), prompts)
    np.testing.assert_allclose(agreement, 1.0, atol=1e-10)


def test_agreement_falls_below_one_with_dense_attention():
    task = free_stack.TASK
    model = depth.reference_model(task, 3, 3, gammas=random_gammas(6, 3, scale=0.05, seed=1))
    prompts = sample_prompts(task, 16, 5, 0, dtype=torch.float64)
    dense = depth.with_dense_attention(model.double(), 0.05, seed=0)
    assert free_stack.stream_agreement(dense, prompts).max() < 0.9


def test_agreement_of_a_free_block_falls_when_its_glu_reads_the_label():
    """One free block whose GLU reads the label: the context token's own label changes its
    update, which the query (label 0) does not see."""
    model = free_stack.build_free_stack(1, dtype=torch.float64)
    prompts = sample_prompts(free_stack.TASK, 16, 5, 0, dtype=torch.float64)
    with torch.no_grad():
        model.blocks[0].glu.w1[:, -1] = 1.0
        model.blocks[0].glu.w2[:, -1] = 1.0
        model.blocks[0].lsa.p.copy_(torch.eye(7))
    assert free_stack.stream_agreement(model, prompts)[0] < 0.9


def test_prediction_r2_is_one_for_the_same_prediction_and_zero_for_its_mean():
    values = torch.randn(100, dtype=torch.float64)
    assert free_stack.prediction_r2(values, values) == pytest.approx(1.0)
    assert free_stack.prediction_r2(values, values.mean().expand(100)) == pytest.approx(0.0)
