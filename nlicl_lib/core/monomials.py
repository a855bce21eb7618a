r"""Monomials, polynomial feature maps and their exact Gaussian moments.

A polynomial feature map is stored as a coefficient matrix over a monomial basis,
$f(x) = C\, m(x)$ with $m(x) = (x^{\alpha})_\alpha$ and $x^\alpha = \prod_j x_j^{\alpha_j}$
(the tasks' monomials, Definition 1 (def-prompts)). For $x \sim \mathcal N(0, I_d)$ every moment
is exact, Lemma 3 (lem-gaussian-moments):

$$\mathbb E[x^\alpha] = \prod_j (\alpha_j - 1)!! \text{ if every } \alpha_j \text{ is even, else } 0,$$

so second moments $\mathbb E[f g^\top]$ and weighted ones $\mathbb E[q\, f g^\top]$ are sums of
integers times coefficients, computed here without sampling.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from itertools import combinations_with_replacement
from math import comb

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_int

#: Largest number of monomials a task or feature map may have (memory of a batch of prompts).
MAX_MONOMIALS = 2000


def monomial_count(input_dim: int, degree: int) -> int:
    r"""$p_k = \binom{d+k-1}{k}$: monomials of degree exactly $k$ in $d$ variables."""
    input_dim = check_int("input_dim", input_dim, minimum=1)
    degree = check_int("degree", degree, minimum=0)
    return comb(input_dim + degree - 1, degree)


def monomial_exponents(input_dim: int, degrees: Iterable[int]) -> np.ndarray:
    r"""Exponent vectors $\alpha$ of all monomials with $|\alpha|$ in ``degrees``.

    Returns an int array of shape ``(count, input_dim)``, ordered by degree, then
    lexicographically: for $d=2$, degrees (1, 2): $x_1, x_2, x_1^2, x_1x_2, x_2^2$.
    """
    input_dim = check_int("input_dim", input_dim, minimum=1)
    rows: list[np.ndarray] = []
    for degree in sorted(set(degrees)):
        degree = check_int("degree", degree, minimum=0)
        if degree == 0:
            rows.append(np.zeros(input_dim, dtype=np.int64))
            continue
        for combo in combinations_with_replacement(range(input_dim), degree):
            alpha = np.zeros(input_dim, dtype=np.int64)
            for j in combo:
                alpha[j] += 1
            rows.append(alpha)
    if not rows:
        return np.zeros((0, input_dim), dtype=np.int64)
    return np.stack(rows)


def monomial_name(alpha: Sequence[int]) -> str:
    """A readable name such as ``"x1^2 x3"`` (variables counted from 1)."""
    parts = []
    for j, power in enumerate(alpha):
        if power == 1:
            parts.append(f"x{j + 1}")
        elif power > 1:
            parts.append(f"x{j + 1}^{power}")
    return " ".join(parts) if parts else "1"


@lru_cache(maxsize=64)
def _double_factorial_table(size: int) -> np.ndarray:
    # table[a] = E[g^a] for g ~ N(0, 1): (a-1)!! for even a, 0 for odd a.
    table = np.zeros(size, dtype=np.float64)
    table[0] = 1.0
    for a in range(2, size, 2):
        table[a] = table[a - 2] * (a - 1)
    return table


def gaussian_moments(exponents: np.ndarray) -> np.ndarray:
    r"""$\mathbb E[x^\alpha]$ for $x \sim \mathcal N(0, I)$, for each row $\alpha$ of ``exponents``.

    ``exponents`` has shape ``(..., d)``; the result has shape ``(...)``. Values are integers
    (stored as float64; exact below $2^{53}$).
    """
    exponents = np.asarray(exponents, dtype=np.int64)
    if exponents.size == 0:
        return np.ones(exponents.shape[:-1], dtype=np.float64)
    table = _double_factorial_table(int(exponents.max()) + 2)
    return table[exponents].prod(axis=-1)


def gaussian_moment(alpha: Sequence[int]) -> float:
    r"""$\mathbb E[x^\alpha] = \prod_j (\alpha_j-1)!!$ if every $\alpha_j$ is even, else 0."""
    return float(gaussian_moments(np.asarray(alpha, dtype=np.int64)[None])[0])


def _factor_indices(exponents: np.ndarray) -> np.ndarray:
    """Each monomial as a list of variable indices, padded with ``d`` (a column of ones)."""
    exponents = np.ascontiguousarray(exponents, dtype=np.int64)
    return _factor_indices_cached(exponents.tobytes(), exponents.shape)


@lru_cache(maxsize=256)
def _factor_indices_cached(data: bytes, shape: tuple[int, int]) -> np.ndarray:
    exponents = np.frombuffer(data, dtype=np.int64).reshape(shape)
    count, d = shape
    width = int(exponents.sum(axis=1).max()) if count else 0
    index = np.full((count, max(width, 1)), d, dtype=np.int64)
    for k, alpha in enumerate(exponents):
        factors = np.repeat(np.arange(d), alpha)
        index[k, : factors.size] = factors
    return index


def evaluate_monomials(x: torch.Tensor, exponents: np.ndarray) -> torch.Tensor:
    r"""$m(x) = (x^\alpha)_\alpha$: shape ``(..., d)`` in, ``(..., count)`` out."""
    return monomial_rows(x, exponents).movedim(0, -1).contiguous()


def monomial_rows(x: torch.Tensor, exponents: np.ndarray) -> torch.Tensor:
    r"""The monomials $x^\alpha$ of :func:`evaluate_monomials` as rows: ``(count, ...)``.

    Each monomial is its longest listed prefix times one variable ($x_1^2 x_2 = (x_1 x_1)\,
    x_2$), every product computed once: the same numbers as multiplying the factors left to
    right, with one product per monomial instead of one per factor."""
    exponents = np.asarray(exponents)
    if exponents.shape[0] == 0:
        return x.new_zeros((0,) + x.shape[:-1])
    d = x.shape[-1]
    variables = x.movedim(-1, 0).contiguous()  # (d, ...): selecting rows is fast
    products: dict[tuple[int, ...], torch.Tensor] = {}
    rows = []
    for index in _factor_indices(exponents):
        factors = tuple(int(j) for j in index if j < d)
        if not factors:
            rows.append(torch.ones_like(variables[0]))
            continue
        for r in range(1, len(factors) + 1):
            if factors[:r] not in products:
                last = variables[factors[r - 1]]
                products[factors[:r]] = last if r == 1 else products[factors[: r - 1]] * last
        rows.append(products[factors])
    return torch.stack(rows)


@dataclass(frozen=True)
class PolyMap:
    r"""A vector of polynomials $f(x) = C\,m(x)$ over a monomial basis.

    ``exponents``: ``(K, d)`` ints, the basis; ``coefficients``: ``(r, K)`` float64;
    ``names``: one label per output (optional). Call it on ``x`` of shape ``(..., d)``.
    """

    exponents: np.ndarray
    coefficients: np.ndarray
    names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        exps = np.asarray(self.exponents, dtype=np.int64)
        coefs = np.asarray(self.coefficients, dtype=np.float64)
        if exps.ndim != 2 or coefs.ndim != 2 or coefs.shape[1] != exps.shape[0]:
            raise ConfigError(
                "coefficients", coefs.shape, f"shape (outputs, {exps.shape[0]}) for this basis"
            )
        object.__setattr__(self, "exponents", exps)
        object.__setattr__(self, "coefficients", coefs)

    @classmethod
    def monomials(cls, input_dim: int, degrees: Iterable[int]) -> PolyMap:
        """The identity map onto the monomials of the given degrees."""
        exps = monomial_exponents(input_dim, degrees)
        if exps.shape[0] > MAX_MONOMIALS:
            raise ConfigError(
                "degree", tuple(degrees), f"at most {MAX_MONOMIALS} monomials (got {exps.shape[0]})"
            )
        return cls(exps, np.eye(exps.shape[0]), tuple(monomial_name(a) for a in exps))

    @property
    def input_dim(self) -> int:
        return int(self.exponents.shape[1])

    @property
    def num_outputs(self) -> int:
        return int(self.coefficients.shape[0])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        m = evaluate_monomials(x, self.exponents)
        if self._is_identity:  # the monomials themselves (every task's target features)
            return m
        return m @ torch.as_tensor(self.coefficients.T, dtype=x.dtype, device=x.device)

    @cached_property
    def _is_identity(self) -> bool:
        c = self.coefficients
        return c.shape[0] == c.shape[1] and bool(np.array_equal(c, np.eye(c.shape[0])))

    def transform(self, matrix: np.ndarray, names: tuple[str, ...] | None = None) -> PolyMap:
        r"""The map $A f(x)$ for a matrix $A$ of shape ``(r', r)``."""
        return PolyMap(self.exponents, np.asarray(matrix) @ self.coefficients, names)

    def concat(self, other: PolyMap) -> PolyMap:
        """Stack the outputs of two maps (on the union of their bases)."""
        exps, (a, b) = _union_basis(self, other)
        names = None
        if self.names is not None and other.names is not None:
            names = self.names + other.names
        return PolyMap(exps, np.vstack([a, b]), names)


def _union_basis(*maps: PolyMap) -> tuple[np.ndarray, list[np.ndarray]]:
    """Express every map over one common basis; returns the basis and the coefficient matrices."""
    all_exps = np.vstack([m.exponents for m in maps])
    basis, inverse = np.unique(all_exps, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    out, start = [], 0
    for m in maps:
        k = m.exponents.shape[0]
        coef = np.zeros((m.num_outputs, basis.shape[0]))
        np.add.at(coef.T, inverse[start : start + k], m.coefficients.T)
        out.append(coef)
        start += k
    return basis, out


def moment_matrix(exps_a: np.ndarray, exps_b: np.ndarray) -> np.ndarray:
    r"""$M_{ab} = \mathbb E[x^{\alpha_a} x^{\alpha_b}]$, shape ``(Ka, Kb)``."""
    return gaussian_moments(exps_a[:, None, :] + exps_b[None, :, :])


def second_moment(f: PolyMap, g: PolyMap | None = None) -> np.ndarray:
    r"""$\mathbb E[f(x) g(x)^\top]$ exactly, shape ``(r_f, r_g)``."""
    g = f if g is None else g
    return f.coefficients @ moment_matrix(f.exponents, g.exponents) @ g.coefficients.T


def mean(f: PolyMap) -> np.ndarray:
    r"""$\mathbb E[f(x)]$ exactly, shape ``(r_f,)``."""
    return f.coefficients @ gaussian_moments(f.exponents)


def squared_norm(f: PolyMap) -> PolyMap:
    r"""The scalar polynomial $\|f(x)\|^2 = m^\top C^\top C\, m$ as a one-output map."""
    gram = f.coefficients.T @ f.coefficients  # (K, K)
    pair_exps = (f.exponents[:, None, :] + f.exponents[None, :, :]).reshape(-1, f.input_dim)
    basis, inverse = np.unique(pair_exps, axis=0, return_inverse=True)
    coef = np.zeros(basis.shape[0])
    np.add.at(coef, inverse.reshape(-1), gram.reshape(-1))
    return PolyMap(basis, coef[None, :])


def weighted_second_moment(weight: PolyMap, f: PolyMap, g: PolyMap | None = None) -> np.ndarray:
    r"""$\mathbb E[q(x)\, f(x) g(x)^\top]$ for a scalar polynomial $q$ (one-output ``weight``)."""
    g = f if g is None else g
    if weight.num_outputs != 1:
        raise ConfigError("weight", weight.num_outputs, "a map with exactly one output")
    q = weight.coefficients[0]
    keep = q != 0
    q_exps, q = weight.exponents[keep], q[keep]
    # M[a, b] = sum_c q_c E[x^(c + a + b)]; loop over the smaller of the bases to bound memory.
    ka, kb = f.exponents.shape[0], g.exponents.shape[0]
    total = np.zeros((ka, kb))
    chunk = max(1, 4_000_000 // max(1, ka * kb * f.input_dim))
    for start in range(0, q.shape[0], chunk):
        e = q_exps[start : start + chunk]
        moments = gaussian_moments(
            e[:, None, None, :] + f.exponents[None, :, None, :] + g.exponents[None, None, :, :]
        )
        total += np.tensordot(q[start : start + chunk], moments, axes=1)
    return f.coefficients @ total @ g.coefficients.T


@lru_cache(maxsize=64)
def quadratic_pairs(input_dim: int) -> tuple[tuple[int, int], ...]:
    r"""The index pair $(j, l)$, $j \le l$, of each degree-2 monomial $x_j x_l$, in
    :func:`monomial_exponents` order: the one decoding of the quadratic monomials."""
    return tuple((int(np.flatnonzero(a)[0]), int(np.flatnonzero(a)[-1]))
                 for a in monomial_exponents(input_dim, [2]))


def quadratic_form_matrix(w1: torch.Tensor, w2: torch.Tensor, input_dim: int) -> torch.Tensor:
    r"""The hidden units $(a_u^\top x)(b_u^\top x)$ as rows over the degree-2 monomials.

    ``w1``, ``w2``: ``(..., h, d)``. Returns ``(..., h, p_2)``: the coefficient of $x_j x_l$
    ($j \le l$, :func:`~nlicl_lib.core.monomials.monomial_exponents` order) is
    $a_{uj} b_{ul} + a_{ul} b_{uj}$ for $j < l$ and $a_{uj} b_{uj}$ for $j = l$. Differentiable.
    """
    first, last, cross = _pair_index(input_dim, w1.dtype, w1.device)
    return (w1.index_select(-1, first) * w2.index_select(-1, last)
            + cross * w1.index_select(-1, last) * w2.index_select(-1, first))


@lru_cache(maxsize=64)
def _pair_index(input_dim: int, dtype: torch.dtype, device: torch.device
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`quadratic_pairs` as index tensors, and 1 where $j < l$ (a cross term), else 0."""
    first, last = (list(index) for index in zip(*quadratic_pairs(input_dim), strict=True))
    cross = [float(f != s) for f, s in zip(first, last, strict=True)]
    return (torch.tensor(first, device=device), torch.tensor(last, device=device),
            torch.tensor(cross, dtype=dtype, device=device))
