"""Exact identities behind chapters 2 and 3, in float64 (fast)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import PolyMap, monomial_count, quadratic_form_matrix, second_moment
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.experiments.baselines import polynomial_kernel_features, ridge_path
from nlicl_lib.theory import closed_forms
from nlicl_lib.theory.constructions import (
    glu_slot_features,
    kernel_glu_lsa,
    polynomial_kernel_gamma,
)
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
    best_linear_weights,
    line_probe,
    linearity_gap,
    predict_at_queries,
    query_weights,
)
from nlicl_lib.theory.predictors import kernel_gd, kernel_ridge, polynomial_kernel, ridge
from nlicl_lib.training.evaluate import test_loss

F64 = torch.float64


def prompts_for(task: TaskConfig, batch: int = 64, step: int = 0):
    return sample_prompts(task, batch, seed=7, step=step, dtype=F64)


# --- tasks (Definition 1 (def-prompts)) ---------------------------------------------------

def test_polynomial_task_counts_and_errors():
    assert [monomial_count(3, k) for k in (1, 2, 3)] == [3, 6, 10]
    assert [monomial_count(5, k) for k in (2, 3)] == [15, 35]
    assert TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3).num_monomials == 19
    assert TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3, homogeneous=True).num_monomials == 10
    with pytest.raises(ConfigError) as low:
        TaskConfig(kind="poly", input_dim=3, context_length=20, degree=0)
    assert low.value.param == "degree"
    with pytest.raises(ConfigError) as big:
        TaskConfig(kind="poly", input_dim=30, context_length=20, degree=4)
    assert big.value.param == "degree" and "monomial count" in str(big.value)


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


def test_a_glu_block_is_not_linear_in_the_query():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    model = build_model(ModelConfig(kind="glu-lsa"), task, seed=0, dtype=F64)
    assert linearity_gap(model, prompts_for(task)) > 1e-2


def test_line_probe_and_best_linear_weights():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    prompts = prompts_for(task, 4)
    # the best linear predictor of y = beta^T (x; phi_2) is the linear part of beta (E[x x_j x_k] = 0)
    assert np.allclose(best_linear_weights(task, prompts.coefficients),
                       prompts.coefficients[:, :3].numpy())
    model = build_model(ModelConfig(kind="lsa", depth=2, attention_init_std=0.2), task, seed=1, dtype=F64)
    probe = line_probe(model, task, prompts, [0.3, -0.2, 0.1], [1.0, 0.5, -1.0],
                       np.linspace(-2, 2, 9))
    assert probe.curvature < 1e-10 * max(1.0, np.abs(probe.predictions).max())
    t = probe.offsets
    second_difference = probe.targets[:-2] - 2 * probe.targets[1:-1] + probe.targets[2:]
    assert np.allclose(second_difference, second_difference[0]) and abs(second_difference[0]) > 0
    assert np.allclose(np.diff(probe.best_linear, 2), 0.0, atol=1e-12)
    assert t.shape == probe.predictions.shape


def test_best_linear_bound_of_pure_and_mixed_quadratic_tasks():
    pure = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, homogeneous=True)
    mixed = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    assert closed_forms.best_linear_loss(pure) == pytest.approx(closed_forms.null_loss(pure))  # nothing linear
    assert closed_forms.best_linear_loss(mixed) / closed_forms.null_loss(mixed) == pytest.approx(12 / 15)
    # one step of linear GD on the pure quadratic task cannot do better than predicting 0
    optimum = closed_forms.linear_gd_optimum(pure)
    assert np.allclose(optimum.gamma, 0.0) and optimum.normalised_loss == pytest.approx(1.0)


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


def test_one_step_kernel_optimum_and_its_asymptote():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    optimum = closed_forms.one_step_kernel_gd_optimum(task)
    model = kernel_glu_lsa(3, optimum.gamma)
    from nlicl_lib.theory.values import exact_model_loss
    assert exact_model_loss(model, task) == pytest.approx(optimum.loss, rel=1e-10)
    # L*(n) ~ c / n
    constant = closed_forms.one_step_gd_asymptote(task)
    far = TaskConfig(kind="poly", input_dim=3, context_length=200_000, degree=2)
    assert closed_forms.one_step_kernel_gd_optimum(far).loss * 200_000 / constant == pytest.approx(
        1.0, rel=1e-3)
    assert closed_forms.one_step_gd_asymptote(TaskConfig(kind="linear", input_dim=4, context_length=20)) == 20.0


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
    ModelConfig(kind="lsa", attention="sparse", depth=3),
    ModelConfig(kind="glu-lsa"),
    ModelConfig(kind="glu-lsa", glu_init="normal"),
    ModelConfig(kind="glu-lsa", depth=2, feature_slots=4, glu_width=2),
    ModelConfig(kind="glu-lsa", depth=4, feature_slots=3, glu_width=5),
]


@pytest.mark.parametrize("config", GD_FORM_STACKS, ids=lambda c: f"{c.kind}-L{c.depth}-m{c.feature_slots}")
def test_the_statistics_forward_is_the_token_forward(config):
    """``forward_statistics`` (the recursion on g-bar, H and mu(x_{n+1})) against the forward
    pass over every token, predictions and gradients, in float64, with trained-looking
    preconditioners (every Gamma drawn at scale 0.3, not the tiny initial one)."""
    task = TaskConfig(kind="poly", input_dim=3, context_length=12, degree=2, noise_std=0.3)
    model = build_model(config, task, seed=5, dtype=F64)
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


# --- baselines: kernel ridge through weighted monomials ------------------------------------

@pytest.mark.parametrize("degree", [1, 2, 3])
def test_polynomial_kernel_features_reproduce_the_kernel_and_kernel_ridge(degree):
    task = TaskConfig(kind="poly", input_dim=3, context_length=12, degree=degree)
    prompts = prompts_for(task, 16)
    features = polynomial_kernel_features(3, degree, 1.5)
    kernel = polynomial_kernel(degree, 1.5)
    a, b = prompts.x[:, :5], prompts.x[:, 5:9]
    assert torch.allclose(features(a) @ features(b).transpose(1, 2), kernel(a, b), rtol=1e-12)
    via_features = ridge(prompts, 0.05, features)
    assert torch.allclose(via_features, kernel_ridge(prompts, kernel, 0.05), rtol=1e-9, atol=1e-9)
    assert torch.allclose(ridge_path(prompts, [0.3, 0.05], features)[1], via_features,
                          rtol=1e-9, atol=1e-9)


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
