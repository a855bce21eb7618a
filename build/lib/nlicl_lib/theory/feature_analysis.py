r"""What a trained GLU writes into the slots: strength, span and missing directions of its features.

Features are polynomials of $x$, so we measure them with the Gaussian inner product
$\langle f, g\rangle = \mathbb E[f(x)\,g(x)]$, $x \sim \mathcal N(0, I_d)$, computed exactly from
monomial moments (:mod:`~nlicl_lib.core.monomials`). For the $m$ slot features $s(x)$ of a block,
with Gram matrix $G = \mathbb E[s\,s^\top] = U \operatorname{diag}(\sigma_1^2, \dots) U^\top$:

- the **strengths** $\sigma_1 \ge \sigma_2 \ge \dots$ are the singular values of the features in an
  orthonormal basis of polynomials; the features span all $p_2$ degree-2 monomials exactly
  when $p_2$ of them are nonzero, and a direction with $\sigma_k \approx 0$ is *dead*;
- the **directions** $u_k^\top s(x) / \sigma_k$ are unit-norm polynomials; a dead one names
  what the block cannot use (for a one-block GLU on the quadratic task, a combination of
  cross terms $x_j x_k$);
- the **captured fraction** of a reference polynomial (say the monomial $x_1 x_2$) is the share
  of its squared norm inside the span of the live directions: 1 for every monomial when the
  block writes them all, $1/2$ for two cross terms when the dead direction is
  $(x_1x_2 - x_2x_3)/\sqrt2$;
- **principal angles** compare two spans.

:func:`kernel_matrix` gives the kernel a trained block applies, in the monomial basis, to
compare with the optimal $\Gamma^*$ of Theorem 9 (thm-feature-optimum), and :func:`live_span_optimum` the best
one-step loss that the block's live features allow (the plateau a block with a dead direction
stalls on).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nlicl_lib.core.errors import ConfigError, check_float
from nlicl_lib.core.models import InContextRegressor
from nlicl_lib.core.monomials import PolyMap, monomial_name, second_moment
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.constructions import block_features, block_gamma, glu_slot_features


@dataclass(frozen=True)
class FeatureDirections:
    r"""``strengths`` $\sigma_k$ (descending) and ``directions``: a :class:`PolyMap` whose output
    $k$ is the unit-norm polynomial $u_k^\top s(x)/\sigma_k$ (zero where $\sigma_k = 0$)."""

    strengths: np.ndarray
    directions: PolyMap

    @property
    def relative_strengths(self) -> np.ndarray:
        """$\\sigma_k / \\sigma_1$."""
        top = self.strengths[0] if self.strengths.size and self.strengths[0] > 0 else 1.0
        return self.strengths / top

    def live(self, tolerance: float = 1e-2) -> PolyMap:
        """The directions with $\\sigma_k / \\sigma_1 >$ ``tolerance``."""
        keep = self.relative_strengths > tolerance
        return PolyMap(self.directions.exponents, self.directions.coefficients[keep])

    def rank(self, tolerance: float = 1e-2) -> int:
        """How many directions are alive at ``tolerance``."""
        return int(np.sum(self.relative_strengths > tolerance))


def feature_directions(features: PolyMap) -> FeatureDirections:
    r"""Strengths and unit-norm directions of ``features`` in $L^2(\mathcal N(0, I))$ (see the module doc)."""
    gram = second_moment(features)
    values, vectors = np.linalg.eigh(gram)
    order = np.argsort(values)[::-1]
    values, vectors = np.clip(values[order], 0.0, None), vectors[:, order]
    strengths = np.sqrt(values)
    scale = np.divide(1.0, strengths, out=np.zeros_like(strengths), where=strengths > 0)
    coefficients = (vectors * scale).T @ features.coefficients
    return FeatureDirections(strengths, PolyMap(features.exponents, coefficients))


def slot_feature_directions(model: InContextRegressor) -> FeatureDirections:
    """:func:`feature_directions` of the slot features $s(x)$ a one-block bilinear GLU writes."""
    if model.depth != 1 or model.blocks[0].glu is None:
        raise ConfigError("model", f"depth {model.depth}", "one GLU-LSA block")
    return feature_directions(glu_slot_features(model.blocks[0].glu))


def _orthonormal(features: PolyMap, tolerance: float = 1e-10) -> PolyMap:
    found = feature_directions(features)
    return found.live(tolerance)


def captured_fraction(reference: PolyMap, span: PolyMap) -> np.ndarray:
    r"""For each output $r_j$ of ``reference``: $\|\Pi r_j\|^2 / \|r_j\|^2$, the share of its
    squared norm inside the span of ``span``'s outputs ($\Pi$ the orthogonal projection)."""
    basis = _orthonormal(span)
    cross = second_moment(reference, basis)  # <r_j, e_k>
    norms = np.diag(second_moment(reference))
    return np.sum(cross**2, axis=1) / norms


