"""Every model trained with others takes the steps it takes alone (float64, to 1e-10), and the
one test-loss estimator gives each model what it gives alone."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.training.evaluate import test_loss
from nlicl_lib.training.train import TrainConfig, train

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def quadratic(n: int, degree: int = 2) -> TaskConfig:
    return TaskConfig(kind="poly", input_dim=3, context_length=n, degree=degree)


# (task, model, initial seed, prompt seed): chapter 3's sweep (several degrees, two prompt
# seeds, two initialisations), chapter 4's and 5's (other slots, widths and depths), and stacks
# out of the GD form (GLUs reading the slots; full attention)
RUNS = {
    "one-block sweep": [
        (quadratic(20), ModelConfig(kind="glu-lsa", glu_init="large"), 3, 0),
        (quadratic(20), ModelConfig(kind="glu-lsa", glu_init="small"), 4, 0),
        (quadratic(20), ModelConfig(kind="glu-lsa", glu_init="large"), 5, 1),
        (quadratic(20, degree=1), ModelConfig(kind="glu-lsa", glu_init="large"), 6, 0)],
    "shapes and depths": [
        (quadratic(10), ModelConfig(kind="glu-lsa", feature_slots=3, glu_width=6), 0, 2),
        (quadratic(10), ModelConfig(kind="glu-lsa", feature_slots=3, glu_width=6), 1, 2),
        (quadratic(10), ModelConfig(kind="glu-lsa", depth=2, feature_slots=2, glu_width=4), 2, 2),
        (quadratic(10), ModelConfig(kind="glu-lsa", depth=3, feature_slots=2,
                                    attention_init_std=0.1), 3, 2)],
    "token path": [
        (TaskConfig(kind="poly", input_dim=2, context_length=10, degree=3),
         ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="x+slots"), 0, 2),
        (TaskConfig(kind="poly", input_dim=2, context_length=10, degree=3),
         ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="x+slots"), 1, 3),
        (TaskConfig(kind="linear", input_dim=2, context_length=10),
         ModelConfig(kind="lsa", depth=2), 2, 2)],
}


@pytest.mark.parametrize("grad_clip", [0.5, None])
@pytest.mark.parametrize("case", list(RUNS))
def test_models_trained_together_follow_train_alone(case, grad_clip):
    config = TrainConfig(steps=10, batch_size=32, learning_rate=0.02, grad_clip=grad_clip)
    runs = RUNS[case]
    models = [build_model(m, t, seed=s, dtype=F64) for t, m, s, _ in runs]
    configs = [replace(config, seed=seed) for *_, seed in runs]
    together = train(models, [t for t, *_ in runs], configs, progress=False)
    for (task, model_config, seed, _), model, record, setting in zip(runs, models, together,
                                                                    configs, strict=True):
        alone = build_model(model_config, task, seed=seed, dtype=F64)
        history = train(alone, task, setting, progress=False)
        np.testing.assert_allclose(record.loss_history, history.loss_history, rtol=1e-10)
        for a, b in zip(alone.parameters(), model.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_one_estimator_for_one_model_and_for_several():
    task = quadratic(10)
    models = [build_model(ModelConfig(kind="glu-lsa", depth=L, feature_slots=2), task, seed=L)
              for L in (1, 2)]
    together, samples = test_loss(models, task, 1200, batch_size=500, integrate="task+query",
                                  return_samples=True)
    assert samples.shape == (2, 1200)
    for k, model in enumerate(models):
        alone = test_loss(model, task, 1200, batch_size=500, integrate="task+query")
        assert alone == together[k]
        assert alone.worst_share == pytest.approx(samples[k].max() / samples[k].sum(), rel=1e-12)
        stopped = test_loss(model, task, relative_error=1e-9, batch_size=500, min_prompts=1500,
                            max_prompts=1500, integrate="task+query")
        check = test_loss(model, task, 1500, batch_size=500, integrate="task+query")
        assert (stopped.mean, stopped.std_error, stopped.num_prompts) == (
            check.mean, check.std_error, 1500)
    plain = test_loss(models, task, 1000, batch_size=400)
    assert plain[0] == test_loss(models[0], task, 1000, batch_size=400)
    with pytest.raises(ConfigError) as info:
        test_loss(models, task, 1000, relative_error=0.01)
    assert info.value.param == "num_prompts"
