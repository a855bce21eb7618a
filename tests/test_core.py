"""Core library: validation, the command line, exact moments, closed forms, reproducibility."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from nlicl_lib import ConfigError, ModelConfig, TaskConfig, TrainConfig, resolve_device
from nlicl_lib.core.device import available_devices, choose_threads
from nlicl_lib.core.models import build_model, orthogonal_
from nlicl_lib.core.monomials import (
    PolyMap,
    gaussian_moment,
    monomial_count,
    monomial_exponents,
    second_moment,
    squared_norm,
    weighted_second_moment,
)
from nlicl_lib.core.tasks import PART_SIZE, embed, sample_inputs, sample_prompts
from nlicl_lib.experiments.baselines import polynomial_kernel_features, tuned_kernel_ridge, tuned_ridge
from nlicl_lib.experiments.cli import main
from nlicl_lib.experiments.run import run_experiment
from nlicl_lib.experiments.studies import run_study
from nlicl_lib.theory import linearity
from nlicl_lib.theory.capacity import one_block_references, slot_increments
from nlicl_lib.theory.closed_forms import best_step_size, gd_moments, kernel_features, null_loss
from nlicl_lib.theory.depth import (
    deep_glu_lsa,
    greedy_reference,
    monomial_schedule,
    recursion_losses,
    schedule_features,
)
from nlicl_lib.theory.values import theory_values
from nlicl_lib.training.evaluate import test_loss
from nlicl_lib.training.settings import base_settings, default_train_config
from nlicl_lib.training.train import train

# ---------------------------------------------------------------- validation (library)

Q = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
Q30 = TaskConfig(kind="poly", input_dim=3, context_length=30, degree=2)
LIN = TaskConfig(kind="linear", input_dim=3, context_length=10)
COV2 = ((2.0, 0.3), (0.3, 1.0))

# every public entry point refuses bad input before any work, naming the parameter
BAD_CALLS = [
    (lambda: TaskConfig(input_dim=0), "input_dim"),
    (lambda: TaskConfig(context_length=0), "context_length"),
    (lambda: TaskConfig(noise_std=float("nan")), "noise_std"),
    (lambda: TaskConfig(kind="cubic"), "task"),
    (lambda: TaskConfig(kind="poly", input_dim=20, degree=5), "degree"),  # 53130 monomials
    (lambda: TaskConfig(kind="poly", input_dim=3, degree=0), "degree"),
    (lambda: TaskConfig(kind="linear", degree=2), "degree"),
    (lambda: TrainConfig(steps=0), "steps"),
    (lambda: TrainConfig(learning_rate=-1e-3), "learning_rate"),
    (lambda: TrainConfig(learning_rate=0.0), "learning_rate"),
    (lambda: TrainConfig(schedule="linear"), "schedule"),
    (lambda: TrainConfig(schedule="OneCycle"), "schedule"),
    (lambda: TrainConfig(warmup_fraction=-0.1), "warmup_fraction"),
    (lambda: TrainConfig(warmup_fraction=1.5), "warmup_fraction"),
    (lambda: TrainConfig(steps=100).learning_rate_at(101), "step"),
    (lambda: TrainConfig(steps=100).learning_rate_at(-1), "step"),
    (lambda: ModelConfig(kind="mlp"), "model"),
    (lambda: ModelConfig(depth=0), "depth"),
    (lambda: ModelConfig(kind="glu-lsa", feature_slots=0), "feature_slots"),
    (lambda: resolve_device("tpu"), "device"),
    *[(lambda bad=bad: choose_threads(bad), "threads") for bad in (0, -1, "many", 1.5, True)],
    (lambda: test_loss(build_model(ModelConfig(), LIN), LIN, 100, integrate="query"), "integrate"),
    (lambda: test_loss(build_model(ModelConfig(), LIN), LIN, test_samples=2), "test_samples"),
    (lambda: test_loss(build_model(ModelConfig(), LIN), LIN, 100, test_samples=0), "test_samples"),
    (lambda: train([build_model(ModelConfig(), LIN)] * 3, [LIN, LIN], TrainConfig(steps=3)), "task"),
    (lambda: train([build_model(ModelConfig(), LIN)] * 2, LIN, TrainConfig(steps=3),
                   callback=lambda step, loss: None), "callback"),
    (lambda: default_train_config(Q, ModelConfig(kind="lsa"), purpose="fast"), "purpose"),
    (lambda: base_settings("mlp"), "kind"),
    (lambda: default_train_config(Q, "lsa"), "model_config"),
    (lambda: polynomial_kernel_features(input_dim=0, degree=2), "d"),
    (lambda: polynomial_kernel_features(input_dim=3, degree=0), "degree"),
    (lambda: polynomial_kernel_features(input_dim=3, degree=2, offset=-1.0), "offset"),
    (lambda: polynomial_kernel_features(input_dim=3, degree=2, offset=float("nan")), "offset"),
    (lambda: tuned_ridge(LIN, penalties=[]), "penalties"),
    (lambda: tuned_ridge(LIN, penalties=[0.1, 0.0]), "penalty"),
    (lambda: tuned_ridge(LIN, penalties=[-1.0]), "penalty"),
    (lambda: tuned_ridge(LIN, validation_prompts=0), "validation_prompts"),
    (lambda: tuned_ridge(LIN, PolyMap.monomials(2, [1, 2])), "features.input_dim"),
    (lambda: tuned_kernel_ridge(Q, offset=-0.5), "offset"),
    (lambda: greedy_reference(TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2,
                                         noise_std=0.1), schedule_features(Q30, 3, 2)), "task"),
    (lambda: greedy_reference(Q30, schedule_features(Q30, 3, 2), fit_contexts=0), "fit_contexts"),
    (lambda: greedy_reference(Q30, schedule_features(Q30, 3, 2), fit_seed=-1), "fit_seed"),
    (lambda: recursion_losses(Q30, schedule_features(Q30, 3, 2), [np.zeros((6, 6))], 10), "gammas"),
    (lambda: slot_increments(TaskConfig(kind="poly", input_dim=2, context_length=10, degree=3)),
     "task"),
    (lambda: slot_increments(TaskConfig(kind="poly", input_dim=2, context_length=10, degree=2,
                                        homogeneous=True)), "task"),
    (lambda: slot_increments(TaskConfig(kind="poly", input_dim=2, context_length=10, degree=2,
                                        covariance=((1.0, 0.0), (0.0, 2.0)))), "covariance"),
    (lambda: one_block_references(TaskConfig(kind="poly", input_dim=2, context_length=20,
                                             degree=3)), "task"),
    (lambda: linearity.diagnostic_prompts(TaskConfig(kind="poly", input_dim=2, context_length=10,
                                                     degree=2), 100, quantile=1.0), "quantile"),
    (lambda: linearity.best_predictor_loss(Q, PolyMap.monomials(4, [1])), "features"),
    (lambda: linearity.best_affine_loss(TaskConfig(kind="linear", input_dim=2, context_length=5,
                                                   covariance=COV2)), "covariance"),
    (lambda: run_study("d3", ("trained",), shapes=[(4, 1)]), "shapes"),
    (lambda: run_study("d3", ("references",), reference_slots=[4]), "reference_slots"),
    (lambda: theory_values(TaskConfig(kind="poly", input_dim=3, context_length=100, degree=2),
                           ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="x"),
                           reference_contexts=10), "reference_contexts"),
    (lambda: deep_glu_lsa(3, [monomial_schedule(3, 10, 2, 3)[1]], [np.zeros((13, 13))], 10,
                          "x+slots"), "feature_blocks"),  # a cubic needs a stored factor
    (lambda: deep_glu_lsa(3, list(monomial_schedule(3, 10, 2, 3)), [np.zeros((13, 13))] * 2, 10,
                          "x"), "feature_blocks"),  # reading x only, a GLU writes quadratics
    (lambda: best_step_size(np.zeros((9, 9)), gd_moments(Q.target_features, kernel_features(3, 2),
                                                         20)), "gamma"),
    (lambda: run_experiment(Q, ModelConfig(kind="glu-lsa"), TrainConfig(steps=2, batch_size=50),
                            "cpu", theory="no"), "theory"),
]


@pytest.mark.parametrize(("call", "param"), BAD_CALLS, ids=[p for _, p in BAD_CALLS])
def test_bad_input_names_the_parameter_and_what_is_allowed(call, param):
    with pytest.raises(ConfigError) as info:
        call()
    assert info.value.param == param
    assert str(info.value).startswith(f"{param}=") and "is not allowed: " in str(info.value)


@pytest.mark.parametrize("shape", [(6, 6), (2, 4), (10, 6)])
def test_orthogonal_init_is_torchs_draw_orthogonalised_in_float64(shape):
    """models.orthogonal_ takes nn.init.orthogonal_'s normals and signs, its QR in float64: a
    float64 weight gets torch's matrix to rounding, a float32 one torch's to float32 rounding,
    and the rows or columns (whichever are fewer) are orthonormal."""
    for dtype, tolerance in [(torch.float64, 1e-14), (torch.float32, 1e-6)]:
        torch.manual_seed(3)
        ours = orthogonal_(torch.empty(*shape, dtype=dtype)).double()
        torch.manual_seed(3)
        theirs = torch.nn.init.orthogonal_(torch.empty(*shape, dtype=dtype)).double()
        assert float((ours - theirs).abs().max()) <= tolerance
        gram = ours @ ours.T if shape[0] <= shape[1] else ours.T @ ours
        assert float((gram - torch.eye(len(gram), dtype=torch.float64)).abs().max()) <= 10 * tolerance


def test_missing_device():
    if "cuda" not in available_devices():
        with pytest.raises(ConfigError, match="cuda"):
            resolve_device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto").type == available_devices()[0]


# ---------------------------------------------------------------- command line


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nlicl_lib", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


CLI_BAD = [(["--d", "0"], "d=0"), (["--lr", "-0.1"], "lr=-0.1"), (["--task", "cubic"], "task='cubic'"),
           (["--device", "tpu"], "device='tpu'"), (["--task", "poly", "--degree", "0"], "degree=0"),
           (["--threads=0"], "--threads=0"), (["--threads=lots"], "--threads='lots'")]
if not torch.cuda.is_available():
    CLI_BAD.append((["--device", "cuda"], "device='cuda'"))


@pytest.mark.parametrize(("flags", "message"), CLI_BAD)
def test_cli_bad_input_names_the_flag_before_any_work(tmp_path, capsys, monkeypatch, flags, message):
    import nlicl_lib.experiments.run as experiment

    def boom(*args, **kwargs):  # pragma: no cover - must not be reached
        raise AssertionError("training started")

    monkeypatch.setattr(experiment, "train", boom)
    out = tmp_path / "out.json"
    assert main(["train", *flags, "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "not allowed" in err
    assert list(tmp_path.iterdir()) == []


def test_cli_bad_input_in_a_real_process(tmp_path):
    """The real command: exit status 2, one line on stderr, no traceback, no file."""
    out = tmp_path / "out.json"
    result = _cli("train", "--d", "0", "--json", str(out))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "not allowed" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not out.exists()


@pytest.mark.slow
def test_cli_train_default_run(tmp_path):
    """The minimal command is a complete run that converges to the optimum."""
    out = tmp_path / "out.json"
    result = _cli("train", "--task", "linear", "--d", "5", "--n", "20", "--model", "lsa",
                  "--depth", "1", "--device", "cpu", "--json", str(out))
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    for key in ("test_loss", "theory_loss", "null_loss", "train_seconds", "steps", "device",
                "config"):
        assert key in data
    assert data["null_loss"] == pytest.approx(5.0)
    assert data["theory_loss"] == pytest.approx(30 / 26)
    # within 3% of the optimum, beyond the Monte Carlo error
    assert data["test_loss"] < 1.03 * data["theory_loss"] + 2 * data["test_loss_std_error"]
    assert data["test_loss_std_error"] < 0.01 * data["test_loss"]
    assert "test loss" in result.stdout


# ---------------------------------------------------------------- monomials and exact moments


def test_monomial_counts():
    assert [monomial_count(3, k) for k in (1, 2, 3)] == [3, 6, 10]
    assert [monomial_count(5, k) for k in (2, 3)] == [15, 35]
    assert monomial_exponents(4, [1, 2, 3]).shape == (4 + 10 + 20, 4)
    assert (monomial_exponents(3, [2]).sum(axis=1) == 2).all()
    assert TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3).num_monomials == 19
    assert TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3,
                      homogeneous=True).num_monomials == 10


def test_gaussian_moment_rule():
    assert gaussian_moment([2, 0]) == 1
    assert gaussian_moment([4, 2]) == 3
    assert gaussian_moment([6, 4, 2]) == 15 * 3
    assert gaussian_moment([1, 2]) == 0


def test_exact_moments_match_monte_carlo():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2_000_000, 3, generator=gen, dtype=torch.float64)
    f = PolyMap.monomials(3, [1, 2])
    values = f(x)
    sampled = (values.T @ values / x.shape[0]).numpy()
    exact = second_moment(f)
    assert np.abs(sampled - exact).max() < 0.05
    weight = (values**2).sum(-1, keepdim=True)
    sampled4 = ((values * weight).T @ values / x.shape[0]).numpy()
    exact4 = weighted_second_moment(squared_norm(f), f)
    assert np.abs(sampled4 - exact4).max() / np.abs(exact4).max() < 0.02


# ---------------------------------------------------------------- prompts


def test_prompts_shape_and_embedding():
    task = TaskConfig(kind="linear", input_dim=4, context_length=7, noise_std=0.5)
    prompts = sample_prompts(task, 3, seed=0, step=0)
    assert prompts.x.shape == (3, 8, 4) and prompts.y.shape == (3, 8)
    z = prompts.embed(feature_slots=2)
    assert z.shape == (3, 8, 4 + 2 + 1)
    assert torch.equal(z[:, :, :4], prompts.x)
    assert (z[:, :, 4:6] == 0).all() and (z[:, -1, -1] == 0).all()
    assert torch.equal(z[:, :7, -1], prompts.y[:, :7])
    # query label is clean: y_q = w . x_q exactly
    clean = torch.einsum("bd,bd->b", prompts.x[:, -1], prompts.coefficients)
    assert torch.allclose(prompts.query_label, clean)
    assert torch.equal(embed(prompts.x, prompts.y[:, :7]), prompts.embed())


def test_prompts_are_a_pure_function_of_seed_and_step():
    task = TaskConfig(kind="poly", input_dim=3, context_length=10, degree=2)
    a = sample_prompts(task, 5, seed=3, step=11)
    sample_prompts(task, 5, seed=3, step=12)
    b = sample_prompts(task, 5, seed=3, step=11)
    c = sample_prompts(task, 5, seed=3, step=12)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.x, c.x)


def test_covariance_prompts():
    cov = ((2.0, 0.5), (0.5, 1.0))
    task = TaskConfig(kind="linear", input_dim=2, context_length=3, covariance=cov)
    x = sample_prompts(task, 200_000, seed=0, step=0, dtype=torch.float64).x.reshape(-1, 2)
    sampled = (x.T @ x / x.shape[0]).numpy()
    assert np.abs(sampled - np.array(cov)).max() < 0.02
    assert null_loss(task) == pytest.approx(3.0)


# ---------------------------------------------------------------- reproducibility


@pytest.mark.usefixtures("one_torch_thread")  # bit for bit: one thread sums in one order
def test_same_seed_same_model_and_numbers():
    task = TaskConfig(kind="linear", input_dim=3, context_length=8)
    config = ModelConfig(kind="lsa", depth=2)
    a = build_model(config, task, seed=5)
    b = build_model(config, task, seed=5)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    train = TrainConfig(steps=30, batch_size=64, seed=2)
    r1 = run_experiment(task, config, train, "cpu", progress=False, relative_error=0.05)
    r2 = run_experiment(task, config, train, "cpu", progress=False, relative_error=0.05)
    assert np.array_equal(r1.training.loss_history, r2.training.loss_history)
    assert r1.test.mean == r2.test.mean
    assert math.isfinite(r1.test.mean)


@pytest.mark.parametrize("task", [
    TaskConfig(kind="poly", input_dim=3, context_length=30, degree=2),
    TaskConfig(kind="linear", input_dim=2, context_length=7, noise_std=0.3,
               covariance=[[2.0, 0.5], [0.5, 1.0]]),
])
def test_sample_inputs_are_the_inputs_of_sample_prompts(task):
    """The recursion of chapter 5 draws only inputs; they must be the prompts' very numbers,
    whatever the batch size (several sampling parts included)."""
    for batch in (1, PART_SIZE + 3):
        prompts = sample_prompts(task, batch, 3, 5, "cpu", 4, torch.float64)
        assert torch.equal(sample_inputs(task, batch, 3, 5, "cpu", 4, torch.float64), prompts.x)


def test_run_experiment_can_skip_the_theory_values():
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    model = ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="x")
    result = run_experiment(task, model, TrainConfig(steps=2, batch_size=50), "cpu",
                            progress=False, theory=False, max_test_prompts=2_000)
    assert result.theory.theory_loss is None and result.theory.null_loss == 15.0
