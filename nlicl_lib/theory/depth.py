r"""Depth distributes the kernel: deep GLU-LSA stacks as block-coordinate descent,
Theorem 13 (thm-depth-bcd).

Block $\ell$ of a structured stack (bilinear GLU reading $(x; \text{slots})$, never the label,
and writing the $m$ slots; attention in GD form, $P = e_De_D^\top$) first sets the slots to a
feature block $\chi_\ell(x)$, then moves every label by $-\psi_\ell(x_j)^\top \Gamma_\ell\,
g_\ell$ with $\psi_\ell = (x; \chi_\ell)$. Starting from $r^{(0)}_i = y_i$:

$$g_\ell = \tfrac1n \textstyle\sum_{i\le n} r^{(\ell-1)}_i \psi_\ell(x_i), \qquad
  r^{(\ell)}_i = r^{(\ell-1)}_i - \psi_\ell(x_i)^\top\Gamma_\ell\, g_\ell, \qquad
  \hat y = \textstyle\sum_\ell \psi_\ell(x_{n+1})^\top\Gamma_\ell\, g_\ell,$$

one cyclic pass of block-coordinate descent on $\frac1{2n}\sum_i (y_i - \sum_\ell
\theta_\ell^\top\psi_\ell(x_i))^2$ (:func:`nlicl_lib.theory.predictors.block_coordinate_descent`).
$\Gamma_\ell$ acts on $(x; \text{slots})$; a zero $x$-block gives the form with $\Gamma_\ell$ on
the slots only, $Q_\ell = -\mathrm{blkdiag}(0, \Gamma_\ell, 0)$ (:func:`deep_glu_lsa` accepts
both). Both assumptions are needed: with full $P_\ell, Q_\ell$ the identity fails, Remark 14
(rem-full-attention) (:func:`with_dense_attention`).

- :func:`deep_glu_lsa`: the construction. The GLU is residual, so to *replace* block
  $\ell-1$'s features by block $\ell$'s it writes $\chi_\ell - \chi_{\ell-1}$: quadratic terms
  from units $x_jx_k$, cubic ones from units $x_j \cdot s_i$ (an input coordinate times a stored
  quadratic slot; this is how depth raises the degree).
- :func:`monomial_schedule`: the feature blocks of the reference recursion: chunks of $m$
  monomials (squares first), cycled; for cubic tasks, quadratics then the cubics they generate.
- :func:`greedy_reference`, :func:`schedule_features`, :func:`recursion_losses`: the reference
  of Proposition 15 (prop-greedy-reference): the recursion on the schedule's blocks with each
  $\Gamma_\ell$ the best given the earlier ones (block 1 exact, Theorem 9
  (thm-feature-optimum); later blocks from Monte Carlo context moments), so its loss can only
  fall with depth; with $m \ge p_2$ it is $L$ steps of kernel GD. Losses given the context are
  closed forms in the context's empirical moments, the task and query integrated out exactly.
- :func:`reference_model`: the recursion as a constructed stack.
- :func:`stack_slot_features`, :func:`stack_as_bcd`: read a trained (or constructed) stack as
  the recursion it computes, its features as exact polynomials of $x$.
- :func:`context_conditional_loss`: the test loss given the context, task and query
  integrated out exactly, the samples of every test loss of the depth sweeps.
- :func:`stream_recursion_gap`, :func:`stream_residuals`, :func:`dense_attention_gap`,
  :func:`stack_recursion_gap`, :func:`stream_agreement`, :func:`prediction_r2`: the theorem
  measured on stacks: the stream's label entries against $r^{(\ell)}_i = y_i - \hat
  y_\ell(x_i)$, for constructed (:func:`random_gammas`), trained, dense-attention and free
  stacks.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike

from nlicl_lib.core.device import resolve_device
from nlicl_lib.core.errors import ConfigError, check_choice, check_float, check_int
from nlicl_lib.core.models import GLU, LSA, Block, InContextRegressor
from nlicl_lib.core.monomials import (
    PolyMap,
    evaluate_monomials,
    moment_matrix,
    monomial_exponents,
    monomial_name,
    second_moment,
)
from nlicl_lib.core.seeding import STREAM_REFERENCE, STREAM_TEST
from nlicl_lib.core.tasks import Prompts, TaskConfig, embed, sample_inputs
from nlicl_lib.theory.closed_forms import null_loss, one_step_gd_optimum
from nlicl_lib.theory.predictors import block_coordinate_descent

# ---------------------------------------------------------------------------------------------
# polynomial algebra on PolyMaps


def _zero_map(input_dim: int, outputs: int) -> PolyMap:
    exps = np.zeros((1, input_dim), dtype=np.int64)
    exps[0, 0] = 1
    return PolyMap(exps, np.zeros((outputs, 1)))


def _simplify(f: PolyMap) -> PolyMap:
    """Merge repeated basis monomials and drop the unused ones (keeps one if all vanish)."""
    basis, inverse = np.unique(f.exponents, axis=0, return_inverse=True)
    coef = np.zeros((f.num_outputs, basis.shape[0]))
    np.add.at(coef.T, inverse.reshape(-1), f.coefficients.T)
    keep = np.abs(coef).max(axis=0) > 0
    if not keep.any():
        keep[0] = True
    return PolyMap(basis[keep], coef[:, keep], f.names)


def poly_add(f: PolyMap, g: PolyMap) -> PolyMap:
    """Output-wise sum $f(x) + g(x)$."""
    if f.num_outputs != g.num_outputs:
        raise ConfigError("outputs", (f.num_outputs, g.num_outputs), "maps of the same size")
    both = f.concat(g)
    r = f.num_outputs
    return _simplify(both.transform(np.hstack([np.eye(r), np.eye(r)])))


def poly_multiply(f: PolyMap, g: PolyMap) -> PolyMap:
    """Output-wise product $f_j(x)\\, g_j(x)$."""
    if f.num_outputs != g.num_outputs:
        raise ConfigError("outputs", (f.num_outputs, g.num_outputs), "maps of the same size")
    exps = (f.exponents[:, None, :] + g.exponents[None, :, :]).reshape(-1, f.input_dim)
    coef = (f.coefficients[:, :, None] * g.coefficients[:, None, :]).reshape(f.num_outputs, -1)
    return _simplify(PolyMap(exps, coef))


def pad_outputs(f: PolyMap, outputs: int) -> PolyMap:
    """``f`` with zero outputs appended up to ``outputs`` (unused slots hold 0)."""
    extra = outputs - f.num_outputs
    if extra < 0:
        raise ConfigError("feature_block", f.num_outputs, f"at most {outputs} features")
    names = None if f.names is None else f.names + ("0",) * extra
    return PolyMap(f.exponents, np.vstack([f.coefficients, np.zeros((extra,
                                                                     f.coefficients.shape[1]))]),
                   names)


def with_input(f: PolyMap) -> PolyMap:
    r"""$\psi = (x; f(x))$, what the attention of a block sees."""
    return PolyMap.monomials(f.input_dim, [1]).concat(f)


# ---------------------------------------------------------------------------------------------
# the reference schedule


def _ordered_quadratics(input_dim: int) -> list[np.ndarray]:
    exps = monomial_exponents(input_dim, [2])
    squares = [a for a in exps if a.max() == 2]
    cross = [a for a in exps if a.max() == 1]
    return squares + cross


def _monomial_map(exps: Sequence[np.ndarray], input_dim: int) -> PolyMap:
    exps = np.asarray(exps, dtype=np.int64).reshape(-1, input_dim)
    return PolyMap(exps, np.eye(exps.shape[0]), tuple(monomial_name(a) for a in exps))


def monomial_schedule(input_dim: int, slots: int, depth: int, max_degree: int = 2
                      ) -> list[PolyMap]:
    r"""The feature blocks $\chi_1, \dots, \chi_L$ of the reference recursion, each at most $m$
    monomials.

    Degree 2: the $p_2$ quadratic monomials, squares first (with $m = d$ they are the best
    coordinate subset), in chunks of $m$, cycled. Degree 3: block 1 holds the first
    $\min(m, p_2)$ quadratics, block 2 the cubic monomials $x_j \cdot q$ they generate (first
    $m$), later blocks repeat block 2: a bilinear GLU cannot erase a cubic (it has no product
    left that equals it), so the schedule never goes back to quadratics.
    """
    d = check_int("d", input_dim, minimum=1)
    m = check_int("slots", slots, minimum=1)
    depth = check_int("depth", depth, minimum=1)
    k = check_int("degree", max_degree, minimum=1, maximum=3)
    quads = _ordered_quadratics(d)
    if k <= 2:
        chunks = [quads[i:i + m] for i in range(0, len(quads), m)]
        return [_monomial_map(chunks[layer % len(chunks)], d) for layer in range(depth)]
    first = quads[:m]
    cubics: list[np.ndarray] = []
    for q in first:
        for j in range(d):
            alpha = q.copy()
            alpha[j] += 1
            if not any(np.array_equal(alpha, c) for c in cubics):
                cubics.append(alpha)
    cubics = sorted(cubics, key=lambda a: tuple(-a))[:m]
    blocks = [_monomial_map(first, d)]
    blocks += [_monomial_map(cubics, d) for _ in range(depth - 1)]
    return blocks


# ---------------------------------------------------------------------------------------------
# the construction


@dataclass(frozen=True)
class _GLUWeights:
    first: list[int]  # column W1 reads, per unit
    second: list[int]  # column W2 reads, per unit
    out: np.ndarray  # W3, (m, units)


def _glu_for_step(input_dim: int, previous: PolyMap, target: PolyMap, reads: str
                  ) -> _GLUWeights:
    """Units and $W_3$ with $W_3 u(x) = $ ``target`` $-$ ``previous``, exactly."""
    d, m = input_dim, target.num_outputs
    x = PolyMap.monomials(d, [1])
    candidates: list[tuple[int, int, PolyMap]] = []
    for j in range(d):
        for k in range(j, d):
            unit = poly_multiply(x.transform(np.eye(d)[[j]]), x.transform(np.eye(d)[[k]]))
            candidates.append((j, k, unit))
    if reads == "x+slots":
        for i in range(m):
            stored = previous.transform(np.eye(m)[[i]])
            if np.abs(stored.coefficients).max() == 0:
                continue
            for j in range(d):
                candidates.append((j, d + i, poly_multiply(x.transform(np.eye(d)[[j]]), stored)))
    delta = _simplify(poly_add(target, previous.transform(-np.eye(m))))
    units = candidates[0][2]
    for _, _, unit in candidates[1:]:
        units = units.concat(unit)
    both = delta.concat(units)  # one common basis
    delta_coef, unit_coef = both.coefficients[:m], both.coefficients[m:]
    # keep a linearly independent set of units (x1 (x2 x3) = x2 (x1 x3)): the solution is then
    # unique and the GLU no wider than it must be
    independent: list[int] = []
    for u in range(unit_coef.shape[0]):
        if np.linalg.matrix_rank(unit_coef[independent + [u]]) > len(independent):
            independent.append(u)
    candidates = [candidates[u] for u in independent]
    unit_coef = unit_coef[independent]
    solution, *_ = np.linalg.lstsq(unit_coef.T, delta_coef.T, rcond=None)
    out = solution.T  # (m, candidates)
    if np.abs(out @ unit_coef - delta_coef).max() > 1e-9 * max(1.0, np.abs(delta_coef).max()):
        raise ConfigError("feature_blocks", "a step", "features whose change from the previous "
                          "block is a combination of x_j x_k (and, reading slots, x_j times a "
                          "stored slot)")
    out[np.abs(out) < 1e-12] = 0.0
    used = np.flatnonzero(np.abs(out).max(axis=0) > 0)
    if used.size == 0:
        used = np.array([0])
    return _GLUWeights([candidates[u][0] for u in used], [candidates[u][1] for u in used],
                       out[:, used])


def _full_gamma(gamma: ArrayLike, input_dim: int, slots: int) -> np.ndarray:
    gamma = np.asarray(gamma, dtype=np.float64)
    size = input_dim + slots
    if gamma.shape == (slots, slots):  # Gamma on the slots only: Q = -blkdiag(0, Gamma, 0)
        full = np.zeros((size, size))
        full[input_dim:, input_dim:] = gamma
        return full
    if gamma.shape != (size, size):
        raise ConfigError("gamma", gamma.shape, f"a {slots}x{slots} (slots only) "
                          f"or {size}x{size} ((x; slots)) matrix")
    return gamma


def deep_glu_lsa(input_dim: int, feature_blocks: Sequence[PolyMap], gammas: Sequence,
                 feature_slots: int | None = None, glu_reads: str = "x+slots",
                 dtype: torch.dtype = torch.float64) -> InContextRegressor:
    r"""A depth-$L$ GLU-LSA stack equal to the block-coordinate recursion (module doc).

    ``feature_blocks``: $\chi_1..\chi_L$ (each at most $m$ polynomials; fewer are padded with
    zero slots). ``gammas``: per block an $m \times m$ matrix on the slots (zero
    on $x$) or a $(d+m) \times (d+m)$ matrix on $(x; \text{slots})$. Block $\ell$'s GLU writes
    $\chi_\ell - \chi_{\ell-1}$ using units $x_j x_k$ and, if ``glu_reads="x+slots"``,
    $x_j s_i$; its width is the largest number of units any block needs.
    """
    d = check_int("d", input_dim, minimum=1)
    check_choice("glu_reads", glu_reads, ("x", "x+slots"))
    blocks = list(feature_blocks)
    if len(blocks) != len(gammas) or not blocks:
        raise ConfigError("gammas", len(gammas), f"one per feature block ({len(blocks)})")
    m = max(f.num_outputs for f in blocks) if feature_slots is None else feature_slots
    m = check_int("slots", m, minimum=1)
    previous = _zero_map(d, m)
    steps = []
    for features in blocks:
        if features.input_dim != d:
            raise ConfigError("feature_blocks", features.input_dim, f"maps of d={d} inputs")
        target = pad_outputs(features, m)
        steps.append(_glu_for_step(d, previous, target, glu_reads))
        previous = target
    width = max(len(s.first) for s in steps)
    model = InContextRegressor(
        [Block(LSA(d + m + 1, "sparse"), GLU(d, m, width, reads=glu_reads)) for _ in blocks],
        d, m).to(dtype)
    with torch.no_grad():  # load after the cast, so float64 weights stay exact
        for block, step, gamma in zip(model.blocks, steps, gammas, strict=True):
            glu = block.glu
            for w in (glu.w1, glu.w2, glu.w3):
                w.zero_()
            for unit, (a, b) in enumerate(zip(step.first, step.second, strict=True)):
                glu.w1[unit, a] = 1.0
                glu.w2[unit, b] = 1.0
            glu.w3[:, : step.out.shape[1]] = torch.as_tensor(step.out, dtype=dtype)
            block.lsa.gamma.copy_(torch.as_tensor(_full_gamma(gamma, d, m), dtype=dtype))
    return model


# ---------------------------------------------------------------------------------------------
# reading a stack as the recursion


def stack_slot_features(model: InContextRegressor) -> list[PolyMap]:
    r"""The slot contents after each block's GLU, as exact polynomials of $x$ (bilinear GLUs
    writing the slots, any reads but the label): $s_\ell = s_{\ell-1} + W_3\big((W_1 z)\odot
    (W_2 z)\big)$ with $z = (x; s_{\ell-1})$. Degree up to $2^\ell$ when GLUs read the slots."""
    d, m = model.input_dim, model.feature_slots
    x = PolyMap.monomials(d, [1])
    slots = _zero_map(d, m)
    out = []
    for block in model.blocks:
        glu = block.glu
        if glu is None or glu.activation != "none" or glu.writes != "slots" or glu.reads == "all":
            raise ConfigError("model", "block", "bilinear GLUs reading x or x+slots, writing slots")
        read = x if glu.reads == "x" else x.concat(slots)
        w1, w2, w3 = (w.detach().double().cpu().numpy() for w in (glu.w1, glu.w2, glu.w3))
        units = poly_multiply(_simplify(read.transform(w1)), _simplify(read.transform(w2)))
        slots = poly_add(slots, _simplify(units.transform(w3)))
        out.append(slots)
    return out


def is_gd_form_stack(model: object) -> bool:
    r"""Whether ``model`` satisfies the assumptions of Theorem 13 (thm-depth-bcd): every block
    has GD-form (sparse) attention and a bilinear GLU that reads $x$ or $(x; \text{slots})$,
    never the label, and writes the slots. Then its prediction is linear in the context labels
    and :func:`context_conditional_loss` gives its exact loss given the context."""
    if not isinstance(model, InContextRegressor) or not len(model.blocks):
        return False
    return all(block.lsa.attention == "sparse" and block.glu is not None
               and block.glu.activation == "none" and block.glu.writes == "slots"
               and block.glu.reads != "all" for block in model.blocks)


def stack_as_bcd(model: InContextRegressor) -> tuple[list[PolyMap], list[np.ndarray]]:
    r"""The recursion a stack computes: features $\psi_\ell = (x; s_\ell)$ and its
    $\Gamma_\ell$ (sparse attention), for :func:`nlicl_lib.theory.predictors.block_coordinate_descent`."""
    for block in model.blocks:
        if block.lsa.attention != "sparse":
            raise ConfigError("attention", block.lsa.attention, "'sparse' (value = label)")
    features = [with_input(s) for s in stack_slot_features(model)]
    gammas = [b.lsa.gamma.detach().double().cpu().numpy() for b in model.blocks]
    return features, gammas


def _joint_features(features: Sequence[PolyMap]) -> PolyMap:
    joint = features[0]
    for f in features[1:]:
        joint = joint.concat(f)
    return joint


def context_conditional_loss(model: InContextRegressor, task: TaskConfig
                             ) -> Callable[[Prompts], torch.Tensor]:
    r"""The test loss of a GD-form stack given the context, with the task and the query
    integrated out exactly: a function of a batch of prompts returning, per prompt (float64,
    ``(B,)``), $\mathbb E_{\beta, \epsilon, x_{n+1}}\big[(\hat y - y_{n+1})^2 \mid x_1, \dots,
    x_n\big]$. Its mean over contexts is the test loss.

    By Theorem 13 (thm-depth-bcd) the stack is the recursion on its own features $\psi_\ell$
    (:func:`stack_as_bcd`). Run it on the $p$ label vectors $\phi_k(x_i)$ at once (and on
    $\sigma e_j$ for the noise): with $R^{(0)} = [\Phi, \sigma I_n]$ ($n \times (p + n)$),
    $K_\ell = \Gamma_\ell \frac1n \Psi_\ell^\top R^{(\ell-1)}$ and
    $R^{(\ell)} = R^{(\ell-1)} - \Psi_\ell K_\ell$, the prediction is
    $\hat y = \Psi(x_{n+1})^\top K\,(\beta; \epsilon/\sigma)$ with $\Psi = (\psi_1; \dots; \psi_L)$,
    $K = (K_1; \dots; K_L)$. The query is independent of the context, so the conditional loss is
    $\operatorname{tr}(K^\top T K) - 2 \operatorname{tr}(K_\beta^\top C) + \operatorname{tr} S$ with
    the exact moments $T = \mathbb E[\Psi\Psi^\top]$, $C = \mathbb E[\Psi\phi^\top]$,
    $S = \mathbb E[\phi\phi^\top]$ (Lemma 3 (lem-gaussian-moments)). The labels and coefficients of
    the prompts are not used. Isotropic inputs only."""
    if task.covariance is not None:
        raise ConfigError("task", task.describe(), "isotropic inputs (exact moments)")
    if model.input_dim != task.input_dim:
        raise ConfigError("model", f"d={model.input_dim}", f"d={task.input_dim}")
    features, gammas = stack_as_bcd(model)
    target = task.target_features
    joint = _joint_features(features)
    second, cross = second_moment(joint), second_moment(joint, target)
    target_trace = float(np.trace(second_moment(target)))
    p, noise = target.num_outputs, task.noise_std
    # every feature block and the target over one monomial basis, evaluated once per batch
    everything = _joint_features([*features, target])
    sizes = [f.num_outputs for f in features] + [p]
    blocks = np.split(everything.coefficients, np.cumsum(sizes)[:-1])

    def conditional_loss(prompts: Prompts) -> torch.Tensor:
        n = prompts.context_length
        x = prompts.x[:, :n].double()

        def tensor(a: ArrayLike) -> torch.Tensor:
            return torch.as_tensor(a, dtype=torch.float64, device=x.device)

        basis = evaluate_monomials(x, everything.exponents)  # (B, n, K)
        residual = basis @ tensor(blocks[-1].T)  # (B, n, p): one label vector per beta_k
        if noise > 0:
            eye = noise * torch.eye(n, dtype=x.dtype, device=x.device)
            residual = torch.cat([residual, eye.expand(x.shape[0], n, n)], dim=-1)
        steps = []
        for coefficients, gamma in zip(blocks[:-1], gammas, strict=True):
            psi = basis @ tensor(coefficients.T)  # (B, n, D_l)
            # einsum, not bmm: far faster for many tiny matrices on a CPU
            k = torch.einsum("de,bie,biq->bdq", tensor(gamma / n), psi, residual)
            residual = residual - torch.einsum("bid,bdq->biq", psi, k)
            steps.append(k)
        k = torch.cat(steps, dim=1)  # (B, D, p (+ n))
        predicted = torch.einsum("bdq,de,beq->b", k, tensor(second), k)
        return predicted - 2 * torch.einsum("bdp,dp->b", k[..., :p], tensor(cross)) + target_trace

    return conditional_loss


# ---------------------------------------------------------------------------------------------
# the reference recursion with optimised preconditioners, and the depth sweep


@dataclass
class GreedyReference:
    r"""The greedy block-coordinate reference (:func:`greedy_reference`): per depth
    $\ell = 1, \dots, L$ the loss of the recursion cut after block $\ell$.

    ``loss``, ``std_error``: unnormalised test losses ``(L,)`` on ``test_contexts`` fresh
    contexts (task and query integrated out exactly) and their standard errors;
    ``gain_std_error``: the paired standard error of ``loss[l-1] - loss[l]`` (the first entry:
    of ``null_loss - loss[0]``), the error of each block's gain; ``worst_share``: the largest
    single context's share of each test mean; ``fit_loss``: the same losses on the fitting
    contexts, non-increasing by construction; ``exact_first``: the exact loss of block 1
    (Theorem 9 (thm-feature-optimum)); ``features``, ``gammas``: $\psi_\ell$ and
    $\Gamma_\ell$ of the recursion.
    """

    task: TaskConfig
    features: list[PolyMap]
    gammas: list[np.ndarray]
    loss: np.ndarray
    std_error: np.ndarray
    gain_std_error: np.ndarray
    worst_share: np.ndarray
    fit_loss: np.ndarray
    exact_first: float
    null_loss: float
    fit_contexts: int
    test_contexts: int
    seconds: float

    @property
    def depths(self) -> list[int]:
        return list(range(1, len(self.gammas) + 1))

    def normalised(self) -> np.ndarray:
        """``loss`` / $\\mathbb E[y^2]$."""
        return self.loss / self.null_loss


def greedy_reference(task: TaskConfig, feature_blocks: Sequence[PolyMap],
                     fit_contexts: int = 100_000, test_contexts: int = 40_000, seed: int = 0,
                     batch_size: int = 10_000, device: torch.device | str = "cpu",
                     fit_seed: int | None = None) -> GreedyReference:
    r"""The block-coordinate recursion on the features ``feature_blocks`` $\psi_1, \dots,
    \psi_L$ with greedily optimal preconditioners: $\Gamma_\ell$ minimises the test loss given
    $\Gamma_1, \dots, \Gamma_{\ell-1}$, Proposition 15 (prop-greedy-reference).

    Write every feature block and the target over one monomial basis $b(x)$ ($K$ monomials):
    $\psi_\ell = C_\ell\, b$, $\phi = C_\phi\, b$, and let $\hat S_b = \frac1n\sum_{i\le n}
    b(x_i) b(x_i)^\top$ (the context's only statistic the recursion uses) and $S_b = \mathbb
    E[b b^\top]$ (exact, Lemma 3 (lem-gaussian-moments)). Given the context, the residual
    function after $\ell$ blocks is $r_\ell(x) = b(x)^\top W_\ell\, \beta$ with

    $$W_0 = C_\phi^\top, \qquad G_\ell = C_\ell \hat S_b W_{\ell-1}, \qquad
      W_\ell = W_{\ell-1} - C_\ell^\top \Gamma_\ell\, G_\ell,$$

    ($g_\ell = G_\ell\beta$), and the loss given the context, task and query integrated out, is
    $\operatorname{tr}(W_\ell^\top S_b W_\ell)$. Its mean over contexts is a convex quadratic in
    $\Gamma_\ell$, minimised where $T_\ell\,\Gamma_\ell\, \mathbb E[G_\ell G_\ell^\top] =
    \mathbb E[A_\ell G_\ell^\top]$ with $T_\ell = C_\ell S_b C_\ell^\top$ and
    $A_\ell = C_\ell S_b W_{\ell-1}$; $\Gamma_\ell = 0$ is allowed, so the optimum can only lower
    the loss. Block 1's optimum is exact (Theorem 9 (thm-feature-optimum)); for $\ell \ge 2$
    the two context expectations are Monte Carlo means over ``fit_contexts`` contexts (stream
    ``STREAM_REFERENCE``, never the test contexts), solved with pseudo-inverses (padded zero
    slots). The losses are measured on ``test_contexts`` fresh contexts of the test stream.
    Noise-free isotropic polynomial tasks.

    ``seed`` draws both context samples; ``fit_seed`` (default: ``seed``) draws the fitting
    contexts alone, so that references fitted on independent samples can be measured on the same
    test contexts (the spread over fitting samples, chapter 5).
    """
    blocks = _check_recursion(task, feature_blocks)
    fit_contexts = check_int("fit_contexts", fit_contexts, minimum=1)
    test_contexts = check_int("test_contexts", test_contexts, minimum=2)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    fit_seed = seed if fit_seed is None else check_int("fit_seed", fit_seed, minimum=0)
    device = resolve_device(device)
    start = time.perf_counter()
    algebra = _RecursionAlgebra(task, blocks, device)
    first = one_step_gd_optimum(task.target_features, blocks[0], task.context_length,
                                task.noise_std)
    gammas = [np.asarray(first.gamma, dtype=np.float64)]
    fit_moments = algebra.empirical(fit_contexts, fit_seed, STREAM_REFERENCE, batch_size)
    w = algebra.start(fit_contexts)
    fit = []
    for ell in range(len(blocks)):
        g = algebra.gradient(ell, fit_moments, w)
        if ell > 0:
            a = torch.einsum("dk,kl,blp->bdp", algebra.coefficients[ell], algebra.moment, w)
            gg = torch.einsum("bdp,bep->de", g, g).cpu().numpy()
            ag = torch.einsum("bdp,bep->de", a, g).cpu().numpy()
            t = algebra.parts[ell] @ algebra.exact_moment @ algebra.parts[ell].T
            gammas.append(np.linalg.pinv(t, hermitian=True) @ ag
                          @ np.linalg.pinv(gg, hermitian=True))
        w = algebra.step(ell, gammas[ell], g, w)
        fit.append(float(algebra.loss(w).mean()))
    del fit_moments
    test = recursion_losses(task, blocks, gammas, test_contexts, seed, STREAM_TEST, batch_size,
                            device)
    null = null_loss(task)
    gains = -np.diff(np.hstack([np.full((test.shape[0], 1), null), test]), axis=1)
    sqrt_count = np.sqrt(test.shape[0])
    return GreedyReference(
        task, blocks, gammas, test.mean(axis=0), test.std(axis=0, ddof=1) / sqrt_count,
        gains.std(axis=0, ddof=1) / sqrt_count, test.max(axis=0) / test.sum(axis=0),
        np.array(fit), float(first.loss), null, fit_contexts, test_contexts,
        time.perf_counter() - start)


def _check_recursion(task: TaskConfig, feature_blocks: Sequence[PolyMap]) -> list[PolyMap]:
    if task.kind != "poly" or task.covariance is not None or task.noise_std > 0:
        raise ConfigError("task", task.describe(), "a noise-free isotropic polynomial task")
    blocks = list(feature_blocks)
    if not blocks:
        raise ConfigError("feature_blocks", 0, "at least one block")
    for f in blocks:
        if f.input_dim != task.input_dim:
            raise ConfigError("feature_blocks", f.input_dim, f"maps of d={task.input_dim} inputs")
    return blocks


MOMENT_CHUNK = 1000
"""Contexts whose monomials :class:`_RecursionAlgebra` evaluates at once: the monomials of a
whole batch at $n = 100$ would take hundreds of megabytes; the moments are the same."""


class _RecursionAlgebra:
    """The recursion of :func:`greedy_reference` over one monomial basis $b(x)$."""

    def __init__(self, task: TaskConfig, blocks: Sequence[PolyMap], device: torch.device):
        self.task, self.device = task, device
        self.joint = _joint_features([*blocks, task.target_features])
        self.parts = np.split(self.joint.coefficients,
                              np.cumsum([f.num_outputs for f in blocks]))
        self.exact_moment = moment_matrix(self.joint.exponents, self.joint.exponents)
        self.coefficients = [self.tensor(c) for c in self.parts[:-1]]
        self.moment = self.tensor(self.exact_moment)

    def tensor(self, a: ArrayLike) -> torch.Tensor:
        return torch.as_tensor(a, dtype=torch.float64, device=self.device)

    def empirical(self, count: int, seed: int, stream: int, batch_size: int) -> torch.Tensor:
        r"""$\hat S_b$ of ``count`` contexts, ``(count, K, K)``."""
        n, out, drawn, step = self.task.context_length, [], 0, 0
        while drawn < count:
            size = min(batch_size, count - drawn)
            x = sample_inputs(self.task, size, seed, step, self.device, stream,
                              torch.float64)[:, :n]
            for part in x.split(MOMENT_CHUNK):  # the monomials of a few contexts at a time
                b = evaluate_monomials(part, self.joint.exponents)
                out.append(torch.einsum("bik,bil->bkl", b, b) / n)
            drawn, step = drawn + size, step + 1
        return torch.cat(out)

    def start(self, count: int) -> torch.Tensor:
        return self.tensor(self.parts[-1].T).expand(count, -1, -1)

    def gradient(self, block: int, moments: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.einsum("dk,bkl,blp->bdp", self.coefficients[block], moments, w)

    def step(self, block: int, gamma: np.ndarray, g: torch.Tensor, w: torch.Tensor
             ) -> torch.Tensor:
        return w - torch.einsum("dk,de,bep->bkp", self.coefficients[block], self.tensor(gamma), g)

    def loss(self, w: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bkp,kl,blp->b", w, self.moment, w)


def recursion_losses(task: TaskConfig, feature_blocks: Sequence[PolyMap], gammas: Sequence,
                     contexts: int, seed: int = 0, stream: int = STREAM_TEST,
                     batch_size: int = 10_000, device: torch.device | str = "cpu"
                     ) -> np.ndarray:
    r"""The block-coordinate recursion's loss given the context (task and query integrated
    out exactly), $\operatorname{tr}(W_\ell^\top S_b W_\ell)$ of :func:`greedy_reference`, after
    every block, on ``contexts`` contexts of ``(seed, stream)``: ``(contexts, L)`` float64."""
    blocks = _check_recursion(task, feature_blocks)
    if len(gammas) != len(blocks):
        raise ConfigError("gammas", len(gammas), f"one per feature block ({len(blocks)})")
    contexts = check_int("contexts", contexts, minimum=1)
    algebra = _RecursionAlgebra(task, blocks, resolve_device(device))
    moments = algebra.empirical(contexts, seed, stream, check_int("batch_size", batch_size,
                                                                  minimum=1))
    w, out = algebra.start(contexts), []
    for ell, gamma in enumerate(gammas):
        w = algebra.step(ell, np.asarray(gamma, dtype=np.float64),
                         algebra.gradient(ell, moments, w), w)
        out.append(algebra.loss(w).cpu().numpy())
    return np.stack(out, axis=1)


def schedule_features(task: TaskConfig, slots: int, depth: int) -> list[PolyMap]:
    r"""$\psi_\ell = (x; \chi_\ell)$ for the :func:`monomial_schedule` blocks of ``task``
    (degree 2 or 3) with $m$ = ``slots``, zero slots padded. With $m \ge p_2$ every block
    holds all quadratic monomials: the recursion is then $L$ steps of preconditioned GD on
    the whole kernel's features $(x; \phi_2)$."""
    degree = max(task.degree, 2)
    blocks = monomial_schedule(task.input_dim, slots, depth, degree)
    return [with_input(pad_outputs(b, slots)) for b in blocks]


