"""The one stacked trainer (nlicl_lib.training.stacked) and the one test-loss estimator.

Every member of a stack must follow the trajectory ``train`` gives it alone on the same prompts
(float64, to 1e-10), the two stacked modules must train alike where both apply, and the
per-member Adam must be ``torch.optim.Adam`` bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import nlicl_lib.training.train as train_module
from nlicl_lib.core.errors import ConfigError, TrainingDivergedError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.training.ensemble import StackedGLULSA, ensemble_test_loss, train_ensemble
from nlicl_lib.training.evaluate import estimate_loss, paired_test_loss, paired_test_losses
from nlicl_lib.training.one_block import Run, _StackedBlocks, run_groups, train_one_block_runs
from nlicl_lib.training.stacked import (
    MemberAdam,
    MemberGroup,
    clip_per_member,
    train_stacked,
    truncate_context,
)
from nlicl_lib.training.train import TrainConfig, train

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def quadratic(n: int, degree: int = 2) -> TaskConfig:
    return TaskConfig(kind="poly", input_dim=3, context_length=n, degree=degree)


# runs of a chapter-3 sweep: several n on one prompt seed, another prompt seed, another degree
RUNS = [Run(quadratic(20), seed=3, data_seed=0), Run(quadratic(10), seed=4, data_seed=0),
        Run(quadratic(20), seed=5), Run(quadratic(10, degree=1), seed=6, data_seed=0)]


def truncated_sampler(longest: int):
    """``sample_prompts`` drawing the prompts of context length ``longest`` and truncating them
    to the task's own: what a member of a group with that longest context sees."""
    original = sample_prompts

    def sample(task, batch_size, seed, step, device="cpu", *args, **kwargs):
        prompts = original(replace(task, context_length=longest), batch_size, seed, step, device,
                           *args, **kwargs)
        return truncate_context(prompts, task.context_length)
    return sample


@pytest.mark.parametrize("grad_clip", [0.5, None])
def test_one_block_runs_follow_train_alone(grad_clip, monkeypatch):
    config = TrainConfig(steps=10, batch_size=32, learning_rate=0.02, grad_clip=grad_clip)
    joint = train_one_block_runs(RUNS, config, dtype=F64, progress=False)
    for run, model, record in zip(RUNS, joint.models, joint.training, strict=True):
        longest = max(r.task.context_length for r in RUNS
                      if r.prompt_seed == run.prompt_seed and r.task.degree == run.task.degree)
        monkeypatch.setattr(train_module, "sample_prompts", truncated_sampler(longest))
        alone = build_model(run.model, run.task, seed=run.seed, dtype=F64)
        history = train(alone, run.task, replace(config, seed=run.prompt_seed), progress=False)
        np.testing.assert_allclose(record.loss_history, history.loss_history, rtol=1e-10)
        for a, b in zip(alone.parameters(), model.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_the_two_stacked_modules_train_alike():
    """The statistics stack and the padded token stack, on the same groups (truncated contexts
    included): the same histories and weights up to float64 rounding."""
    config = TrainConfig(steps=10, batch_size=32, learning_rate=0.02, grad_clip=0.5)
    groups = run_groups(RUNS)
    assert [(g.members, g.context_lengths) for g in groups] == [((0, 1), (20, 10)), ((2,), (20,)), ((3,), (10,))]
    normalisers = [null_loss(run.task) for run in RUNS]
    results, weights = [], []
    for kind in ("statistics", "padded"):
        models = [build_model(r.model, r.task, seed=r.seed, dtype=F64) for r in RUNS]
        stack = _StackedBlocks(models) if kind == "statistics" else StackedGLULSA(models, 3)
        results.append(train_stacked(stack, groups, config, normalisers, progress=False))
        stack.load_into(models) if kind == "statistics" else stack.write_back(models)
        weights.append(torch.cat([p.detach().flatten() for m in models for p in m.parameters()]))
    np.testing.assert_allclose(results[0].loss_history, results[1].loss_history, rtol=1e-12)
    torch.testing.assert_close(weights[0], weights[1], rtol=1e-11, atol=1e-13)


ENSEMBLES = {
    "quadratic, depths 1-3": (quadratic(10), [
        ModelConfig(kind="glu-lsa", feature_slots=3, glu_width=6),
        ModelConfig(kind="glu-lsa", depth=2, feature_slots=2, glu_width=4),
        ModelConfig(kind="glu-lsa", depth=3, feature_slots=2, attention_init_std=0.1)]),
    "cubic, GLUs reading the slots": (TaskConfig(kind="poly", input_dim=2, context_length=10, degree=3), [
        ModelConfig(kind="glu-lsa", feature_slots=3),
        ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="x+slots")]),
}


