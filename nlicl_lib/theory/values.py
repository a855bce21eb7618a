r"""What theory says for a task and a model class: the optimum where a closed form or an exact
construction gives one, the best linear predictor as a bound, $\mathbb E[y^2]$; and the exact
test loss of a trained one-block model where its features are polynomials of $x$."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.models import InContextRegressor, ModelConfig
from nlicl_lib.core.monomials import PolyMap, monomial_count
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.capacity import best_block
from nlicl_lib.theory.constructions import block_features, block_gamma
from nlicl_lib.theory.depth import bcd_reference_loss


@dataclass(frozen=True)
class TheoryValues:
    """What theory says for a task and model class (``None`` where it says nothing exact)."""

    null_loss: float
    theory_loss: float | None
    theory_name: str | None
    bound_loss: float | None


def theory_values(task: TaskConfig, config: ModelConfig) -> TheoryValues:
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
      :func:`nlicl_lib.theory.capacity.best_block`).
    - GLU-LSA of depth $L > 1$ (structured: bilinear GLUs writing the slots, sparse attention) on
      a noise-free polynomial task of degree $\\le 3$: the greedy block-coordinate reference of
      Proposition 15 (prop-greedy-reference) over monomial blocks of $m$, each $\\Gamma_\\ell$
      the best given the earlier ones (:func:`nlicl_lib.theory.depth.bcd_reference_loss`; Monte Carlo
      over contexts, seconds), a reference whose exact loss can only fall with depth, not an optimum.
    """
    config = config.resolved(task)
    null = closed_forms.null_loss(task)
    bound = closed_forms.best_linear_loss(task) if task.kind == "poly" else None
    loss = name = None
    if config.kind == "lsa" and config.depth == 1:
        loss = closed_forms.linear_gd_optimum(task).loss
        name = (f"one-step linear GD optimum ({ref('thm-linear-optimum')})" if task.kind == "linear"
                else f"one-step linear GD optimum ({ref('thm-feature-optimum')} with psi = x)")
    p2 = monomial_count(task.input_dim, 2)
    covers = (config.feature_slots >= p2 and config.glu_width >= p2)
    structured = (config.kind == "glu-lsa" and config.activation == "none"
                  and config.attention == "sparse" and config.glu_writes == "slots"
                  and task.covariance is None)
    if structured and config.depth == 1 and covers and config.glu_reads == "x":
        features = closed_forms.kernel_features(task.input_dim, 2)
        optimum = closed_forms.one_step_gd_optimum(task.target_features, features,
                                                   task.context_length, task.noise_std)
        loss, name = optimum.loss, f"best one-step GD on (x, phi_2) ({ref('thm-feature-optimum')})"
    if structured and config.depth == 1 and not covers and config.glu_reads == "x":
        optimum = best_block(task, config.feature_slots, config.glu_width)
        loss, name = optimum.loss, (f"best block with m={config.feature_slots} slots, width "
                                    f"h={config.glu_width} ({ref('prop-capacity')}: exact loss, "
                                    "optimised span)")
    if (structured and config.depth > 1 and config.glu_reads != "all" and task.kind == "poly"
            and task.degree <= 3 and task.noise_std == 0):
        loss, _ = bcd_reference_loss(task, config.feature_slots, config.depth,
                                     fit_contexts=50_000, test_prompts=20_000)
        name = (f"greedy block-coordinate reference ({ref('prop-greedy-reference')}): "
                f"{config.depth} blocks of m={config.feature_slots} monomials, each Gamma the "
                "best given the earlier ones (Monte Carlo over contexts)")
    return TheoryValues(null, loss, name, bound)


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
