r"""Chapter 3's training and baselines: one GLU-LSA block ($m = h = p_2$) trained on polynomial
tasks, each run's exact test loss, and tuned kernel ridge regression.

All blocks of the page train together (:func:`~nlicl_lib.training.train.train`: the blocks of one
context length in one pass per step over the statistics of their prompts):

- the **grid**: every target degree $k$ and context length $n$, several seeds, ``"large"``
  GLU initialisation, prompts from data seed 0;
- the **initialisations**: the quadratic task at $n = 20$, each GLU initialisation with the same
  seeds, prompts from data seed 0;
- the **exercise runs** (Exercise 3.2): each initialisation with initialisation and prompts both
  from seed 1.

A one-block model's test loss is exact: its GLU writes $s(x) = C\phi_2(x)$, so it is one GD step
on $(x; s(x))$ with its own $\Gamma$ and Theorem thm-feature-optimum gives its loss
(:func:`~nlicl_lib.theory.values.exact_model_loss`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.tables import ResultTable
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.baselines import TunedRidge, tuned_kernel_ridge
from nlicl_lib.theory import closed_forms, values
from nlicl_lib.training.train import TrainConfig, TrainResult, train

GLU_INITS = ("small", "normal", "large")
"""The GLU initialisations of ``ModelConfig.glu_init`` the page compares."""


def context_length_grid(smallest: int = 10, largest: int = 160) -> list[int]:
    """Doubling context lengths from ``smallest`` to ``largest`` (10, 20, 40, 80, 160)."""
    grid, n = [], smallest
    while n <= largest:
        grid.append(n)
        n *= 2
    return grid


def _task(degree: int, context_length: int, input_dim: int = 3) -> TaskConfig:
    return TaskConfig(kind="poly", input_dim=input_dim, context_length=context_length, degree=degree)


@dataclass(frozen=True)
class Run:
    """One block of the study: its ``task`` and ``model``, the seed of its initial weights
    (``seed``) and of its training prompts (``data_seed``)."""

    task: TaskConfig
    model: ModelConfig
    seed: int
    data_seed: int


@dataclass
class GluKernelStudy:
    """The page's trained blocks: ``grid_runs``, ``init_runs`` and ``exercise_runs`` in this
    order in ``models`` and ``training``; ``exact``: each run's exact test loss; ``seconds``:
    the wall time of training them all."""

    grid_runs: list[Run]
    init_runs: list[Run]
    exercise_runs: list[Run]
    models: list[InContextRegressor]
    training: list[TrainResult]
    exact: list[float]
    seconds: float
    device: str

    @property
    def runs(self) -> list[Run]:
        return self.grid_runs + self.init_runs + self.exercise_runs

    def _part(self, start: int, stop: int) -> list[tuple[Run, InContextRegressor, float]]:
        return list(zip(self.runs[start:stop], self.models[start:stop], self.exact[start:stop],
                        strict=True))

    def grid(self) -> dict[tuple[int, int], list[float]]:
        r"""Test loss / $\mathbb E[y^2]$ of each grid run, keyed ``(degree, context_length)``, one
        entry per seed."""
        grid: dict[tuple[int, int], list[float]] = {}
        for run, _, loss in self._part(0, len(self.grid_runs)):
            task = run.task
            grid.setdefault((task.degree, task.context_length), []).append(
                loss / closed_forms.null_loss(task))
        return grid

    def by_init(self, optimum_loss: float
                ) -> tuple[dict[str, list[float]], dict[str, list[InContextRegressor]]]:
        r"""The initialisation runs per GLU initialisation: loss / ``optimum_loss`` ($\mathcal L^*$)
        and the trained models, in seed order."""
        first = len(self.grid_runs)
        inits = list(dict.fromkeys(run.model.glu_init for run in self.init_runs))
        ratios: dict[str, list[float]] = {init: [] for init in inits}
        models: dict[str, list[InContextRegressor]] = {init: [] for init in inits}
        for run, model, loss in self._part(first, first + len(self.init_runs)):
            ratios[run.model.glu_init].append(loss / optimum_loss)
            models[run.model.glu_init].append(model)
        return ratios, models

    def exercise_blocks(self) -> tuple[dict[str, InContextRegressor], dict[str, float]]:
        """Exercise 3.2's blocks and their exact losses, per GLU initialisation."""
        first = len(self.grid_runs) + len(self.init_runs)
        part = self._part(first, len(self.runs))
        return ({run.model.glu_init: model for run, model, _ in part},
                {run.model.glu_init: loss for run, _, loss in part})


