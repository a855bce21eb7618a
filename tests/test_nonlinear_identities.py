"""Exact identities behind chapters 2 and 3, in float64 (fast)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap, quadratic_form_matrix, second_moment
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.constructions import (
    glu_slot_features,
    kernel_glu_lsa,
    polynomial_kernel_gamma,
)
from nlicl_lib.theory.depth import reference_model
from nlicl_lib.theory.kernel import (
    captured_fraction,
    first_length_within,
    kernel_matrix,
    live_span_optimum,
    missing_direction_optimum,
    one_over_n_rates,
    slot_feature_directions,
)
from nlicl_lib.theory.linearity import (
    linearity_gap,
    predict_at_queries,
    query_weights,
)
from nlicl_lib.theory.predictors import kernel_gd
from nlicl_lib.training.evaluate import test_loss

F64 = torch.float64


def prompts_for(task: TaskConfig, batch: int = 64, step: int = 0):
    return sample_prompts(task, batch, seed=7, step=step, dtype=F64)


# --- tasks (Definition 1 (def-prompts)) ---------------------------------------------------

def test_polynomial_task_labels_are_the_drawn_polynomial():
    task = TaskConfig(kind="poly", input_dim=3, context_length=5, degree=2, homogeneous=True)
    prompts = prompts_for(task, 8)
    x, beta = prompts.x, prompts.coefficients
    monomials = torch.stack([x[..., 0] ** 2, x[..., 0] * x[..., 1], x[..., 0] * x[..., 2],
                             x[..., 1] ** 2, x[..., 1] * x[..., 2], x[..., 2] ** 2], dim=-1)
    assert torch.allclose(prompts.y, torch.einsum("btp,bp->bt", monomials, beta))


# --- chapter 2: attention alone is linear in the query ---------------------------------------

@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.parametrize("attention", ["full", "sparse"])
def test_lsa_of_any_depth_is_linear_in_the_query(depth, attention):
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    model = build_model(ModelConfig(kind="lsa", depth=depth, attention=attention, attention_init_std=0.2),
                        task, seed=depth, dtype=F64)
    prompts = prompts_for(task)
    assert linearity_gap(model, prompts) < 1e-12
    # and the prediction is v(context)^T x_query with v read off the basis queries
    v = query_weights(model, prompts)
    direct = predict_at_queries(model, prompts, prompts.x[:, -1:])[:, 0]
    assert torch.allclose(direct, torch.einsum("bd,bd->b", v, prompts.x[:, -1]), rtol=1e-10,
                          atol=1e-10 * float(direct.abs().max()))
    # predicting at the prompt's own query is what the model does on the prompt
    assert torch.allclose(direct, model(prompts.embed(0)), rtol=1e-12, atol=1e-12)


# --- chapter 3: one GLU-LSA block is one step of kernel GD -----------------------------------

@pytest.mark.parametrize("input_dim", [2, 3])
def test_constructed_glu_lsa_equals_explicit_kernel_gd(input_dim):
    task = TaskConfig(kind="poly", input_dim=input_dim, context_length=15, degree=2)
    prompts = prompts_for(task)
    psi = closed_forms.kernel_features(input_dim, 2)
    rng = np.random.default_rng(input_dim)
    size = psi.num_outputs
    for gamma in (polynomial_kernel_gamma(input_dim, 0.7), rng.standard_normal((size, size))):
        model = kernel_glu_lsa(input_dim, gamma)
        with torch.no_grad():
            block = model(prompts.embed(model.feature_slots))
        explicit = kernel_gd(prompts, gamma, psi)
        assert torch.allclose(block, explicit, rtol=1e-12, atol=1e-12 * float(explicit.abs().max()))
        assert np.allclose(kernel_matrix(model), gamma, atol=1e-14)
    # with the polynomial-kernel Gamma it is (1/n) sum_i y_i (a x_i.x + (x_i.x)^2)
    model = kernel_glu_lsa(input_dim, polynomial_kernel_gamma(input_dim, 0.7))
    x, y, n = prompts.x, prompts.y, task.context_length
    dots = torch.einsum("bid,bd->bi", x[:, :n], x[:, n])
    by_hand = torch.einsum("bi,bi->b", y[:, :n], 0.7 * dots + dots**2) / n
    with torch.no_grad():
        assert torch.allclose(model(prompts.embed(model.feature_slots)), by_hand, rtol=1e-12,
                              atol=1e-12)


def test_monte_carlo_agrees_with_the_exact_kernel_optimum():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    optimum = closed_forms.one_step_kernel_gd_optimum(task)
    model = kernel_glu_lsa(3, optimum.gamma)
    measured = test_loss(model, task, num_prompts=40000)
    sigma = measured.std_error
    assert abs(measured.mean - optimum.loss) < 4 * sigma


# --- the fast trainer of the sweeps ---------------------------------------------------------

def test_quadratic_form_matrix_is_what_the_glu_writes():
    glu = build_model(ModelConfig(kind="glu-lsa"), TaskConfig(kind="poly", input_dim=3, context_length=5, degree=2),
                      seed=3,
                      dtype=F64).blocks[0].glu
    hidden = quadratic_form_matrix(glu.w1, glu.w2, 3)
    assert np.allclose((glu.w3 @ hidden).detach().numpy(), glu_slot_features(glu).coefficients)


GD_FORM_STACKS = [
    None,  # the greedy construction, reference_model
    ModelConfig(kind="lsa", attention="sparse", depth=3),
    ModelConfig(kind="glu-lsa", feature_slots=3, glu_width=6),
    ModelConfig(kind="glu-lsa", depth=3, feature_slots=2, glu_width=4, glu_reads="x"),
    ModelConfig(kind="glu-lsa"),
    ModelConfig(kind="glu-lsa", glu_init="normal"),
    ModelConfig(kind="glu-lsa", depth=2, feature_slots=4, glu_width=2),
    ModelConfig(kind="glu-lsa", depth=4, feature_slots=3, glu_width=5),
]


@pytest.mark.parametrize("config", GD_FORM_STACKS,
                         ids=lambda c: f"{c.kind}-L{c.depth}-m{c.feature_slots}-h{c.glu_width}"
                         if c else "reference")
def test_the_statistics_forward_is_the_token_forward(config):
    """The recursion on the prompt's statistics against the forward pass over every token,
    predictions and gradients (float64), with every Gamma drawn at scale 0.3."""
    task = TaskConfig(kind="poly", input_dim=3, context_length=12, degree=2, noise_std=0.3)
    model = (build_model(config, task, seed=5, dtype=F64) if config else
             reference_model(TaskConfig(kind="poly", input_dim=3, context_length=12, degree=2), 3, 2))
    with torch.no_grad():
        for block in model.blocks:
            block.lsa.gamma.normal_(0.0, 0.3)
    prompts = prompts_for(task, 40)
    assert model.gd_form
    outputs = []
    for inputs in (prompts.embed(model.feature_slots), model.prompt_statistics(prompts.x, prompts.y)):
        model.zero_grad()
        prediction = model(inputs)
        ((prediction - prompts.query_label) ** 2).mean().backward()
        outputs.append((prediction.detach(), [p.grad.clone() for p in model.parameters()]))
    (tokens, token_grads), (fast, fast_grads) = outputs
    torch.testing.assert_close(fast, tokens, rtol=1e-12, atol=1e-12)
    for a, b in zip(fast_grads, token_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_only_stacks_in_the_gd_form_take_statistics():
    task = TaskConfig(kind="poly", input_dim=3, context_length=12, degree=3)
    prompts = prompts_for(task, 4)
    for config in (ModelConfig(kind="lsa"), ModelConfig(kind="glu-lsa", activation="silu"),
                   ModelConfig(kind="glu-lsa", depth=2)):  # full P, Q; a gated GLU; GLUs reading slots
        model = build_model(config, task, dtype=F64)
        assert not model.gd_form
        with pytest.raises(ConfigError) as info:
            model.prompt_statistics(prompts.x, prompts.y)
        assert info.value.param == "model"


# --- what a GLU writes ----------------------------------------------------------------------

def test_feature_analysis_of_the_constructed_and_a_crippled_glu():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    model = kernel_glu_lsa(3, polynomial_kernel_gamma(3, 1.0))
    found = slot_feature_directions(model)
    # Gram of the monomials x_j^2 (E = 3, cross 1) and x_j x_k (E = 1): eigenvalues 5, 2, 2, 1, 1, 1
    assert np.allclose(found.strengths**2, [5, 2, 2, 1, 1, 1])
    phi2 = PolyMap.monomials(3, [2])
    assert np.allclose(captured_fraction(phi2, found.live()), 1.0)
    # kill the direction (x1 x2 - x2 x3) / sqrt(2): slots 2 and 5 hold x1 x2 and x2 x3
    glu = model.blocks[0].glu
    with torch.no_grad():
        projector = torch.eye(6, dtype=F64)
        u = torch.zeros(6, dtype=F64)
        u[1], u[4] = 2**-0.5, -(2**-0.5)
        glu.w3.copy_(projector - torch.outer(u, u))
    found = slot_feature_directions(model)
    assert found.rank() == 5 and found.relative_strengths[-1] < 1e-6  # sqrt of a rounding error
    fractions = dict(zip(phi2.names, captured_fraction(phi2, found.live()), strict=True))
    assert fractions["x1 x2"] == pytest.approx(0.5) and fractions["x2 x3"] == pytest.approx(0.5)
    assert fractions["x1 x3"] == pytest.approx(1.0) and fractions["x1^2"] == pytest.approx(1.0)
    # every cross-term direction costs the same, and it is the optimum on the live span
    lost = PolyMap(phi2.exponents, np.array([[0, 1, 0, 0, 0, 0.0]]))
    plateau = missing_direction_optimum(task, lost).loss
    assert live_span_optimum(task, model).loss == pytest.approx(plateau, rel=1e-9)
    assert plateau > closed_forms.one_step_kernel_gd_optimum(task).loss * 1.01
    assert second_moment(lost).shape == (1, 1)


def test_first_context_length_within_one_percent_is_exact():
    # the log grid alone would report the first grid point above 0.99 (3687), not the first n
    lengths = np.unique(np.geomspace(10, 100_000, 60).astype(int))
    rate = one_over_n_rates([2], lengths)[2]
    phi = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2).target_features
    first = first_length_within(rate, phi, 0.99)
    pair = np.array([first - 1, first])
    scaled = pair * closed_forms.one_step_gd_optimum_curve(phi, phi, pair) / rate.c
    assert scaled[0] < 0.99 <= scaled[1]
    assert first not in set(lengths.tolist())  # found between grid points
