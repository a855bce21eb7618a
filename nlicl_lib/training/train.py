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
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from torch.func import functional_call, stack_module_state, vmap

from nlicl_lib.core.device import describe_device
from nlicl_lib.core.errors import (
    ConfigError,
    ForwardOverflowError,
    TrainingDivergedError,
    check_choice,
    check_float,
    check_int,
)
from nlicl_lib.core.models import InContextRegressor, PromptStatistics, gd_steps
from nlicl_lib.core.progress import Progress
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
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
    """``loss_history[t]``: the batch loss at step t (unnormalised); ``null_loss``: E[y^2];
    ``seconds``: the wall time of the training (shared with the models trained at once);
    ``device``: where it ran, with its torch threads (``"cpu (1 thread)"``)."""

    loss_history: np.ndarray
    null_loss: float
    seconds: float
    steps: int
    device: str
    stopped_early: bool = False
    config: dict = field(default_factory=dict)
    trained_with: int = 1
    """How many models trained at once with this one (itself included): ``seconds`` is their
    shared wall time."""

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


def clip_per_member(gradients: Sequence[torch.Tensor], max_norm: float) -> None:
    r"""Clip each member's gradient on its own, in place: the tensors hold one slice per member
    along their first axis, and member $e$'s slices are scaled by
    $\min(1, c / (\lVert G_e \rVert_2 + 10^{-6}))$, $\lVert G_e \rVert_2$ the norm of all of
    them as one vector and $c$ = ``max_norm``: what ``torch.nn.utils.clip_grad_norm_`` does to
    one model."""
    squares = torch.stack([g.flatten(1).pow(2).sum(1) for g in gradients]).sum(0)
    scale = torch.clamp(float(max_norm) / (squares.sqrt() + 1e-6), max=1.0)
    for g in gradients:
        g.mul_(scale.view(-1, *[1] * (g.dim() - 1)))


def architecture(model: InContextRegressor) -> str:
    """What decides a model's forward pass and its parameters' shapes (its ``repr``, which every
    layer's ``extra_repr`` completes): models with the same architecture train together."""
    return repr(model)


