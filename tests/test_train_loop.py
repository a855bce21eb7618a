"""The trainer's loop (``nlicl_lib.training.train.train``) computes exactly what a plain loop
computes: sample, forward, backward, clip, Adam step, one ``loss.item()`` and one finiteness
check per step. Its speed-ups (losses kept on the device and checked every ``CHECK_EVERY``
steps, a leaner clipping, Adam's foreach kernels for many tensors) must change no bit of the
loss history or of the weights, and a diverging run must still name its first bad step."""

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
    clip_gradients,
    diagnose_divergence,
    train,
)

# bit for bit in one process: on one torch thread every sum has one order
pytestmark = pytest.mark.usefixtures("one_torch_thread")

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
    """float64, bit for bit: every loss and every final weight. The depth-3 stacks have six
    weight tensors, so their Adam runs the foreach kernels, the others the per-tensor loop."""
    task, model_config, options = CASES[name]
    config = TrainConfig(steps=CHECK_EVERY + 5, batch_size=16, learning_rate=0.05, seed=2,
                         warmup_fraction=0.3, **options)
    model = build_model(model_config, task, seed=2, dtype=torch.float64)
    reference = build_model(model_config, task, seed=2, dtype=torch.float64)
    expected, bad = reference_loop(reference, task, config)
    assert bad is None
    result = train(model, task, config, progress=False)
    assert result.loss_history.dtype == np.float64 and len(result.loss_history) == config.steps
    assert np.array_equal(result.loss_history, expected)
    assert torch.equal(weights(model), weights(reference))
    assert not np.array_equal(expected[:1], expected[-1:])  # it trained


def test_float32_progress_bar_and_callback_change_nothing():
    """float32 too; a progress bar, and a callback (which sees every step's loss, hence checks
    every step), give the same history; a callback returning True stops after that step."""
    task, model_config, options = CASES["lsa-3, linear, onecycle, clip"]
    config = TrainConfig(steps=12, batch_size=16, learning_rate=0.05, seed=1, **options)
    reference = build_model(model_config, task, seed=1)
    expected, _ = reference_loop(reference, task, config)
    seen: list[tuple[int, float]] = []
    model = build_model(model_config, task, seed=1)
    result = train(model, task, config, progress=True,
                   callback=lambda step, loss: seen.append((step, loss)) and None)
    assert np.array_equal(result.loss_history, expected) and not result.stopped_early
    assert seen == list(enumerate(expected.tolist()))
    assert torch.equal(weights(model), weights(reference))
    stop = train(build_model(model_config, task, seed=1), task, config, progress=False,
                 callback=lambda step, loss: step == 4)
    assert stop.stopped_early and stop.steps == 5
    assert np.array_equal(stop.loss_history, expected[:5])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1e-3, 1e3])
def test_clip_gradients_is_torch_clip_grad_norm(dtype, scale):
    """The same numbers as ``torch.nn.utils.clip_grad_norm_``: untouched below the threshold,
    scaled to norm 1 above it."""
    generator = torch.Generator().manual_seed(0)
    shapes = [(6, 6), (6,), (4, 3), (1,)]
    original = [scale * torch.randn(shape, generator=generator, dtype=dtype) for shape in shapes]
    gradients = [gradient.clone() for gradient in original]
    parameters = [torch.nn.Parameter(torch.zeros(shape, dtype=dtype)) for shape in shapes]
    for parameter, gradient in zip(parameters, original, strict=True):
        parameter.grad = gradient.clone()
    torch.nn.utils.clip_grad_norm_(parameters, 1.0)
    clip_gradients(gradients, 1.0)
    for parameter, gradient in zip(parameters, gradients, strict=True):
        assert torch.equal(parameter.grad, gradient)
    if scale < 1:
        assert all(torch.equal(g, o) for g, o in zip(gradients, original, strict=True))
    else:
        norm = torch.linalg.vector_norm(torch.cat([g.flatten() for g in gradients]))
        assert float(norm) == pytest.approx(1.0, rel=1e-5)


def test_divergence_is_found_at_the_plain_loops_step():
    """A too-large rate sends a depth-4 LSA to inf at some step after the first: the trainer,
    which checks only every ``CHECK_EVERY`` steps, names that same step and its rate, and so
    does a run with a callback (checked every step)."""
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
    """The batch of step ``bad`` gets an infinite query label (its embedded prompts stay
    finite): the loss is infinite there and NaN after, and the error names ``bad``, on either
    side of a check, with the onecycle rate of that step."""

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
