r"""Chapter 4's exact analysis ("How big must one block be?"): the best one-block losses the
page tabulates, and the size of a token that holds a whole kernel. Nothing here trains.

One block with $m$ slots takes one preconditioned GD step on $\psi = (x;\ s(x))$, and for any
such features the best $\Gamma$ and its loss are exact (Theorem 9 (thm-feature-optimum)): with
$\phi$ the target's monomials, $S = \mathbb E[\phi\phi^\top]$, $T = \mathbb E[\psi\psi^\top]$ and
$C = \mathbb E[\psi\phi^\top]$,

$$\mathcal L^*(\psi) = \operatorname{tr} S - \operatorname{tr}\big(T^{-1} C C^\top B^{-1}
C C^\top\big), \qquad
B = \tfrac{n-1}{n} C C^\top + \tfrac1n \mathbb E\big[\|\phi\|^2 \psi\psi^\top\big].$$

- :func:`one_block_references`: $\min_U \mathcal L^*((x; U\phi_2))$ over $m$-dimensional spans,
  the best $m$ monomials and the best span $h$ GLU units can write
  (:mod:`nlicl_lib.theory.capacity`, Proposition 12 (prop-capacity)), with the page's table;
- :func:`short_context_values`: the $d = 5$ kernel step at $n = 20$, where the context is too
  short to use the slots;
- :func:`embedding_table` and :func:`embedding_values`: the slots $m = \sum_{j=2}^k p_j$,
  $p_j = \binom{d+j-1}{j}$, the token size $D = d + m + 1$ and the $(d + m)^2$ entries of
  $\Gamma$ a single GD step on the degree-$\le k$ kernel needs, and the degree-2 bound of the
  cubic task.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.monomials import monomial_count, monomial_name
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.capacity import (
    BlockOptimum,
    best_coordinate_subset,
    best_feature_subspace,
    best_glu_features,
    degree_two_bound,
    required_embedding,
)
from nlicl_lib.theory.closed_forms import null_loss

GAP_FROM = 3
"""From this many slots (units) on the page compares the best monomials (units) with the best
span: below it the best span ($\\|x\\|^2$ first) is strictly better."""


@dataclass(frozen=True)
class OneBlockReferences:
    r"""The exact best loss of one block of every size on ``task`` (unnormalised; ``normaliser``
    is $\mathbb E[y^2]$).

    ``subspace[m]``: best $m$-dimensional span of quadratic forms, $m = 0, \dots, p_2$;
    ``coordinate[m]``: best $m$ monomials; ``units[h]``: best span of $h = 1, \dots, p_2$ GLU
    units writing $p_2$ slots; ``kernel`` $= \mathcal L^*((x; \phi_2))$, ``linear``
    $= \mathcal L^*(x)$; ``seconds``: the time the three searches took.
    """

    task: TaskConfig
    p2: int
    normaliser: float
    kernel: float
    linear: float
    subspace: dict[int, BlockOptimum]
    coordinate: dict[int, BlockOptimum]
    units: dict[int, BlockOptimum]
    seconds: float

    def best_single_slot(self) -> str:
        r"""The best one-slot feature $s(x) = c^\top\phi_2(x)$, scaled so that its largest
        coefficient is 1 (e.g. ``"1.00 x1^2 + 1.00 x2^2 + 1.00 x3^2"``)."""
        coefficients = self.subspace[1].features.coefficients[0]
        coefficients = coefficients / coefficients[np.abs(coefficients).argmax()]
        exponents = self.subspace[1].features.exponents
        terms = zip(coefficients, exponents, strict=True)
        return " + ".join(f"{c:.2f} {monomial_name(a)}" for c, a in terms if abs(c) > 1e-6)

    def report(self) -> str:
        """The page's table: best loss / E[y²] against $m$ (span, monomials) and $h$ (units)."""
        lines = [f"E[y^2] = {self.normaliser:.0f}; references computed in {self.seconds:.1f} s\n",
                 "best loss / E[y^2] with m slots (best span, best monomials) or h units:",
                 " m, h  span    monomials  units   the best monomials"]
        for m in range(self.p2 + 1):
            unit_loss = f"{self.units[m].loss / self.normaliser:.4f}" if m in self.units else "  -"
            names = ", ".join(self.coordinate[m].features.names or ()) or "(none: x only)"
            lines.append(f" {m}     {self.subspace[m].loss / self.normaliser:.4f}  "
                         f"{self.coordinate[m].loss / self.normaliser:.4f}"
                         f"     {unit_loss:6s}  {names}")
        lines.append("\nbest single slot: " + self.best_single_slot())
        return "\n".join(lines)

    def gap_text(self, losses: dict[int, BlockOptimum]) -> str:
        r"""``"equal"`` when ``losses[m]`` equals the best span's for every $m \ge 3$, otherwise
        the largest difference as a share of $\mathbb E[y^2]$."""
        gap = max(abs(losses[m].loss - self.subspace[m].loss)
                  for m in range(GAP_FROM, self.p2 + 1)) / self.normaliser
        return "equal" if gap == 0 else f"equal to {gap:.0e} of E[y²]"

    def prose_values(self) -> dict[str, float | int | str]:
        """The values the page's prose quotes, by ``prose`` name."""
        return {
            "kernel_norm": self.kernel / self.normaliser,
            "linear_norm": self.linear / self.normaliser,
            "one_slot_span": self.subspace[1].loss / self.normaliser,
            "one_slot_monomial": self.coordinate[1].loss / self.normaliser,
            "one_unit": self.units[1].loss / self.normaliser,
            "p2": self.p2,
            "monomial_gap": self.gap_text(self.coordinate),
            "unit_gap": self.gap_text(self.units),
        }


