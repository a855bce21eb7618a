r"""What theory says for a task and a model class: the optimum where a closed form or an exact
construction gives one, the best linear predictor as a bound, $\mathbb E[y^2]$; and the exact
test loss of a trained one-block model where its features are polynomials of $x$."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.errors import check_int
from nlicl_lib.core.models import InContextRegressor, ModelConfig
from nlicl_lib.core.monomials import PolyMap, monomial_count
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.capacity import best_block, slot_increments
from nlicl_lib.theory.constructions import block_features, block_gamma
from nlicl_lib.theory.depth import bcd_reference_loss


@dataclass(frozen=True)
class TheoryValues:
    """What theory says for a task and model class (``None`` where it says nothing exact)."""

    null_loss: float
    theory_loss: float | None
    theory_name: str | None
    bound_loss: float | None
    theory_kind: str | None = None
    """What ``theory_loss`` is: :data:`EXACT_OPTIMUM` (proven, computed exactly: no model of the
    class does better), :data:`OPTIMISED_EXACT` (the exact loss of the best block a numerical
    search found: no model does better than the true optimum, which the search may miss),
    :data:`MONTE_CARLO_REFERENCE` (a constructed predictor's loss, estimated by sampling: a
    trained model may go below it), or ``None`` with no theory loss."""


EXACT_OPTIMUM = "exact optimum"
OPTIMISED_EXACT = "optimised exact loss"
MONTE_CARLO_REFERENCE = "Monte Carlo reference"
LOWER_BOUND = "lower bound"
"""The kind of ``bound_loss``: the best linear predictor, below every attention-only model."""


def theory_values(task: TaskConfig, config: ModelConfig,
                  reference_contexts: int = 50_000) -> TheoryValues:
    """The optimum for this model class where theory gives one, the linear bound, E[y^2].

    - LSA, depth 1: the best step of preconditioned GD on $x$ (Theorem 5 (thm-linear-optimum)
      for a linear task; for a polynomial task the best one-step *linear* GD, Theorem 9
      (thm-feature-optimum) with $\\psi = x$). Deeper LSA: no closed form (``None``).
    - LSA on a polynomial task: ``bound_loss``, the best linear predictor (Corollary 7
      (cor-linear-bound)), for any depth.
    - GLU-LSA, one bilinear block reading $x$ and writing its slots, sparse attention, whose slots
      and width hold every degree-2 monomial:
      the best preconditioned GD step on $\\psi = (x; \\phi_2)$ (Theorem 9 (thm-feature-optimum)).
    - GLU-LSA, one such block with fewer slots or units ($m < p_2$ or $h < p_2$): the exact loss
      of the best feature span it can write (Proposition 12 (prop-capacity),
      :func:`nlicl_lib.theory.capacity.best_block`), an exact optimum where it meets the proven
      lower bound $\\mathcal L^*_{\\min(m, h)}$ (:func:`meets_capacity_bound`), else the best a numerical
      search found.
    - GLU-LSA of depth $L > 1$ (structured: bilinear GLUs writing the slots, sparse attention) on
      a noise-free polynomial task of degree $\\le 3$: the greedy block-coordinate reference of
      Proposition 15 (prop-greedy-reference) over monomial blocks of $m$, each $\\Gamma_\\ell$
      the best given the earlier ones (:func:`nlicl_lib.theory.depth.bcd_reference_loss`; Monte Carlo
      over contexts, seconds), a reference whose exact loss can only fall with depth, not an optimum.
      ``reference_contexts`` is its number of fitting contexts; its memory grows with it (about
      7 KB a context at $d = 3$, $m = 3$, $n = 100$).
    """
    config = config.resolved(task)
    null = closed_forms.null_loss(task)
    bound = closed_forms.best_linear_loss(task) if task.kind == "poly" else None
    loss = name = kind = None
    if config.kind == "lsa" and config.depth == 1:
        loss = closed_forms.linear_gd_optimum(task).loss
        name = (f"one-step linear GD optimum ({ref('thm-linear-optimum')})" if task.kind == "linear"
                else f"one-step linear GD optimum ({ref('thm-feature-optimum')} with psi = x)")
        kind = EXACT_OPTIMUM
    p2 = monomial_count(task.input_dim, 2)
    covers = (config.feature_slots >= p2 and config.glu_width >= p2)
    structured = (config.kind == "glu-lsa" and config.activation == "none"
                  and config.attention == "sparse" and config.glu_writes == "slots"
                  and task.covariance is None)
    if structured and config.depth == 1 and covers and config.glu_reads == "x":
        features = closed_forms.kernel_features(task.input_dim, 2)
        optimum = closed_forms.one_step_gd_optimum(task.target_features, features,
                                                   task.context_length, task.noise_std)
        loss, name = optimum.loss, f"best one-step GD on (x; φ₂) ({ref('thm-feature-optimum')})"
        kind = EXACT_OPTIMUM
    if structured and config.depth == 1 and not covers and config.glu_reads == "x":
        optimum = best_block(task, config.feature_slots, config.glu_width)
        loss, exact = optimum.loss, meets_capacity_bound(task, config, optimum.loss)
        size = f"m={config.feature_slots} slots, width h={config.glu_width}"
        name = (f"best block with {size}: the closed form L*_{min(config.feature_slots, config.glu_width)} "
                f"of {ref('prop-capacity')}, item 5, attained (item 1)" if exact else
                f"best block with {size} ({ref('prop-capacity')}: exact loss, optimised span)")
        kind = EXACT_OPTIMUM if exact else OPTIMISED_EXACT
    if (structured and config.depth > 1 and config.glu_reads != "all" and task.kind == "poly"
            and task.degree <= 3 and task.noise_std == 0):
        fit = check_int("reference_contexts", reference_contexts, minimum=1_000)
        loss, _ = bcd_reference_loss(task, config.feature_slots, config.depth,
                                     fit_contexts=fit, test_prompts=20_000)
        name = (f"greedy block-coordinate reference ({ref('prop-greedy-reference')}): "
                f"{config.depth} blocks of m={config.feature_slots} monomials, each Γ the "
                "best given the earlier ones (Monte Carlo over contexts)")
        kind = MONTE_CARLO_REFERENCE
    return TheoryValues(null, loss, name, bound, kind)


def meets_capacity_bound(task: TaskConfig, config: ModelConfig, loss: float,
                         rel: float = 1e-9) -> bool:
    r"""Whether a block's optimised loss equals the proven lower bound $\mathcal L^*_{\min(m, h)}$ of
    Proposition 12 (prop-capacity, items 1 and 5), which makes it the exact optimum: no block of
    this size does better than $\mathcal L^*_{\min(m, h)}$, and this one reaches it. Only for the
    degree-$\le 2$ task with isotropic inputs, where item 5 gives $\mathcal L^*_r$ in closed form."""
    if not (task.kind == "poly" and task.degree == 2 and not task.homogeneous
            and task.covariance is None):
        return False
    bound = slot_increments(task).loss(min(config.feature_slots, config.glu_width))
    return abs(loss - bound) <= rel * bound


#: Largest degree of a GD-form stack's slot features for which the test loss integrates the
#: query out with exact moments (degree 8: three blocks reading the slots, a few seconds; degree
#: 16 takes minutes and gigabytes).
MAX_EXACT_FEATURE_DEGREE = 8


def slot_feature_degree(model: InContextRegressor) -> int:
    r"""The largest degree in $x$ the slots of a stack of bilinear GLUs can hold: each GLU
    multiplies two linear forms of what it reads, so a block reading $x$ writes degree 2 and one
    reading $(x; \text{slots})$ doubles the slots' degree ($2^L$ after $L$ such blocks)."""
    degree = 0
    for block in model.blocks:
        if block.glu is not None:
            read = 1 if block.glu.reads == "x" else max(1, degree)
            degree = max(degree, 2 * read)
    return degree


def exact_model_loss(model: InContextRegressor, task: TaskConfig) -> float | None:
    r"""The exact test loss where a closed form exists: one block with sparse attention whose
    features are polynomials of $x$ (a plain LSA layer, or a bilinear GLU reading $x$), isotropic
    inputs. Then the model is one GD step with its own $\Gamma$ and the loss formula of Theorem 9
    (thm-feature-optimum) applies."""
    if model.depth != 1 or task.covariance is not None:
        return None
    block = model.blocks[0]
    if block.lsa.attention != "sparse":
        return None
    if block.glu is None:
        features = PolyMap.monomials(task.input_dim, [1])
        if model.feature_slots:
            zeros = PolyMap(features.exponents, np.zeros((model.feature_slots, task.input_dim)))
            features = features.concat(zeros)
    elif (block.glu.activation == "none" and block.glu.reads == "x"
          and block.glu.writes == "slots"):
        features = block_features(model)
    else:
        return None
    return closed_forms.one_step_gd_loss(block_gamma(model), task.target_features, features,
                                   task.context_length, task.noise_std)