def principal_angles(first: PolyMap, second: PolyMap) -> np.ndarray:
    r"""Principal angles (degrees, ascending) between the spans of two feature maps:
    $\cos\theta_k$ are the singular values of $\mathbb E[e\,f^\top]$ for orthonormal bases $e, f$."""
    a, b = _orthonormal(first), _orthonormal(second)
    cosines = np.linalg.svd(second_moment(a, b), compute_uv=False)
    return np.degrees(np.arccos(np.clip(cosines, -1.0, 1.0)))


def describe_polynomial(poly: PolyMap, output: int = 0, digits: int = 2, cutoff: float = 0.05
                        ) -> str:
    """A short readable form of one output, largest terms first, e.g.
    ``"0.71 x1 x2 - 0.70 x2 x3"`` (terms below ``cutoff`` times the largest are left out)."""
    coefs = poly.coefficients[output]
    if not np.any(coefs):
        return "0"
    order = np.argsort(-np.abs(coefs))
    top = np.abs(coefs[order[0]])
    text = ""
    for k in order:
        c = coefs[k]
        if abs(c) < cutoff * top:
            break
        name = monomial_name(poly.exponents[k])
        sign = "-" if c < 0 else "+"
        text += (f"{'-' if c < 0 else ''}" if not text else f" {sign} ") + f"{abs(c):.{digits}f} {name}"
    return text


def kernel_matrix(model: InContextRegressor) -> np.ndarray:
    r"""The kernel of a one-block model in the monomial basis $\psi_0 = (x; \phi_2)$:
    $K = A^\top \Gamma A$ with $\psi(x) = (x; s(x)) = A\,\psi_0(x)$, so that
    $\hat y = \frac1n \sum_i y_i\, \psi_0(x_{n+1})^\top K\, \psi_0(x_i)$. Comparable with the
    $\Gamma^*$ of :func:`~nlicl_lib.theory.closed_forms.one_step_gd_optimum` on ``kernel_features(d, 2)``."""
    features = block_features(model)
    basis = closed_forms.kernel_features(model.input_dim, 2)
    # express the block's features over the basis' monomials
    lookup = {tuple(a): k for k, a in enumerate(basis.exponents)}
    a = np.zeros((features.num_outputs, basis.num_outputs))
    for col, alpha in enumerate(features.exponents):
        key = tuple(alpha)
        if key not in lookup:
            if np.any(features.coefficients[:, col]):
                raise ConfigError("model", "features", "features of degree 1 and 2")
            continue
        a[:, lookup[key]] += features.coefficients[:, col]
    return a.T @ block_gamma(model) @ a


