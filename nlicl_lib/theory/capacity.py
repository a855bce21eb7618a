r"""How big one block must be: the best loss of a block with $m$ slots and width $h$.

Proposition 12 (prop-capacity) of the book's Theory part; this module computes its references.

One bilinear GLU-LSA block reading $x$ writes $m$ quadratic forms of $x$ into its slots, and its
attention takes one GD step on $\psi(x) = (x;\ s(x))$, $s(x) = V\,u(x)$, where the $h$ hidden
units are $u_j(x) = (a_j^\top x)(b_j^\top x)$ and $V = W_3$ is $m \times h$. For any such
features the best $\Gamma$ and its loss are exact (Theorem 9 (thm-feature-optimum),
:mod:`nlicl_lib.theory.closed_forms`): with $S = \mathbb E[\phi\phi^\top]$, $T = \mathbb E[\psi\psi^\top]$ and
$C = \mathbb E[\psi\phi^\top]$ ($\phi$: the target's monomials),

$$\mathcal L^*(\psi) = \operatorname{tr} S - \operatorname{tr}\big(T^{-1} C C^\top B^{-1} C C^\top\big),
\quad B = \tfrac{n-1}{n} C C^\top + \tfrac1n \mathbb E[\|\phi\|^2 \psi\psi^\top] + \tfrac{\sigma^2}{n} T.$$

$\mathcal L^*$ depends only on the span of $\psi$, so the best block of a given size is the best
feature span it can write (Proposition 12 (prop-capacity)):

- :func:`best_feature_subspace`: the best $m$-dimensional subspace $U\phi_2$ of the quadratic
  forms (a GLU of width $h \ge p_2$ can write any: its units can hold every monomial and $W_3$
  mixes them), found by minimising the exact $\mathcal L^*$ over $U$ ($m \times p_2$) in float64
  from several starts;
- :func:`best_glu_features`: the best span a GLU of width $h$ can write into $m$ slots, optimising
  $a_j, b_j$ and $V$ the same way;
- :func:`best_coordinate_subset`: the best $m$ degree-2 monomials (exact enumeration), a
  restricted search: its loss is at or above :func:`best_feature_subspace`'s.

The first two are losses no trained block of that size can go below (up to the optimiser finding
the global minimum, checked against enumeration and random features in the tests); all three
equal the one-step optimum on $(x; \phi_2)$ once $m \ge p_2$ and $h \ge p_2$.

- :func:`slot_increments`: $\mathcal L^*_r$ in closed form for the degree-$\le 2$ task (Proposition 12
  (prop-capacity), item 5): every slot adds one eigenvalue of $S_E^3 K_E^{-1}$, so the curve is
  piecewise linear in $r$ and flat from $r = p_2$ on;
- :func:`one_block_references`: the three searches at every size $m = 0, \dots, p_2$ (chapter
  4's table); :func:`slot_path` and :func:`width_path`: the same curves warm-started size by
  size, cheap up to $d = 5$;
- :func:`degree_two_bound`: the loss no single block reaches on a target of degree $\ge 3$, at
  any size (its prediction has degree $\le 2$ in the query);
- :func:`required_embedding`: the slots $m = \sum_{j=2}^k p_j$, $p_j = \binom{d+j-1}{j}$, a
  token needs to hold the whole degree-$\le k$ kernel.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.monomials import (
    PolyMap,
    moment_matrix,
    monomial_count,
    monomial_exponents,
    quadratic_form_matrix,
    quadratic_pairs,
    squared_norm,
    weighted_second_moment,
)
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.closed_forms import (
    OneStepOptimum,
    feature_moments,
    one_step_gd_optimum,
)


@dataclass(frozen=True)
class BlockOptimum(OneStepOptimum):
    r"""The best features of one block and their loss: a :class:`OneStepOptimum` (``gamma``
    $\Gamma^*$ on $\psi$, ``loss`` $\mathcal L^*$ unnormalised, ``null_loss`` $\mathbb E[y^2]$)
    plus ``features``, the slot features $s(x)$ as a :class:`PolyMap` (the block's $\psi$ is
    $(x; s)$), ``method``, how they were found, and for :func:`best_glu_features` ``units``, the
    GLU's $(a, b)$ (each $h \times d$) whose span the features are (``None`` otherwise).
    """

    features: PolyMap
    method: str
    units: tuple[np.ndarray, np.ndarray] | None = None


def check_capacity_task(task: TaskConfig) -> None:
    if task.covariance is not None:
        raise ConfigError("covariance", "given", "isotropic inputs for the exact block losses")


def _optimum_for(task: TaskConfig, slot_features: PolyMap, method: str,
                 units: tuple[np.ndarray, np.ndarray] | None = None) -> BlockOptimum:
    linear = PolyMap.monomials(task.input_dim, [1])
    psi = linear.concat(slot_features) if slot_features.num_outputs else linear
    opt = one_step_gd_optimum(task.target_features, psi, task.context_length, task.noise_std)
    return BlockOptimum(opt.gamma, opt.loss, opt.null_loss, slot_features, method, units)


def best_coordinate_subset(task: TaskConfig, slots: int) -> BlockOptimum:
    r"""The best choice of $m$ degree-2 monomials for the slots, by exact enumeration of all
    $\binom{p_2}{m}$ subsets ($x$ is always in $\psi$). ``slots`` $\ge p_2$ keeps them all."""
    check_capacity_task(task)
    m = check_int("slots", slots, minimum=0)
    quadratics = PolyMap.monomials(task.input_dim, [2])
    p2 = quadratics.num_outputs
    if m == 0:
        empty = PolyMap(quadratics.exponents, np.zeros((0, p2)), ())
        return _optimum_for(task, empty, "no slots (linear GD)")
    if m >= p2:
        return _optimum_for(task, quadratics, "all degree-2 monomials")
    best = None
    for subset in itertools.combinations(range(p2), m):
        rows = list(subset)
        names = tuple(quadratics.names[r] for r in rows)
        candidate = _optimum_for(task, PolyMap(quadratics.exponents,
                                               quadratics.coefficients[rows], names),
                                 f"best of {m} monomials (enumeration)")
        if best is None or candidate.loss < best.loss - 1e-12:
            best = candidate
    return best


class ExactBlockLoss:
    r"""$\mathcal L^*(\psi)$ of Theorem 9 (thm-feature-optimum) as a differentiable torch float64
    function of the slot features' coefficients over the degree-2 monomials (``(m, p_2)``;
    $\psi = (x; s)$).

    All moments are exact and precomputed once: over the basis $b = (x; \phi_2; \text{target
    monomials})$, $S_b = \mathbb E[b b^\top]$ and $W = \mathbb E[\|\phi\|^2 b b^\top]$.
    """

    def __init__(self, task: TaskConfig):
        check_capacity_task(task)
        d = task.input_dim
        target = task.target_features
        self.n = task.context_length
        self.noise_var = task.noise_std**2
        self.input_dim = d
        self.p2 = monomial_count(d, 2)
        feature_exps = monomial_exponents(d, [1, 2])
        basis = np.unique(np.vstack([feature_exps, target.exponents]), axis=0)
        index = {tuple(e): i for i, e in enumerate(basis)}
        self.feature_index = torch.tensor([index[tuple(e)] for e in feature_exps])
        target_coef = np.zeros((target.num_outputs, basis.shape[0]))
        for col, e in enumerate(target.exponents):
            target_coef[:, index[tuple(e)]] += target.coefficients[:, col]
        basis_map = PolyMap(basis, np.eye(basis.shape[0]))
        as_t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
        moments = moment_matrix(basis, basis)
        self.moments = as_t(moments)
        self.weighted = as_t(weighted_second_moment(squared_norm(target), basis_map))
        self.target = as_t(target_coef)
        self.target_energy = float(np.trace(target_coef @ moments @ target_coef.T))
        self.basis = basis

    def coefficients(self, slot_coefficients: torch.Tensor) -> torch.Tensor:
        r"""The coefficients of $\psi = (x; s)$ over the basis, ``(d + m, K)``."""
        d, p2 = self.input_dim, self.p2
        m = slot_coefficients.shape[0]
        block = torch.zeros(d + m, d + p2, dtype=torch.float64)
        block[:d, :d] = torch.eye(d, dtype=torch.float64)
        block = block + torch.nn.functional.pad(slot_coefficients, (d, 0, d, 0))
        psi = slot_coefficients.new_zeros(d + m, self.basis.shape[0])
        return psi.index_add(1, self.feature_index, block)

    def __call__(self, slot_coefficients: torch.Tensor) -> torch.Tensor:
        """$\\mathcal L^*$ for the slot features with these coefficients (a 0-dim tensor)."""
        c = self.coefficients(slot_coefficients)
        s_pp = c @ self.moments @ c.T
        s_pf = c @ self.moments @ self.target.T
        cross = s_pf @ s_pf.T
        b = (self.n - 1) / self.n * cross + c @ self.weighted @ c.T / self.n
        if self.noise_var:
            b = b + self.noise_var / self.n * s_pp
        gain = torch.linalg.solve(s_pp, cross)  # S_pp^{-1} X
        # L* = tr S_ff - tr(B^{-1} X S_pp^{-1} X)
        return self.target_energy - torch.trace(torch.linalg.solve(b, cross) @ gain)


def _minimise(loss_fn: Callable[[], torch.Tensor], params: list[torch.Tensor], iterations: int) -> float:
    optimiser = torch.optim.LBFGS(params, lr=1.0, max_iter=iterations, tolerance_grad=1e-12,
                                  tolerance_change=1e-15, history_size=50,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimiser.zero_grad()
        value = loss_fn()
        value.backward()
        return value

    optimiser.step(closure)
    with torch.no_grad():
        return float(loss_fn())


def _orthonormal_rows(u: torch.Tensor) -> torch.Tensor:
    # the loss depends on the span only; orthonormal rows keep S_psi_psi well conditioned
    q, _ = torch.linalg.qr(u.T)
    return q.T


def best_feature_subspace(task: TaskConfig, slots: int, restarts: int = 4, seed: int = 0,
                          iterations: int = 100, starts: Sequence[ArrayLike] | None = None
                          ) -> BlockOptimum:
    r"""The best $m$-dimensional span $U\phi_2$ of quadratic forms: $\min_U \mathcal L^*((x; U\phi_2))$
    over $U \in \mathbb R^{m \times p_2}$, exact loss, L-BFGS in float64 from ``restarts`` random
    starts plus ``starts`` (initial $U$'s, each ``(m, p_2)``; default: the best coordinate subset,
    found by enumerating all $\binom{p_2}{m}$ subsets, which is slow for $p_2 \ge 15$). Exact
    (closed form) for $m = 0$ and $m \ge p_2$."""
    m = check_int("slots", slots, minimum=0)
    p2 = monomial_count(task.input_dim, 2)
    if m == 0 or m >= p2:
        return best_coordinate_subset(task, m)
    loss = ExactBlockLoss(task)
    exps = monomial_exponents(task.input_dim, [2])
    if starts is None:
        starts = [best_coordinate_subset(task, m).features.coefficients]
    starts = [torch.as_tensor(np.asarray(u, dtype=float).reshape(m, p2)) for u in starts]
    generator = torch.Generator().manual_seed(seed)
    starts += [torch.randn(m, p2, generator=generator, dtype=torch.float64)
               for _ in range(restarts)]
    best_value, best_u = np.inf, None
    for u0 in starts:
        u = u0.clone().requires_grad_(True)
        value = _minimise(lambda u=u: loss(_orthonormal_rows(u)), [u], iterations)
        if value < best_value:
            best_value, best_u = value, _orthonormal_rows(u.detach())
    features = PolyMap(exps, best_u.numpy(), tuple(f"u{j + 1}" for j in range(m)))
    return _optimum_for(task, features, f"best {m}-dim subspace (L-BFGS, {len(starts)} starts)")


def best_glu_features(task: TaskConfig, slots: int, width: int, restarts: int = 4,
                      seed: int = 0, iterations: int = 100,
                      starts: Sequence[tuple[ArrayLike, ...]] | None = None) -> BlockOptimum:
    r"""The best span a bilinear GLU of width $h$ can write into $m$ slots:
    $\min_{a, b, V} \mathcal L^*((x; V u(x)))$, $u_j = (a_j^\top x)(b_j^\top x)$, $V \in
    \mathbb R^{m \times h}$ ($V = I$ when $h \le m$: the slots then hold every unit), by L-BFGS
    from ``restarts`` random starts plus ``starts`` (initial ``(a, b)`` or ``(a, b, V)``, $a, b$
    of shape ``(h, d)``). $h \ge p_2$ reduces to :func:`best_feature_subspace`."""
    m = check_int("slots", slots, minimum=0)
    h = check_int("width", width, minimum=1)
    d = task.input_dim
    p2 = monomial_count(d, 2)
    if m == 0 or h >= p2:
        return best_feature_subspace(task, m, restarts, seed, iterations)
    loss = ExactBlockLoss(task)
    exps = monomial_exponents(d, [2])
    generator = torch.Generator().manual_seed(seed)
    mix = m < h
    as_t = lambda a, *shape: torch.as_tensor(np.asarray(a, dtype=float)).reshape(shape)  # noqa: E731
    initial = []
    for start in starts or []:
        v0 = as_t(start[2], m, h) if len(start) > 2 else torch.eye(m, h, dtype=torch.float64)
        initial.append((as_t(start[0], h, d), as_t(start[1], h, d), v0))
    initial += [tuple(torch.randn(*shape, generator=generator, dtype=torch.float64)
                      for shape in ((h, d), (h, d), (m, h))) for _ in range(restarts)]
    best_value, best_c, best_units = np.inf, None, None
    for a0, b0, v0 in initial:
        a, b, v = (t.clone().requires_grad_(True) for t in (a0, b0, v0))
        params = [a, b, v] if mix else [a, b]

        def features(a: torch.Tensor = a, b: torch.Tensor = b, v: torch.Tensor = v) -> torch.Tensor:
            units = quadratic_form_matrix(a, b, d)
            return _orthonormal_rows(v @ units if mix else units)

        value = _minimise(lambda f=features: loss(f()), params, iterations)
        if value < best_value:
            best_value, best_c = value, features().detach()
            best_units = (a.detach().numpy().copy(), b.detach().numpy().copy())
    names = tuple(f"s{j + 1}" for j in range(best_c.shape[0]))
    return _optimum_for(task, PolyMap(exps, best_c.numpy(), names),
                        f"best GLU of width {h} into {m} slots (L-BFGS, {len(initial)} starts)",
                        best_units)


def best_block(task: TaskConfig, slots: int, width: int | None = None, restarts: int = 4,
               seed: int = 0) -> BlockOptimum:
    r"""The reference for one block with $m$ slots and width $h$ (default $h = m$): exact closed
    form when $m, h \ge p_2$ or $m = 0$, otherwise the optimised spans above."""
    width = slots if width is None else width
    if slots == 0:
        return best_coordinate_subset(task, 0)
    return best_glu_features(task, slots, width, restarts, seed)


@dataclass(frozen=True)
class OneBlockReferences:
    r"""The exact best loss of one block of every size on ``task`` (unnormalised).

    ``subspace[m]``: the best $m$-dimensional span of quadratic forms, $m = 0, \dots, p_2$;
    ``coordinate[m]``: the best $m$ monomials; ``units[h]``: the best span of $h = 1, \dots, p_2$
    GLU units writing $p_2$ slots; ``seconds``: the time the three searches took.
    """

    task: TaskConfig
    p2: int
    subspace: dict[int, BlockOptimum]
    coordinate: dict[int, BlockOptimum]
    units: dict[int, BlockOptimum]
    seconds: float

    @property
    def normaliser(self) -> float:
        r"""$\mathbb E[y^2]$."""
        return self.subspace[0].null_loss

    @property
    def kernel(self) -> float:
        r"""$\mathcal L^*((x; \phi_2))$, the full one-step kernel GD ($m = p_2$)."""
        return self.subspace[self.p2].loss

    @property
    def linear(self) -> float:
        r"""$\mathcal L^*(x)$, linear GD (no slots)."""
        return self.subspace[0].loss


def one_block_references(task: TaskConfig) -> OneBlockReferences:
    r"""The best loss of one block with $m = 0, \dots, p_2$ slots (:func:`best_feature_subspace`,
    :func:`best_coordinate_subset`) and with $h = 1, \dots, p_2$ units writing $p_2$ slots
    (:func:`best_glu_features`), on the quadratic ``task`` (isotropic inputs, degree 2)."""
    if task.kind != "poly" or task.degree != 2:
        raise ConfigError("task", f"kind={task.kind!r}, degree={task.degree}",
                          "the quadratic task: kind='poly', degree=2")
    p2 = monomial_count(task.input_dim, 2)
    start = time.perf_counter()
    subspace = {m: best_feature_subspace(task, m) for m in range(p2 + 1)}
    coordinate = {m: best_coordinate_subset(task, m) for m in range(p2 + 1)}
    units = {h: best_glu_features(task, p2, h) for h in range(1, p2 + 1)}
    return OneBlockReferences(task, p2, subspace, coordinate, units, time.perf_counter() - start)


def degree_two_bound(task: TaskConfig) -> float:
    r"""The loss below which no single bilinear block reading $x$ can go, at any $n$, $m$ and $h$
    (Proposition 12 (prop-capacity), item 4): its prediction is a polynomial of degree $\le 2$
    in the query, so

    $$\mathcal L \ge \mathbb E_f\big[\min_{q \in \operatorname{span}(x; \phi_2)}
    \mathbb E_x (q - f)^2\big] = \operatorname{tr} S - \operatorname{tr}\big(T_2^{-1} C_2
    C_2^\top\big),$$

    $T_2 = \mathbb E[\psi\psi^\top]$, $C_2 = \mathbb E[\psi\phi^\top]$ for $\psi = (x; \phi_2)$.
    Zero for targets of degree $\le 2$; for the cubic task it is
    $\operatorname{tr}\mathbb E[\phi_3\phi_3^\top] - \|\mathbb E[x\phi_3^\top]\|_F^2$.
    Unnormalised."""
    check_capacity_task(task)
    moments = feature_moments(task.target_features, PolyMap.monomials(task.input_dim, [1, 2]))
    gain = np.linalg.solve(moments.s_pp, moments.s_pf @ moments.s_pf.T)
    return float(moments.s_ff_trace - np.trace(gain))


SLOT_DIRECTIONS = ("|x|^2", "contrasts of the squares", "cross terms")
r"""The three kinds of common eigenvector of $S_E$ and $K_E$ (:func:`slot_increments`): the
direction $\|x\|^2$ of the squares, the $d - 1$ contrasts of the squares orthogonal to it, and
each of the $p_2 - d$ cross terms $x_j x_k$ ($j < k$)."""


@dataclass(frozen=True)
class SlotIncrements:
    r"""The best loss $\mathcal L^*_r$ of one block with $r$ slots, in closed form
    (:func:`slot_increments`). All losses unnormalised; ``null_loss`` $= \mathbb E[y^2]$.

    ``losses[r]`` $= \mathcal L^*_r$ for $r = 0, \dots, p_2$ (``(p_2 + 1,)``); ``increments``
    $\lambda_1 \ge \dots \ge \lambda_{p_2}$, the eigenvalues of $S_E^3 K_E^{-1}$
    (``(p_2,)``, $\mathcal L^*_{r-1} - \mathcal L^*_r = \lambda_r$); ``groups``: for each kind of direction in
    :data:`SLOT_DIRECTIONS` that exists at this $d$, ``(increment, multiplicity, s, kappa)``, with
    $s = v^\top S_E v$ and $\kappa = v^\top K_E v$ on a unit direction $v$ of that kind, so
    that the increment is $s^3 / \kappa$; ``order``: the kinds by decreasing increment (the
    order in which the best spans add them); ``s_even``, ``k_even``: $S_E$ and $K_E$
    (``(p_2, p_2)``, over the degree-2 monomials in :func:`~nlicl_lib.core.monomials.monomial_exponents`
    order).
    """

    task: TaskConfig
    p2: int
    null_loss: float
    losses: np.ndarray
    increments: np.ndarray
    groups: dict[str, tuple[float, int, float, float]]
    order: tuple[str, ...]
    s_even: np.ndarray
    k_even: np.ndarray

    def loss(self, slots: int) -> float:
        r"""$\mathcal L^*_r$ for ``slots`` $= r \ge 0$ ($\mathcal L^*_r = \mathcal L^*_{p_2}$ for $r \ge p_2$)."""
        r = check_int("slots", slots, minimum=0)
        return float(self.losses[min(r, self.p2)])


def slot_increments(task: TaskConfig) -> SlotIncrements:
    r"""$\mathcal L^*_r$ of Proposition 12 (prop-capacity) in closed form, $r = 0, \dots, p_2$, for the
    degree-$\le 2$ task $y = \beta^\top\phi(x)$, $\phi = (x;\ \phi_2)$, $\beta \sim
    \mathcal N(0, I)$, $x \sim \mathcal N(0, I_d)$ (item 5, "What each slot is worth").

    With $S = \mathbb E[\phi\phi^\top]$ and $K = \frac{n-1}{n} S^2 + \frac1n
    \mathbb E[\|\phi\|^2\phi\phi^\top] + \frac{\sigma^2}{n} S$ (the $B$ of Corollary 10
    (cor-same-span); for $\psi = A\phi$, Theorem 9's $B$ is $A K A^\top$), both block diagonal
    between $x$ and $E = \phi_2$, and $S_E$, $K_E$ commuting,

    $$\mathcal L^*_r = \mathcal L^*_0 - \sum_{i \le r} \lambda_i, \qquad
    \mathcal L^*_0 = \operatorname{tr} S - \operatorname{tr}\big(S_x^3 K_x^{-1}\big),$$

    $\lambda_1 \ge \dots \ge \lambda_{p_2}$ the eigenvalues of $S_E^3 K_E^{-1}$. They take
    three values, $(d+2)^3/\kappa_1$ on $\|x\|^2$ (once), $8/\kappa_2$ on the contrasts of the
    squares ($d - 1$ times) and $1/\kappa_c$ on the cross terms ($p_2 - d$ times), $\kappa$ the
    eigenvalues of $K_E$ there; for a cross term
    $\kappa_c = \frac{n-1}{n} + \frac1n \mathbb E[\|\phi\|^2 x_1^2 x_2^2] + \frac{\sigma^2}{n}$.
    Exact moments (Lemma 3 (lem-gaussian-moments)), float64."""
    if task.kind != "poly" or task.degree != 2 or task.homogeneous:
        raise ConfigError("task", task.describe(), "the degree-<=2 task: kind='poly', degree=2, "
                          "homogeneous=False (every monomial of degree 1 and 2)")
    check_capacity_task(task)
    d, n = task.input_dim, task.context_length
    phi = task.target_features  # (x; phi_2), degree 1 then 2
    moments = feature_moments(phi, phi).at(n, task.noise_std)  # T = S, B = K for psi = phi
    s, k = moments.s_pp, moments.b
    odd = phi.exponents.sum(axis=1) == 1
    s_x, k_x = s[np.ix_(odd, odd)], k[np.ix_(odd, odd)]
    s_e, k_e = s[np.ix_(~odd, ~odd)], k[np.ix_(~odd, ~odd)]
    linear = float(np.trace(s) - np.trace(s_x @ s_x @ s_x @ np.linalg.inv(k_x)))
    # S_E and K_E commute, so S_E^3 K_E^{-1} has the eigenvalues of the symmetric
    # S_E^{3/2} K_E^{-1} S_E^{3/2} = R_E R_E^T
    values, vectors = np.linalg.eigh(s_e)
    root = vectors * values**1.5 @ vectors.T
    increments = np.sort(np.linalg.eigvalsh(root @ np.linalg.solve(k_e, root)))[::-1]
    losses = linear - np.concatenate([[0.0], np.cumsum(increments)])
    exps = phi.exponents[~odd]
    square = exps.max(axis=1) == 2
    p2 = int(exps.shape[0])
    directions = {SLOT_DIRECTIONS[0]: (square / np.sqrt(d), 1)}
    if d > 1:
        first, second = np.flatnonzero(square)[:2]
        contrast = np.zeros(p2)
        contrast[[first, second]] = [1 / np.sqrt(2), -1 / np.sqrt(2)]
        directions[SLOT_DIRECTIONS[1]] = (contrast, d - 1)
        directions[SLOT_DIRECTIONS[2]] = (np.eye(p2)[np.flatnonzero(~square)[0]], p2 - d)
    groups = {}
    for name, (v, count) in directions.items():
        s_v, k_v = float(v @ s_e @ v), float(v @ k_e @ v)
        groups[name] = (s_v**3 / k_v, count, s_v, k_v)
    order = tuple(sorted(groups, key=lambda name: -groups[name][0]))
    return SlotIncrements(task, p2, float(np.trace(s)), losses, increments, groups, order,
                          s_e, k_e)


@dataclass(frozen=True)
class EmbeddingSize:
    r"""How big one block's embedding must be to hold every monomial of degree $2..k$."""

    input_dim: int
    degree: int
    monomials: int  # p_k
    slots: int  # m = sum_{j=2}^k p_j
    token_dim: int  # D = d + m + 1
    gamma_entries: int  # (d + m)^2


def required_embedding(input_dim: int, degree: int) -> EmbeddingSize:
    r"""$p_k = \binom{d+k-1}{k}$, the slots $m = \sum_{j=2}^k p_j$ a single block needs for the
    whole degree-$\le k$ kernel, the token size $D = d + m + 1$ and the $(d+m)^2$ entries of
    $\Gamma$. $m$ grows like $d^k / k!$."""
    d = check_int("d", input_dim, minimum=1)
    k = check_int("degree", degree, minimum=1)
    m = sum(monomial_count(d, j) for j in range(2, k + 1))
    return EmbeddingSize(d, k, monomial_count(d, k), m, d + m + 1, (d + m) ** 2)


def _best_extension(loss: ExactBlockLoss, rows: torch.Tensor) -> torch.Tensor:
    r"""``rows`` (orthonormal, ``(k, p_2)``) plus the degree-2 monomial whose part outside their
    span lowers $\mathcal L^*$ most: the start of the greedy path to $k + 1$ slots."""
    best_value, best = np.inf, None
    with torch.no_grad():
        for e in torch.eye(loss.p2, dtype=torch.float64):
            new = e - rows.T @ (rows @ e)
            if float(new.norm()) < 1e-8:
                continue
            candidate = torch.cat([rows, (new / new.norm())[None]])
            value = float(loss(candidate))
            if value < best_value:
                best_value, best = value, candidate
    return best


def _best_unit(loss: ExactBlockLoss, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    r"""The GLU units $(a, b)$ plus the monomial unit $x_j x_l$ ($a = e_j$, $b = e_l$) that lowers
    $\mathcal L^*$ most: the start of the greedy path to one more unit."""
    d = loss.input_dim
    eye = np.eye(d)
    best_value, best = np.inf, None
    with torch.no_grad():
        for j, l in quadratic_pairs(d):
            a1, b1 = np.vstack([a, eye[j]]), np.vstack([b, eye[l]])
            units = quadratic_form_matrix(torch.as_tensor(a1), torch.as_tensor(b1), d)
            if torch.linalg.matrix_rank(units) < units.shape[0]:
                continue
            value = float(loss(_orthonormal_rows(units)))
            if value < best_value:
                best_value, best = value, (a1, b1)
    return best


def slot_path(task: TaskConfig, restarts: int, seed: int) -> dict[int, BlockOptimum]:
    """best_feature_subspace for m = 1..p2-1, each started from the previous optimum plus its
    best monomial (no enumeration) and from ``restarts`` random starts."""
    loss = ExactBlockLoss(task)
    rows = torch.zeros(0, loss.p2, dtype=torch.float64)
    path = {}
    for m in range(1, loss.p2):
        start = _best_extension(loss, rows)
        path[m] = best_feature_subspace(task, m, restarts, seed + m, starts=[start.numpy()])
        rows = torch.as_tensor(path[m].features.coefficients)
    return path


def width_path(task: TaskConfig, restarts: int, seed: int) -> dict[int, BlockOptimum]:
    """best_glu_features with m = p2 slots for h = 1..p2-1 units, each started from the
    previous optimum's units plus its best monomial unit and from ``restarts`` random starts."""
    loss = ExactBlockLoss(task)
    d = task.input_dim
    a, b = np.zeros((0, d)), np.zeros((0, d))
    path = {}
    for h in range(1, loss.p2):
        start = _best_unit(loss, a, b)
        path[h] = best_glu_features(task, loss.p2, h, restarts, seed + h, starts=[start])
        a, b = path[h].units
    return path
