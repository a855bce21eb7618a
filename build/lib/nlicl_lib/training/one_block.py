r"""Train many one-block GLU-LSA models at once (the sweeps behind the chapters' sliders).

A sweep over the context length $n$, the degree $k$ or the seed trains one model per point.
Training them one after the other with :func:`~nlicl_lib.training.train.train` costs one Python loop and
one full forward pass per model and step; here every model of a sweep advances in the same
step, at the cost of one batch of prompts per distinct task. Two facts make that exact:

1. **Truncated contexts.** Context tokens are i.i.d., so the first $n$ context pairs of a prompt
   of length $n_{\max}$, with the same query, are a prompt of length $n$. One batch of the
   longest task serves every context length of a sweep.
2. **Sufficient statistics.** A block whose bilinear GLU reads $x$ and writes the slots, with
   sparse attention, writes $s(x) = C\,\phi_2(x)$ (unit $u$ computes
   $(a_u^\top x)(b_u^\top x)$, a quadratic form, and $C$ mixes them through $W_3$). So its
   features are $\psi(x) = (x; s(x)) = A\,\psi_0(x)$ with $\psi_0 = (x; \phi_2)$ the monomials
   of degree 1 and 2 and $A = \mathrm{blkdiag}(I_d, C)$, and its prediction is

   $$\hat y = \psi(x_{n+1})^\top \Gamma\, \tfrac1n \textstyle\sum_{i \le n} y_i \psi(x_i)
      = \psi_0(x_{n+1})^\top A^\top \Gamma A\, g_0, \qquad
      g_0 = \tfrac1n \textstyle\sum_{i \le n} y_i \psi_0(x_i).$$

   $g_0$ and $\psi_0(x_{n+1})$ do not depend on the weights, so a training step needs them
   once per prompt (a running sum over the context gives $g_0$ for every $n$ at once).

The models are stacked along a leading *run* axis (:class:`_StackedBlocks`) and trained by the
one stacked trainer, :func:`~nlicl_lib.training.stacked.train_stacked` (per-run gradient
clipping and Adam), so each run follows exactly the trajectory
:func:`~nlicl_lib.training.train.train` would give it on the same prompts (the tests check this in
float64). The results are ordinary
:class:`~nlicl_lib.core.models.InContextRegressor` models built by
:func:`~nlicl_lib.core.models.build_model` and loaded with the trained weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap, quadratic_form_matrix
from nlicl_lib.core.tasks import Prompts, TaskConfig
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.training.stacked import MemberGroup, gather_members, train_stacked
from nlicl_lib.training.train import TrainConfig, TrainResult


@dataclass(frozen=True)
class Run:
    """One model of a sweep: its task, its model (one bilinear GLU-LSA block) and its seeds.

    ``seed`` fixes the initialisation (as in :func:`~nlicl_lib.core.models.build_model`);
    ``data_seed`` (default: ``seed``) the training prompts, as ``TrainConfig.seed`` does. Runs
    that share a data seed and a task up to $n$ share their prompts (truncated), so extra
    initialisations on the same prompts cost almost nothing.
    """

    task: TaskConfig
    model: ModelConfig = ModelConfig(kind="glu-lsa")
    seed: int = 0
    data_seed: int | None = None

    @property
    def prompt_seed(self) -> int:
        return self.seed if self.data_seed is None else self.data_seed


@dataclass
class SweepResult:
    """The trained models in the order of the runs, their training records, and the wall time of
    the joint training (``seconds``, shared by all runs)."""

    runs: list[Run]
    models: list[InContextRegressor]
    training: list[TrainResult]
    seconds: float
    device: str


def _check_run(run: Run) -> ModelConfig:
    if not isinstance(run, Run):
        raise ConfigError("run", type(run).__name__, "a Run")
    config = run.model.resolved(run.task)
    ok = (config.kind == "glu-lsa" and config.depth == 1 and config.attention == "sparse"
          and config.glu_reads == "x" and config.glu_writes == "slots"
          and config.activation == "none")
    if not ok:
        raise ConfigError("model", config, "one bilinear GLU-LSA block (reads x, writes the "
                          "slots, sparse attention): train other models with nlicl_lib.training.train")
    if run.task.covariance is not None:
        raise ConfigError("covariance", "given", "isotropic inputs")
    return config


class _StackedBlocks(torch.nn.Module):
    """``R`` one-block models' weights stacked on a leading axis (the member axis of
    :func:`~nlicl_lib.training.stacked.train_stacked`), predicting from statistics."""

    member_dim = 0

    def __init__(self, models: Sequence[InContextRegressor]):
        super().__init__()
        glus = [m.blocks[0].glu for m in models]
        self.input_dim = models[0].input_dim
        self.member_count = len(models)
        self.w1 = torch.nn.Parameter(torch.stack([g.w1.detach().clone() for g in glus]))
        self.w2 = torch.nn.Parameter(torch.stack([g.w2.detach().clone() for g in glus]))
        self.w3 = torch.nn.Parameter(torch.stack([g.w3.detach().clone() for g in glus]))
        self.gamma = torch.nn.Parameter(
            torch.stack([m.blocks[0].lsa.gamma.detach().clone() for m in models]))

    def feature_matrix(self) -> torch.Tensor:
        """$A = \\mathrm{blkdiag}(I_d, C)$ per run: ``(R, d + m, d + p_2)``."""
        d = self.input_dim
        slots = self.w3 @ quadratic_form_matrix(self.w1, self.w2, d)  # (R, m, p2)
        runs, m, p2 = slots.shape
        top = torch.cat([torch.eye(d, dtype=slots.dtype, device=slots.device).expand(runs, d, d),
                         slots.new_zeros(runs, d, p2)], dim=2)
        return torch.cat([top, torch.cat([slots.new_zeros(runs, m, d), slots], dim=2)], dim=1)

    def forward(self, g0: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        """``g0``, ``query``: ``(R, B, d + p_2)``; returns $\\hat y$, ``(R, B)``."""
        kernel = self.feature_matrix()
        kernel = kernel.transpose(1, 2) @ self.gamma @ kernel  # A^T Gamma A, (R, p, p)
        return torch.einsum("rbf,rfg,rbg->rb", query, kernel, g0)

    def member_predictions(self, groups: Sequence[MemberGroup], batches: Sequence[Prompts]
                           ) -> tuple[torch.Tensor, torch.Tensor]:
        """$\\hat y$ and the query labels of every run, ``(R, B)`` each: per group one batch of
        prompts, whose statistics serve every context length of the group at once."""
        g0_parts, query_parts, label_parts = [], [], []
        for group, prompts in zip(groups, batches, strict=True):
            lengths = sorted(set(group.context_lengths))
            slot = [lengths.index(n) for n in group.context_lengths]
            g0, query = prompt_statistics(prompts, lengths)
            g0_parts.append(g0[slot])
            query_parts.append(query.expand(len(group.members), *query.shape))
            label_parts.append(prompts.query_label.expand(len(group.members), -1))
        g0, query = gather_members(g0_parts, groups), gather_members(query_parts, groups)
        return self(g0, query), gather_members(label_parts, groups)

    def load_into(self, models: Sequence[InContextRegressor]) -> None:
        with torch.no_grad():
            for r, model in enumerate(models):
                glu, lsa = model.blocks[0].glu, model.blocks[0].lsa
                glu.w1.copy_(self.w1[r])
                glu.w2.copy_(self.w2[r])
                glu.w3.copy_(self.w3[r])
                lsa.gamma.copy_(self.gamma[r])


def prompt_statistics(prompts: Prompts, context_lengths: Sequence[int]
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""$g_0 = \frac1n \sum_{i \le n} y_i \psi_0(x_i)$ for each $n$ in ``context_lengths`` (the
    first $n$ context pairs) and $\psi_0(x_{n+1})$, with $\psi_0 = (x; \phi_2)$.

    Returns ``g0`` of shape ``(len(context_lengths), B, d + p_2)`` and ``query`` ``(B, d + p_2)``.
    """
    basis = PolyMap.monomials(prompts.x.shape[-1], [1, 2])
    n = prompts.context_length
    psi0 = basis(prompts.x)
    running = torch.cumsum(prompts.y[:, :n, None] * psi0[:, :n], dim=1)
    index = torch.as_tensor([c - 1 for c in context_lengths], device=psi0.device)
    lengths = torch.as_tensor(list(context_lengths), dtype=psi0.dtype, device=psi0.device)
    g0 = running.index_select(1, index).permute(1, 0, 2) / lengths[:, None, None]
    return g0, psi0[:, n]


