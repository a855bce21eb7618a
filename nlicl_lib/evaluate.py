r"""Test loss on fresh prompts, with its Monte Carlo error.

Prompts come from the test stream of the seed (never seen in training). Batches are added until
the standard error of the mean squared error is below ``relative_error`` of the mean (default
1%), so every printed loss carries its own error bar.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .errors import check_float, check_int
from .models import InContextRegressor
from .seeding import STREAM_TEST
from .tasks import Prompts, TaskConfig, sample_prompts


@dataclass(frozen=True)
class LossEstimate:
    """``mean`` of $(\\hat y - y_{n+1})^2$ over ``num_prompts`` prompts, ``std_error`` its MC error."""

    mean: float
    std_error: float
    num_prompts: int

    @property
    def relative_error(self) -> float:
        return self.std_error / self.mean if self.mean > 0 else 0.0

    def __str__(self) -> str:
        return (f"{self.mean:.5g} +- {self.std_error:.2g} ({100 * self.relative_error:.2f}% MC "
                f"error, {self.num_prompts} prompts)")


def model_predictor(model: InContextRegressor) -> Callable[[Prompts], torch.Tensor]:
    """Wrap a model as a predictor on prompts (embedding with its own feature slots)."""
    def predict(prompts: Prompts) -> torch.Tensor:
        return model(prompts.embed(model.feature_slots))
    return predict


@torch.no_grad()
def estimate_loss(
    predict: Callable[[Prompts], torch.Tensor] | InContextRegressor,
    task: TaskConfig,
    device: torch.device | str = "cpu",
    seed: int = 0,
    relative_error: float = 0.01,
    batch_size: int = 20000,
    max_prompts: int = 2_000_000,
    min_prompts: int = 40000,
    dtype: torch.dtype = torch.float32,
) -> LossEstimate:
    """Monte Carlo test loss of ``predict`` (a model or a function of prompts)."""
    check_float("relative_error", relative_error, 0.0, strict_minimum=True)
    batch_size = check_int("batch", batch_size, minimum=1)
    max_prompts = check_int("max_prompts", max_prompts, minimum=1)
    if isinstance(predict, InContextRegressor):
        dtype = next(predict.parameters()).dtype
        predict = model_predictor(predict)
    device = torch.device(device)
    total = total_sq = 0.0
    count = 0
    step = 0
    while count < max_prompts:
        prompts = sample_prompts(task, batch_size, seed, step, device, STREAM_TEST, dtype)
        errors = (predict(prompts) - prompts.query_label).double() ** 2
        total += float(errors.sum())
        total_sq += float((errors**2).sum())
        count += errors.numel()
        step += 1
        mean = total / count
        variance = max(total_sq / count - mean**2, 0.0)
        std_error = math.sqrt(variance / count)
        if count >= min(min_prompts, max_prompts) and std_error <= relative_error * mean:
            break
    return LossEstimate(mean, std_error, count)
