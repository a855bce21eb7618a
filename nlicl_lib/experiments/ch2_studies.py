r"""Chapter 2's trainings and Monte Carlo references: LSA stacks of depth $L$ on polynomial tasks,
in two parametrisations, against references that are linear in the query.

- :func:`train_lsa_stacks`: every (form, task, depth) trained side by side, each measured on the
  same test prompts relative to the zero predictor (``full``: all of $P_\ell, Q_\ell$ learned;
  ``sparse``, the GD form: $P_\ell = e_D e_D^\top$, only $\Gamma_\ell$ learned);
- :func:`linear_references`: ridge on $x$ with its penalty tuned on validation prompts, least
  squares on $x$ (both on the same test prompts) and the exact best single step of linear GD,
  Theorem 9 (thm-feature-optimum) with $\psi = x$.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments import baselines
from nlicl_lib.theory import closed_forms, predictors
from nlicl_lib.theory.values import TheoryValues, theory_values
from nlicl_lib.training.evaluate import LossEstimate, test_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainResult, train


@dataclass
class TrainedModel:
    """One trained model of a sweep with its paired test loss and what theory says."""

    task: TaskConfig
    model_config: ModelConfig
    model: InContextRegressor
    training: TrainResult
    test: LossEstimate
    theory: TheoryValues


@dataclass
class StackSweep:
    """``trained[form_label, task_name, L]``: the :class:`TrainedModel` of each run, in the
    order of training; ``seconds``: wall time of training and testing them."""

    trained: dict[tuple[str, str, int], TrainedModel]
    seconds: float

    @property
    def train_seconds(self) -> float:
        """Training time summed over the groups of runs trained at once (each run's share)."""
        return sum(t.training.seconds / t.training.trained_with for t in self.trained.values())


def train_lsa_stacks(tasks: Mapping[str, TaskConfig], forms: Mapping[str, str], depths: Sequence[int],
                     steps: int, batch_size: int, test_prompts: int, seed: int = 0) -> StackSweep:
    r"""Train an LSA of every depth $L$ in ``depths``, attention form ``forms[label]`` (``"full"`` or
    ``"sparse"``) and task ``tasks[name]`` with the default settings (peak rate divided by $L$),
    ``steps`` steps of ``batch_size`` prompts, all at once
    (:func:`~nlicl_lib.training.train.train`), each then measured on the same ``test_prompts``
    test prompts (:func:`~nlicl_lib.training.evaluate.test_loss`)."""
    if not tasks or not forms or not depths:
        raise ConfigError("tasks, forms, depths", (len(tasks), len(forms), len(depths)),
                          "at least one of each")
    depths = [check_int("depths", L, minimum=1) for L in depths]
    keys = [(form, name, depth) for form in forms for name in tasks for depth in depths]
    runs = [(tasks[name], ModelConfig(kind="lsa", depth=depth, attention=forms[form]))
            for form, name, depth in keys]
    start = time.perf_counter()
    models = [build_model(config, task, seed=seed) for task, config in runs]
    results = train(models, [task for task, _ in runs],
                    [default_train_config(task, config, seed=seed, steps=steps,
                                          batch_size=batch_size) for task, config in runs],
                    progress=False)
    trained = {key: TrainedModel(task, config, model, result,
                                 test_loss(model, task, test_prompts, seed=seed),
                                 theory_values(task, config))
               for key, (task, config), model, result in zip(keys, runs, models, results,
                                                              strict=True)}
    return StackSweep(trained, time.perf_counter() - start)


@dataclass
class LinearReferences:
    r"""Per task name: ``ridge[name]`` (tuned ridge on $x$) and ``one_step[name]`` (exact best single
    step of linear GD); ``least_squares``: least squares on $x$ on the task named ``least_squares_task``."""

    ridge: dict[str, baselines.TunedRidge]
    least_squares: LossEstimate
    least_squares_task: str
    one_step: dict[str, closed_forms.OneStepOptimum]


def linear_references(tasks: Mapping[str, TaskConfig], least_squares_task: str, test_prompts: int,
                      seed: int = 0) -> LinearReferences:
    r"""The references linear in the query at each task's $n$: ridge $\hat w = (X^\top X + n\lambda
    I)^{-1} X^\top y$ with $\lambda$ tuned on validation prompts, least squares ($\lambda = 0$, float64,
    on ``tasks[least_squares_task]`` only) on the first ``test_prompts`` test prompts of ``seed``,
    and $\Gamma^*, \mathcal L^*$ of one GD step on $x$ (Theorem 9 (thm-feature-optimum), $\psi = x$)."""
    if least_squares_task not in tasks:
        raise ConfigError("least_squares_task", least_squares_task, f"one of {list(tasks)}")
    ridge_x = {name: baselines.tuned_ridge(task, seed=seed, test_prompts=test_prompts)
               for name, task in tasks.items()}
    least_squares_x = test_loss(predictors.least_squares, tasks[least_squares_task],
                                test_prompts, seed=seed, dtype=torch.float64)
    one_step = {name: closed_forms.linear_gd_optimum(task) for name, task in tasks.items()}
    return LinearReferences(ridge_x, least_squares_x, least_squares_task, one_step)
