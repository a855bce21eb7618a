r"""One experiment end to end: task + model + training + evaluation + theory, as a JSON-able dict.

This is what the command line, the chapters' widgets and ``reproduce`` all call, so the three
agree by construction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from nlicl_lib.core.device import describe_device, resolve_device
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import (
    InContextRegressor,
    ModelConfig,
    build_model,
)
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.theory.depth import is_gd_form_stack
from nlicl_lib.theory.values import (
    MAX_EXACT_FEATURE_DEGREE,
    TheoryValues,
    exact_model_loss,
    slot_feature_degree,
    theory_values,
)
from nlicl_lib.training.evaluate import LossEstimate, test_loss
from nlicl_lib.training.train import TrainConfig, TrainResult, train


@dataclass
class ExperimentResult:
    """Everything a run produced; :meth:`to_json` is the ``--json`` file."""

    task: TaskConfig
    model_config: ModelConfig
    train_config: TrainConfig
    theory: TheoryValues
    test: LossEstimate
    exact_test_loss: float | None
    training: TrainResult
    device: str
    model: InContextRegressor | None = field(default=None, repr=False)

    @property
    def test_loss(self) -> float:
        return self.exact_test_loss if self.exact_test_loss is not None else self.test.mean

    @property
    def normalised_test_loss(self) -> float:
        return self.test_loss / self.theory.null_loss

    @property
    def ratio_to_theory(self) -> float | None:
        if self.theory.theory_loss is None or self.theory.theory_loss == 0:
            return None
        return self.test_loss / self.theory.theory_loss

    def to_json(self) -> dict:
        return {
            "test_loss": self.test_loss,
            "test_loss_method": "exact" if self.exact_test_loss is not None else "monte-carlo",
            "test_loss_monte_carlo": self.test.mean,
            "test_loss_std_error": self.test.std_error,
            "test_prompts": self.test.num_prompts,
            "normalised_test_loss": self.normalised_test_loss,
            "theory_loss": self.theory.theory_loss,
            "theory_name": self.theory.theory_name,
            "theory_kind": self.theory.theory_kind,
            "bound_loss": self.theory.bound_loss,
            "null_loss": self.theory.null_loss,
            "ratio_to_theory": self.ratio_to_theory,
            "train_seconds": self.training.seconds,
            "steps": self.training.steps,
            "final_train_loss": float(np.mean(self.training.loss_history[-20:])),
            "device": self.device,
            "config": {
                "task": asdict(self.task),
                "model": asdict(self.model_config.resolved(self.task)),
                "train": asdict(self.train_config),
            },
        }


def run_experiment(
    task: TaskConfig,
    model_config: ModelConfig,
    train_config: TrainConfig,
    device: torch.device | str | None = "auto",
    progress: bool | None = None,
    relative_error: float = 0.01,
    callback: Callable[[int, float], bool | None] | None = None,
    eval_batch_size: int = 20000,
    max_test_prompts: int = 2_000_000,
    theory: bool = True,
) -> ExperimentResult:
    r"""Validate everything, then train, evaluate and compare with theory. ``eval_batch_size``
    is the batch of the test-loss estimate (smaller: less memory for long contexts);
    ``max_test_prompts`` caps its prompts when ``relative_error`` is not reached sooner (a
    heavy-tailed loss). ``theory=False`` skips the theory values but $\mathbb E[y^2]$ (for a
    caller that compares with its own reference: a deep stack's Monte Carlo reference takes
    seconds and hundreds of MB)."""
    device = resolve_device(device)
    for name, value, kind in (("task", task, TaskConfig), ("model", model_config, ModelConfig),
                              ("train", train_config, TrainConfig)):
        if not isinstance(value, kind):
            raise ConfigError(name, type(value).__name__, f"a {kind.__name__}")
    if not isinstance(theory, bool):
        raise ConfigError("theory", theory, "True or False")
    values = (theory_values(task, model_config) if theory
              else TheoryValues(null_loss(task), None, None, None))
    model = build_model(model_config, task, device, seed=train_config.seed)
    training = train(model, task, train_config, device, progress, callback)
    start = time.perf_counter()
    exact = exact_model_loss(model, task)
    # A GD-form stack without an exact loss: integrate the task and the query out exactly and
    # sample only contexts, so that heavy tails over the task do not bias the error bars. That
    # needs the exact Gaussian moments of its features, polynomials of degree up to 2^L when
    # the GLUs read the slots: beyond degree MAX_EXACT_FEATURE_DEGREE only the task is
    # integrated out (still exact given the inputs, the predictor being linear in the labels).
    integrate = "none"
    if exact is None and task.covariance is None and is_gd_form_stack(model):
        exact_query = slot_feature_degree(model) <= MAX_EXACT_FEATURE_DEGREE
        integrate = "task+query" if exact_query else "task"
    test = test_loss(model, task, relative_error=relative_error, seed=train_config.seed,
                     device=device, batch_size=eval_batch_size, integrate=integrate,
                     max_prompts=max_test_prompts)
    del start
    return ExperimentResult(task, model_config, train_config, values, test, exact, training,
                            describe_device(device), model)
