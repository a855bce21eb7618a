r"""GLU-LSA stacks of several shapes (slots $m$, depth $L$) trained together in one ensemble and
measured on the same test contexts, next to the greedy block-coordinate reference
(:func:`~nlicl_lib.theory.depth.greedy_reference`): chapter 5's depth study."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.models import InContextRegressor, ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.values import exact_model_loss
from nlicl_lib.training.ensemble import ensemble_test_loss, train_ensemble
from nlicl_lib.training.train import TrainConfig


def shape_key(slots: int, depth: int) -> str:
    """The key of a stack of ``depth`` blocks with ``slots`` in a :class:`DepthSweep`."""
    return f"m{slots}-L{depth}"


@dataclass
class DepthSweep:
    r"""Trained GLU-LSA stacks of several shapes (slots $m$, depth $L$), trained together
    (:func:`depth_sweep`); results keyed by :func:`shape_key`.

    ``loss`` and ``std_error``: unnormalised test losses and their standard errors, on the same
    ``test_prompts`` fresh contexts for every model, with the task and the query integrated
    out exactly (:func:`context_conditional_loss`); ``worst_share``: the largest single
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
    diverged: dict[str, bool]
    worst_share: dict[str, float]
    parameters: dict[str, int]

    def normalised(self, key: str) -> float:
        return self.loss[key] / self.null_loss


def depth_sweep(task: TaskConfig, shapes: Sequence[tuple[int, int]], train_config: TrainConfig,
                glu_reads: str | None = None, test_prompts: int = 20000,
                device: torch.device | str = "cpu", progress: bool | None = None
                ) -> DepthSweep:
    r"""Train, in one ensemble (:func:`nlicl_lib.training.ensemble.train_ensemble`), one GLU-LSA stack per
    ``(slots, depth)`` in ``shapes`` (GLUs read $x$ for quadratic tasks, $(x; \text{slots})$ in
    the later blocks of cubic ones; width $h = m$), each from its own default initialisation
    with peak learning rate ``train_config.learning_rate`` $/L$, all on the same prompts. Test
    losses: :func:`~nlicl_lib.training.ensemble.ensemble_test_loss` on ``test_prompts`` contexts, task and
    query integrated out exactly."""

    degree = max(task.degree, 2)
    reads = glu_reads or ("x" if degree == 2 else "x+slots")
    shapes = [(check_int("slots", m, minimum=1), check_int("depth", L, minimum=1))
              for m, L in shapes]
    if not shapes:
        raise ConfigError("shapes", "[]", "at least one (slots, depth) pair")
    keys = [shape_key(m, L) for m, L in shapes]
    if len(set(keys)) != len(keys):
        raise ConfigError("shapes", shapes, "distinct (slots, depth) pairs")
    members = [ModelConfig(kind="glu-lsa", depth=L, feature_slots=m, glu_reads=reads if L > 1 else "x")
               for m, L in shapes]
    rates = [train_config.learning_rate / L for _, L in shapes]
    result = train_ensemble(task, members, train_config, learning_rates=rates, device=device,
                            progress=progress)
    mean, error, samples = ensemble_test_loss(result.models, task, num_prompts=test_prompts,
                                              seed=train_config.seed, device=device,
                                              return_samples=True)
    worst = samples.max(axis=1) / samples.sum(axis=1)
    models = dict(zip(keys, result.models, strict=True))
    exact = {}
    for key, model in models.items():
        value = exact_model_loss(model, task) if model.depth == 1 else None
        if value is not None:
            exact[key] = value
    return DepthSweep(
        task, shapes, models,
        dict(zip(keys, map(float, mean), strict=True)),
        dict(zip(keys, map(float, error), strict=True)),
        exact,
        dict(zip(keys, result.loss_history, strict=True)),
        result.null_loss, result.seconds, result.device, test_prompts,
        dict(zip(keys, result.diverged, strict=True)),
        dict(zip(keys, map(float, worst), strict=True)),
        {key: sum(p.numel() for p in model.parameters()) for key, model in models.items()},
    )
