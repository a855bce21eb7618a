r"""Chapter 5's exact checks ("Depth distributes the kernel"): the construction of a stack as
block-coordinate descent, its residual stream, and the greedy reference's table. Nothing here
trains; trained stacks are passed in.

Block $\ell$ of a structured stack writes a feature block $\phi_\ell(x)$ into the slots and
steps on $\psi_\ell = (x; \phi_\ell)$ with preconditioner $\Gamma_\ell$. Starting from
$r^{(0)}_i = y_i$ (Theorem 13 (thm-depth-bcd)):

$$g_\ell = \frac1n \sum_{i \le n} r^{(\ell-1)}_i\, \psi_\ell(x_i), \qquad
r^{(\ell)}_i = r^{(\ell-1)}_i - \psi_\ell(x_i)^\top\Gamma_\ell\, g_\ell, \qquad
\hat y = \sum_\ell \psi_\ell(x_{n+1})^\top\Gamma_\ell\, g_\ell .$$

- :func:`random_gammas`, :func:`construction_report`, :func:`glu_unit_names`: the constructed
  stack (:func:`~nlicl_lib.theory.depth.deep_glu_lsa`) and what its GLU units multiply;
- :func:`stream_recursion_gap`: the stream's label entries against $r^{(\ell)}_i$ (context) and
  $-\hat y_\ell$ (query), float64;
- :func:`greedy_reference_report`, :func:`greedy_reference_values`: the greedy reference of
  Proposition 15 (prop-greedy-reference) on short contexts;
- :func:`stream_residuals`, :func:`dense_attention_gap`, :func:`trained_stack_report`: the
  context labels after block $\ell$ against $y_i - \hat y_\ell(x_i)$, for constructed, trained
  and dense-attention stacks (Remark 14 (rem-full-attention));
- :func:`cubic_construction_report`: two blocks whose second GLU reads the slots and writes
  the cubic monomials $x_j \cdot s_i$.
"""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_float, check_int
from nlicl_lib.core.models import GLU, InContextRegressor
from nlicl_lib.core.monomials import PolyMap, monomial_name
from nlicl_lib.core.tasks import Prompts
from nlicl_lib.theory.depth import (
    GreedyReference,
    context_residuals,
    deep_glu_lsa,
    monomial_schedule,
    pad_outputs,
    stack_as_bcd,
    with_dense_attention,
    with_input,
)
from nlicl_lib.theory.predictors import block_coordinate_descent

PRINT_WIDTH = 76
"""Width the construction listings wrap to (the pages print at most 78 columns)."""


def random_gammas(size: int, count: int, scale: float = 0.05, seed: int = 0) -> list[np.ndarray]:
    r"""``count`` preconditioners $\Gamma_\ell$ of shape ``(size, size)`` ($d + m$), entries
    independent $\mathcal N(0, \text{scale}^2)$ from ``np.random.default_rng(seed)``."""
    size = check_int("size", size, minimum=1)
    count = check_int("count", count, minimum=1)
    scale = check_float("scale", scale, minimum=0.0)
    rng = np.random.default_rng(seed)
    return [scale * rng.standard_normal((size, size)) for _ in range(count)]


def glu_unit_names(glu: GLU, reads: Sequence[str]) -> list[str]:
    r"""``"a*b"`` for each unit $u_j = (W_1 z)_j (W_2 z)_j$ of a constructed GLU whose rows of
    $W_1, W_2$ each pick one coordinate of its input $z$ (named by ``reads``)."""
    if len(reads) != glu.w1.shape[1]:
        raise ConfigError("reads", list(reads), f"one name per GLU input ({glu.w1.shape[1]})")
    return [f"{reads[int(glu.w1[u].argmax())]}*{reads[int(glu.w2[u].argmax())]}"
            for u in range(glu.width)]


def construction_report(schedule: Sequence[PolyMap], glu: GLU, input_names: Sequence[str]
                        ) -> str:
    """The feature block each block writes, then ``glu``'s units and what $W_3$ adds to each
    slot (e.g. ``x1*x2  ->  slots += (1, 0, 0)``)."""
    lines = [f"block {ell} writes phi_{ell} = ({', '.join(block.names)})"
             for ell, block in enumerate(schedule, start=1)]
    lines.append("\nblock 2's GLU units (W1 reads, W2 reads) and what W3 adds to each slot:")
    for unit, name in enumerate(glu_unit_names(glu, input_names)):
        added = ", ".join(str(int(round(v))) for v in glu.w3[:, unit].tolist())
        lines.append(f"  {name}  ->  slots += ({added})")
    return "\n".join(lines)


