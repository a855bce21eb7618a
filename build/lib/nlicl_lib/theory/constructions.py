r"""Models loaded with the weights of the Theory part's constructions.

- :func:`gd_lsa`: $P = e_D e_D^\top$, $Q_\ell = -\mathrm{blkdiag}(\Gamma_\ell^\top, 0)$, so $L$
  layers are $L$ steps of preconditioned GD (Proposition 4 (prop-lsa-gd)); context labels
  become residuals.
- :func:`kernel_glu_lsa`: a GLU of width $p_2$ whose unit $(j \le k)$ reads $x_j$ with $W_1$ and
  $x_k$ with $W_2$ and writes slot $u$, so each token becomes $(x; \phi_2(x); y)$; the LSA then
  takes one preconditioned GD step on $\psi = (x; \phi_2)$, $\hat y = \frac1n \sum_i y_i\,
  k_\Gamma(x_{n+1}, x_i)$ with $k_\Gamma(x, x') = \psi(x)^\top\Gamma\psi(x')$, a step of kernel
  regression when $\Gamma$ is symmetric positive semidefinite (Proposition 8 (prop-glu-kernel)).
- :func:`glu_slot_features`: the polynomial map a bilinear GLU writes into the slots.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from numpy.typing import ArrayLike

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.models import GLU, LSA, Block, InContextRegressor
from nlicl_lib.core.monomials import PolyMap, monomial_exponents, quadratic_form_matrix


def _full_gd_weights(layer: LSA, gamma: np.ndarray, feature_rows: int) -> None:
    gamma = torch.as_tensor(gamma, dtype=torch.float64)
    with torch.no_grad():
        if layer.attention == "full":
            layer.p.zero_()
            layer.p[-1, -1] = 1.0
            layer.q.zero_()
            layer.q[:feature_rows, :feature_rows] = -gamma.T
        else:
            layer.gamma.zero_()
            layer.gamma[:feature_rows, :feature_rows] = gamma


def gd_lsa(input_dim: int, gammas: Sequence, feature_slots: int = 0, attention: str = "full",
           dtype: torch.dtype = torch.float64) -> InContextRegressor:
    r"""An LSA of depth ``len(gammas)`` that is exactly $L$ steps of preconditioned GD
    (Proposition 4 (prop-lsa-gd)).

    Layer $\ell$: $P = e_D e_D^\top$, $Q = -\mathrm{blkdiag}(\Gamma_\ell^\top, 0)$, giving
    $\hat y = x_{n+1}^\top \Gamma \frac1n\sum_i y_i x_i$ for one layer. A scalar $\gamma$ means
    $\gamma I_d$.
    """
    d = check_int("d", input_dim, minimum=1)
    dim = d + feature_slots + 1
    blocks = []
    for gamma in gammas:
        gamma = np.asarray(gamma, dtype=np.float64)
        if gamma.ndim == 0:
            gamma = float(gamma) * np.eye(d)
        if gamma.shape != (d, d):
            raise ConfigError("gamma", gamma.shape, f"a scalar or a {d}x{d} matrix")
        blocks.append((Block(LSA(dim, attention)), gamma))
    model = InContextRegressor([b for b, _ in blocks], d, feature_slots).to(dtype)
    for block, gamma in blocks:  # load after the cast, so float64 weights stay exact
        _full_gd_weights(block.lsa, gamma, d)
    return model


def monomial_glu(input_dim: int, glu: GLU | None = None, reads: str = "x") -> GLU:
    r"""A GLU of width $p_2$ whose unit for $(j \le k)$ is $x_j x_k$, written to slot $u$.

    The slots then hold the degree-2 monomials in :func:`~nlicl_lib.core.monomials.monomial_exponents`
    order: $x_1^2, x_1x_2, \dots, x_d^2$.
    """
    d = check_int("d", input_dim, minimum=1)
    exps = monomial_exponents(d, [2])
    width = exps.shape[0]
    if glu is None:
        glu = GLU(d, width, width, reads=reads)
    w1 = torch.zeros_like(glu.w1)
    w2 = torch.zeros_like(glu.w2)
    for unit, alpha in enumerate(exps):
        first, second = np.flatnonzero(alpha)[0], np.flatnonzero(alpha)[-1]
        w1[unit, first] = 1.0
        w2[unit, second] = 1.0
    w3 = torch.zeros_like(glu.w3)
    w3[:width, :width] = torch.eye(width)
    with torch.no_grad():
        glu.w1.copy_(w1)
        glu.w2.copy_(w2)
        glu.w3.copy_(w3)
    return glu


def kernel_glu_lsa(input_dim: int, gamma: ArrayLike, dtype: torch.dtype = torch.float64
                   ) -> InContextRegressor:
    r"""One GLU-LSA block equal to one preconditioned GD step on $\psi = (x; \phi_2(x))$
    (Proposition 8 (prop-glu-kernel); kernel GD when ``gamma`` is symmetric positive semidefinite).

    ``gamma``: a $(d + p_2) \times (d + p_2)$ matrix acting on $\psi$. See
    :func:`polynomial_kernel_gamma` for the $\Gamma$ of $a\,x^\top x' + (x^\top x')^2$.
    """
    d = check_int("d", input_dim, minimum=1)
    m = monomial_exponents(d, [2]).shape[0]
    gamma = np.asarray(gamma, dtype=np.float64)
    if gamma.shape != (d + m, d + m):
        raise ConfigError("gamma", gamma.shape, f"a {d + m}x{d + m} matrix for d={d}")
    model = InContextRegressor([Block(LSA(d + m + 1, "sparse"), GLU(d, m, m))], d, m).to(dtype)
    monomial_glu(d, model.blocks[0].glu)
    _full_gd_weights(model.blocks[0].lsa, gamma, d + m)
    return model


def polynomial_kernel_gamma(input_dim: int, linear_weight: float = 0.0) -> np.ndarray:
    r"""$\Gamma$ on $\psi = (x; \phi_2)$ with $\psi(x)^\top\Gamma\psi(x') = a\,x^\top x' + (x^\top x')^2$:
    $a I$ on the $x$ block, weight 1 on $x_j^2$ and 2 on $x_jx_k$ ($j<k$)."""
    exps = monomial_exponents(input_dim, [2])
    weights = np.where(exps.max(axis=1) == 2, 1.0, 2.0)
    return np.diag(np.concatenate([np.full(input_dim, float(linear_weight)), weights]))


def glu_slot_features(glu: GLU, slots_in: PolyMap | None = None) -> PolyMap:
    r"""The polynomial map $s(x)$ that a bilinear GLU adds to the slots: unit $u$ computes
    $(a_u^\top x)(b_u^\top x)$ and $W_3$ mixes the units.

    Only GLUs reading ``"x"`` without activation are polynomial maps of $x$ alone.
    """
    if glu.activation != "none" or glu.reads != "x" or glu.writes != "slots":
        raise ConfigError("glu", (glu.reads, glu.writes, glu.activation),
                          "a bilinear GLU that reads x and writes the slots")
    d = glu.input_dim
    exps = monomial_exponents(d, [2])
    w1, w2 = (w.detach().double().cpu() for w in (glu.w1, glu.w2))
    w3 = glu.w3.detach().double().cpu().numpy()
    hidden = quadratic_form_matrix(w1, w2, d).numpy()
    names = tuple(f"slot {i + 1}" for i in range(glu.feature_slots))
    return PolyMap(exps, w3 @ hidden, names)


def block_features(model: InContextRegressor) -> PolyMap:
    r"""$\psi(x) = (x; s(x))$ of a one-block GLU-LSA with a bilinear GLU reading $x$: the
    features its attention takes a GD step on."""
    if model.depth != 1 or model.blocks[0].glu is None:
        raise ConfigError("model", f"depth {model.depth}", "one GLU-LSA block")
    d = model.input_dim
    linear = PolyMap.monomials(d, [1])
    return linear.concat(glu_slot_features(model.blocks[0].glu))


def block_gamma(model: InContextRegressor) -> np.ndarray:
    r"""The $\Gamma$ of a depth-1 model with sparse attention, acting on $(x; \text{slots})$."""
    lsa = model.blocks[0].lsa
    if lsa.attention != "sparse":
        raise ConfigError("attention", lsa.attention, "'sparse' (value = label)")
    return lsa.gamma.detach().double().cpu().numpy()
