"""Sweeps of single models for the chapters' figures: context-length grids, and models of
different kinds trained side by side with the default settings, each measured on the same test
prompts (:func:`~nlicl_lib.training.evaluate.paired_test_loss`) next to what theory says."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.values import TheoryValues, theory_values
from nlicl_lib.training.evaluate import PairedLoss, paired_test_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainResult, train


def context_length_grid(smallest: int = 10, largest: int = 160) -> list[int]:
    """Doubling context lengths from ``smallest`` to ``largest`` (10, 20, 40, 80, 160)."""
    grid, n = [], smallest
    while n <= largest:
        grid.append(n)
        n *= 2
    return grid


@dataclass
class TrainedModel:
    """One trained model of a sweep with its paired test loss and what theory says."""

    task: TaskConfig
    model_config: ModelConfig
    model: InContextRegressor
    training: TrainResult
    test: PairedLoss
    theory: TheoryValues


def train_models(tasks: Sequence[TaskConfig], model_configs: Sequence[ModelConfig], seed: int = 0,
                 device: torch.device | str = "cpu", test_prompts: int = 100_000,
                 **train_overrides) -> list[TrainedModel]:
    """Train ``model_configs[i]`` on ``tasks[i]`` for every ``i`` with
    :func:`~nlicl_lib.training.settings.default_train_config` (``train_overrides`` win, e.g.
    ``steps=``, ``batch_size=``) by :func:`~nlicl_lib.training.train.train` (models of one shape
    and config at once), then measure each on the same ``test_prompts`` test prompts
    (:func:`paired_test_loss`)."""

    if len(tasks) != len(model_configs):
        raise ConfigError("model_configs", len(model_configs), f"one per task ({len(tasks)})")
    device = torch.device(device)
    configs = [default_train_config(t, c, seed=seed, **train_overrides)
               for t, c in zip(tasks, model_configs, strict=True)]
    models = [build_model(c, t, device, seed=seed) for t, c in zip(tasks, model_configs, strict=True)]
    results = train(models, list(tasks), configs, device, False)
    out = []
    for task, config, model, result in zip(tasks, model_configs, models, results, strict=True):
        test = paired_test_loss(model, task, test_prompts, seed, device)
        out.append(TrainedModel(task, config, model, result, test, theory_values(task, config)))
    return out
