r"""One training loop for many models at once: the stacked trainer.

A *stack* holds the weights of $E$ models (its *members*) along one axis of every parameter, so
one tensor pass per step advances them all. Two stacks exist: the one-block sufficient-statistics
stack of :mod:`~nlicl_lib.training.one_block` (member axis 0) and the padded multi-block stack
:class:`~nlicl_lib.training.ensemble.StackedGLULSA` (member axis 1). :func:`train_stacked` trains
either. Step $t$:

1. **Sampling per group.** Members are split into groups (:class:`MemberGroup`); group $g$ draws
   one batch $\{(x_i, y_i)_{i \le n_g + 1}\}$ from $(s_g, t)$ alone
   (:func:`~nlicl_lib.core.tasks.sample_prompts`), and a member of the group with context length
   $n_e \le n_g$ reads its first $n_e$ context pairs and the same query (context tokens are i.i.d.,
   so that is a prompt of length $n_e$: :func:`truncate_context`).
2. **Loss per member.** $\mathcal L_e = \frac1B \sum_b (\hat y_{e,b} - y_{b,n+1})^2$; the summed
   objective $\sum_e \mathcal L_e / \mathbb E[y^2]_e$ gives every member the gradient of its own
   normalised loss (members share no weight).
3. **Per-member clipping and Adam.** Member $e$'s gradient is clipped to norm $c$ on its own
   (:func:`clip_per_member`, what ``torch.nn.utils.clip_grad_norm_`` does to one model), then
   Adam (:class:`MemberAdam`) steps it with its own rate $\eta_e(t) = \eta_e\, s(t)/\eta$, where
   $s(t)$ is the schedule of the :class:`~nlicl_lib.training.train.TrainConfig` and $\eta$ its
   peak (by default $\eta_e = \eta$, and $\eta_e(t) = s(t)$ exactly).
4. **Divergence.** A member whose loss is not finite either stops the training
   (:class:`~nlicl_lib.core.errors.TrainingDivergedError`) or is frozen from that step on, its
   history ``NaN`` (:class:`Divergence` says when).

So member $e$ follows the trajectory :func:`~nlicl_lib.training.train.train` gives it alone on
the same prompts (``tests/test_stacked_trainer.py`` checks it in float64), while the Python
overhead of a step is paid once for all members.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, TrainingDivergedError
from nlicl_lib.core.progress import Progress
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.training.train import TrainConfig


def truncate_context(prompts: Prompts, context_length: int) -> Prompts:
    """The prompts with only their first ``context_length`` context pairs, same query."""
    n = prompts.context_length
    if not 1 <= context_length <= n:
        raise ConfigError("context_length", context_length, f"an integer between 1 and {n}")
    keep = list(range(context_length)) + [n]
    return Prompts(prompts.x[:, keep], prompts.y[:, keep], prompts.coefficients)


@dataclass(frozen=True)
class MemberGroup:
    """Members that train on one stream of prompts: those of ``task`` and ``seed``
    (step $t$: ``sample_prompts(task, batch, seed, t)``). ``members``: their indices in the stack;
    ``context_lengths``: the context length $n_e \\le n$ each of them reads (the first $n_e$
    context pairs of every prompt; default: all of ``task.context_length``)."""

    task: TaskConfig
    seed: int
    members: tuple[int, ...]
    context_lengths: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(int(e) for e in self.members))
        n = self.task.context_length
        lengths = (n,) * len(self.members) if self.context_lengths is None else tuple(
            int(c) for c in self.context_lengths)
        if not self.members:
            raise ConfigError("members", self.members, "at least one member per group")
        if len(lengths) != len(self.members):
            raise ConfigError("context_lengths", lengths, f"one per member ({len(self.members)})")
        if not all(1 <= c <= n for c in lengths):
            raise ConfigError("context_lengths", lengths, f"integers between 1 and the group's n={n}")
        object.__setattr__(self, "context_lengths", lengths)


def check_groups(groups: Sequence[MemberGroup], members: int) -> list[MemberGroup]:
    """``groups`` as a list, checked to hold every member ``0 .. members - 1`` exactly once."""
    groups = list(groups)
    if not groups or not all(isinstance(g, MemberGroup) for g in groups):
        raise ConfigError("groups", groups, "a non-empty list of MemberGroup")
    listed = sorted(e for g in groups for e in g.members)
    if listed != list(range(members)):
        raise ConfigError("groups", listed, f"every member 0..{members - 1} in exactly one group")
    return groups


def gather_members(parts: Sequence[torch.Tensor], groups: Sequence[MemberGroup]) -> torch.Tensor:
    """Per-group tensors (rows: the group's members, in the group's order) as one tensor whose
    row $e$ is member $e$."""
    order = [e for group in groups for e in group.members]
    back = torch.as_tensor(np.argsort(order), device=parts[0].device)
    return torch.cat(list(parts)).index_select(0, back)


class StackedMembers(Protocol):
    """What :func:`train_stacked` needs of a stack (a ``torch.nn.Module``): its parameters hold
    one slice per member along ``member_dim``, and :meth:`member_predictions` returns every
    member's predictions on its group's prompts, ``(E, B)``, and the labels they are compared
    with (``(E, B)``, or ``(B,)`` when all members read the same prompts)."""

    member_dim: int
    member_count: int

    def member_predictions(self, groups: Sequence[MemberGroup], batches: Sequence[Prompts]
                           ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]: ...


def clip_per_member(grads: Sequence[torch.Tensor], max_norm: float, member_dim: int = 0) -> None:
    """``torch.nn.utils.clip_grad_norm_`` applied, in place, to each member's own gradients:
    the tensors of ``grads`` hold one slice per stacked model along ``member_dim``. Member $e$'s
    gradient $G_e$ is scaled by $\\min(1, c / (\\lVert G_e \\rVert + 10^{-6}))$."""
    squares = sum(g.pow(2).movedim(member_dim, 0).reshape(g.shape[member_dim], -1).sum(dim=1)
                  for g in grads)
    scale = torch.clamp(max_norm / (squares.sqrt() + 1e-6), max=1.0)
    for g in grads:
        shape = [1] * g.dim()
        shape[member_dim] = -1
        g.mul_(scale.reshape(shape))


class MemberAdam:
    r"""Adam with a learning rate and a gradient-norm clip per member.

    The update is torch's, term by term: $m \leftarrow \beta_1 m + (1 - \beta_1) g$,
    $v \leftarrow \beta_2 v + (1 - \beta_2) g^2$,
    $p \leftarrow p - \frac{\eta_e}{1 - \beta_1^t}\, m / (\sqrt{v / (1 - \beta_2^t)} + \epsilon)$.
    The step size $\eta_e / (1 - \beta_1^t)$ is computed in the dtype of the rates handed to
    :meth:`step` and then rounded to the weights' dtype: with float64 rates this is bit for bit
    ``torch.optim.Adam`` at rate $\eta_e$ (measured on CPU, torch 2.13). A member whose rate is 0
    is frozen: its gradient counts as 0 (also in its clipping norm). Non-finite gradient entries
    count as 0 (they can only come from a frozen, diverged member)."""

    def __init__(self, params: Sequence[torch.Tensor], member_dim: int,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        self.member_dim = member_dim
        self.betas, self.eps = betas, eps
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.step_count = 0

    def _per_member(self, values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        shape = [1] * like.dim()
        shape[self.member_dim] = -1
        return values.reshape(shape)

    @torch.no_grad()
    def step(self, rates: Sequence[torch.Tensor], clip: float | None) -> None:
        """``rates``: one ``(E,)`` tensor per parameter, each member's rate at this step."""
        grads = [torch.nan_to_num(p.grad, nan=0.0, posinf=0.0, neginf=0.0)
                 * self._per_member((rate > 0).to(p.dtype), p)
                 for p, rate in zip(self.params, rates, strict=True)]
        if clip is not None:
            clip_per_member(grads, clip, member_dim=self.member_dim)
        self.step_count += 1
        beta1, beta2 = self.betas
        bias1 = 1 - beta1**self.step_count
        bias2_sqrt = math.sqrt(1 - beta2**self.step_count)
        for p, g, m, v, rate in zip(self.params, grads, self.exp_avg, self.exp_avg_sq, rates,
                                    strict=True):
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
            step_size = self._per_member((rate / bias1).to(p.dtype), p)
            p.sub_(step_size * m / denom)