def train(
    models: InContextRegressor | Sequence[InContextRegressor],
    task: TaskConfig | Sequence[TaskConfig],
    config: TrainConfig | Sequence[TrainConfig],
    device: torch.device | str = "cpu",
    progress: bool | None = None,
    callback: Callable[[int, float], bool | None] | None = None,
) -> TrainResult | list[TrainResult]:
    r"""Train one model, or many, in place; returns one :class:`TrainResult`, or one per model.

    ``task`` and ``config`` are one for all models or one per model. Step $t$ of a model
    draws ``config.batch_size`` prompts of its task from $(\text{config.seed}, t)$ and takes
    one Adam step on its normalised loss $\mathbb E[(\hat y - y_{n+1})^2] / \mathbb E[y^2]$,
    its gradient clipped to norm ``config.grad_clip``, at the schedule's rate.

    Models with one architecture (:func:`architecture`), one context length and one config
    (seeds aside) train at once, in one pass per step, as in PyTorch's model-ensembling recipe:
    their weights stacked (``torch.func.stack_module_state``), the one forward pass mapped over
    them (``vmap`` of ``functional_call``), ``torch.optim.Adam`` on the stacked weights (it acts
    element by element, so on each model as alone) and :func:`clip_per_member`. Every model
    therefore takes the steps it takes alone, which is one such group of one (the tests check
    it). Several groups on the CPU run side by side, one per core on one torch thread each
    (these models are too small for threads inside an operation to pay off).

    ``callback(step, loss)`` (one model only) runs after every step; returning True stops the
    run early (the result says so). Raises :class:`TrainingDivergedError` when a loss becomes
    NaN or infinite, naming the first such step (found at the next check, at most
    :data:`CHECK_EVERY` steps later): a :class:`~nlicl_lib.core.errors.ForwardOverflowError`
    when the forward pass already overflows at the initial weights
    (:func:`diagnose_divergence`; no learning rate helps), else the plain error with advice on
    the learning rate.
    """
    single = isinstance(models, InContextRegressor)
    members = [models] if single else list(models)
    if not members or not all(isinstance(m, InContextRegressor) for m in members):
        raise ConfigError("models", type(models).__name__, "a model or a non-empty list of models")
    tasks = _one_per_model("task", task, TaskConfig, len(members))
    configs = _one_per_model("config", config, TrainConfig, len(members))
    if callback is not None and len(members) > 1:
        raise ConfigError("callback", "a callback", "a callback for one model only")
    device = torch.device(device)
    groups: dict[tuple, list[int]] = {}
    for e, (model, member_task, member_config) in enumerate(zip(members, tasks, configs, strict=True)):
        # stacks in the GD form share one group whatever their shapes (they read the same
        # statistics); the others are grouped by architecture, groups side by side
        key = (("gd form", model.statistics_size) if model.gd_form else architecture(model),
               next(model.parameters()).dtype, member_task.input_dim,
               member_task.context_length, replace(member_config, seed=0))
        groups.setdefault(key, []).append(e)
    results: list[TrainResult | None] = [None] * len(members)

    def run(indices: list[int], bar: bool | None) -> None:
        trained = _train_group([members[e] for e in indices], [tasks[e] for e in indices],
                               [configs[e] for e in indices], device, bar, callback)
        for e, result in zip(indices, trained, strict=True):
            results[e] = result

    if device.type != "cpu" or len(groups) == 1:
        for indices in groups.values():
            run(indices, progress)
        return results[0] if single else results
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        # the costliest groups first, so that the last to finish is a cheap one; the cost of
        # a step grows with the tokens it samples (streams times n + 1) and with the models
        def cost(indices: list[int]) -> tuple[int, int]:
            streams = {(tasks[e], configs[e].seed) for e in indices}
            return (len(streams) * (tasks[indices[0]].context_length + 1), len(indices))

        with ThreadPoolExecutor(min(os.cpu_count() or 1, len(groups))) as pool:
            jobs = [pool.submit(run, indices, False)
                    for indices in sorted(groups.values(), key=cost, reverse=True)]
            for job in jobs:
                job.result()
    finally:
        torch.set_num_threads(threads)
    return results


def _one_per_model(name: str, value: object, kind: type, count: int) -> list:
    values = [value] * count if isinstance(value, kind) else list(value)
    if len(values) != count or not all(isinstance(v, kind) for v in values):
        raise ConfigError(name, type(value).__name__,
                          f"a {kind.__name__} or one per model ({count})")
    return values


class _Preconditioners(torch.nn.Module):
    """A stack's :meth:`~nlicl_lib.core.models.InContextRegressor.preconditioners` as the
    forward pass of a module, for ``torch.func.functional_call``."""

    def __init__(self, model: InContextRegressor):
        super().__init__()
        self.model = model

    def forward(self) -> torch.Tensor:
        return self.model.preconditioners()


class _Members:
    """Models of one architecture in a group. Several: their weights stacked (``torch.func``'s
    recipe), and :meth:`__call__` maps their forward pass (or, for the GD form, their
    preconditioners) over them. One: it trains its own weights, called as it is."""

    def __init__(self, models: list[InContextRegressor], indices: list[int], gd_form: bool):
        self.models, self.indices, self.gd_form = models, indices, gd_form
        if len(models) == 1:
            self.params = dict(models[0].named_parameters())
            self.initial = {name: value.detach().clone().unsqueeze(0)
                            for name, value in self.params.items()}
            return
        self.params, self.buffers = stack_module_state(models)  # (E, ...) copies of every weight
        self.initial = {name: value.detach().clone() for name, value in self.params.items()}
        base = copy.deepcopy(models[0]).to("meta")  # the architecture, without weights
        if gd_form:
            base = _Preconditioners(base)
            names = {name: f"model.{name}" for name in self.params}
        else:
            names = {name: name for name in self.params}

        def compute(member_params: dict, member_buffers: dict, *inputs: object) -> torch.Tensor:
            state = {names[name]: value for name, value in member_params.items()}
            return functional_call(base, (state, member_buffers), inputs)

        self.compute = compute

    def __call__(self, inputs: object | None, shared: bool) -> torch.Tensor:
        """The models' predictions on ``inputs`` (embedded tokens, one batch for all or one per
        model, ``shared`` or not), or for the GD form their preconditioners: ``(E, ...)``."""
        if len(self.models) == 1:
            model = self.models[0]
            if self.gd_form:
                return model.preconditioners().unsqueeze(0)
            return model(inputs if shared else inputs[0]).unsqueeze(0)
        args = () if self.gd_form else (inputs,)
        dims = (0, 0) + ((None if shared else 0),) * len(args)
        return vmap(self.compute, in_dims=dims)(self.params, self.buffers, *args)

    def clip(self, max_norm: float) -> None:
        """Clip each model's gradient to norm ``max_norm`` on its own: one model with
        ``torch.nn.utils.clip_grad_norm_``, a stack with :func:`clip_per_member`, which scales
        each model's slices alike."""
        if len(self.models) == 1:
            torch.nn.utils.clip_grad_norm_(list(self.params.values()), max_norm)
        else:
            clip_per_member([w.grad for w in self.params.values()], max_norm)

    def copy_back(self) -> None:
        if len(self.models) == 1:
            return  # it trained its own weights
        with torch.no_grad():
            for e, model in enumerate(self.models):
                for name, weight in model.named_parameters():
                    weight.copy_(self.params[name][e])


