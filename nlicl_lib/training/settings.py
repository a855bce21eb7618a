r"""The one source of training settings.

:func:`default_train_config` gives the steps, the batch and the learning rate for a model; every
page, panel, sweep, study and the CLI starts from it. Where one of them trains differently, the
difference is a named *purpose* in :data:`PURPOSES`, with its reason, or an explicit keyword
override at the call (a slider, an exercise's question); ``tests/test_settings.py`` fails when a
caller's settings differ from these without saying so.

The peak learning rate of a model of depth $L$ is $\eta / L$, $\eta$ the rate of one block: the
loss is a polynomial of degree about $2L + 1$ in the weights, and a rate that suits one layer
sends a deep LSA to NaN.
"""

from __future__ import annotations

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import MODEL_KINDS, ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.training.train import TrainConfig

BASE: dict[str, dict[str, int | float]] = {
    "lsa": {"steps": 600, "batch_size": 2000, "learning_rate": 0.02},
    "glu-lsa": {"steps": 1000, "batch_size": 1000, "learning_rate": 0.01},
}
r"""Settings of one block of each kind that converge (checked in the tests); ``learning_rate`` is
$\eta$, the rate of depth 1. GLU-LSA trains at half the LSA rate: the weakest feature direction
of a GLU grows only slowly out of its initial value, and gradient noise at a larger rate can
kill it for good (chapter 3 measures this; a quarter of the rate is too slow for it to grow)."""

PURPOSES: dict[str, dict[str, int | float]] = {
    "default": {},
    # chapter 2's panel: LSA stacks up to depth 4 within about 20 s on two cores
    "panel-ch2": {"batch_size": 1000},
    # chapter 3's one-block studies and panel: 1000 steps of 500 prompts at eta = 0.01
    "one-block": {"batch_size": 500},
    # chapter 1's depth sweep: LSA of every depth on linear tasks at one rate, 1000 steps of 500
    "lsa-depth-sweep": {"steps": 1000, "batch_size": 500, "learning_rate": 0.04},
    # chapters 4 and 5's quick sweeps of blocks with m < p_2 (and of their stacks, eta / L each)
    "short-sweeps": {"steps": 600, "learning_rate": 0.02},
    # chapter 4's full blocks (m = h = p_2) trained five times as long as the sweeps, at their
    # rate: at 600 steps they stop short of the kernel optimum, so their last slot is not seen
    "full-blocks": {"steps": 3000, "learning_rate": 0.02},
    # chapter 4's panel: blocks with fewer slots than p_2 have no weak direction to lose,
    # so they take the LSA rate and fewer steps
    "panel-ch4": {"steps": 800, "learning_rate": 0.02},
    # chapter 5: narrow stacks (m < p_2, GLUs reading x) at eta = 0.02, i.e. 0.02 / L each
    "narrow-stacks": {"learning_rate": 0.02},
    # chapter 5's depth study: the narrow stacks' rate, four times their steps; at 1000 steps
    # the deep narrow stacks were still falling (d = 3, depth 8: 0.0153 at 1000 steps, 0.0098
    # at 2000); the study checks each stack against itself trained half as long
    "depth-study": {"steps": 4000, "learning_rate": 0.02},
    # chapter 5's panel: the narrow stacks with fewer, smaller steps (20 s on two cores)
    "panel-ch5": {"steps": 600, "batch_size": 500, "learning_rate": 0.02},
    # the command line's GLU-LSA stacks of 3 or more blocks at n = 100: within a minute on two
    # idle cores (tests/test_cli_budget.py); chapter 5's study trains 1000 steps of 1000 prompts,
    # minutes per stack, which the CLI's --steps and --batch give
    "cli-deep-stacks": {"steps": 400, "batch_size": 400},
    # chapter 5's cubic stacks (GLUs reading x and the slots)
    "cubic-stacks": {"steps": 800, "batch_size": 500, "learning_rate": 0.02},
    # chapter 5's free stacks (full P, Q; GLUs reading and writing the whole token): half the
    # narrow stacks' eta; the stored runs also try 0.005 and 0.02 (seed 0), and no rate is
    # best at every depth
    "free-stacks": {"learning_rate": 0.01},
}
"""Named departures from :data:`BASE`, each for a reason stated beside it."""


def default_train_config(task: TaskConfig, model_config: ModelConfig, *, purpose: str = "default",
                         **overrides: object) -> TrainConfig:
    r"""The training settings for ``model_config`` on ``task``: :data:`BASE` of its kind, then
    the named ``purpose`` (:data:`PURPOSES`), the peak rate divided by the depth $L$
    ($\eta / L$), then ``overrides`` (``TrainConfig`` fields; ``None`` values are ignored, so a
    CLI flag left unset keeps the default).

    Deep GLU-LSA stacks at short contexts (n = 20) train to a low loss on typical prompts, but
    their test loss rests on rare contexts with unusually large empirical moments, on which the
    fixed steps overshoot (chapter 5); half the rate, twice the batch or no gradient clipping
    did not change that at depth 8, a longer context (n = 100) does.
    """
    if not isinstance(task, TaskConfig):
        raise ConfigError("task", type(task).__name__, "a TaskConfig")
    if not isinstance(model_config, ModelConfig):
        raise ConfigError("model_config", type(model_config).__name__, "a ModelConfig")
    settings = base_settings(model_config.kind, purpose)
    settings["learning_rate"] = settings["learning_rate"] / model_config.depth
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig(**settings)


def base_settings(kind: str, purpose: str = "default") -> dict[str, int | float]:
    r"""``steps``, ``batch_size`` and $\eta$ (``learning_rate``, the rate of one block, before the
    division by the depth) of ``purpose`` for a model ``kind``: what the panels' sliders start at."""
    if kind not in MODEL_KINDS:
        raise ConfigError("kind", kind, f"one of {list(MODEL_KINDS)}")
    if purpose not in PURPOSES:
        raise ConfigError("purpose", purpose, f"one of {sorted(PURPOSES)}")
    return {**BASE[kind], **PURPOSES[purpose]}
