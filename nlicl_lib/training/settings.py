"""The one source of training settings: :func:`default_train_config` gives the steps, batch and
learning rate for a task and a model; every page, panel, sweep and the CLI starts from it and
states its overrides."""

from __future__ import annotations

from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.training.train import TrainConfig


def default_train_config(task: TaskConfig, model_config: ModelConfig, **overrides
                         ) -> TrainConfig:
    """Settings that converge for each model kind (checked in the tests); ``overrides`` win.

    Deeper stacks get a learning rate divided by the depth: the loss is a polynomial of degree
    about $2L+1$ in the weights, and a rate that suits one layer sends a deep LSA to NaN.
    GLU-LSA trains at half the LSA rate: the weakest feature direction of a GLU grows only
    slowly out of its initial value, and gradient noise at a larger rate can kill it for good
    (chapter 3 measures this; a quarter of the rate is too slow for it to grow at all).
    Deep GLU-LSA stacks at short contexts (n = 20) train to a low loss on typical prompts, but
    their test loss rests on rare contexts with unusually large empirical moments, on which the
    fixed steps overshoot (chapter 5); half the rate, twice the batch or no gradient clipping
    did not change that at depth 8 (issue 11), a longer context (n = 100) does.
    """
    config = model_config.resolved(task)
    if config.kind == "lsa":
        base = {"steps": 600, "batch_size": 2000, "learning_rate": 0.02 / config.depth}
    else:
        base = {"steps": 1000, "batch_size": 1000, "learning_rate": 0.01 / config.depth}
    base.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig(**base)
