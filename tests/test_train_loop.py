"""The trainer computes what a plain loop computes (sample, forward, backward, clip, Adam
step), to rounding, and a diverging run names its first bad step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nlicl_lib.core.errors import ForwardOverflowError, TrainingDivergedError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.training import train as train_module
from nlicl_lib.training.train import (
    CHECK_EVERY,
    TrainConfig,
    clip_per_member,
    diagnose_divergence,
    train,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# The trainer maps the model's forward pass over a stack of models (vmap) and clips each
# member's gradient with its own norm: the same operations as the plain loop, summed in other
# orders. Over these 37 steps float64 runs agree to this relative tolerance (measured: 1e-13
# and below), float32 runs over 12 steps to the second.
FLOAT64_RTOL = 1e-11
FLOAT32_RTOL = 1e-4

LINEAR = TaskConfig(kind="linear", input_dim=3, context_length=8)
POLY = TaskConfig(kind="poly", input_dim=2, context_length=8, degree=2)


def reference_loop(model: torch.nn.Module, task: TaskConfig, config: TrainConfig
                   ) -> tuple[np.ndarray, int | None]:
    """The straightforward loop: ``(loss history, first step whose loss is not finite)``; it
    stops before the update of that step, as the trainer first did."""
    dtype = next(model.parameters()).dtype
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    normaliser = null_loss(task)
    history = []
    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = config.learning_rate_at(step)
        prompts = sample_prompts(task, config.batch_size, config.seed, step, dtype=dtype)
        loss = torch.mean((model(prompts.embed(model.feature_slots)) - prompts.query_label) ** 2)
        optimizer.zero_grad(set_to_none=True)
        (loss / normaliser).backward()
        if config.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        history.append(loss.item())
        if not math.isfinite(history[-1]):
            return np.array(history), step
        optimizer.step()
    return np.array(history), None


def weights(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([parameter.detach().flatten() for parameter in model.parameters()])


CASES = {
    "lsa-1, linear, constant": (LINEAR, ModelConfig(), dict(schedule="constant", grad_clip=None)),
    "lsa-3, linear, onecycle, clip": (LINEAR, ModelConfig(depth=3), dict(grad_clip=1.0)),
    "lsa-1, poly, cosine": (POLY, ModelConfig(), dict(schedule="cosine", grad_clip=None)),
    "lsa-3, poly, onecycle, clip": (POLY, ModelConfig(depth=3), dict(grad_clip=0.05)),
    "glu-lsa-1, poly, onecycle, clip": (POLY, ModelConfig(kind="glu-lsa"), dict(grad_clip=0.05)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_history_and_weights_are_those_of_the_plain_loop(name):
    task, model_config, options = CASES[name]
    config = TrainConfig(steps=CHECK_EVERY + 5, batch_size=16, learning_rate=0.05, seed=2,
                         warmup_fraction=0.3, **options)
    model = build_model(model_config, task, seed=2, dtype=torch.float64)
    reference = build_model(model_config, task, seed=2, dtype=torch.float64)
    expected, bad = reference_loop(reference, task, config)
    assert bad is None
    result = train(model, task, config, progress=False)
    assert result.loss_history.dtype == np.float64 and len(result.loss_history) == config.steps
    np.testing.assert_allclose(result.loss_history, expected, rtol=FLOAT64_RTOL)
    torch.testing.assert_close(weights(model), weights(reference), rtol=FLOAT64_RTOL, atol=0)
    assert not np.array_equal(expected[:1], expected[-1:])  # it trained


def test_float32_progress_bar_and_callback_change_nothing():
    task, model_config, options = CASES["lsa-3, linear, onecycle, clip"]
    config = TrainConfig(steps=12, batch_size=16, learning_rate=0.05, seed=1, **options)
    reference = build_model(model_config, task, seed=1)
    expected, _ = reference_loop(reference, task, config)
    seen: list[tuple[int, float]] = []
    model = build_model(model_config, task, seed=1)
    result = train(model, task, config, progress=True,
                   callback=lambda step, loss: seen.append((step, loss)) and None)
    np.testing.assert_allclose(result.loss_history, expected, rtol=FLOAT32_RTOL)
    assert not result.stopped_early
    assert seen == list(enumerate(result.loss_history.tolist()))
    torch.testing.assert_close(weights(model), weights(reference), rtol=FLOAT32_RTOL,
                               atol=FLOAT32_RTOL)
    stop = train(build_model(model_config, task, seed=1), task, config, progress=False,
                 callback=lambda step, loss: step == 4)
    assert stop.stopped_early and stop.steps == 5
    assert np.array_equal(stop.loss_history, result.loss_history[:5])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_clip_per_member_is_torch_clip_grad_norm_on_each_member(dtype):
    generator = torch.Generator().manual_seed(0)
    shapes = [(6, 6), (6,), (4, 3), (1,)]
    scales = [1e-3, 1e3, 3.0]
    stacked = [torch.stack([s * torch.randn(shape, generator=generator, dtype=dtype)
                            for s in scales]) for shape in shapes]
    clipped = [g.clone() for g in stacked]
    clip_per_member(clipped, 1.0)
    for e, scale in enumerate(scales):
        parameters = [torch.nn.Parameter(torch.zeros(shape, dtype=dtype)) for shape in shapes]
        for parameter, gradient in zip(parameters, stacked, strict=True):
            parameter.grad = gradient[e].clone()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        tolerance = 1e-6 if dtype == torch.float32 else 1e-14
        for parameter, gradient in zip(parameters, clipped, strict=True):
            torch.testing.assert_close(gradient[e], parameter.grad, rtol=tolerance, atol=0)
        if scale < 1:
            assert all(torch.equal(c[e], g[e]) for c, g in zip(clipped, stacked, strict=True))
        else:
            norm = torch.linalg.vector_norm(torch.cat([c[e].flatten() for c in clipped]))
            assert float(norm) == pytest.approx(1.0, rel=1e-5)


def test_divergence_is_found_at_the_plain_loops_step():
    """Checked only every CHECK_EVERY steps, the trainer names the plain loop's bad step."""
    task = TaskConfig(kind="linear", input_dim=2, context_length=6)
    model_config = ModelConfig(depth=4, attention_init_std=0.3)
    config = TrainConfig(steps=80, batch_size=16, learning_rate=10.0, schedule="constant",
                         grad_clip=None)
    history, bad = reference_loop(build_model(model_config, task, dtype=torch.float64), task,
                                  config)
    assert bad is not None and 1 < bad < config.steps - 1 and bad % CHECK_EVERY != 0
    # what the plain loop reports: that step's prompts through the initial weights
    prompts = sample_prompts(task, config.batch_size, config.seed, bad, dtype=torch.float64)
    expected = diagnose_divergence(build_model(model_config, task, dtype=torch.float64),
                                   prompts.embed(), bad, history[bad], config.learning_rate)
    for callback in (None, lambda step, loss: None):
        with pytest.raises(TrainingDivergedError) as info:
            train(build_model(model_config, task, dtype=torch.float64), task, config,
                  progress=False, callback=callback)
        assert type(info.value) is type(expected) and str(info.value) == str(expected)
        assert info.value.step == bad and info.value.loss == history[bad]
        assert info.value.learning_rate == config.learning_rate_at(bad)
        assert f"at step {bad} " in str(info.value)


@pytest.mark.parametrize("bad", [0, CHECK_EVERY - 1, CHECK_EVERY + 3])
def test_an_infinite_loss_is_reported_at_its_step(monkeypatch, bad):
    """An infinite label at step ``bad``: the error names that step and its rate."""

    def poisoned(task, batch_size, seed, step, *args, **kwargs) -> Prompts:
        prompts = sample_prompts(task, batch_size, seed, step, *args, **kwargs)
        if step == bad:
            prompts.y[:, -1] = math.inf
        return prompts

    monkeypatch.setattr(train_module, "sample_prompts", poisoned)
    config = TrainConfig(steps=2 * CHECK_EVERY + 1, batch_size=8, learning_rate=0.01)
    with pytest.raises(TrainingDivergedError) as info:
        train(build_model(ModelConfig(), LINEAR), LINEAR, config, progress=False)
    assert not isinstance(info.value, ForwardOverflowError)
    assert info.value.step == bad and info.value.loss == math.inf
    assert info.value.learning_rate == config.learning_rate_at(bad)


