r"""The planning of a live panel's run before anything runs: one job, its memory and its time.

A run at the panel's settings is a :class:`Plan`: the configs ``configure`` returns, the
estimated peak memory (:func:`estimate_memory_bytes`, the count of
:mod:`nlicl_lib.core.planning`, which the command line's check uses too) against the limit
(:func:`memory_limit_bytes`), and the *expected* time. Settings whose estimate exceeds the limit
are refused with a message (:attr:`Plan.problem`) before anything is allocated.

The expected time is $S\,t_{\text{step}} + t_{\text{test}}$ for $S$ training steps: the seconds
per step $t_{\text{step}}$ are timed here, at these settings, on a few training steps
(:func:`time_training_step`) and replaced by the measured speed of a finished run; until a run
has measured the test $t_{\text{test}}$, it is counted as the forward passes of at least
:data:`EVAL_MIN_PROMPTS` prompts (:func:`expected_seconds`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape

import torch

from nlicl_lib.core import planning
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.planning import format_bytes
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.pages.panel_params import Configure, Settings
from nlicl_lib.training.train import TrainConfig, train

EVAL_BATCH = planning.EVAL_BATCH
"""Prompts per batch of :func:`nlicl_lib.training.evaluate.test_loss` (its default at a precision)."""
EVAL_TOKENS = EVAL_BATCH * 21
"""Tokens per test batch of a panel: the library's default batch at $n = 20$."""
EVAL_MIN_PROMPTS = 40000
"""Prompts :func:`~nlicl_lib.training.evaluate.test_loss` draws at least (its default)."""
MEMORY_CAP_BYTES = 768 * 2**20
"""Most working memory a panel run may take on the CPU. A Binder session has 2 GB for the
server, the kernel and the run; a chapter's kernel takes about 0.5 GB with its own data
(``make notebook-test`` measures it), and the estimate is an upper bound."""

SpeedKey = tuple[TaskConfig, ModelConfig, int]
"""What the speed of a run depends on: the task, the model and the batch size (not the number
of steps or the learning rate)."""


# --- memory --------------------------------------------------------------------------------