def reference_model(task: TaskConfig, slots: int, depth: int, glu_reads: str | None = None,
                    gammas: Sequence | None = None) -> InContextRegressor:
    r"""The recursion over :func:`monomial_schedule` blocks as a constructed stack
    (:func:`deep_glu_lsa`), $\psi_\ell = (x; \chi_\ell)$. ``gammas``: its $\Gamma_\ell$ (e.g. the
    first ``depth`` of a :class:`GreedyReference` on :func:`schedule_features`); default:
    $\Gamma_1$ = the exact one-step optimum on $\psi_1$ (Theorem 9 (thm-feature-optimum)) and
    $\Gamma_{\ell \ge 2} = 0$, the best single block on $\chi_1$. GLUs read $x$ for quadratic
    tasks and $(x; \text{slots})$ for cubic ones (default)."""
    if task.kind != "poly" or task.degree > 3 or task.covariance is not None:
        raise ConfigError("task", task.describe(), "an isotropic polynomial task of degree <= 3")
    degree = max(task.degree, 2)
    reads = glu_reads or ("x" if degree == 2 else "x+slots")
    blocks = monomial_schedule(task.input_dim, slots, depth, degree)
    if gammas is None:
        first = with_input(pad_outputs(blocks[0], slots))
        gamma = one_step_gd_optimum(task.target_features, first, task.context_length,
                                    task.noise_std).gamma
        size = task.input_dim + slots
        gammas = [gamma] + [np.zeros((size, size))] * (depth - 1)
    elif len(gammas) < depth:
        raise ConfigError("gammas", len(gammas), f"at least depth={depth} matrices")
    return deep_glu_lsa(task.input_dim, blocks, list(gammas)[:depth], slots, reads)