def _train_group(models: list[InContextRegressor], tasks: list[TaskConfig],
                 configs: list[TrainConfig], device: torch.device, progress: bool | None,
                 callback: Callable[[int, float], bool | None] | None) -> list[TrainResult]:
    """Train models of one context length and config (seeds aside) at once: those of one
    architecture in one mapped pass, every batch of prompts drawn once per step. Stacks in the
    GD form read only the batches' statistics, made once per batch: each architecture's
    preconditioners are mapped over its models, and one :func:`~nlicl_lib.core.models.gd_steps`
    takes the steps of every model (a shallower stack's missing steps are zero, which leave
    its $\theta$ exactly as it is)."""
    config = configs[0]
    for model in models:
        model.to(device)
    dtype = next(models[0].parameters()).dtype
    gd_form = models[0].gd_form
    classes: dict[str, list[int]] = {}
    for e, model in enumerate(models):
        classes.setdefault(architecture(model), []).append(e)
    members = [_Members([models[e] for e in indices], indices, gd_form)
               for indices in classes.values()]
    # one batch of prompts per (task, seed); members that share it read it once
    streams = list(dict.fromkeys((t, c.seed) for t, c in zip(tasks, configs, strict=True)))
    member_stream = [streams.index((t, c.seed)) for t, c in zip(tasks, configs, strict=True)]
    order = [e for part in members for e in part.indices]
    depth = max(model.depth for model in models)
    normalisers = [null_loss(t) for t in tasks]
    normaliser = torch.tensor(normalisers, dtype=dtype, device=device)
    back = torch.argsort(torch.tensor(order, device=device))  # model e's place in ``order``
    weights = [w for part in members for w in part.params.values()]
    # foreach: one kernel per operation for all the (many, small) stacked weights
    optimizer = torch.optim.Adam(weights, lr=config.learning_rate, foreach=True)
    scheduled = config.schedule != "constant"
    check_every = 1 if callback is not None else CHECK_EVERY
    count = len(models)
    history = np.empty((config.steps, count))
    pending: list[torch.Tensor] = []  # this step's and the unchecked steps' losses, on device
    stopped = False
    start = last_check = time.perf_counter()
    desc = f"training {count} models on {device.type}" if count > 1 else f"training on {device.type}"
    with Progress(config.steps, progress, desc=desc) as bar:
        for step in range(config.steps):
            if scheduled:
                for group in optimizer.param_groups:
                    group["lr"] = config.learning_rate_at(step)
            batches = [sample_prompts(t, config.batch_size, seed, step, device, dtype=dtype)
                       for t, seed in streams]
            if gd_form:
                losses = _gd_form_losses(members, models[0], batches, member_stream, order, depth)
            else:
                losses = _token_losses(members, batches, member_stream)
            losses = losses[back]  # (E,) in the models' order
            for weight in weights:
                weight.grad = None
            (losses / normaliser).sum().backward()
            if config.grad_clip is not None:
                for part in members:
                    part.clip(config.grad_clip)
            optimizer.step()
            pending.append(losses.detach())
            if (len(pending) < check_every and step + 1 < config.steps
                    and time.perf_counter() - last_check < CHECK_SECONDS):
                continue
            first = step + 1 - len(pending)
            values = torch.stack(pending).to("cpu", torch.float64).numpy()  # (steps, E)
            pending.clear()
            last_check = time.perf_counter()
            history[first: step + 1] = values
            if not np.isfinite(values).all():
                bad_step, e = np.argwhere(~np.isfinite(values))[0]
                bad = first + int(bad_step)
                part = next(p for p in members if e in p.indices)
                start_model = copy.deepcopy(models[e])
                place = part.indices.index(e)
                start_model.load_state_dict({k: v[place] for k, v in part.initial.items()},
                                            strict=False)
                raise _diverged(start_model, tasks[e], configs[e], device, bad,
                                float(history[bad, e]))
            bar.update(len(values), loss=float(np.mean(values[-1] / normalisers)))
            if callback is not None and callback(step, float(values[-1, 0])):
                history = history[: step + 1]
                stopped = True
                break
    seconds = time.perf_counter() - start
    device_name = describe_device(device)  # with the torch threads it ran on
    for part in members:
        part.copy_back()
    return [TrainResult(np.ascontiguousarray(history[:, e]), normalisers[e], seconds,
                        len(history), device_name, stopped, asdict(member_config), count)
            for e, member_config in enumerate(configs)]


