r"""Training: Adam on fresh prompts every step.

Step $t$ of a run with seed $s$ draws its prompts from $(s, t)$ alone
(:func:`~nlicl_lib.tasks.sample_prompts`); the objective is the normalised query loss
$\mathbb E[(\hat y - y_{n+1})^2] / \mathbb E[y^2]$, so one learning rate and one clipping
threshold suit every task. The loss history is stored unnormalised.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from .errors import ConfigError, TrainingDivergedError, check_choice, check_float, check_int
from .models import InContextRegressor
from .progress import Progress
from .tasks import TaskConfig, sample_prompts
from .theory import null_loss

SCHEDULES = ("constant", "onecycle", "cosine")


@dataclass(frozen=True)
class TrainConfig:
    """How to train. ``learning_rate`` is Adam's peak rate; ``grad_clip`` the largest gradient
    norm (``None`` or 0: no clipping); ``schedule``: ``"onecycle"`` warms up for
    ``warmup_fraction`` of the steps then anneals with a cosine, ``"cosine"`` only anneals."""

    steps: int = 1000
    batch_size: int = 2000
    learning_rate: float = 0.01
    schedule: str = "onecycle"
    warmup_fraction: float = 0.1
    grad_clip: float | None = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", check_int("steps", self.steps, minimum=1))
        object.__setattr__(self, "batch_size", check_int("batch", self.batch_size, minimum=1))
        object.__setattr__(
            self, "learning_rate", check_float("lr", self.learning_rate, 0.0, strict_minimum=True)
        )
        check_choice("schedule", self.schedule, SCHEDULES)
        object.__setattr__(
            self, "warmup_fraction", check_float("warmup_fraction", self.warmup_fraction, 0.0,
                                                 maximum=1.0)
        )
        if self.grad_clip is not None:
            clip = check_float("grad_clip", self.grad_clip, minimum=0.0)
            object.__setattr__(self, "grad_clip", clip or None)
        object.__setattr__(self, "seed", check_int("seed", self.seed, minimum=0))

    def learning_rate_at(self, step: int) -> float:
        """The schedule's rate at ``step`` (0-based)."""
        if self.schedule == "constant":
            return self.learning_rate
        warmup = int(self.warmup_fraction * self.steps) if self.schedule == "onecycle" else 0
        if step < warmup:
            return self.learning_rate * (0.04 + 0.96 * step / warmup)
        progress = (step - warmup) / max(1, self.steps - warmup)
        return self.learning_rate * (0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass
class TrainResult:
    """``loss_history[t]``: the batch loss at step t (unnormalised); ``null_loss``: E[y^2]."""

    loss_history: np.ndarray
    null_loss: float
    seconds: float
    steps: int
    device: str
    stopped_early: bool = False
    config: dict = field(default_factory=dict)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("inf")


def train(
    model: InContextRegressor,
    task: TaskConfig,
    config: TrainConfig,
    device: torch.device | str = "cpu",
    progress: bool | None = None,
    callback: Callable[[int, float], bool | None] | None = None,
) -> TrainResult:
    """Train ``model`` in place. ``callback(step, loss)`` runs after every step; returning True
    stops the run early (the result says so). Raises :class:`TrainingDivergedError` when the
    loss becomes NaN or infinite."""
    if not isinstance(config, TrainConfig):
        raise ConfigError("config", type(config).__name__, "a TrainConfig")
    device = torch.device(device)
    model.to(device)
    dtype = next(model.parameters()).dtype
    slots = model.feature_slots
    normaliser = null_loss(task)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    history = np.empty(config.steps)
    stopped = False
    start = time.perf_counter()
    with Progress(config.steps, progress, desc=f"training on {device.type}") as bar:
        for step in range(config.steps):
            rate = config.learning_rate_at(step)
            for group in optimizer.param_groups:
                group["lr"] = rate
            prompts = sample_prompts(task, config.batch_size, config.seed, step, device,
                                     dtype=dtype)
            prediction = model(prompts.embed(slots))
            loss = torch.mean((prediction - prompts.query_label) ** 2)
            optimizer.zero_grad(set_to_none=True)
            (loss / normaliser).backward()
            if config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            value = loss.item()
            if not math.isfinite(value):
                raise TrainingDivergedError(step, value, rate)
            optimizer.step()
            history[step] = value
            bar.update(1, loss=value / normaliser)
            if callback is not None and callback(step, value):
                history = history[: step + 1]
                stopped = True
                break
    seconds = time.perf_counter() - start
    return TrainResult(history, normaliser, seconds, len(history), str(device), stopped,
                       asdict(config))