def bcd_reference_loss(task: TaskConfig, slots: int, depth: int, fit_contexts: int = 100_000,
                       test_prompts: int = 40_000, device: torch.device | str = "cpu"
                       ) -> tuple[float, float]:
    r"""The greedy block-coordinate reference (:func:`greedy_reference` on the
    :func:`monomial_schedule` blocks of $m$ = ``slots``) cut at ``depth`` blocks: its test loss
    (unnormalised, task and query integrated out) and standard error."""
    reference = greedy_reference(task, schedule_features(task, slots, depth), fit_contexts,
                                 test_prompts, device=device)
    return float(reference.loss[-1]), float(reference.std_error[-1])


# ---------------------------------------------------------------------------------------------
# the residual stream against the recursion


@torch.no_grad()
def with_dense_attention(model: InContextRegressor, perturbation_std: float, seed: int = 0
                         ) -> InContextRegressor:
    r"""A copy of ``model`` whose attention layers are full ($P_\ell, Q_\ell$ learned, not the GD
    form) and start from the model's own: $P_\ell = e_De_D^\top + E_\ell$,
    $Q_\ell = -\mathrm{blkdiag}(\Gamma_\ell^\top, 0) + E'_\ell$ with dense Gaussian $E, E'$ of entry
    standard deviation ``perturbation_std`` (drawn from ``seed``). The GLUs are copied unchanged,
    so they still never read the label; ``perturbation_std = 0`` gives the same function. What
    Remark 14 (rem-full-attention) is about: without the GD form the residual identity of
    Theorem 13 (thm-depth-bcd) fails (:func:`context_residuals`)."""
    std = check_float("perturbation_std", perturbation_std, minimum=0.0)
    gen = torch.Generator().manual_seed(seed)
    dense = copy.deepcopy(model)
    for block in dense.blocks:
        old = block.lsa
        dtype, device = old.P.dtype, old.P.device
        lsa = LSA(old.dim, "full").to(dtype=dtype, device=device)
        for param, start in ((lsa.p, old.P), (lsa.q, old.Q)):
            noise = torch.randn(old.dim, old.dim, generator=gen, dtype=torch.float64)
            param.copy_(start + std * noise.to(dtype=dtype, device=device))
        block.lsa = lsa
    return dense