def eval_batch_size(task: TaskConfig, model: ModelConfig | None = None) -> int:
    """Prompts per batch of a panel's test-loss estimate: the library's 20 000 up to $n = 20$,
    fewer for longer contexts, so that a batch holds at most :data:`EVAL_TOKENS` tokens; a
    quarter of that for a stack of two or more blocks, whose test loss takes one forward pass
    per coefficient of the task (measured: 312 MiB at $n = 100$ for a batch of 4158 prompts,
    which took chapter 5 run live over Binder's 1 GB)."""
    tokens = EVAL_TOKENS // 4 if model is not None and model.depth > 1 else EVAL_TOKENS
    return max(1000, min(EVAL_BATCH, tokens // (task.context_length + 1)))


def estimate_memory_bytes(task: TaskConfig, model: ModelConfig, train_config: TrainConfig
                          ) -> int:
    r"""Peak working memory of a panel's run, in bytes (float32): the larger of a training step
    and a batch of the test-loss estimate (:func:`eval_batch_size` prompts), as
    :func:`nlicl_lib.core.planning.estimate` counts it (the command line's check uses the same
    count). ``bench/panel_memory.py`` compares it with the measured peak."""
    return planning.estimate(task, model, train_config.batch_size,
                             eval_batch_size(task, model)).peak_bytes


def memory_limit_bytes(device: torch.device, cap: int | None = MEMORY_CAP_BYTES) -> int:
    """The largest run a panel accepts on ``device``: half its free memory
    (:func:`nlicl_lib.core.planning.available_memory_bytes`), and on the CPU at most ``cap``
    (:data:`MEMORY_CAP_BYTES`)."""
    limit = planning.memory_limit_bytes(device, fraction=0.5, cap=cap)
    return limit if limit is not None else (cap or MEMORY_CAP_BYTES)


def format_seconds(seconds: float) -> str:
    """``"0.8 s"``, ``"14 s"``, ``"2 min 5 s"``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {int(round(seconds % 60))} s"


# --- the plan ------------------------------------------------------------------------------


@dataclass
class Plan:
    """What the settings mean before anything runs: the configs, the memory estimate and its
    limit, the expected seconds (``None`` until measured), or the ``problem`` that refuses
    them."""

    settings: Settings
    task: TaskConfig | None = None
    model_config: ModelConfig | None = None
    train_config: TrainConfig | None = None
    memory_bytes: int = 0
    memory_limit: int = 0
    expected_seconds: float | None = None
    problem: str | None = None


def speed_key(plan: Plan) -> SpeedKey:
    """The key of a plan's measured speed (:data:`SpeedKey`)."""
    return (plan.task, plan.model_config, plan.train_config.batch_size)


def expected_seconds(plan: Plan, per_step: float, test_seconds: float | None) -> float:
    r"""$S\,t_{\text{step}} + t_{\text{test}}$: the plan's ``steps`` at ``per_step`` seconds,
    then the test, ``test_seconds`` when a run has measured it, else at least
    :data:`EVAL_MIN_PROMPTS` prompts forward only (a third of the work of a training step per
    prompt)."""
    if test_seconds is None:
        test_seconds = per_step * EVAL_MIN_PROMPTS / plan.train_config.batch_size / 3
    return plan.train_config.steps * per_step + test_seconds


def plan_run(settings: Settings, configure: Configure, device: torch.device,
             memory_cap: int | None, step_seconds: Mapping[SpeedKey, float],
             test_seconds: Mapping[SpeedKey, float]) -> Plan:
    """Configs, memory estimate and expected time at ``settings``, or the problem that refuses
    them: ``configure`` rejects them, or they need more than :func:`memory_limit_bytes` of
    ``device`` (with ``memory_cap``). The expected time comes from the seconds per step (and
    of the test) already measured for the same :func:`speed_key`; this measures nothing."""
    plan = Plan(dict(settings))
    try:
        plan.task, plan.model_config, plan.train_config = configure(dict(plan.settings))
    except ConfigError as error:
        plan.problem = f"These settings are not accepted: {error}"
        return plan
    plan.memory_bytes = estimate_memory_bytes(plan.task, plan.model_config, plan.train_config)
    plan.memory_limit = memory_limit_bytes(device, memory_cap)
    if plan.memory_bytes > plan.memory_limit:
        plan.problem = (f"Refused: a run at these settings needs about "
                        f"{format_bytes(plan.memory_bytes)} of memory, more than the "
                        f"{format_bytes(plan.memory_limit)} this panel allows on "
                        f"{device.type}. Choose a shorter context, a smaller batch "
                        "or a lower degree.")
        return plan
    key = speed_key(plan)
    if key in step_seconds:
        plan.expected_seconds = expected_seconds(plan, step_seconds[key], test_seconds.get(key))
    return plan


def time_training_step(plan: Plan, device: torch.device, warmup: int = 1, steps: int = 5,
                       max_seconds: float = 0.5) -> float:
    """Seconds per training step of an accepted ``plan``, timed here: ``warmup`` untimed steps
    (allocation, thread start-up), then up to ``steps`` steps or ``max_seconds``, with the
    plan's model, batch size, learning rate and seed."""
    model = build_model(plan.model_config, plan.task, device, seed=plan.train_config.seed)
    stamps: list[float] = []

    def clock(step: int, loss: float) -> bool:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if step + 1 >= warmup:
            stamps.append(time.perf_counter())
        return len(stamps) > steps or (len(stamps) > 1 and stamps[-1] - stamps[0] > max_seconds)

    probe = TrainConfig(steps=warmup + steps + 1, batch_size=plan.train_config.batch_size,
                        learning_rate=plan.train_config.learning_rate,
                        seed=plan.train_config.seed)
    train(model, plan.task, probe, device, progress=False, callback=clock)
    return (stamps[-1] - stamps[0]) / max(1, len(stamps) - 1)


def estimate_html(plan: Plan) -> str:
    """The panel's expected-time line for ``plan`` (HTML): its problem in bold, or the expected
    time of its steps and test."""
    if plan.problem:
        return f"<b>{escape(plan.problem)}</b>"
    return (f"Expected time at these settings: about "
            f"<b>{format_seconds(plan.expected_seconds)}</b> for "
            f"{plan.train_config.steps} steps of {plan.train_config.batch_size} prompts and "
            "the test (an estimate from training steps timed on this machine).")