@dataclass(frozen=True)
class DirectionUsage:
    r"""For each unit direction $e_k$ the GLU writes (strongest first): its ``strengths``
    $\sigma_k/\sigma_1$ and its ``usage``, the weight $e_k^\top K e_k$ the block's kernel puts on
    it over the weight $e_k^\top \Gamma^* e_k$ the optimal kernel puts on it (both on the
    degree-2 part, coefficients over $\phi_2$). About 1 for a direction the block uses as the
    optimum does; about 0 for a *dead* one, however strong or weak it is written."""

    strengths: np.ndarray
    usage: np.ndarray
    directions: PolyMap

    def used(self, threshold: float = 0.5) -> PolyMap:
        """The directions with usage above ``threshold``."""
        return PolyMap(self.directions.exponents, self.directions.coefficients[self.usage > threshold])

    def dead(self, threshold: float = 0.5) -> PolyMap:
        """The directions with usage at or below ``threshold``."""
        return PolyMap(self.directions.exponents, self.directions.coefficients[self.usage <= threshold])


def direction_usage(model: InContextRegressor, optimal_gamma: np.ndarray) -> DirectionUsage:
    r"""How much of the optimal kernel weight a one-block model puts on each direction it writes.

    ``optimal_gamma``: $\Gamma^*$ on $\psi_0 = (x; \phi_2)$, e.g.
    ``closed_forms.one_step_kernel_gd_optimum(task).gamma`` for a quadratic task. With $K$ from
    :func:`kernel_matrix` and the unit directions $e_k$ of :func:`slot_feature_directions`
    (coefficients $c_k$ over $\phi_2$), usage$_k = c_k^\top K_{qq} c_k / c_k^\top \Gamma^*_{qq} c_k$."""
    d = model.input_dim
    found = slot_feature_directions(model)
    kernel = kernel_matrix(model)[d:, d:]
    optimal = np.asarray(optimal_gamma, dtype=np.float64)[d:, d:]
    basis = closed_forms.kernel_features(d, 2)
    if found.directions.exponents.shape[0] != basis.num_outputs - d or not np.array_equal(
            found.directions.exponents, basis.exponents[d:]):
        raise ConfigError("model", "features", "a GLU writing quadratic forms of x")
    c = found.directions.coefficients
    weights = np.einsum("kp,pq,kq->k", c, kernel, c)
    best = np.einsum("kp,pq,kq->k", c, optimal, c)
    usage = np.divide(weights, best, out=np.zeros_like(weights), where=np.abs(best) > 0)
    return DirectionUsage(found.relative_strengths, usage, found.directions)


def span_optimum(task: TaskConfig, slot_directions: PolyMap) -> closed_forms.OneStepOptimum:
    r"""The best one-step loss on $(x; \text{slot\_directions})$ (Theorem 9 (thm-feature-optimum) on
    that span)."""
    features = PolyMap.monomials(task.input_dim, [1]).concat(slot_directions)
    return closed_forms.one_step_gd_optimum(task.target_features, features, task.context_length,
                                      task.noise_std)


def live_span_optimum(task: TaskConfig, model: InContextRegressor, tolerance: float = 1e-2
                      ) -> closed_forms.OneStepOptimum:
    r"""The best one-step loss on $(x; \text{live slot directions})$: what a block whose dead
    directions stay dead can reach at best (Theorem 9 (thm-feature-optimum) on its live span)."""
    check_float("tolerance", tolerance, minimum=0.0)
    live = slot_feature_directions(model).live(tolerance)
    features = PolyMap.monomials(task.input_dim, [1]).concat(live)
    return closed_forms.one_step_gd_optimum(task.target_features, features, task.context_length,
                                      task.noise_std)


def missing_direction_optimum(task: TaskConfig, direction: PolyMap) -> closed_forms.OneStepOptimum:
    r"""The best one-step loss on $\psi_0 = (x; \phi_2)$ with the polynomials of ``direction``
    (combinations of degree-2 monomials) projected out: the plateau of a block that has lost
    exactly those directions."""
    basis = closed_forms.kernel_features(task.input_dim, 2)
    lost = _orthonormal(direction)
    both = basis.concat(lost)
    size = basis.num_outputs
    inner = second_moment(basis, lost)  # <b_j, e_k>
    projected = PolyMap(both.exponents, both.coefficients[:size] - inner @ both.coefficients[size:])
    return closed_forms.one_step_gd_optimum(task.target_features, projected, task.context_length,
                                      task.noise_std)