@torch.no_grad()
def stream_recursion_gap(model: InContextRegressor, schedule: Sequence[PolyMap],
                         gammas: Sequence[np.ndarray], prompts: Prompts) -> float:
    r"""The largest difference, over blocks $\ell$, prompts and context tokens, between the
    stream's label entries after block $\ell$ and the recursion's $r^{(\ell)}_i$, and between
    the query's label entry and $-\hat y_\ell$ (the partial prediction, negated)."""
    slots, n = model.feature_slots, prompts.context_length
    if len(schedule) != model.depth or len(gammas) != model.depth:
        raise ConfigError("schedule", len(schedule), f"one feature block and Γ per block "
                          f"({model.depth})")
    _, stream = model(prompts.embed(slots), return_stream=True)
    features = [with_input(pad_outputs(b, slots)) for b in schedule]
    _, residuals, partial = block_coordinate_descent(prompts, features, gammas,
                                                     return_residuals=True)
    return max(max(float((stream[f"block{ell}"][:, :n, -1] - residuals[ell - 1]).abs().max()),
                   float((stream[f"block{ell}"][:, n, -1] + partial[ell - 1]).abs().max()))
               for ell in range(1, len(schedule) + 1))


def greedy_reference_report(reference: GreedyReference, slots: int) -> str:
    """The greedy reference's table: test loss ± standard error on fresh contexts, the loss on
    the fitting contexts and the largest test context's share, per depth (over $E[y^2]$)."""
    null = reference.null_loss
    lines = [f"n = {reference.task.context_length}, m = {slots}: greedy reference, "
             "loss / E[y²]",
             " L   test (fresh)       fitting   largest context's share of the test"]
    for L in reference.depths:
        lines.append(f" {L}  {reference.normalised()[L - 1]:7.4f} ± "
                     f"{reference.std_error[L - 1] / null:6.4f}  "
                     f"{reference.fit_loss[L - 1] / null:7.4f}   "
                     f"{reference.worst_share[L - 1]:6.1%}")
    return "\n".join(lines)


def greedy_reference_values(reference: GreedyReference, prefix: str) -> dict[str, float | int]:
    """Glued by the page as ``{prefix}_...``: the deepest fit and test losses, the deepest
    largest context's share, and the depth with the lowest test loss."""
    return {f"{prefix}_fit_last": float(reference.fit_loss[-1] / reference.null_loss),
            f"{prefix}_test_last": float(reference.normalised()[-1]),
            f"{prefix}_worst_last": float(reference.worst_share[-1]),
            f"{prefix}_best_depth": int(np.argmin(reference.loss)) + 1}


@dataclass(frozen=True)
class StreamResiduals:
    r"""For each stack (by name), one prompt's context labels after each block $\ell = 0,
    \dots, L$ two ways (:func:`~nlicl_lib.theory.depth.context_residuals`): ``labels_seen``, the
    label entries of the stream, and ``requeried``, $y_i - \hat y_\ell(x_i)$; each
    ``(L + 1, n)`` float64."""

    labels_seen: dict[str, torch.Tensor]
    requeried: dict[str, torch.Tensor]

    def report(self) -> str:
        r"""Per stack: $\max |\text{label} - (y_i - \hat y_\ell(x_i))|$ and the mean of
        $r_i^2$ after each block."""
        lines = ["max |label slot - (y_i - prediction at x_i)|; mean r_i^2 after blocks 0.."
                 f"{max(len(v) for v in self.labels_seen.values()) - 1}"]
        for name, seen in self.labels_seen.items():
            mean_squares = ", ".join(f"{v:.2f}" for v in (seen**2).mean(dim=1).tolist())
            gap = float((seen - self.requeried[name]).abs().max())
            lines.append(f"  {name:11s}  {gap:.2g};  {mean_squares}")
        return "\n".join(lines)