def run_groups(runs: Sequence[Run]) -> list[MemberGroup]:
    """Runs that share a prompt seed and a task up to its context length share one batch of
    prompts (the longest context, truncated for the others): one group per such set, in the
    order of first appearance."""
    keyed: dict[tuple, list[int]] = {}
    for r, run in enumerate(runs):
        keyed.setdefault((replace(run.task, context_length=1), run.prompt_seed), []).append(r)
    return [MemberGroup(replace(task, context_length=max(runs[r].task.context_length for r in members)),
                        seed, tuple(members), tuple(runs[r].task.context_length for r in members))
            for (task, seed), members in keyed.items()]


def train_one_block_runs(runs: Sequence[Run], config: TrainConfig,
                         device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
                         progress: bool | None = None) -> SweepResult:
    """Train every run of ``runs`` at once (see the module doc) with
    :func:`~nlicl_lib.training.stacked.train_stacked`; ``config.seed`` is ignored, each run has
    its own seeds. All runs need the same $d$, slots $m$ and width $h$.

    Raises :class:`~nlicl_lib.core.errors.TrainingDivergedError` if any run's loss stops being finite.
    """
    runs = list(runs)
    if not runs:
        raise ConfigError("runs", runs, "at least one run")
    if not isinstance(config, TrainConfig):
        raise ConfigError("config", type(config).__name__, "a TrainConfig")
    resolved = [_check_run(run) for run in runs]
    shapes = {(run.task.input_dim, c.feature_slots, c.glu_width) for run, c in zip(runs, resolved, strict=True)}
    if len(shapes) != 1:
        raise ConfigError("runs", sorted(shapes), "runs with one d, one slot count and one width")
    device = torch.device(device)
    models = [build_model(run.model, run.task, device, seed=run.seed, dtype=dtype) for run in runs]
    stacked = _StackedBlocks(models).to(device)
    result = train_stacked(stacked, run_groups(runs), config, [null_loss(run.task) for run in runs],
                           progress=progress, desc=f"training {len(runs)} blocks on {device.type}")
    stacked.load_into(models)
    training = [
        TrainResult(result.loss_history[:, r].copy(), null_loss(run.task), result.seconds, config.steps,
                    str(device), False, {**asdict(config), "seed": run.prompt_seed, "init_seed": run.seed,
                                         "joint_runs": len(runs)})
        for r, run in enumerate(runs)
    ]
    return SweepResult(runs, models, training, result.seconds, str(device))
