"""Chapter 5: Theorem 13 needs both its assumptions (GD-form attention, GLUs not reading the
label), and the test-loss estimators that integrate the task and the query out are unbiased."""

import numpy as np
import pytest
import torch

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import Prompts, TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import one_step_gd_loss
from nlicl_lib.theory.depth import (
    context_conditional_loss,
    context_residuals,
    is_gd_form_stack,
    reference_model,
    stack_as_bcd,
    with_dense_attention,
)
from nlicl_lib.training.evaluate import (
    conditional_squared_errors,
    label_linearity_gap,
    model_predictor,
    test_loss,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
CUBIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)


def gd_form_stack(reads: str, depth: int = 3, slots: int = 3, seed: int = 1):
    return build_model(ModelConfig(kind="glu-lsa", depth=depth, feature_slots=slots, glu_reads=reads,
                                   attention_init_std=0.05), QUADRATIC, seed=seed,
                       dtype=torch.float64)


def residual_gap(model, prompts) -> float:
    """max |label entry - (y_i - partial prediction at x_i)| over blocks, relative to the labels."""
    labels, requeried = context_residuals(model, prompts.x[0], prompts.y[0])
    return float((labels - requeried).abs().max() / labels.abs().max())


@pytest.mark.parametrize("reads", ["x", "x+slots"])
def test_residual_identity_needs_the_gd_form_of_attention(reads):
    prompts = sample_prompts(QUADRATIC, 1, seed=11, step=0, dtype=torch.float64)
    model = gd_form_stack(reads)
    assert residual_gap(model, prompts) < 1e-9
    # the dense copy starts from the model's own P, Q: with no perturbation, the same function
    same = with_dense_attention(model, 0.0)
    assert all(b.lsa.attention == "full" for b in same.blocks)
    embedded = prompts.embed(3)
    torch.testing.assert_close(same(embedded), model(embedded), rtol=1e-12, atol=1e-12)
    # dense P, Q, same GLUs (still never reading the label): the identity fails by far
    dense = with_dense_attention(model, 0.05, seed=0)
    for a, b in zip(model.blocks, dense.blocks, strict=True):
        torch.testing.assert_close(a.glu.w1, b.glu.w1)
    gap = residual_gap(dense, prompts)
    assert gap > 1e-2


@pytest.mark.parametrize("task,model", [
    (QUADRATIC, lambda: gd_form_stack("x")),
    (QUADRATIC, lambda: gd_form_stack("x+slots", depth=4)),
    (CUBIC, lambda: reference_model(CUBIC, 10, 2)),
])
def test_gd_form_stacks_are_linear_in_the_context_labels(task, model):
    model = model()
    prompts = sample_prompts(task, 64, seed=2, step=0, dtype=torch.float64)
    assert label_linearity_gap(model_predictor(model), prompts) < 1e-12


def test_dense_attention_or_a_glu_reading_the_label_is_not_linear_in_the_labels():
    prompts = sample_prompts(QUADRATIC, 64, seed=2, step=0, dtype=torch.float64)
    dense = with_dense_attention(gd_form_stack("x+slots"), 0.05, seed=0)
    assert label_linearity_gap(model_predictor(dense), prompts) > 1e-3
    reads_label = build_model(ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="all",
                                          attention_init_std=0.05), QUADRATIC, seed=0,
                              dtype=torch.float64)
    assert label_linearity_gap(model_predictor(reads_label), prompts) > 1e-3
    with pytest.raises(ConfigError, match="linear in the context labels"):
        test_loss(model_predictor(dense), QUADRATIC, integrate="task", batch_size=100,
                      min_prompts=100, dtype=torch.float64)
    with pytest.raises(ConfigError, match="sparse"):
        context_conditional_loss(dense, QUADRATIC)


def exact_one_block_loss(model, task) -> float:
    """Theorem 9 (thm-feature-optimum)'s loss formula with the block's own features and Gamma."""
    (features,), (gamma,) = stack_as_bcd(model)
    return one_step_gd_loss(gamma, task.target_features, features, task.context_length,
                            task.noise_std)


