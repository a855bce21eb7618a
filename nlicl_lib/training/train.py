r"""Training: Adam on fresh prompts every step.

Step $t$ of a run with seed $s$ draws its prompts from $(s, t)$ alone
(:func:`~nlicl_lib.core.tasks.sample_prompts`); the objective is the normalised query loss
$\mathbb E[(\hat y - y_{n+1})^2] / \mathbb E[y^2]$, so one learning rate and one clipping
threshold suit every task. The loss history is stored unnormalised.
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from nlicl_lib.core.errors import (
    ConfigError,
    ForwardOverflowError,
    TrainingDivergedError,
    check_choice,
    check_float,
    check_int,
)
from nlicl_lib.core.models import InContextRegressor
from nlicl_lib.core.progress import Progress
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import null_loss

SCHEDULES = ("constant", "onecycle", "cosine")


@dataclass(frozen=True, kw_only=True)
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
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, minimum=1))
        object.__setattr__(
            self, "learning_rate", check_float("learning_rate", self.learning_rate, 0.0, strict_minimum=True)
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
        r"""The schedule's rate at ``step`` $t \in \{0, \dots, T\}$, $T$ = ``steps``, peak
        $\eta$ = ``learning_rate``: ``"constant"``: $\eta$; ``"onecycle"``: a linear warm-up over
        $w = \lfloor fT \rfloor$ steps ($f$ = ``warmup_fraction``),
        $\eta\,(0.04 + 0.96\,t/w)$, then a cosine down to $0.01\eta$:
        $\eta\,\big(0.01 + 0.99 \cdot \tfrac12 (1 + \cos(\pi (t - w)/\max(1, T - w)))\big)$;
        ``"cosine"``: the same with $w = 0$."""
        if not 0 <= step <= self.steps:
            raise ConfigError("step", step, f"a step of the run, 0 to {self.steps} (its end)")
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


#: The forward pass "overflows" when the residual stream becomes infinite or NaN, or its largest
#: entry exceeds this many times the embedded prompts' largest entry. Default depth-8 GLU-LSA
#: stacks reach 30 to 4e4 times at initialisation (the label entry, moved by 8 random
#: attention steps; measured over seeds); stacks whose GLUs square the slots at each block
#: reach 1e19 by depth 4 and inf in float32 by depth 5.
OVERFLOW_GROWTH = 1e6


@dataclass(frozen=True)
class StreamOverflow:
    """Where a forward pass overflows (:func:`find_forward_overflow`): 1-based ``block``,
    ``part`` ``"glu"`` (after the block's GLU) or ``"block"``, the largest entry ``peak`` there
    (``inf`` or ``nan`` when not finite), the largest entry ``before`` it (of the stream just
    before that point, finite) and the embedded prompts' largest entry ``scale``."""

    block: int
    part: str
    peak: float
    before: float
    scale: float


@torch.no_grad()
def find_forward_overflow(model: InContextRegressor, z: torch.Tensor,
                          growth: float = OVERFLOW_GROWTH) -> StreamOverflow | None:
    """The first place where ``model``'s residual stream on the embedded prompts ``z`` is not
    finite, else the place of its largest entry if that exceeds ``growth`` times ``z``'s
    largest; ``None`` when the stream stays finite and within that."""
    scale = float(z.abs().max())
    _, stream = model(z, return_stream=True)
    before, largest = scale, None
    for key, value in stream.items():
        if key == "embed":
            continue
        name, _, sub = key.partition(".")
        block, part = int(name.removeprefix("block")), ("glu" if sub else "block")
        if not bool(torch.isfinite(value).all()):
            nan = bool(torch.isnan(value).any()) and not bool(torch.isinf(value).any())
            return StreamOverflow(block, part, float("nan") if nan else float("inf"), before,
                                  scale)
        peak = float(value.abs().max())
        if largest is None or peak > largest.peak:
            largest = StreamOverflow(block, part, peak, before, scale)
        before = peak
    if largest is not None and largest.peak > growth * max(scale, 1e-30):
        return largest
    return None


def diagnose_divergence(initial_model: InContextRegressor, z: torch.Tensor, step: int,
                        loss: float, learning_rate: float) -> TrainingDivergedError:
    """The error for a non-finite loss at ``step`` on the embedded prompts ``z``: a
    :class:`~nlicl_lib.core.errors.ForwardOverflowError` when the forward pass at the initial weights
    (``initial_model``) already overflows on them (:func:`find_forward_overflow`), else a
    :class:`~nlicl_lib.core.errors.TrainingDivergedError` (a too-large step)."""
    overflow = find_forward_overflow(initial_model, z)
    if overflow is None:
        return TrainingDivergedError(step, loss, learning_rate)
    return ForwardOverflowError(step, loss, learning_rate, overflow.block, overflow.peak,
                                overflow.scale, overflow.part, _overflow_remedies(initial_model),
                                overflow.before)


def _overflow_remedies(model: InContextRegressor) -> str:
    """What can stop a forward overflow of ``model``, in the config's parameter names."""
    glus = [block.glu for block in model.blocks if block.glu is not None]
    remedies = ["fewer blocks (depth)"] if model.depth > 1 else []
    if any(glu.reads != "x" for glu in glus):
        remedies.append("GLUs reading x only (glu_reads='x')")
    initial = (["glu_init='normal' or 'small'"] if glus else []) + ["attention_init_std"]
    remedies.append(f"a smaller initialisation ({', '.join(initial)})")
    return ", ".join(remedies[:-1]) + (" or " if len(remedies) > 1 else "") + remedies[-1]


#: The losses stay on the device and are checked (copied to the host, tested for NaN and
#: infinity) every this many steps, or sooner when ``CHECK_SECONDS`` have passed: a check
#: waits for the device, so checking every step would stall a GPU's queue, while a diverged
#: run goes on for at most this many steps before the error (its first bad step is found in
#: the stored losses). A ``callback`` needs every step's loss, so it is checked every step.
CHECK_EVERY = 32
CHECK_SECONDS = 0.25


def clip_gradients(gradients: list[torch.Tensor], max_norm: float) -> None:
    r"""Scale ``gradients`` (in place) by $\min(1, c / (\lVert g \rVert_2 + 10^{-6}))$, where
    $\lVert g \rVert_2$ is the norm of all of them as one vector and $c$ = ``max_norm``.

    The operations of :func:`torch.nn.utils.clip_grad_norm_` (foreach norms, the norm of their
    stack, the clamped coefficient, a foreach product), hence the same numbers, without its
    grouping by device and type: all of ``gradients`` must share one device (CPU or CUDA) and
    one dtype, as a model's do.
    """
    norms = torch._foreach_norm(gradients, 2.0)
    total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
    torch._foreach_mul_(gradients, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))