@torch.no_grad()
def context_residuals(model: InContextRegressor, x: torch.Tensor, y: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""What the context labels hold after each block, two ways, for one prompt.

    ``x``: ``(n + 1, d)``, ``y``: ``(n + 1,)``. Returns ``labels`` and ``residuals``, each
    ``(L + 1, n)``: row $\ell$ of ``labels`` is the label entry of the context tokens in the
    residual stream after block $\ell$ (row 0: $y_i$); row $\ell$ of ``residuals`` is
    $y_i - \hat y_\ell(x_i)$, where $\hat y_\ell(x_i)$ is what the first $\ell$ blocks predict
    when $x_i$ is put in the query's place (same context). For stacks whose GLUs never read the
    label and whose attention is in GD form the two agree, Theorem 13 (thm-depth-bcd): the
    context labels hold the residuals of the model's own partial predictor. With full
    attention they do not, Remark 14 (rem-full-attention) (:func:`with_dense_attention`)."""
    n = x.shape[0] - 1
    slots = model.feature_slots
    _, stream = model(embed(x[None], y[None], slots), return_stream=True)
    labels = [y[:n]] + [stream[f"block{ell}"][0, :n, -1] for ell in range(1, model.depth + 1)]
    # one prompt per context point, that point copied into the query's place
    queries = x[None].repeat(n, 1, 1)
    queries[:, n] = x[:n]
    _, requery = model(embed(queries, y[None].repeat(n, 1), slots), return_stream=True)
    residuals = [y[:n]] + [y[:n] + requery[f"block{ell}"][:, n, -1]
                           for ell in range(1, model.depth + 1)]
    return torch.stack(labels), torch.stack(residuals)


def random_gammas(size: int, count: int, scale: float = 0.05, seed: int = 0) -> list[np.ndarray]:
    r"""``count`` preconditioners $\Gamma_\ell$ of shape ``(size, size)`` ($d + m$), entries
    independent $\mathcal N(0, \text{scale}^2)$ from ``np.random.default_rng(seed)``."""
    size = check_int("size", size, minimum=1)
    count = check_int("count", count, minimum=1)
    scale = check_float("scale", scale, minimum=0.0)
    rng = np.random.default_rng(seed)
    return [scale * rng.standard_normal((size, size)) for _ in range(count)]


@torch.no_grad()
def stream_recursion_gap(model: InContextRegressor, schedule: Sequence[PolyMap],
                         gammas: Sequence[np.ndarray], prompts: Prompts) -> float:
    r"""The largest difference, over blocks $\ell$, prompts and context tokens, between the
    stream's label entries after block $\ell$ and the recursion's $r^{(\ell)}_i$ on the feature
    blocks ``schedule`` with ``gammas``, and between the query's label entry and $-\hat y_\ell$."""
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


@dataclass(frozen=True)
class StreamResiduals:
    r"""For each stack (by name), one prompt's context labels after each block $\ell = 0,
    \dots, L$ two ways (:func:`context_residuals`): ``labels_seen``, the label entries of the
    stream, and ``requeried``, $y_i - \hat y_\ell(x_i)$; each ``(L + 1, n)`` float64."""

    labels_seen: dict[str, torch.Tensor]
    requeried: dict[str, torch.Tensor]


def stream_residuals(stacks: dict[str, InContextRegressor], x: torch.Tensor, y: torch.Tensor
                     ) -> StreamResiduals:
    """:func:`context_residuals` of a float64 copy of each stack on the prompt ``x``
    ``(n + 1, d)``, ``y`` ``(n + 1,)``."""
    if not stacks:
        raise ConfigError("stacks", "{}", "at least one named stack")
    seen, requeried = {}, {}
    for name, model in stacks.items():
        seen[name], requeried[name] = context_residuals(copy.deepcopy(model).double(), x, y)
    return StreamResiduals(seen, requeried)


def dense_attention_gap(model: InContextRegressor, x: torch.Tensor, y: torch.Tensor,
                        perturbation_std: float = 0.05, seed: int = 0) -> float:
    r"""Remark 14 (rem-full-attention) measured: with dense attention
    (:func:`with_dense_attention`) the largest $|\text{label} - (y_i - \hat y_\ell(x_i))|$ over
    the largest label entry, on one prompt."""
    dense = with_dense_attention(copy.deepcopy(model).double(), perturbation_std, seed=seed)
    seen, requeried = context_residuals(dense, x, y)
    return float((seen - requeried).abs().max() / seen.abs().max())


@torch.no_grad()
def stack_recursion_gap(model: InContextRegressor, prompts: Prompts) -> float:
    """The largest difference, in float64, between a GD-form stack's prediction on ``prompts``
    and :func:`~nlicl_lib.theory.predictors.block_coordinate_descent` on its own features
    (:func:`stack_as_bcd`)."""
    stack = copy.deepcopy(model).double()
    features, gammas = stack_as_bcd(stack)
    recursion = block_coordinate_descent(prompts, features, gammas)
    return float((recursion - stack(prompts.embed(model.feature_slots))).abs().max())


@torch.no_grad()
def stream_agreement(model: InContextRegressor, prompts: Prompts) -> np.ndarray:
    r"""How much of Theorem 13 (thm-depth-bcd) a stack keeps, per block: with $s^{(\ell)}_i$ the
    label entry of context token $i$ after block $\ell$ and $\hat y_\ell(x)$ what the first
    $\ell$ blocks predict at $x$ (the context unchanged), over prompts $q$ and tokens $i$,

    $$\rho_\ell = 1 - \frac{\sum_{q,i} \big((y_{q,i} - s^{(\ell)}_{q,i}) - \hat y_\ell(x_{q,i})\big)^2}
                        {\sum_{q,i} \hat y_\ell(x_{q,i})^2}:$$

    1 for every GD-form stack (up to rounding), below 1 when the identity fails (negative when
    the label changes are further from the predictions than zero is). Batched
    :func:`context_residuals`, in the model's dtype; shape ``(L,)``, float64."""
    dtype = next(model.parameters()).dtype
    x, y = prompts.x.to(dtype), prompts.y.to(dtype)
    batch, tokens, d = x.shape
    n, slots = tokens - 1, model.feature_slots
    _, stream = model(embed(x, y, slots), return_stream=True)
    # prompt b, token i: the context of prompt b with x_i of it in the query's place
    requeried = x.repeat_interleave(n, dim=0)
    requeried[:, n] = x[:, :n].reshape(batch * n, d)
    _, again = model(embed(requeried, y.repeat_interleave(n, dim=0), slots), return_stream=True)
    out = []
    for ell in range(1, model.depth + 1):
        taken = y[:, :n].double() - stream[f"block{ell}"][:, :n, -1].double()
        partial = -again[f"block{ell}"][:, n, -1].double().reshape(batch, n)
        out.append(1.0 - float(((taken - partial) ** 2).sum() / (partial**2).sum()))
    return np.array(out)


def prediction_r2(predicted: torch.Tensor, recursion: torch.Tensor) -> float:
    r"""$R^2 = 1 - \sum_b (\hat y_b - \hat y^{\mathrm{rec}}_b)^2 / \sum_b (\hat y_b -
    \bar{\hat y})^2$: the fraction of the variance of ``predicted`` that ``recursion``
    (the same prompts, shape ``(B,)``) explains."""
    p, r = predicted.detach().double(), recursion.detach().double()
    return 1.0 - float(((p - r) ** 2).sum() / ((p - p.mean()) ** 2).sum())