ONE_BLOCK_CASES = {
    "cubic, the reference block (GLU reads x+slots)": (CUBIC, lambda t: reference_model(t, 10, 1)),
    "quadratic, noisy labels, the reference block (GLU reads x)": (
        TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, noise_std=0.5),
        lambda t: reference_model(t, 3, 1)),
}


@pytest.mark.parametrize("case", list(ONE_BLOCK_CASES))
def test_integrated_estimators_agree_with_the_exact_one_block_loss(case):
    task, make = ONE_BLOCK_CASES[case]
    model = make(task)
    exact = exact_one_block_loss(model, task)
    common = {"seed": 5, "batch_size": 4000, "min_prompts": 4000, "max_prompts": 4000,
              "dtype": torch.float64}
    plain = test_loss(model, task, **common)
    task_only = test_loss(model, task, integrate="task", **common)
    both = test_loss(model, task, integrate="task+query", **common)
    for estimate in (plain, task_only, both):
        assert abs(estimate.mean - exact) < 3 * estimate.std_error
    # integrating beta out removes at most a factor 3 of variance (module doc of evaluate), and
    # with errors this heavy-tailed over the inputs, 4000 prompts cannot show even that;
    # integrating the query out too removes most of it
    assert both.std_error < 0.2 * plain.std_error


def test_task_integral_is_the_mean_over_tasks_and_noise_at_fixed_inputs():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, noise_std=0.5)
    model = gd_form_stack("x+slots", depth=2, seed=3)
    x = sample_prompts(task, 1, seed=0, step=0, dtype=torch.float64).x
    draws = 50000
    gen = torch.Generator().manual_seed(0)
    beta = torch.randn(draws, task.num_monomials, generator=gen, dtype=torch.float64)
    noise = torch.randn(draws, 20, generator=gen, dtype=torch.float64)
    y = torch.einsum("tp,bp->bt", task.target_features(x[0]), beta)
    y[:, :20] += task.noise_std * noise
    prompts = Prompts(x.expand(draws, 21, 3), y, beta)
    with torch.no_grad():
        errors = (model_predictor(model)(prompts) - y[:, 20]) ** 2
    integrated = float(conditional_squared_errors(model_predictor(model),
                                                  Prompts(x, y[:1], beta[:1]), task))
    mean, error = float(errors.mean()), float(errors.std() / np.sqrt(draws))
    assert abs(integrated - mean) < 4 * error


@pytest.mark.slow
def test_query_integral_is_the_mean_over_queries_at_a_fixed_context():
    task = TaskConfig(kind="poly", input_dim=3, context_length=12, degree=3, noise_std=0.3)
    model = reference_model(TaskConfig(kind="poly", input_dim=3, context_length=12, degree=3), 10, 2)
    with torch.no_grad():
        model.blocks[1].lsa.gamma.copy_(0.02 * torch.eye(13, dtype=torch.float64))
    context = sample_prompts(task, 1, seed=0, step=0, dtype=torch.float64).x[:, :12]
    queries = sample_prompts(task, 20000, seed=1, step=0, dtype=torch.float64).x[:, 12:]
    x = torch.cat([context.expand(20000, 12, 3), queries], dim=1)
    prompts = Prompts(x, x.new_zeros(20000, 13), x.new_zeros(20000, 1))
    per_query = conditional_squared_errors(model_predictor(model), prompts, task)
    integrated = context_conditional_loss(model, task)(
        Prompts(x[:1], x.new_zeros(1, 13), x.new_zeros(1, 1)))
    mean = float(per_query.mean())
    error = float(per_query.std() / np.sqrt(per_query.numel()))
    assert abs(float(integrated) - mean) < 4 * error
    assert error < 0.05 * mean


def test_is_gd_form_stack_is_what_theorem_13_assumes():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    assert is_gd_form_stack(build_model(ModelConfig(kind="glu-lsa", depth=2), task))
    assert is_gd_form_stack(build_model(
        ModelConfig(kind="glu-lsa", depth=2, glu_reads="x"), task))
    assert not is_gd_form_stack(build_model(
        ModelConfig(kind="glu-lsa", depth=2, glu_reads="all"), task))
    assert not is_gd_form_stack(build_model(ModelConfig(kind="lsa", depth=2), task))
    assert not is_gd_form_stack(lambda prompts: prompts.x[:, -1, 0])
