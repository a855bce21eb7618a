r"""The chapters' live training panels (:class:`nlicl_lib.pages.widgets.TrainingPanel`), one function
each, so that a page shows its panel in one line and the tests and ``bench/panel_times.py``
drive the very panels readers get.

Every panel trains on $d = 3$ inputs, context length $n = 20$ unless a slider says otherwise,
with :func:`nlicl_lib.experiments.run.run_experiment`, and compares with
:func:`nlicl_lib.theory.values.theory_values`. Defaults are sized to take 20 s or less on 2 CPU
cores, test included (measured by ``bench/panel_times.py``); the step sliders trade time
for accuracy.
"""

from __future__ import annotations

from nlicl_lib.core.errors import ConfigError
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.pages.panel_params import Param, Settings
from nlicl_lib.pages.widgets import TrainingPanel
from nlicl_lib.theory.values import TheoryValues, theory_values
from nlicl_lib.training.settings import base_settings, default_train_config
from nlicl_lib.training.train import TrainConfig

PANEL_REFERENCE_CONTEXTS = 10_000
"""Fitting contexts of the depth panel's greedy reference (the library's default is 50,000).
At 20,000, chapter 5 run with Colab's versions and its panel pressed peaked at 934 to 959 MiB,
at the test's limit of 10^9 bytes (954 MiB); the reference's memory grows with its contexts."""

INPUT_DIM = 3
"""$d$ of every panel: $p_2 = 6$ quadratic monomials, so one full GLU-LSA block has $m = h = 6$."""

TARGETS = ("all degrees ≤ k", "only degree k")


def _training(kind: str, purpose: str, max_steps: int = 3000) -> list[Param]:
    """The steps and learning-rate sliders, starting at the settings of ``purpose``
    (:func:`nlicl_lib.training.settings.base_settings`), so that a panel left at its defaults
    trains exactly as :func:`~nlicl_lib.training.settings.default_train_config` says."""
    settings = base_settings(kind, purpose)
    return [
        Param("steps", "training steps", settings["steps"], 100, max_steps, step=100,
              help="Adam steps on fresh prompts; more steps get closer to the theory"),
        Param("learning_rate", "learning rate", settings["learning_rate"], 1e-4, 1.0, log=True,
              step=0.1, help="Adam's peak learning rate (divided by the depth for deep stacks)"),
    ]


def _train(task: TaskConfig, model: ModelConfig, purpose: str, s: Settings, **overrides: object
           ) -> TrainConfig:
    """The panel's training settings: ``purpose``'s, with the sliders' steps and rate."""
    return default_train_config(task, model, purpose=purpose, steps=s["steps"],
                                learning_rate=s["learning_rate"] / model.depth, **overrides)


def lsa_gd_panel(device: str = "auto") -> TrainingPanel:
    """Chapter 1: one LSA layer on linear regression against the best one-step GD (Theorem 5
    (thm-linear-optimum))."""
    params = [
        Param("context_length", "context length n", 20, 5, 80, step=5),
        Param("input_dim", "input dimension d", 5, 1, 10),
        Param("noise_std", "label noise σ", 0.0, 0.0, 2.0, step=0.25),
        *_training("lsa", "default"),
    ]

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        task = TaskConfig(kind="linear", input_dim=s["input_dim"], context_length=s["context_length"],
                          noise_std=s["noise_std"])
        model = ModelConfig(kind="lsa")
        return task, model, _train(task, model, "default", s)

    return TrainingPanel(params, configure, title="One LSA layer on linear tasks",
                         device=device)


def attention_alone_panel(device: str = "auto") -> TrainingPanel:
    """Chapter 2: LSA stacks of any depth on polynomial tasks against the linear bound (Corollary 7
    (cor-linear-bound))."""
    params = [
        Param("depth", "depth L", 1, 1, 4),
        Param("degree", "degree k", 2, 1, 3),
        Param("target", "target", TARGETS[0], options=TARGETS,
              help="every monomial of degree 1..k, or only those of degree k"),
        Param("context_length", "context length n", 20, 10, 80, step=10),
        *_training("lsa", "panel-ch2", 2000),
    ]

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        task = TaskConfig(kind="poly", input_dim=INPUT_DIM, context_length=s["context_length"],
                          degree=s["degree"], homogeneous=s["target"] == TARGETS[1])
        model = ModelConfig(kind="lsa", depth=s["depth"])
        return task, model, _train(task, model, "panel-ch2", s)

    return TrainingPanel(params, configure, x_param="depth", device=device,
                         title="Attention alone (LSA stacks)")


