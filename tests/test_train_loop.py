"""The trainer's loop (``nlicl_lib.training.train.train``) computes what a plain loop computes:
sample, forward, backward, clip, Adam step, one ``loss.item()`` and one finiteness check per
step, to rounding. Its speed-ups (models of one shape trained at once, losses kept on the device
and checked every ``CHECK_EVERY`` steps) change no loss beyond rounding, and a diverging run
must still name its first bad step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from nlicl_lib.core.errors import ConfigError, ForwardOverflowError, TrainingDivergedError
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
    np.testing.assert_allclose(result.loss_history, expected, rtol=FLOAT64_RTOL)
    torch.testing.assert_close(weights(model), weights(reference), rtol=FLOAT64_RTOL, atol=0)
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
    """Three members' gradients stacked on a first axis, one far below the threshold, two above:
    each member's slices are what ``torch.nn.utils.clip_grad_norm_`` makes of them alone (to
    rounding: the norm is summed in another order), the small one untouched."""
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


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_models_trained_together_take_the_steps_they_take_alone(dtype):
    """Three GLU-LSA models in the GD form, two of one shape (different seeds and label noise:
    one mapped pass per step over both) and a deeper one (called as it is, on the same
    statistics), all in one group, trained together and each alone: the same losses and
    weights. In float64 to 1e-12. In float32 the mapped pass rounds its products differently
    from a model called alone, and training carries the last-bit differences on: measured
    1.5e-5 after 60 steps (the third model, alone in its shape both ways, equal to the bit),
    held to 1e-4."""
    tasks = [TaskConfig(kind="poly", input_dim=2, context_length=10, degree=2, noise_std=s)
             for s in (0.0, 0.5, 0.0)]
    shapes = [ModelConfig(kind="glu-lsa"), ModelConfig(kind="glu-lsa"),
              ModelConfig(kind="glu-lsa", depth=2)]
    configs = [TrainConfig(steps=60, batch_size=32, seed=s) for s in (1, 2, 3)]
    rtol = 1e-12 if dtype == torch.float64 else 1e-4
    together = [build_model(c, t, seed=k.seed, dtype=dtype)
                for c, t, k in zip(shapes, tasks, configs, strict=True)]
    results = train(together, tasks, configs, progress=False)
    assert [r.trained_with for r in results] == [3, 3, 3]
    for model, result, shape, task, config in zip(together, results, shapes, tasks, configs,
                                                  strict=True):
        alone = build_model(shape, task, seed=config.seed, dtype=dtype)
        expected = train(alone, task, config, progress=False)
        np.testing.assert_allclose(result.loss_history, expected.loss_history, rtol=rtol)
        torch.testing.assert_close(weights(model), weights(alone), rtol=rtol, atol=rtol)
        assert result.null_loss == expected.null_loss


def test_models_of_other_shapes_or_settings_train_apart():
    """One group per architecture, context length and config (seeds aside); bad arguments are
    refused by name before any step."""
    task = TaskConfig(kind="linear", input_dim=2, context_length=6)
    config = TrainConfig(steps=3, batch_size=8)
    models = [build_model(ModelConfig(), task), build_model(ModelConfig(attention="sparse"), task),
              build_model(ModelConfig(), task, seed=1)]
    results = train(models, task, [config, config, TrainConfig(steps=3, batch_size=8, seed=5)],
                    progress=False)
    assert [r.trained_with for r in results] == [2, 1, 2]
    longer = TaskConfig(kind="linear", input_dim=2, context_length=7)
    results = train(models[:1] + models[2:], [task, longer], config, progress=False)
    assert [r.trained_with for r in results] == [1, 1]
    with pytest.raises(ConfigError) as info:
        train(models, [task, task], config, progress=False)
    assert info.value.param == "task"
    with pytest.raises(ConfigError) as info:
        train(models, task, config, progress=False, callback=lambda step, loss: None)
    assert info.value.param == "callback"