@dataclass(frozen=True)
class Divergence:
    """A member's loss stopped being finite at ``step`` (0-based): that ``loss``, at its
    ``learning_rate`` of that step. Its weights are those before the step."""

    step: int
    loss: float
    learning_rate: float


@dataclass
class StackedTraining:
    """``loss_history``: ``(steps, E)`` batch losses (unnormalised), ``NaN`` from a member's
    divergence on; ``divergences[e]``: member $e$'s :class:`Divergence` or ``None``;
    ``seconds``: wall time of the whole loop (shared by all members)."""

    loss_history: np.ndarray
    divergences: list[Divergence | None]
    seconds: float
    device: str

    @property
    def diverged(self) -> list[bool]:
        return [d is not None for d in self.divergences]


def train_stacked(
    stack: StackedMembers,
    groups: Sequence[MemberGroup],
    config: TrainConfig,
    normalisers: Sequence[float],
    learning_rates: Sequence[float] | None = None,
    trainable: Mapping[str, Sequence[bool]] | None = None,
    stop_on_divergence: bool = True,
    progress: bool | None = None,
    desc: str | None = None,
) -> StackedTraining:
    r"""Train every member of ``stack`` in place (module doc) under ``config``'s steps, batch,
    schedule and clipping; ``config.seed`` is not read (each group has its seed).

    ``normalisers``: $\mathbb E[y^2]_e$ per member, dividing its loss in the objective.
    ``learning_rates``: peak rate $\eta_e$ per member, held in the weights' dtype; by default
    every member's rate is the schedule's own float $s(t)$ (as for
    :func:`~nlicl_lib.training.train.train`). ``trainable``: parameter name $\to$ one flag per
    member; ``False`` freezes that parameter of that member. ``stop_on_divergence``: raise
    :class:`~nlicl_lib.core.errors.TrainingDivergedError` at the first non-finite loss, else
    freeze the member and go on.
    """
    if not isinstance(config, TrainConfig):
        raise ConfigError("config", type(config).__name__, "a TrainConfig")
    if not callable(getattr(stack, "member_predictions", None)):
        raise ConfigError("stack", type(stack).__name__, "a stacked module (member_predictions)")
    count = stack.member_count
    groups = check_groups(groups, count)
    names, params = zip(*stack.named_parameters(), strict=True)
    dtype, device = params[0].dtype, params[0].device
    if len(normalisers) != count or not all(v > 0 for v in normalisers):
        raise ConfigError("normalisers", list(normalisers), f"{count} positive numbers, one per member")
    peak = None
    if learning_rates is not None:
        rates = [float(r) for r in learning_rates]
        if len(rates) != count or not all(math.isfinite(r) and r > 0 for r in rates):
            raise ConfigError("learning_rates", rates, f"{count} positive rates, one per member")
        peak = torch.tensor(rates, dtype=dtype, device=device)
    rate_dtype = torch.float64 if peak is None else dtype
    masks = {name: torch.ones(count, dtype=rate_dtype, device=device) for name in names}
    for name, flags in (trainable or {}).items():
        if name not in masks or len(flags) != count:
            raise ConfigError("trainable", name, f"a parameter of the stack ({', '.join(names)}) "
                              f"with {count} flags")
        masks[name] = torch.tensor([bool(f) for f in flags], dtype=rate_dtype, device=device)
    normaliser = torch.tensor(list(normalisers), dtype=dtype, device=device)

    optimiser = MemberAdam(params, stack.member_dim)
    alive = np.ones(count, dtype=bool)
    divergences: list[Divergence | None] = [None] * count
    history = np.full((config.steps, count), np.nan)
    start = time.perf_counter()
    with Progress(config.steps, progress, desc=desc or f"training {count} models on {device.type}"
                  ) as bar:
        for step in range(config.steps):
            schedule = config.learning_rate_at(step)
            if peak is None:
                rate = torch.full((count,), schedule, dtype=torch.float64, device=device)
            else:
                rate = peak * (schedule / config.learning_rate)
            batches = [sample_prompts(g.task, config.batch_size, g.seed, step, device, dtype=dtype)
                       for g in groups]
            prediction, labels = stack.member_predictions(groups, batches)
            losses = torch.mean((prediction - labels) ** 2, dim=1)  # (E,)
            values = losses.detach().cpu().numpy()
            for e in np.flatnonzero(alive & ~np.isfinite(values)):
                if stop_on_divergence:
                    raise TrainingDivergedError(step, float(values[e]), float(rate[e]))
                divergences[e] = Divergence(step, float(values[e]), float(rate[e]))
                alive[e] = False
            on = torch.as_tensor(alive, device=device)
            for p in params:
                p.grad = None
            (torch.where(on, losses, 0.0) / normaliser).sum().backward()
            rate = rate * on
            optimiser.step([rate * masks[name] for name in names], config.grad_clip)
            history[step] = np.where(alive, values, np.nan)
            shown = values[alive] / np.asarray(normalisers)[alive]
            bar.update(1, loss=float(shown.mean()) if shown.size else math.nan)
    seconds = time.perf_counter() - start
    return StackedTraining(history, divergences, seconds, str(device))