def _token_losses(members: list[_Members], batches: list[Prompts], member_stream: list[int]
                  ) -> torch.Tensor:
    """Each model's batch loss from its forward pass over the embedded tokens, in the order
    of ``members``."""
    losses, embedded = [], {}
    for part in members:
        slots = part.models[0].feature_slots
        streams = [member_stream[e] for e in part.indices]
        for s in set(streams):
            if (s, slots) not in embedded:
                embedded[s, slots] = batches[s].embed(slots)
        shared = len(set(streams)) == 1
        if shared:
            z, labels = embedded[streams[0], slots], batches[streams[0]].query_label
        else:
            z = torch.stack([embedded[s, slots] for s in streams])
            labels = torch.stack([batches[s].query_label for s in streams])
        losses.append(torch.mean((part(z, shared) - labels) ** 2, dim=-1))
    return torch.cat(losses)


def _gd_form_losses(members: list[_Members], first: InContextRegressor, batches: list[Prompts],
                    member_stream: list[int], order: list[int], depth: int) -> torch.Tensor:
    """Each model's batch loss through its batches' statistics and one
    :func:`~nlicl_lib.core.models.gd_steps` for all, in ``order``."""
    steps = []
    for part in members:
        block_steps = part(None, True)  # (E_c, L_c, K, K)
        missing = depth - block_steps.shape[1]
        if missing:
            block_steps = torch.cat([block_steps, block_steps.new_zeros(
                block_steps.shape[0], missing, *block_steps.shape[2:])], dim=1)
        steps.append(block_steps)
    statistics = [first.prompt_statistics(b.x, b.y, moment=depth > 1) for b in batches]
    if len(batches) == 1:
        inputs, labels = statistics[0], batches[0].query_label
    else:
        streams = [member_stream[e] for e in order]
        inputs = PromptStatistics(*(torch.stack([statistics[s][k] for s in streams])
                                    for k in range(3)))
        labels = torch.stack([batches[s].query_label for s in streams])
    return torch.mean((gd_steps(inputs, torch.cat(steps)) - labels) ** 2, dim=-1)


def _diverged(start_model: InContextRegressor, task: TaskConfig, config: TrainConfig,
              device: torch.device, step: int, loss: float) -> TrainingDivergedError:
    """The error for the first non-finite loss, at ``step``: the prompts of that step (a pure
    function of the seed and the step) on the initial weights (:func:`diagnose_divergence`)."""
    prompts = sample_prompts(task, config.batch_size, config.seed, step, device,
                             dtype=next(start_model.parameters()).dtype)
    return diagnose_divergence(start_model, prompts.embed(start_model.feature_slots), step, loss,
                               config.learning_rate_at(step))
