"""Core library: validation, the command line, exact moments, closed forms, reproducibility."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from nlicl_lib import ConfigError, ModelConfig, TaskConfig, TrainConfig, resolve_device
from nlicl_lib.core.book_refs import ref
from nlicl_lib.core.device import available_devices
from nlicl_lib.core.models import build_model
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
from nlicl_lib.experiments.cli import main
from nlicl_lib.experiments.run import run_experiment
from nlicl_lib.theory.closed_forms import (
    kernel_features,
    linear_gd_optimum,
    linear_gd_optimum_isotropic,
    null_loss,
    one_step_gd_optimum,
)
from nlicl_lib.theory.values import theory_values

# ---------------------------------------------------------------- validation (library)

BAD_CONFIGS = [
    (TaskConfig, {"input_dim": 0}, "input_dim"),
    (TaskConfig, {"context_length": 0}, "context_length"),
    (TaskConfig, {"noise_std": float("nan")}, "noise_std"),
    (TaskConfig, {"kind": "cubic"}, "task"),
    (TaskConfig, {"kind": "poly", "input_dim": 20, "degree": 5}, "degree"),  # 53130 monomials
    (TaskConfig, {"kind": "linear", "degree": 2}, "degree"),
    (TrainConfig, {"steps": 0}, "steps"),
    (TrainConfig, {"learning_rate": -1e-3}, "learning_rate"),
    (TrainConfig, {"schedule": "linear"}, "schedule"),
    (ModelConfig, {"kind": "mlp"}, "model"),
    (ModelConfig, {"depth": 0}, "depth"),
    (ModelConfig, {"kind": "glu-lsa", "feature_slots": 0}, "feature_slots"),
]


@pytest.mark.parametrize(("config", "kwargs", "param"), BAD_CONFIGS)
def test_a_bad_setting_names_the_parameter_and_what_is_allowed(config, kwargs, param):
    with pytest.raises(ConfigError) as info:
        config(**kwargs)
    assert info.value.param == param
    assert param in str(info.value) and "allowed" in str(info.value)


def test_unknown_or_missing_device():
    with pytest.raises(ConfigError) as info:
        resolve_device("tpu")
    assert info.value.param == "device"
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
           (["--device", "tpu"], "device='tpu'"), (["--task", "poly", "--degree", "0"], "degree=0")]
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


def test_cli_theory_writes_values(tmp_path):
    out = tmp_path / "theory.json"
    assert main(["theory", "--task", "linear", "--d", "5", "--n", "20", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["theory_loss"] == pytest.approx(30 / 26, rel=1e-12)
    assert data["null_loss"] == pytest.approx(5.0)
    assert data["bound_loss"] is None
    # the value is named by the book's numbered result, not by a section of private notes
    assert data["theory_name"] == f"one-step linear GD optimum ({ref('thm-linear-optimum')})"


def test_theory_values_name_the_book_results_they_compute():
    quadratic = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    names = {
        "lsa, linear task": theory_values(TaskConfig(kind="linear", input_dim=5, context_length=20),
                                          ModelConfig(kind="lsa")),
        "lsa, quadratic": theory_values(quadratic, ModelConfig(kind="lsa")),
        "one full block": theory_values(quadratic, ModelConfig(kind="glu-lsa")),
        "one block, m = 3": theory_values(quadratic, ModelConfig(kind="glu-lsa", feature_slots=3)),
    }
    expected = {"lsa, linear task": "Theorem 5", "lsa, quadratic": "Theorem 9 with psi = x",
                "one full block": "Theorem 9", "one block, m = 3": "Proposition 12"}
    for case, values in names.items():
        assert f"({expected[case]}" in values.theory_name, (case, values.theory_name)
        assert not re.search(r"\b3\.[1-5]\b", values.theory_name)  # no tag of the old notes
    # the full block's optimum is Theorem 9 on (x; phi_2), exactly (Gaussian moments)
    optimum = one_step_gd_optimum(quadratic.target_features, kernel_features(3, 2), 20)
    assert names["one full block"].theory_loss == optimum.loss
    assert names["lsa, linear task"].theory_loss == pytest.approx(30 / 26, rel=1e-12)


def test_cli_names_the_linear_bound_by_its_corollary(capsys):
    assert main(["theory", "--task", "poly", "--degree", "2", "--d", "3", "--model", "lsa"]) == 0
    out = capsys.readouterr().out
    assert f"a bound for LSA of any depth, {ref('cor-linear-bound')}" in out
    assert ref("cor-linear-bound") == "Corollary 7"


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


def test_poly_labels_are_the_monomial_combination():
    task = TaskConfig(kind="poly", input_dim=2, context_length=5, degree=2)
    p = sample_prompts(task, 4, seed=0, step=0, dtype=torch.float64)
    x1, x2 = p.x[..., 0], p.x[..., 1]
    basis = torch.stack([x1, x2, x1 * x1, x1 * x2, x2 * x2], -1)
    assert torch.allclose(p.y, torch.einsum("btk,bk->bt", basis, p.coefficients))


def test_covariance_prompts():
    cov = ((2.0, 0.5), (0.5, 1.0))
    task = TaskConfig(kind="linear", input_dim=2, context_length=3, covariance=cov)
    x = sample_prompts(task, 200_000, seed=0, step=0, dtype=torch.float64).x.reshape(-1, 2)
    sampled = (x.T @ x / x.shape[0]).numpy()
    assert np.abs(sampled - np.array(cov)).max() < 0.02
    assert null_loss(task) == pytest.approx(3.0)


# ---------------------------------------------------------------- closed forms


def test_isotropic_closed_form_matches_general_formula():
    for d, n, sigma in [(5, 20, 0.0), (3, 7, 0.5), (1, 1, 2.0)]:
        scale, loss = linear_gd_optimum_isotropic(d, n, sigma)
        general = linear_gd_optimum(TaskConfig(kind="linear", input_dim=d, context_length=n, noise_std=sigma))
        assert general.loss == pytest.approx(loss, rel=1e-12)
        assert np.allclose(general.gamma, scale * np.eye(d), rtol=1e-12, atol=1e-14)
    assert linear_gd_optimum_isotropic(5, 20)[1] == pytest.approx(30 / 26, rel=1e-15)


def test_general_covariance_gamma_formula():
    cov = np.array([[2.0, 0.3, 0.0], [0.3, 1.0, 0.2], [0.0, 0.2, 0.5]])
    n, sigma = 10, 0.7
    task = TaskConfig(kind="linear", input_dim=3, context_length=n, noise_std=sigma, covariance=tuple(map(tuple, cov)))
    expected = np.linalg.inv((n + 1) / n * cov + (np.trace(cov) + sigma**2) / n * np.eye(3))
    assert np.allclose(linear_gd_optimum(task).gamma, expected, rtol=1e-10)


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


def test_divergence_is_reported_with_step_and_learning_rate(capsys):
    """A learning rate far too large for a deep LSA: a clear error, not NaN results."""
    from nlicl_lib import TrainingDivergedError
    from nlicl_lib.training.train import train

    task = TaskConfig(kind="poly", input_dim=3, context_length=10, degree=2, homogeneous=True)
    model = build_model(ModelConfig(kind="lsa", depth=4, attention_init_std=0.5), task, seed=0)
    config = TrainConfig(steps=500, batch_size=64, learning_rate=50.0, grad_clip=None,
                         schedule="constant")
    with pytest.raises(TrainingDivergedError) as info:
        train(model, task, config, "cpu", progress=False)
    assert info.value.step < 500
    assert "learning rate 50" in str(info.value) and "smaller learning rate" in str(info.value)
    assert main(["train", "--task", "poly", "--d", "3", "--n", "10", "--homogeneous",
                 "--depth", "4", "--lr", "1e6", "--steps", "300", "--batch", "64"]) == 1
    assert "became" in capsys.readouterr().err


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
    from nlicl_lib import run_experiment
    task = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
    model = ModelConfig(kind="glu-lsa", depth=2, feature_slots=3, glu_reads="x")
    result = run_experiment(task, model, TrainConfig(steps=2, batch_size=50), "cpu",
                            progress=False, theory=False, max_test_prompts=2_000)
    assert result.theory.theory_loss is None and result.theory.null_loss == 15.0
    with pytest.raises(ConfigError, match="theory"):
        run_experiment(task, model, TrainConfig(steps=2, batch_size=50), "cpu", theory="no")
