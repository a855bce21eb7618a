r"""Train several structured GLU-LSA models at once, in one tensor pass per step (the fast path of
the sweeps in chapters 4 and 5).

Every member is a stack of bilinear GLU-LSA blocks with sparse attention (Definition 2
(def-models), Theorem 13 (thm-depth-bcd)): block $\ell$'s GLU reads $(x; \text{slots})$ and
adds $W_3^{(\ell)}\big((W_1^{(\ell)} z) \odot (W_2^{(\ell)} z)\big)$ to the slots, its
attention moves every label by $-\psi_j^\top \Gamma_\ell\, g_\ell$ with
$\psi = (x; \text{slots})$ and $g_\ell = \frac1n \sum_{i \le n} (\text{label}_i)\, \psi_i$.
Members may differ in slots $m$, width $h$, depth $L$, what the GLU reads, initial weights and
learning rate: they are zero-padded to the largest $m$, $h$ and $L$, and masks keep the padding
at zero. A padded slot is never
written, a padded unit is $0$, a padded block adds nothing, so each member computes exactly what
it computes alone; the summed loss gives each member its own gradient, and Adam and gradient
clipping act per member (the one stacked trainer,
:func:`~nlicl_lib.training.stacked.train_stacked`). Member $e$ therefore follows the run
:func:`nlicl_lib.training.train.train` would make with the same seed (checked in the tests), while the
Python overhead of a step is paid once for all members.

Shapes: ``(members E, batch B, tokens n + 1, features)``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from nlicl_lib.core.device import describe_device, resolve_device
from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.monomials import evaluate_monomials, monomial_exponents, quadratic_form_matrix
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.training.evaluate import paired_test_losses
from nlicl_lib.training.stacked import MemberGroup, gather_members, train_stacked, truncate_context
from nlicl_lib.training.train import TrainConfig, diagnose_divergence


@dataclass
class EnsembleResult:
    """``models``: one trained :class:`InContextRegressor` per member (float32, on ``device``);
    ``configs``: the resolved config of each member (``None`` for members given as models);
    ``loss_history``: ``(E, steps)`` batch losses (unnormalised); ``diverged``: members whose
    loss became NaN (their training stopped there); ``divergence``: for each member, why
    (the message of :func:`nlicl_lib.training.train.diagnose_divergence`: a forward pass that overflows
    at the initial weights, or a too-large step), ``None`` for members that did not diverge."""

    models: list[InContextRegressor]
    configs: list[ModelConfig | None]
    loss_history: np.ndarray
    null_loss: float
    seconds: float
    steps: int
    device: str
    diverged: list[bool]
    divergence: list[str | None] = field(default_factory=list)


class StackedGLULSA(torch.nn.Module):
    """The members' weights stacked along axis 1 (axis 0: the block), with their masks (see the
    module doc)."""

    member_dim = 1

    def __init__(self, models: Sequence[InContextRegressor], input_dim: int):
        super().__init__()
        d = input_dim
        members = len(models)
        self.input_dim = d
        self.member_count = members
        self.slots = max(m.feature_slots for m in models)
        self.width = max(b.glu.width for m in models for b in m.blocks)
        self.depth = max(m.depth for m in models)
        big_m, big_h, feats = self.slots, self.width, d + self.slots
        dtype = next(models[0].parameters()).dtype
        shapes = {"w1": (big_h, feats), "w2": (big_h, feats), "w3": (big_m, big_h),
                  "gamma": (feats, feats)}
        for name, shape in shapes.items():
            value = torch.zeros(self.depth, members, *shape, dtype=dtype)
            mask = torch.zeros_like(value)
            for e, model in enumerate(models):
                m = model.feature_slots
                rows = list(range(d)) + list(range(d, d + m))  # (x; this member's slots)
                for layer, block in enumerate(model.blocks):
                    glu, h = block.glu, block.glu.width
                    if name in ("w1", "w2"):
                        read = getattr(glu, name).detach()
                        cols = rows[: read.shape[1]]  # "x" reads the first d columns only
                        value[layer, e, :h, cols] = read
                        mask[layer, e, :h, cols] = 1.0
                    elif name == "w3":
                        value[layer, e, :m, :h] = glu.w3.detach()
                        mask[layer, e, :m, :h] = 1.0
                    else:
                        idx = torch.tensor(rows)
                        value[layer, e][idx[:, None], idx[None, :]] = block.lsa.gamma.detach()
                        mask[layer, e][idx[:, None], idx[None, :]] = 1.0
            setattr(self, name, torch.nn.Parameter(value))
            self.register_buffer(f"{name}_mask", mask)
        self._monomials = monomial_exponents(d, [1, 2])
        # GLUs after the first that read no slot: every feature is a quadratic form of x
        self.reads_input_only = bool((self.w1_mask[1:, :, :, d:] == 0).all()
                                     and (self.w2_mask[1:, :, :, d:] == 0).all())

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r"""Predictions $\hat y = -[Z_L]_{D, n+1}$ of every member, ``(E, B)``, for inputs ``x``
        ``(B, n + 1, d)`` and labels ``y`` ``(B, n + 1)`` (the query label is not read).

        Stacks whose GLUs all read $x$ only go through :meth:`forward_statistics`, the others
        through :meth:`forward_tokens`; both compute the same function."""
        if self.reads_input_only:
            return self.forward_statistics(x, y)
        return self.forward_tokens(x, y)

    def forward_statistics(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        r"""Stacks whose GLUs read $x$ only, through the prompt's sufficient statistics.

        Block $\ell$'s GLU adds the quadratic forms $C_\ell\,\phi_2(x)$ to the slots
        ($C_\ell = W_3 U$, $U_{u\alpha}$ the coefficient of $x^\alpha$ in unit $u$'s
        $(a_u^\top x)(b_u^\top x)$), so block $\ell$'s features are $\psi_\ell = \tilde C_\ell\,
        \mu(x)$ with $\mu = (x; \phi_2)$ and $\tilde C_\ell = \mathrm{blkdiag}(I_d,
        \textstyle\sum_{\ell' \le \ell} C_{\ell'})$. Every label then stays $y_i - \mu(x_i)^\top
        \theta_\ell$, and the stack is $L$ steps of preconditioned GD on $\mu$:
        $\theta_\ell = \theta_{\ell-1} + A_\ell\,(\bar g - H\theta_{\ell-1})$ with
        $A_\ell = \tilde C_\ell^\top \Gamma_\ell \tilde C_\ell$,
        $\bar g = \frac1n\sum_i y_i\mu(x_i)$, $H = \frac1n \sum_i \mu(x_i)\mu(x_i)^\top$, and
        $\hat y = \mu(x_{n+1})^\top\theta_L$. Per prompt only $\bar g$, $H$ and
        $\mu(x_{n+1})$ are needed, shared by all members."""
        n, d = x.shape[1] - 1, self.input_dim
        mu = evaluate_monomials(x, self._monomials)  # (B, n + 1, d + p2)
        mean_feature = torch.einsum("bi,bik->bk", y[:, :n], mu[:, :n]) / n
        moment = None
        if self.depth > 1:
            moment = torch.einsum("bik,bil->bkl", mu[:, :n], mu[:, :n]) / n
        members = self.w1.shape[1]
        eye = torch.eye(d, dtype=x.dtype, device=x.device)
        slot_coef = x.new_zeros(members, self.slots, mu.shape[-1] - d)
        theta = None
        for layer in range(self.depth):
            w1 = (self.w1[layer] * self.w1_mask[layer])[..., :d]
            w2 = (self.w2[layer] * self.w2_mask[layer])[..., :d]
            w3 = self.w3[layer] * self.w3_mask[layer]
            gamma = self.gamma[layer] * self.gamma_mask[layer]
            slot_coef = slot_coef + torch.bmm(w3, quadratic_form_matrix(w1, w2, d))
            coef = torch.cat([
                torch.cat([eye.expand(members, d, d), slot_coef.new_zeros(members, d,
                                                                          slot_coef.shape[2])], 2),
                torch.cat([slot_coef.new_zeros(members, self.slots, d), slot_coef], 2)], 1)
            precond = coef.transpose(1, 2) @ gamma @ coef  # A_l, (E, d + p2, d + p2)
            if theta is None:
                grad = mean_feature.expand(members, -1, -1)
                theta = torch.matmul(grad, precond.transpose(1, 2))
            else:
                # H theta per prompt, as one broadcast product (an einsum here runs B tiny matmuls)
                grad = mean_feature - (theta.unsqueeze(-1) * moment).sum(-2)
                theta = theta + torch.bmm(grad, precond.transpose(1, 2))
        return (theta * mu[:, n]).sum(-1)

    def forward_tokens(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Any depth, token by token (the order of :class:`~nlicl_lib.core.models.InContextRegressor`)."""
        n = x.shape[1] - 1
        members = self.w1.shape[1]
        batch, tokens = x.shape[0], x.shape[1]
        # tokens of all prompts as rows, one matrix per member: every GLU product is one bmm
        xs = x.reshape(1, batch * tokens, -1).expand(members, -1, -1)
        slots = x.new_zeros(members, batch * tokens, self.slots)
        labels = torch.cat([y[:, :n], y.new_zeros(batch, 1)], dim=1).expand(members, -1, -1)
        for layer in range(self.depth):
            w1 = self.w1[layer] * self.w1_mask[layer]
            w2 = self.w2[layer] * self.w2_mask[layer]
            w3 = self.w3[layer] * self.w3_mask[layer]
            gamma = self.gamma[layer] * self.gamma_mask[layer]
            read = torch.cat([xs, slots], dim=-1)  # (E, B (n+1), d + M)
            hidden = torch.bmm(read, w1.transpose(1, 2)) * torch.bmm(read, w2.transpose(1, 2))
            slots = slots + torch.bmm(hidden, w3.transpose(1, 2))
            psi = torch.cat([xs, slots], dim=-1).view(members, batch, tokens, -1)
            g = (labels[:, :, :n].unsqueeze(-1) * psi[:, :, :n]).sum(2) / n  # (E, B, d + M)
            step = torch.bmm(g, gamma.transpose(1, 2))  # Gamma g, (E, B, d + M)
            if layer == self.depth - 1:  # only the query's label is read out
                return -(labels[:, :, n] - (psi[:, :, n] * step).sum(-1))
            labels = labels - (psi * step.unsqueeze(2)).sum(-1)
        raise AssertionError("unreachable")

    def member_predictions(self, groups: Sequence[MemberGroup], batches: Sequence[Prompts]
                           ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every member's predictions on its group's prompts (truncated to its context length),
        ``(E, B)``, and the query labels (``(B,)`` when all members read one batch whole)."""
        whole = groups[0].context_lengths == (batches[0].context_length,) * self.member_count
        if len(groups) == 1 and groups[0].members == tuple(range(self.member_count)) and whole:
            return self(batches[0].x, batches[0].y), batches[0].query_label
        predictions, labels = [], []
        for group, prompts in zip(groups, batches, strict=True):
            by_length = {}
            for n in sorted(set(group.context_lengths)):
                short = truncate_context(prompts, n)
                by_length[n] = self(short.x, short.y)  # all members; row e is kept where it belongs
            predictions.append(torch.stack([by_length[n][e] for e, n
                                            in zip(group.members, group.context_lengths, strict=True)]))
            labels.append(prompts.query_label.expand(len(group.members), -1))
        return gather_members(predictions, groups), gather_members(labels, groups)

    @torch.no_grad()
    def write_back(self, models: Sequence[InContextRegressor]) -> None:
        """Copy each member's (unpadded) weights into its own model."""
        d = self.input_dim
        for e, model in enumerate(models):
            m = model.feature_slots
            rows = torch.tensor(list(range(d)) + list(range(d, d + m)))
            for layer, block in enumerate(model.blocks):
                glu, h = block.glu, block.glu.width
                for name in ("w1", "w2"):
                    param = getattr(glu, name)
                    param.copy_(getattr(self, name)[layer, e, :h, rows[: param.shape[1]]])
                glu.w3.copy_(self.w3[layer, e, :m, :h])
                block.lsa.gamma.copy_(self.gamma[layer, e][rows[:, None], rows[None, :]])


def _check_member(model: InContextRegressor) -> None:
    for block in model.blocks:
        glu = block.glu
        if (glu is None or block.lsa.attention != "sparse" or glu.activation != "none"
                or glu.writes != "slots" or glu.reads == "all"):
            raise ConfigError("model", "block", "bilinear GLU-LSA blocks (GLU reading x or "
                              "x+slots, writing the slots, no activation; sparse attention)")


def train_ensemble(
    task: TaskConfig,
    members: Sequence[ModelConfig | InContextRegressor],
    train_config: TrainConfig,
    seeds: Sequence[int] | None = None,
    learning_rates: Sequence[float] | None = None,
    train_glu: Sequence[bool] | None = None,
    device: torch.device | str = "cpu",
    progress: bool | None = None,
    dtype: torch.dtype = torch.float32,
) -> EnsembleResult:
    r"""Train one model per entry of ``members`` (``dtype`` weights) on the same prompts (those
    of ``train_config.seed``) under ``train_config``'s schedule and clipping.

    A :class:`~nlicl_lib.core.models.ModelConfig` member is initialised by
    :func:`~nlicl_lib.core.models.build_model` with its seed (``seeds``, default
    ``train_config.seed``); an :class:`InContextRegressor` member (e.g. a construction) starts
    from a copy of its weights. ``learning_rates``: peak rate per member (default
    ``train_config.learning_rate``); ``train_glu``: ``False`` freezes that member's GLUs (only
    its $\Gamma_\ell$ learn). Objective per member: the normalised loss
    $\mathbb E[(\hat y - y_{n+1})^2]/\mathbb E[y^2]$.
    """
    if not isinstance(train_config, TrainConfig):
        raise ConfigError("train_config", type(train_config).__name__, "a TrainConfig")
    device = resolve_device(device)
    members = list(members)
    if not members:
        raise ConfigError("members", "[]", "at least one model")
    count = len(members)
    seeds = [train_config.seed] * count if seeds is None else list(seeds)
    rates = [train_config.learning_rate] * count if learning_rates is None else list(
        learning_rates)
    trainable = [True] * count if train_glu is None else [bool(t) for t in train_glu]
    if not len(seeds) == len(rates) == len(trainable) == count:
        raise ConfigError("seeds", (len(seeds), len(rates), len(trainable)),
                          f"one seed, learning rate and train_glu flag per member ({count})")
    models, configs = [], []
    for member, seed in zip(members, seeds, strict=True):
        if isinstance(member, ModelConfig):
            config = member.resolved(task)
            models.append(build_model(config, task, "cpu", seed=seed, dtype=dtype))
            configs.append(config)
        elif isinstance(member, InContextRegressor):
            models.append(copy.deepcopy(member).to(device="cpu", dtype=dtype))
            configs.append(None)
        else:
            raise ConfigError("member", type(member).__name__, "a ModelConfig or a model")
        if models[-1].input_dim != task.input_dim:
            raise ConfigError("member", f"d={models[-1].input_dim}", f"d={task.input_dim}")
        _check_member(models[-1])
    stack = StackedGLULSA(models, task.input_dim).to(device)
    group = MemberGroup(task, train_config.seed, tuple(range(count)))
    glu = {name: trainable for name in ("w1", "w2", "w3")}
    normaliser = null_loss(task)
    result = train_stacked(stack, [group], train_config, [normaliser] * count, learning_rates=rates,
                           trainable=glu, stop_on_divergence=False, progress=progress,
                           desc=f"{count} models on {device.type}")
    divergence: list[str | None] = [None] * count
    for e, diverged in enumerate(result.divergences):
        if diverged is not None:
            # models[e] still holds member e's initial weights (written back below); the prompts
            # of a step are a function of (seed, step) alone, so these are the ones it diverged on
            prompts = sample_prompts(task, train_config.batch_size, train_config.seed, diverged.step,
                                     device, dtype=stack.w1.dtype)
            z = prompts.embed(models[e].feature_slots).to(device="cpu")
            rate = rates[e] * train_config.learning_rate_at(diverged.step) / train_config.learning_rate
            divergence[e] = str(diagnose_divergence(models[e], z, diverged.step, diverged.loss, rate))
    stack.write_back(models)
    for model in models:
        model.to(device)
    return EnsembleResult(models, configs, np.ascontiguousarray(result.loss_history.T), normaliser,
                          result.seconds, train_config.steps, describe_device(device), result.diverged,
                          divergence)


def ensemble_test_loss(models: Sequence[InContextRegressor], task: TaskConfig,
                       num_prompts: int = 40000, batch_size: int = 10000, seed: int = 0,
                       device: torch.device | str = "cpu", integrate: str = "task+query",
                       return_samples: bool = False
                       ) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Test loss of every model on the same test prompts (stream ``STREAM_TEST``): returns
    (mean, standard error), each ``(E,)``, unnormalised; with ``return_samples`` also the
    per-prompt samples, ``(E, num_prompts)``.

    The means and errors of :func:`nlicl_lib.training.evaluate.paired_test_losses` (the library's
    one estimator on a fixed set of test prompts). Every member is a GD-form stack whose GLUs
    never read the label (Theorem 13 (thm-depth-bcd)), so by default the task coefficients and
    the query are integrated out exactly and only the context inputs are sampled;
    ``integrate="none"`` (or ``"task"``) runs the models as one stack."""

    models = list(models)
    if not models:
        raise ConfigError("models", models, "at least one model")
    for model in models:
        _check_member(model)
    device = resolve_device(device)
    if integrate == "task+query":
        predict, dtype = models, None
    else:
        stack = StackedGLULSA(models, task.input_dim).to(device=device)
        predict, dtype = (lambda prompts: stack(prompts.x, prompts.y)), stack.w1.dtype
    losses, samples = paired_test_losses(predict, task, num_prompts, seed, device, batch_size, dtype,
                                         integrate, return_samples=True)
    mean = np.array([loss.mean for loss in losses])
    error = np.array([loss.std_error for loss in losses])
    return (mean, error, samples) if return_samples else (mean, error)