def glu_kernel_panel(device: str = "auto") -> TrainingPanel:
    r"""Chapter 3: one GLU-LSA block on quadratic tasks against the best one-step GD on
    $(x; \phi_2)$ (Theorem 9 (thm-feature-optimum)), with the chapter's training settings (1000
    steps of 500 prompts, peak rate 0.01) and its three GLU initialisations (``"small"`` can lose
    feature directions)."""
    params = [
        Param("context_length", "context length n", 20, 10, 160, step=10),
        Param("glu_init", "GLU initialisation", "large", options=("large", "normal", "small")),
        Param("activation", "GLU activation", "none", options=("none", "silu", "gelu"),
              help="'none' is the bilinear GLU of the theory; silu and gelu gate one branch"),
        Param("seed", "seed", 0, 0, 9, help="initialisation and training prompts"),
        *_training("glu-lsa", "one-block"),
    ]

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        task = TaskConfig(kind="poly", input_dim=INPUT_DIM, context_length=s["context_length"],
                          degree=2)
        model = ModelConfig(kind="glu-lsa", activation=s["activation"], glu_init=s["glu_init"])
        return task, model, _train(task, model, "one-block", s, seed=s["seed"])

    return TrainingPanel(params, configure, x_param="context_length", device=device,
                         title="One GLU-LSA block on quadratic tasks")


def block_size_panel(device: str = "auto") -> TrainingPanel:
    r"""Chapter 4: one block with $m$ slots and width $h$ against the best block of that size
    (Proposition 12 (prop-capacity)), which is the full step on $(x; \phi_2)$ once
    $m, h \ge p_2$."""
    params = [
        Param("feature_slots", "feature slots m", 3, 1, 8),
        Param("glu_width", "GLU width h", 3, 1, 8),
        *_training("glu-lsa", "panel-ch4"),
    ]

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        task = TaskConfig(kind="poly", input_dim=INPUT_DIM, context_length=20, degree=2)
        model = ModelConfig(kind="glu-lsa", feature_slots=s["feature_slots"],
                            glu_width=s["glu_width"])
        return task, model, _train(task, model, "panel-ch4", s)

    return TrainingPanel(params, configure, x_param="feature_slots", device=device,
                         title="How big one block must be")


DEPTH_CONTEXT_LENGTH = 100


def depth_panel(device: str = "auto") -> TrainingPanel:
    """Chapter 5: stacks of $L$ narrow blocks against the greedy block-coordinate reference
    (Proposition 15 (prop-greedy-reference); Monte Carlo, so its theory is drawn only where
    runs are). Contexts of $n = 100$ examples, as in the chapter's depth study: with $n = 20$
    the loss of a deep stack rests on rare contexts."""
    params = [
        Param("depth", "depth L", 2, 1, 8),
        Param("feature_slots", "feature slots m", 3, 1, 6),
        Param("degree", "degree k", 2, 2, 3),
        *_training("glu-lsa", "panel-ch5", 2000),
    ]

    def configure(s: Settings) -> tuple[TaskConfig, ModelConfig, TrainConfig]:
        if s["degree"] == 3 and s["depth"] > 3:
            raise ConfigError("depth", s["depth"],
                              "at most 3 for cubic tasks (GLUs that read their slots multiply "
                              "degrees: at depth 4 the features reach degree 16 and overflow)")
        if s["degree"] == 3 and s["depth"] > 1 and s["feature_slots"] < 3:
            raise ConfigError("feature_slots", s["feature_slots"],
                              "at least 3 for cubic tasks (a block must keep x_j x_k to "
                              "multiply it by x_l)")
        task = TaskConfig(kind="poly", input_dim=INPUT_DIM, context_length=DEPTH_CONTEXT_LENGTH,
                          degree=s["degree"])
        model = ModelConfig(kind="glu-lsa", depth=s["depth"], feature_slots=s["feature_slots"],
                            glu_reads="x" if s["degree"] == 2 or s["depth"] == 1 else "x+slots")
        return task, model, _train(task, model, "panel-ch5", s)

    def theory(task: TaskConfig, model: ModelConfig) -> TheoryValues:
        # 10,000 fitting contexts instead of 50,000: the reference's memory grows with them, and
        # a live run (Binder, Colab) must stay under 1 GB with the chapter's other cells
        return theory_values(task, model, reference_contexts=PANEL_REFERENCE_CONTEXTS)

    return TrainingPanel(params, configure, theory=theory, x_param="depth", device=device,
                         theory_curve=False,
                         title="Depth: stacks of narrow blocks")


PANELS = {
    "ch1": lsa_gd_panel,
    "ch2": attention_alone_panel,
    "ch3": glu_kernel_panel,
    "ch4": block_size_panel,
    "ch5": depth_panel,
}
"""Chapter -> its panel (what ``bench/panel_times.py`` and the tests go through)."""