@pytest.mark.parametrize("grad_clip", [1.0, None])
@pytest.mark.parametrize("case", list(ENSEMBLES))
def test_ensemble_members_follow_train_alone(case, grad_clip):
    """As depth_sweep calls it: members of several depths, peak rate lr / L each."""
    task, members = ENSEMBLES[case]
    config = TrainConfig(steps=10, batch_size=32, learning_rate=0.02, grad_clip=grad_clip, seed=2)
    rates = [config.learning_rate / m.depth for m in members]
    seeds = list(range(len(members)))
    result = train_ensemble(task, members, config, seeds=seeds, learning_rates=rates, dtype=F64,
                            progress=False)
    for k, (member, seed, rate) in enumerate(zip(members, seeds, rates, strict=True)):
        alone = build_model(member, task, seed=seed, dtype=F64)
        history = train(alone, task, replace(config, learning_rate=rate), progress=False)
        np.testing.assert_allclose(result.loss_history[k], history.loss_history, rtol=1e-10)
        for a, b in zip(alone.parameters(), result.models[k].parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_member_adam_is_torch_adam_bit_for_bit():
    """With float64 rates the per-member Adam rounds exactly as torch.optim.Adam (float32
    weights, a one-cycle schedule, either member axis)."""
    config = TrainConfig(steps=40, learning_rate=0.01)
    gen = torch.Generator().manual_seed(0)
    for member_dim in (0, 1):
        start = torch.randn(2, 5, 4, 3, generator=gen)
        grads = [torch.randn(2, 5, 4, 3, generator=gen) * 10.0 ** (t % 5 - 2) for t in range(config.steps)]
        reference = torch.nn.Parameter(start.clone())
        torch_adam = torch.optim.Adam([reference], lr=config.learning_rate)
        ours = torch.nn.Parameter(start.clone())
        member_adam = MemberAdam([ours], member_dim)
        members = start.shape[member_dim]
        for step, grad in enumerate(grads):
            rate = config.learning_rate_at(step)
            torch_adam.param_groups[0]["lr"] = rate
            reference.grad, ours.grad = grad.clone(), grad.clone()
            torch_adam.step()
            member_adam.step([torch.full((members,), rate, dtype=F64)], None)
            assert torch.equal(reference.detach(), ours.detach()), (member_dim, step)


def test_clipping_per_member_is_clip_grad_norm_of_each_member():
    gen = torch.Generator().manual_seed(1)
    grads = [torch.randn(4, 3, 2, generator=gen, dtype=F64) * s for s in (0.1, 1.0, 10.0)]
    grads.append(torch.randn(4, 6, generator=gen, dtype=F64) * 0.01)
    clipped = [g.clone() for g in grads]
    clip_per_member(clipped, 1.5)
    for e in range(4):
        alone = [torch.nn.Parameter(torch.zeros_like(g[e])) for g in grads]
        for p, g in zip(alone, grads, strict=True):
            p.grad = g[e].clone()
        torch.nn.utils.clip_grad_norm_(alone, 1.5)
        for p, c in zip(alone, clipped, strict=True):
            torch.testing.assert_close(p.grad, c[e], rtol=1e-14, atol=0.0)


def test_a_diverging_member_stops_the_run_or_is_frozen_alone():
    task = quadratic(10)
    config = TrainConfig(steps=20, batch_size=32, learning_rate=0.01, seed=1)
    member = ModelConfig(kind="glu-lsa", depth=2, feature_slots=2)
    both = train_ensemble(task, [member, member], config, seeds=[0, 0], learning_rates=[0.01, 1e4],
                          progress=False)
    good = train_ensemble(task, [member], config, seeds=[0], learning_rates=[0.01], progress=False)
    assert both.diverged == [False, True] and "learning rate" in both.divergence[1]
    step = int(np.flatnonzero(np.isnan(both.loss_history[1]))[0])
    assert 0 < step and np.isfinite(both.loss_history[1, :step]).all()
    assert np.isnan(both.loss_history[1, step:]).all()
    np.testing.assert_allclose(both.loss_history[0], good.loss_history[0], rtol=1e-6)
    # the same members, stopping at the first non-finite loss instead
    models = [build_model(member, task, seed=0) for _ in range(2)]
    with pytest.raises(TrainingDivergedError) as error:
        train_stacked(StackedGLULSA(models, 3), [MemberGroup(task, config.seed, (0, 1))], config,
                      [null_loss(task)] * 2, learning_rates=[0.01, 1e4], progress=False)
    assert error.value.step == step
    assert math.isclose(error.value.learning_rate, 1e4 * config.learning_rate_at(step) / 0.01, rel_tol=1e-6)


def test_bad_groups_and_settings_are_refused_before_training():
    task = quadratic(10)
    models = [build_model(ModelConfig(kind="glu-lsa"), task, seed=s) for s in range(2)]
    stack = _StackedBlocks(models)
    config = TrainConfig(steps=1, batch_size=4)
    norm = [1.0, 1.0]
    bad_calls = [
        lambda: train_stacked(stack, [MemberGroup(task, 0, (0,))], config, norm),  # member 1 missing
        lambda: train_stacked(stack, [MemberGroup(task, 0, (0, 1)), MemberGroup(task, 1, (1,))], config, norm),
        lambda: train_stacked(stack, [MemberGroup(task, 0, (0, 1))], config, [1.0]),
        lambda: train_stacked(stack, [MemberGroup(task, 0, (0, 1))], config, norm, learning_rates=[0.1, 0.0]),
        lambda: train_stacked(stack, [MemberGroup(task, 0, (0, 1))], config, norm, trainable={"w4": [1, 1]}),
        lambda: train_stacked(stack, [MemberGroup(task, 0, (0, 1))], {"steps": 1}, norm),
        lambda: MemberGroup(task, 0, (0, 1), context_lengths=(10, 11)),
        lambda: MemberGroup(task, 0, (0, 1), context_lengths=(10,)),
    ]
    before = [p.detach().clone() for p in stack.parameters()]
    for call in bad_calls:
        with pytest.raises(ConfigError):
            call()
    assert all(torch.equal(a, b) for a, b in zip(before, stack.parameters(), strict=True))


def test_one_estimator_for_one_model_and_for_an_ensemble():
    """ensemble_test_loss, paired_test_loss and estimate_loss (run to a fixed count) are the
    same numbers on the same prompts, bit for bit."""
    task = quadratic(10)
    models = [build_model(ModelConfig(kind="glu-lsa", depth=L, feature_slots=2), task, seed=L) for L in (1, 2)]
    mean, error, samples = ensemble_test_loss(models, task, num_prompts=1200, batch_size=500,
                                              return_samples=True)
    assert samples.shape == (2, 1200)
    together = paired_test_losses(models, task, 1200, batch_size=500, integrate="task+query")
    for k, model in enumerate(models):
        alone = paired_test_loss(model, task, 1200, batch_size=500, integrate="task+query")
        assert alone == together[k]
        assert (mean[k], error[k]) == (alone.mean, alone.std_error)
        stopped = estimate_loss(model, task, integrate="task+query", batch_size=500, min_prompts=1500,
                                max_prompts=1500)
        check = paired_test_loss(model, task, 1500, batch_size=500, integrate="task+query")
        assert (stopped.mean, stopped.std_error) == (check.mean, check.std_error)
    # plain Monte Carlo: the models one by one or run as one stack see the same prompts
    plain = paired_test_losses(models, task, 1000, batch_size=400)
    stacked, _ = ensemble_test_loss(models, task, num_prompts=1000, batch_size=400, integrate="none")
    np.testing.assert_allclose([p.mean for p in plain], stacked, rtol=1e-5)
    assert plain[0] == paired_test_loss(models[0], task, 1000, batch_size=400)