_FOREACH_FROM = 5


def _adam(parameters: list[torch.nn.Parameter], learning_rate: float) -> torch.optim.Adam:
    """Adam with torch's defaults; on CPU in its cheaper implementation for this many tensors:
    a Python loop over fewer than ``_FOREACH_FROM`` tensors, the foreach kernels over more.
    Both give the same numbers on CPU (its foreach kernels loop over the same operations;
    ``tests/test_train_loop.py``), unlike ``fused=True``, which rounds differently. Elsewhere
    torch's default (foreach on CUDA)."""
    foreach = len(parameters) >= _FOREACH_FROM if parameters[0].device.type == "cpu" else None
    return torch.optim.Adam(parameters, lr=learning_rate, foreach=foreach)


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
    loss becomes NaN or infinite, naming the first such step (found at the next check, at most
    :data:`CHECK_EVERY` steps later; the model's weights are NaN by then): a
    :class:`~nlicl_lib.core.errors.ForwardOverflowError` when the forward pass already
    overflows at the initial weights (:func:`diagnose_divergence`; no learning rate helps),
    else the plain error with advice on the learning rate.

    Each step is the bare loop (prompts, forward, backward, Adam step) plus the clipping and
    the schedule's rate; nothing in it waits for the device: the losses are checked every
    :data:`CHECK_EVERY` steps (``bench/train_step.py`` measures the difference).
    """
    if not isinstance(config, TrainConfig):
        raise ConfigError("config", type(config).__name__, "a TrainConfig")
    device = torch.device(device)
    model.to(device)
    parameters = list(model.parameters())
    dtype = parameters[0].dtype
    slots = model.feature_slots
    normaliser = null_loss(task)
    # the initial weights, to tell a forward overflow from a too-large step if the loss diverges
    initial = {key: value.detach().clone() for key, value in model.state_dict().items()}
    optimizer = _adam(parameters, config.learning_rate)
    scheduled = config.schedule != "constant"
    # clip_gradients needs one device and dtype, as a model has; torch's function otherwise
    home = parameters[0].device
    lean_clip = (config.grad_clip is not None and home.type in ("cpu", "cuda")
                 and all(p.device == home and p.dtype == dtype for p in parameters))
    check_every = 1 if callback is not None else CHECK_EVERY
    history = np.empty(config.steps)
    pending: list[torch.Tensor] = []  # this step's and the unchecked steps' losses, on device
    stopped = False
    start = last_check = time.perf_counter()
    with Progress(config.steps, progress, desc=f"training on {device.type}") as bar:
        for step in range(config.steps):
            if scheduled:
                for group in optimizer.param_groups:
                    group["lr"] = config.learning_rate_at(step)
            prompts = sample_prompts(task, config.batch_size, config.seed, step, device,
                                     dtype=dtype)
            prediction = model(prompts.embed(slots))
            loss = torch.mean((prediction - prompts.query_label) ** 2)
            for parameter in parameters:
                parameter.grad = None
            (loss / normaliser).backward()
            if lean_clip:
                clip_gradients([p.grad for p in parameters if p.grad is not None],
                               config.grad_clip)
            elif config.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(parameters, config.grad_clip)
            optimizer.step()
            pending.append(loss.detach())
            if (len(pending) < check_every and step + 1 < config.steps
                    and time.perf_counter() - last_check < CHECK_SECONDS):
                continue
            first = step + 1 - len(pending)
            values = torch.stack(pending).to("cpu", torch.float64).numpy()
            pending.clear()
            last_check = time.perf_counter()
            history[first: step + 1] = values
            if not np.isfinite(values).all():
                bad = first + int(np.argmin(np.isfinite(values)))
                raise _diverged(model, initial, task, config, device, bad, float(history[bad]))
            bar.update(len(values), loss=values[-1] / normaliser)
            if callback is not None and callback(step, float(values[-1])):
                history = history[: step + 1]
                stopped = True
                break
    seconds = time.perf_counter() - start
    return TrainResult(history, normaliser, seconds, len(history), str(device), stopped,
                       asdict(config))


def _diverged(model: InContextRegressor, initial: dict[str, torch.Tensor], task: TaskConfig,
              config: TrainConfig, device: torch.device, step: int, loss: float
              ) -> TrainingDivergedError:
    """The error for the first non-finite loss, at ``step``: the prompts of that step (a pure
    function of the seed and the step) on the initial weights (:func:`diagnose_divergence`)."""
    start_model = copy.deepcopy(model)
    start_model.load_state_dict(initial)
    prompts = sample_prompts(task, config.batch_size, config.seed, step, device,
                             dtype=next(model.parameters()).dtype)
    return diagnose_divergence(start_model, prompts.embed(model.feature_slots), step, loss,
                               config.learning_rate_at(step))


def train_concurrently(models: Sequence[InContextRegressor], tasks: Sequence[TaskConfig],
                       configs: Sequence[TrainConfig], workers: int | None = None
                       ) -> list[TrainResult]:
    r"""Train independent models at the same time, one per CPU core, each single-threaded.

    The layers of these small models are too small for torch's intra-op threads to pay off
    (and on a busy machine those threads wait for each other), so a sweep runs whole trainings
    side by side instead: ``workers`` threads (default: the number of cores), torch set to one
    thread meanwhile. Each run is :func:`~nlicl_lib.training.train.train` with its own config; its
    prompts depend only on its seed and step, and the models are built (initialised) before the
    call, so the results are the same as training them one after the other on one thread.
    """
    if not (len(models) == len(tasks) == len(configs)):
        raise ConfigError("runs", (len(models), len(tasks), len(configs)),
                          "as many tasks and configs as models")
    workers = check_int("workers", workers or os.cpu_count() or 1, minimum=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(min(workers, max(1, len(models)))) as pool:
            jobs = [pool.submit(train, model, task, config, "cpu", False)
                    for model, task, config in zip(models, tasks, configs, strict=True)]
            return [job.result() for job in jobs]
    finally:
        torch.set_num_threads(threads)