def train_glu_kernel_study(quadratic: TaskConfig, contexts: Sequence[int], degrees: Sequence[int],
                           grid_seeds: Sequence[int], inits: Sequence[str], init_seeds: Sequence[int],
                           config: TrainConfig) -> GluKernelStudy:
    r"""Train the page's blocks together (see the module docstring) with ``config`` and compute
    each one's exact test loss. ``quadratic``: the task of the initialisation and exercise runs."""
    for name, value in [("contexts", contexts), ("degrees", degrees), ("grid_seeds", grid_seeds),
                        ("inits", inits), ("init_seeds", init_seeds)]:
        if len(value) == 0:
            raise ConfigError(name, value, "a non-empty list")
    bad = [init for init in inits if init not in GLU_INITS]
    if bad:
        raise ConfigError("inits", list(inits), f"initialisations among {GLU_INITS}")
    large_init = ModelConfig(kind="glu-lsa", glu_init="large")
    grid_runs = [Run(_task(k, n), large_init, seed=s, data_seed=0)
                 for k in degrees for n in contexts for s in grid_seeds]
    init_runs = [Run(quadratic, ModelConfig(kind="glu-lsa", glu_init=init), seed=s, data_seed=0)
                 for init in inits for s in init_seeds]
    # Exercise 3.2's settings: initialisation and prompts both from seed 1
    exercise_runs = [Run(quadratic, ModelConfig(kind="glu-lsa", glu_init=init), seed=1, data_seed=1)
                     for init in inits]
    runs = grid_runs + init_runs + exercise_runs
    models = [build_model(run.model, run.task, seed=run.seed) for run in runs]
    start = time.perf_counter()
    training = train(models, [run.task for run in runs],
                     [replace(config, seed=run.data_seed) for run in runs], progress=False)
    seconds = time.perf_counter() - start
    exact = [values.exact_model_loss(model, run.task) for run, model in zip(runs, models, strict=True)]
    return GluKernelStudy(grid_runs, init_runs, exercise_runs, models, training, exact, seconds,
                          training[0].device)


def kernel_ridge_sweep(degrees: Sequence[int], contexts: Sequence[int], test_prompts: int = 10000,
                       validation_prompts: int = 2000, batch_size: int = 1000
                       ) -> dict[tuple[int, int], TunedRidge]:
    r"""Kernel ridge regression with $k(x, x') = (1 + x^\top x')^k$ on the degree-$k$ task at each
    context length $n$, keyed ``(k, n)``; penalty tuned on validation prompts, test loss a Monte
    Carlo estimate on ``test_prompts`` prompts (:func:`~nlicl_lib.experiments.baselines.tuned_kernel_ridge`)."""
    return {(k, n): tuned_kernel_ridge(_task(k, n), validation_prompts=validation_prompts,
                                       test_prompts=test_prompts, batch_size=batch_size)
            for k in degrees for n in contexts}


def grid_table(grid: Mapping[tuple[int, int], Sequence[float]], block_opt: Mapping[tuple[int, int], float],
               krr: Mapping[tuple[int, int], TunedRidge], degrees: Sequence[int],
               contexts: Sequence[int]) -> ResultTable:
    """The page's table: per degree and context length, each seed's trained loss over the block's
    optimum, and the KRR test loss / E[y^2] with its penalty. A table (HTML in the book, text
    printed)."""
    seeds = len(grid[degrees[0], contexts[0]])
    rows = []
    for k in degrees:
        for n in contexts:
            ratios = np.array(grid[k, n]) / block_opt[k, n]
            rows.append((f"degree {k}, n = {n}", " ".join(f"{r:.4f}" for r in ratios),
                         f"{krr[k, n].test.normalised:.2e}", f"{krr[k, n].penalty:.0e}"))
    return ResultTable(("task, context", f"trained / block optimum ({seeds} seeds)",
                        "KRR / E[y²]", "KRR penalty"), tuple(rows),
                       caption="Trained blocks against their optimum, and kernel ridge regression")


