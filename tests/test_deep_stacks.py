"""Deep GLU-LSA stacks at initialisation keep O(1) slots at any depth, and a non-finite loss is
reported as a forward overflow (no learning rate helps) or as a too-large step."""

import math

import pytest
import torch

from nlicl_lib.core.errors import ForwardOverflowError, TrainingDivergedError
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.experiments.cli import main
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import diagnose_divergence, find_forward_overflow, train

pytestmark = pytest.mark.usefixtures("one_torch_thread")

QUADRATIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2)
CUBIC = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=3)
F64 = torch.float64


def _stream(model, task, seed=0, batch=1000):
    prompts = sample_prompts(task, batch, seed, 0, "cpu", dtype=next(model.parameters()).dtype)
    z = prompts.embed(model.feature_slots)
    with torch.no_grad():
        _, stream = model(z, return_stream=True)
    return z, stream


@pytest.mark.parametrize("task, reads", [(QUADRATIC, None), (QUADRATIC, "x+slots"),
                                         (CUBIC, None)])
def test_default_depth_eight_stack_is_finite_with_order_one_slots(task, reads):
    """Measured over seeds 0-4 (1000 prompts, float64): slot entries at most 82, root mean
    square at most 7.2 at any point of the stream."""
    model = build_model(ModelConfig(kind="glu-lsa", depth=8, feature_slots=3, glu_reads=reads), task,
                        seed=0, dtype=F64)
    z, stream = _stream(model, task)
    d, m = task.input_dim, 3
    for key, value in stream.items():
        assert torch.isfinite(value).all(), key
        slots = value[..., d:d + m]
        assert slots.abs().max() < 200, key
        assert slots.pow(2).mean().sqrt() < 20, key
    assert find_forward_overflow(model, z) is None


def test_default_depth_eight_training_stays_finite():
    for task in (QUADRATIC, CUBIC):
        config = ModelConfig(kind="glu-lsa", depth=8, feature_slots=3)
        model = build_model(config, task, seed=0)
        result = train(model, task, default_train_config(task, config, steps=15, batch_size=200),
                       progress=False)
        assert all(math.isfinite(v) for v in result.loss_history)
        assert all(torch.isfinite(p).all() for p in model.parameters())


# weight sums and sums of squares of single-block models (seed 0, QUADRATIC, float64 copies
# of the float32 initialisation), recorded from the code before issue 11's change, on another CPU
"""Each sum is held to this fraction of the weights' absolute sum, each sum of squares to this
relative error: about 8 float32 ulps per weight. The float32 draws and the QR of the orthogonal
$W_3$ are rounded by each CPU's own kernels (measured: $W_3$'s sum off by 1.1e-8 of its absolute
sum on an AVX-512 Xeon); a changed initialisation moves the sums by order one."""
# the first six batch losses of train() on the "m3" model (steps=6, batch 100, lr 0.01), before,
# in float32 on another CPU (measured within 2e-7 of these here; held to 1e-5)
def test_slot_reading_weights_do_nothing_in_a_single_block():
    """A first block reads empty slots: its slot columns cannot change its output."""
    model = build_model(ModelConfig(kind="glu-lsa", feature_slots=3, glu_reads="x+slots"), QUADRATIC,
                        seed=0, dtype=F64)
    prompts = sample_prompts(QUADRATIC, 200, 0, 0, "cpu", dtype=F64)
    z = prompts.embed(3)
    before = model(z).detach()
    with torch.no_grad():
        model.blocks[0].glu.w1[:, 3:] = torch.randn(3, 3, dtype=F64)
        model.blocks[0].glu.w2[:, 3:] = torch.randn(3, 3, dtype=F64)
    assert torch.equal(model(z).detach(), before)


OVERFLOWING = ["--task", "poly", "--d", "3", "--model", "glu-lsa", "--slots", "3", "--depth", "8",
               "--glu-init", "large", "--glu-reads", "x+slots"]


@pytest.mark.parametrize(("flags", "says", "not_said"), [
    ([*OVERFLOWING, "--steps", "5", "--batch", "50"],
     ["forward pass overflows at initialisation", "in block ", "a smaller learning rate cannot help",
      "glu_reads='x'", "fewer blocks"], "try a smaller learning rate, e.g."),
    (["--task", "linear", "--d", "2", "--n", "10", "--depth", "2", "--lr", "1e4", "--steps", "100",
      "--batch", "64"], ["try a smaller learning rate, e.g. lr="], "overflows"),
], ids=["overflow", "too-large-step"])
def test_cli_says_why_a_run_diverged(capsys, flags, says, not_said):
    assert main(["train", *flags, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: the training loss became") and "Traceback" not in err
    assert all(text in err for text in says) and not_said not in err


def test_divergence_after_updates_is_blamed_on_the_initialisation_only_if_it_overflows():
    healthy = build_model(ModelConfig(kind="glu-lsa", depth=2, feature_slots=3), QUADRATIC, seed=0)
    z = sample_prompts(QUADRATIC, 50, 0, 3, "cpu").embed(3)
    error = diagnose_divergence(healthy, z, 3, math.inf, 0.01)
    assert type(error) is TrainingDivergedError and "lr=0.0025" in str(error)
    config = ModelConfig(kind="glu-lsa", depth=8, feature_slots=3, glu_reads="x+slots", glu_init="large")
    broken = build_model(config, QUADRATIC, seed=0)
    error = diagnose_divergence(broken, z, 3, math.inf, 0.01)
    assert isinstance(error, ForwardOverflowError) and error.block <= 8
    assert "but the model's forward pass already overflows at initialisation" in str(error)
    assert "at step 3 (learning rate 0.01)" in str(error)