def stream_residuals(stacks: dict[str, InContextRegressor], x: torch.Tensor, y: torch.Tensor
                     ) -> StreamResiduals:
    """:func:`~nlicl_lib.theory.depth.context_residuals` of a float64 copy of each stack on the
    prompt ``x`` ``(n + 1, d)``, ``y`` ``(n + 1,)`` (the stacks themselves are not changed)."""
    if not stacks:
        raise ConfigError("stacks", "{}", "at least one named stack")
    seen, requeried = {}, {}
    for name, model in stacks.items():
        seen[name], requeried[name] = context_residuals(copy.deepcopy(model).double(), x, y)
    return StreamResiduals(seen, requeried)


def dense_attention_gap(model: InContextRegressor, x: torch.Tensor, y: torch.Tensor,
                        perturbation_std: float = 0.05, seed: int = 0) -> float:
    r"""With dense attention (:func:`~nlicl_lib.theory.depth.with_dense_attention`: $P, Q$ of
    the GD form plus $\mathcal N(0, \text{std}^2)$ entries) the identity fails: the largest
    $|\text{label} - (y_i - \hat y_\ell(x_i))|$ over the largest label entry."""
    dense = with_dense_attention(copy.deepcopy(model).double(), perturbation_std, seed=seed)
    seen, requeried = context_residuals(dense, x, y)
    return float((seen - requeried).abs().max() / seen.abs().max())


def trained_stack_report(model: InContextRegressor, prompts: Prompts, share: float = 0.1) -> str:
    r"""A trained stack read as the recursion on its own features
    (:func:`~nlicl_lib.theory.depth.stack_as_bcd`): the largest difference between its output
    and :func:`block_coordinate_descent` on ``prompts`` (float64), and the quadratic forms its
    first block writes into the slots (terms of at least ``share`` of the largest)."""
    share = check_float("share", share, minimum=0.0, maximum=1.0)
    features, gammas = stack_as_bcd(copy.deepcopy(model).double())
    recursion = block_coordinate_descent(prompts, features, gammas)
    direct = copy.deepcopy(model).double()(prompts.embed(model.feature_slots)).detach()
    lines = ["trained stack against the recursion on its own features (polynomials of x):",
             f"  largest |difference| {float((recursion - direct).abs().max()):.2g}",
             "the trained stack's slots after block 1 (the quadratic forms it found):"]
    d = prompts.x.shape[-1]
    for row in features[0].coefficients[d:]:
        big = np.abs(row).max()
        terms = zip(row, features[0].exponents, strict=True)
        lines.append("  " + " ".join(f"{c:+.2f} {monomial_name(a)}" for c, a in terms
                                     if abs(c) > share * big))
    return "\n".join(lines)


def cubic_construction_report(input_dim: int, slots: int) -> str:
    r"""Two blocks on the cubic task whose second GLU reads $(x; \text{slots})$: block 1 writes
    the quadratics, block 2 replaces them by the cubic monomials with units $x_j \cdot s_i$
    and erases them with units $x_j x_k$. Lists what each block writes and block 2's units,
    wrapped to :data:`PRINT_WIDTH` columns without breaking a monomial such as ``x1 x2``."""
    schedule = monomial_schedule(input_dim, slots, 2, max_degree=3)
    size = input_dim + slots
    construction = deep_glu_lsa(input_dim, schedule, [np.zeros((size, size))] * 2, slots,
                                glu_reads="x+slots")
    slot_names = list(schedule[0].names) + ["0"] * (slots - schedule[0].num_outputs)
    reads = [f"x{j + 1}" for j in range(input_dim)] + [
        f"slot{i + 1}[{n.replace(' ', '')}]" for i, n in enumerate(slot_names)]
    units = glu_unit_names(construction.blocks[1].glu, reads)
    lines = [f"block {b} writes: {', '.join(f.names)}" for b, f in zip((1, 2), schedule,
                                                                       strict=True)]
    lines.append("block 2's units: " + ", ".join(units))
    wrapped = [textwrap.fill(line.replace(" x", "\u00a0x").replace(",\u00a0", ", "), PRINT_WIDTH,
                             subsequent_indent="  ", break_on_hyphens=False) for line in lines]
    return "\n".join(w.replace("\u00a0", " ") for w in wrapped)
