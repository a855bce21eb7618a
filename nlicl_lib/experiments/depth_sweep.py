r"""GLU-LSA stacks of several shapes (slots $m$, depth $L$) trained together and measured on the
same test contexts, next to the greedy block-coordinate reference
(:func:`~nlicl_lib.theory.depth.greedy_reference`): chapter 5's depth study."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.theory.values import exact_model_loss
from nlicl_lib.training.evaluate import test_loss
from nlicl_lib.training.train import TrainConfig, train


def shape_key(slots: int, depth: int) -> str:
    """The key of a stack of ``depth`` blocks with ``slots`` in a :class:`DepthSweep`."""
    return f"m{slots}-L{depth}"


@dataclass
class DepthSweep:
    r"""Trained GLU-LSA stacks of several shapes (slots $m$, depth $L$), trained together
    (:func:`depth_sweep`); results keyed by :func:`shape_key`.

    ``loss`` and ``std_error``: unnormalised test losses and their standard errors, on the same
    ``test_prompts`` fresh contexts for every model, with the task and the query integrated
    out exactly (:func:`~nlicl_lib.training.evaluate.test_loss`); ``worst_share``: the largest single
    context's share of that sum (near 0 for a light-tailed loss, near 1 when one context
    dominates the mean). ``exact`` holds the exact loss of the depth-1 models
    (Theorem 9 (thm-feature-optimum) with the model's own features and $\Gamma$);
    ``parameters``: the number of trained weights of each model.
    """

    task: TaskConfig
    shapes: list[tuple[int, int]]
    models: dict[str, InContextRegressor]
    loss: dict[str, float]
    std_error: dict[str, float]
    exact: dict[str, float]
    history: dict[str, np.ndarray]
    null_loss: float
    seconds: float
    device: str
    test_prompts: int
    worst_share: dict[str, float]
    parameters: dict[str, int]

    def normalised(self, key: str) -> float:
        return self.loss[key] / self.null_loss


def depth_sweep(task: TaskConfig, shapes: Sequence[tuple[int, int]], train_config: TrainConfig,
                glu_reads: str | None = None, test_prompts: int = 20000,
                device: torch.device | str = "cpu", progress: bool | None = None
                ) -> DepthSweep:
    r"""Train, at once (:func:`~nlicl_lib.training.train.train`), one GLU-LSA stack per
    ``(slots, depth)`` in ``shapes`` (GLUs read $x$ for quadratic tasks, $(x; \text{slots})$ in
    the later blocks of cubic ones; width $h = m$), each from its own default initialisation
    (seed ``train_config.seed``) with peak learning rate ``train_config.learning_rate`` $/L$,
    all on the same prompts. Test losses: :func:`~nlicl_lib.training.evaluate.test_loss`
    on ``test_prompts`` contexts, task and query integrated out exactly."""

    degree = max(task.degree, 2)
    reads = glu_reads or ("x" if degree == 2 else "x+slots")
    shapes = [(check_int("slots", m, minimum=1), check_int("depth", L, minimum=1))
              for m, L in shapes]
    if not shapes:
        raise ConfigError("shapes", "[]", "at least one (slots, depth) pair")
    keys = [shape_key(m, L) for m, L in shapes]
    if len(set(keys)) != len(keys):
        raise ConfigError("shapes", shapes, "distinct (slots, depth) pairs")
    stacks = [build_model(ModelConfig(kind="glu-lsa", depth=L, feature_slots=m,
                                      glu_reads=reads if L > 1 else "x"),
                          task, device, seed=train_config.seed) for m, L in shapes]
    configs = [replace(train_config, learning_rate=train_config.learning_rate / L)
               for _, L in shapes]
    start = time.perf_counter()
    results = train(stacks, task, configs, device, progress)
    seconds = time.perf_counter() - start
    losses = test_loss(stacks, task, test_prompts, seed=train_config.seed, device=device,
                       batch_size=10_000, integrate="task+query")
    models = dict(zip(keys, stacks, strict=True))
    exact = {key: exact_model_loss(model, task) for key, model in models.items() if model.depth == 1}
    exact = {key: value for key, value in exact.items() if value is not None}
    return DepthSweep(
        task, shapes, models,
        {key: loss.mean for key, loss in zip(keys, losses, strict=True)},
        {key: loss.std_error for key, loss in zip(keys, losses, strict=True)},
        exact,
        {key: result.loss_history for key, result in zip(keys, results, strict=True)},
        null_loss(task), seconds, results[0].device, test_prompts,
        {key: loss.worst_share for key, loss in zip(keys, losses, strict=True)},
        {key: sum(p.numel() for p in model.parameters()) for key, model in models.items()},
    )