def one_block_references(task: TaskConfig) -> OneBlockReferences:
    r"""The best loss of one block with $m = 0, \dots, p_2$ slots (best span, by L-BFGS on the
    exact $\mathcal L^*$; best monomials, by enumeration) and with $h = 1, \dots, p_2$ units
    writing $p_2$ slots, on the quadratic ``task`` (isotropic inputs, degree 2)."""
    if task.kind != "poly" or task.degree != 2:
        raise ConfigError("task", f"kind={task.kind!r}, degree={task.degree}",
                          "the quadratic task: kind='poly', degree=2")
    p2 = monomial_count(task.input_dim, 2)
    linear = best_coordinate_subset(task, 0)
    kernel = best_coordinate_subset(task, p2).loss
    start = time.perf_counter()
    subspace = {m: best_feature_subspace(task, m) for m in range(p2 + 1)}
    coordinate = {m: best_coordinate_subset(task, m) for m in range(p2 + 1)}
    units = {h: best_glu_features(task, p2, h) for h in range(1, p2 + 1)}
    seconds = time.perf_counter() - start
    return OneBlockReferences(task, p2, linear.null_loss, kernel, linear.loss, subspace,
                              coordinate, units, seconds)


def short_context_values(input_dim: int = 5, context_length: int = 20) -> dict[str, float]:
    r"""The kernel optimum $\mathcal L^*((x; \phi_2))$ and linear GD's $\mathcal L^*(x)$, over
    $\mathbb E[y^2]$, of the quadratic task with ``input_dim`` $d$ and ``context_length`` $n$:
    quoted as ``kernel_d{d}_n{n}`` and ``linear_d{d}_n{n}``."""
    task = TaskConfig(kind="poly", input_dim=input_dim, context_length=context_length, degree=2)
    key = f"d{input_dim}_n{context_length}"
    return {f"kernel_{key}": best_coordinate_subset(task, monomial_count(input_dim, 2))
            .normalised_loss,
            f"linear_{key}": best_coordinate_subset(task, 0).normalised_loss}


def embedding_table(input_dims: Sequence[int], degrees: Sequence[int]) -> str:
    r"""For each $d$ and $k$: $p_k$, the slots $p_2 + \dots + p_k$, the token size $D$ and the
    entries of $\Gamma$ (:func:`~nlicl_lib.theory.capacity.required_embedding`)."""
    if not degrees:
        raise ConfigError("degrees", list(degrees), "at least one degree k >= 2")
    degrees = [check_int("degree", k, minimum=2) for k in degrees]
    lines = ["a token holding every monomial of degree 2..k (if a GLU wrote them):",
             "  d  k      p_k  p2+..+pk        D     Gamma entries"]
    for d in input_dims:
        for k in degrees:
            r = required_embedding(d, k)
            lines.append(f"{d if k == degrees[0] else '':>3}  {k}  {r.monomials:7,d}  "
                         f"{r.slots:8,d}  {r.token_dim:7,d}  {r.gamma_entries:16,d}")
    return "\n".join(lines)


def embedding_values(cubic_task: TaskConfig) -> dict[str, float | int]:
    r"""Glued by the page: the slots for $d = 10$, $k = 3$ and $k = 4$, and the degree-2 bound
    of ``cubic_task`` over $\mathbb E[y^2]$ (Proposition 12 (prop-capacity), item 4)."""
    return {"slots_d10_k3": required_embedding(10, 3).slots,
            "slots_d10_k4": required_embedding(10, 4).slots,
            "cubic_bound": degree_two_bound(cubic_task) / null_loss(cubic_task)}
