r"""Chapter 1's trainings: one LSA layer against the best one-step GD, and LSA stacks of depth $L$
against $L$ tuned GD steps.

- :func:`train_one_layer`: one LSA layer $\mathrm{LSA}(Z) = Z + \frac1n P Z M Z^\top Q Z$ with all of
  $P, Q$ free, trained with the default settings, its Monte Carlo test loss and that of least
  squares (Theorem 5 (thm-linear-optimum): the best layer reaches
  $\mathcal L^* = \frac{d(d+1+\sigma^2)}{n+d+1+\sigma^2}$);
- :func:`train_depth_sweep`: $L$-layer stacks at several noise levels $\sigma$, trained side by
  side, with the Bayes-optimal predictor for $w \sim \mathcal N(0, I_d)$, ridge with
  $n\lambda = \sigma^2$.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from nlicl_lib.core.errors import ConfigError, check_float, check_int
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.predictors import least_squares, ridge
from nlicl_lib.training.evaluate import LossEstimate, test_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainConfig, TrainResult, train


@dataclass
class OneLayerRun:
    """The trained ``model``, its ``training`` record and settings, its Monte Carlo ``test`` loss
    and the ``least_squares`` predictor's, on the same ``task``."""

    task: TaskConfig
    model: InContextRegressor
    train_config: TrainConfig
    training: TrainResult
    test: LossEstimate
    least_squares: LossEstimate


def train_one_layer(task: TaskConfig, seed: int = 0, train_config: TrainConfig | None = None
                    ) -> OneLayerRun:
    """Train one full LSA layer on ``task`` with ``train_config`` (default:
    :func:`~nlicl_lib.training.settings.default_train_config` with ``seed``; ``seed`` also draws the
    weights and the test stream), then estimate its test loss to 0.5% and least squares'
    (float64) to 5%."""
    if not isinstance(task, TaskConfig):
        raise ConfigError("task", type(task).__name__, "a TaskConfig")
    seed = check_int("seed", seed, minimum=0)
    model_config = ModelConfig(kind="lsa", depth=1)
    if train_config is None:
        train_config = default_train_config(task, model_config, seed=seed)
    elif not isinstance(train_config, TrainConfig):
        raise ConfigError("train_config", type(train_config).__name__, "a TrainConfig or None")
    model = build_model(model_config, task, seed=seed)
    training = train(model, task, train_config, progress=False)
    test = test_loss(model, task, relative_error=0.005, seed=seed)
    ls = test_loss(least_squares, task, relative_error=0.05, seed=seed, dtype=torch.float64,
                   max_prompts=40000)
    return OneLayerRun(task, model, train_config, training, test, ls)


@dataclass
class DepthSweep:
    r"""``runs[i] = (sigma, L)`` with its ``models[i]``, ``tasks[i]`` and ``results[i]``;
    ``trained[sigma, L]``: the Monte Carlo test loss; ``bayes[sigma]`` ($\sigma > 0$): ridge with
    $n\lambda = \sigma^2$; ``seconds``: wall time of the training, all runs side by side."""

    runs: list[tuple[float, int]]
    tasks: list[TaskConfig]
    models: list[InContextRegressor]
    results: list[TrainResult]
    trained: dict[tuple[float, int], LossEstimate]
    bayes: dict[float, LossEstimate]
    seconds: float

    @property
    def thread_seconds(self) -> float:
        """Training time summed over the groups of runs trained at once (each run's share)."""
        return sum(r.seconds / r.trained_with for r in self.results)

    def model(self, sigma: float, depth: int) -> InContextRegressor:
        """The trained stack of depth ``depth`` at noise ``sigma``."""
        return self.models[self.runs.index((sigma, depth))]


def train_depth_sweep(input_dim: int, context_length: int, depths: Sequence[int],
                      noise_levels: Sequence[float], train_config: TrainConfig, seed: int = 1
                      ) -> DepthSweep:
    r"""Train a full LSA of every depth $L$ in ``depths`` on linear tasks with label noise $\sigma$
    for every $\sigma$ in ``noise_levels`` (the noise levels of one depth at once, depths side
    by side: :func:`~nlicl_lib.training.train.train`), then estimate each test loss to 1%, and
    the Bayes-optimal loss for $w \sim \mathcal N(0, I_d)$: ridge
    $\hat w = (X^\top X + n\lambda I)^{-1} X^\top y$ with $n\lambda = \sigma^2$."""
    d = check_int("input_dim", input_dim, minimum=1)
    n = check_int("context_length", context_length, minimum=1)
    if not isinstance(train_config, TrainConfig):
        raise ConfigError("train_config", type(train_config).__name__, "a TrainConfig")
    depths = [check_int("depths", L, minimum=1) for L in depths]
    noise_levels = [check_float("noise_levels", s, minimum=0.0) for s in noise_levels]
    if not depths or not noise_levels:
        raise ConfigError("depths, noise_levels", (depths, noise_levels), "at least one of each")
    runs = [(sigma, depth) for sigma in noise_levels for depth in depths]
    tasks = [TaskConfig(kind="linear", input_dim=d, context_length=n, noise_std=sigma)
             for sigma, _ in runs]
    models = [build_model(ModelConfig(kind="lsa", depth=L), t, seed=seed)
              for (_, L), t in zip(runs, tasks, strict=True)]
    start = time.perf_counter()
    results = train(models, tasks, train_config, progress=False)
    seconds = time.perf_counter() - start
    trained = {key: test_loss(model, task, relative_error=0.01, seed=seed)
               for key, model, task in zip(runs, models, tasks, strict=True)}
    bayes = {}
    for sigma in noise_levels:
        if sigma == 0:
            continue  # without noise n > d examples determine w: the Bayes loss is exactly 0
        noisy = TaskConfig(kind="linear", input_dim=d, context_length=n, noise_std=sigma)
        bayes[sigma] = test_loss(lambda p, s=sigma: ridge(p, s**2 / n), noisy, seed=seed,
                                 relative_error=0.01, dtype=torch.float64)
    return DepthSweep(runs, tasks, models, results, trained, bayes, seconds)
