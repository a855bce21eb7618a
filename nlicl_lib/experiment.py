r"""One experiment end to end: task + model + training + evaluation + theory, as a JSON-able dict.

This is what the command line, the chapters' widgets and ``reproduce`` all call, so the three
agree by construction.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from . import theory
from .book_refs import ref
from .constructions import block_features, block_gamma
from .depth import bcd_reference_loss, is_gd_form_stack
from .device import describe_device, resolve_device
from .errors import ConfigError, check_choice, check_float, check_int
from .evaluate import LossEstimate, estimate_loss
from .models import (
    ACTIVATIONS,
    ATTENTION_KINDS,
    GLU,
    GLU_INITS,
    GLU_READS,
    GLU_WRITES,
    LSA,
    Block,
    InContextRegressor,
)
from .monomials import PolyMap, monomial_count
from .seeding import seed_everything
from .tasks import TaskConfig
from .train import TrainConfig, TrainResult, train

MODEL_KINDS = ("lsa", "glu-lsa")


@dataclass(frozen=True)
class ModelConfig:
    r"""Which model: ``kind`` ``"lsa"`` (attention only) or ``"glu-lsa"``; ``depth`` $L$;
    ``feature_slots`` $m$ and ``glu_width`` $h$ (``None``: $p_2$ of the task's $d$, and $h = m$).

    ``glu_init`` (``None``: ``"large"`` for one block reading $x$, else ``"normal"``, whose
    slot-reading weights start at zero; see :meth:`~nlicl_lib.models.GLU.reset_parameters`).
    ``attention`` (``"full"`` $P, Q$ or ``"sparse"``: value = label, $\Gamma$ on the features)
    defaults to full for LSA and sparse for GLU-LSA; ``glu_reads`` defaults to ``"x"``, and to
    ``"x+slots"`` for deeper stacks on polynomial tasks of degree 3 or more (so a GLU can
    multiply $x$ by a stored feature; a degree-2 target needs only quadratic forms of $x$, and
    slots read again would only add features of degree up to $2^L$, heavy-tailed in $x$).
    """

    kind: str = "lsa"
    depth: int = 1
    feature_slots: int | None = None
    glu_width: int | None = None
    attention: str | None = None
    glu_reads: str | None = None
    glu_writes: str = "slots"
    activation: str = "none"
    glu_init: str | None = None
    attention_init_std: float = 0.02

    def __post_init__(self) -> None:
        check_choice("model", self.kind, MODEL_KINDS)
        object.__setattr__(self, "depth", check_int("depth", self.depth, minimum=1))
        if self.feature_slots is not None:
            minimum = 1 if self.kind == "glu-lsa" and self.glu_writes == "slots" else 0
            object.__setattr__(self, "feature_slots",
                               check_int("slots", self.feature_slots, minimum=minimum))
        if self.glu_width is not None:
            object.__setattr__(self, "glu_width", check_int("width", self.glu_width, minimum=1))
        if self.attention is not None:
            check_choice("attention", self.attention, ATTENTION_KINDS)
        if self.glu_reads is not None:
            check_choice("glu_reads", self.glu_reads, GLU_READS)
        check_choice("glu_writes", self.glu_writes, GLU_WRITES)
        check_choice("activation", self.activation, ACTIVATIONS)
        if self.glu_init is not None:
            check_choice("glu_init", self.glu_init, GLU_INITS)
        check_float("attention_init_std", self.attention_init_std, minimum=0.0)
        if self.kind == "lsa" and (self.glu_width is not None):
            raise ConfigError("width", self.glu_width, "no GLU width for model 'lsa'")

    def resolved(self, task: TaskConfig) -> ModelConfig:
        """Fill the ``None`` defaults for ``task``."""
        slots = self.feature_slots
        if slots is None:
            slots = 0 if self.kind == "lsa" else monomial_count(task.input_dim, 2)
        width = self.glu_width if self.glu_width is not None else (slots if self.kind != "lsa"
                                                                   else None)
        attention = self.attention or ("full" if self.kind == "lsa" else "sparse")
        needs_products = task.kind == "poly" and task.degree > 2
        reads = self.glu_reads or ("x+slots" if self.depth > 1 and needs_products else "x")
        # One block reading x trains to its optimum from the larger initialisation for nearly
        # every seed (chapter 3's initialisation study); stacks keep the smaller one, whose
        # slot-reading weights start at zero, so the slots stay O(1) at any depth.
        init = self.glu_init or ("large" if self.depth == 1 and reads == "x" else "normal")
        return replace(self, feature_slots=slots, glu_width=width, attention=attention,
                       glu_reads=reads, glu_init=init)


def build_model(config: ModelConfig, task: TaskConfig, device: torch.device | str = "cpu",
                seed: int = 0, dtype: torch.dtype = torch.float32) -> InContextRegressor:
    """A freshly initialised model for ``task``; initialisation is seeded by ``seed``."""
    config = config.resolved(task)
    seed_everything(seed)
    d, m = task.input_dim, config.feature_slots
    dim = d + m + 1
    blocks = []
    for _ in range(config.depth):
        glu = None
        if config.kind == "glu-lsa":
            glu = GLU(d, m, config.glu_width, config.glu_reads, config.glu_writes,
                      config.activation, config.glu_init)
        blocks.append(Block(LSA(dim, config.attention, config.attention_init_std), glu))
    return InContextRegressor(blocks, d, m).to(device=torch.device(device), dtype=dtype)


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
    - GLU-LSA, one bilinear block reading $x$ whose slots and width hold every degree-2 monomial:
      the best preconditioned GD step on $\\psi = (x; \\phi_2)$ (Theorem 9 (thm-feature-optimum)).
    - GLU-LSA, one such block with fewer slots or units ($m < p_2$ or $h < p_2$): the exact loss
      of the best feature span it can write (Proposition 12 (prop-capacity),
      :func:`nlicl_lib.capacity.best_block`).
    - GLU-LSA of depth $L > 1$ (structured: bilinear GLUs writing the slots, sparse attention) on
      a noise-free polynomial task of degree $\\le 3$: the greedy block-coordinate reference of
      Proposition 15 (prop-greedy-reference) over monomial blocks of $m$, each $\\Gamma_\\ell$
      the best given the earlier ones (:func:`nlicl_lib.depth.bcd_reference_loss`; Monte Carlo
      over contexts, seconds), a reference whose loss can only fall with depth, not an optimum.
    """
    config = config.resolved(task)
    null = theory.null_loss(task)
    bound = theory.best_linear_loss(task) if task.kind == "poly" else None
    loss = name = None
    if config.kind == "lsa" and config.depth == 1:
        loss = theory.linear_gd_optimum(task).loss
        name = (f"one-step linear GD optimum ({ref('thm-linear-optimum')})" if task.kind == "linear"
                else f"one-step linear GD optimum ({ref('thm-feature-optimum')} with psi = x)")
    p2 = monomial_count(task.input_dim, 2)
    covers = (config.feature_slots >= p2 and config.glu_width >= p2)
    if (config.kind == "glu-lsa" and config.depth == 1 and covers and config.activation == "none"
            and config.glu_reads == "x" and task.covariance is None):
        features = theory.kernel_features(task.input_dim, 2)
        optimum = theory.one_step_gd_optimum(task.target_features, features,
                                             task.context_length, task.noise_std)
        loss, name = optimum.loss, f"best one-step GD on (x, phi_2) ({ref('thm-feature-optimum')})"
    structured = (config.kind == "glu-lsa" and config.activation == "none"
                  and config.attention == "sparse" and config.glu_writes == "slots"
                  and task.covariance is None)
    if structured and config.depth == 1 and not covers and config.glu_reads == "x":
        from .capacity import best_block

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
    return theory.one_step_gd_loss(block_gamma(model), task.target_features, features,
                                   task.context_length, task.noise_std)


@dataclass
class ExperimentResult:
    """Everything a run produced; :meth:`to_json` is the ``--json`` file."""

    task: TaskConfig
    model_config: ModelConfig
    train_config: TrainConfig
    theory: TheoryValues
    test: LossEstimate
    exact_test_loss: float | None
    training: TrainResult
    device: str
    model: InContextRegressor | None = field(default=None, repr=False)

    @property
    def test_loss(self) -> float:
        return self.exact_test_loss if self.exact_test_loss is not None else self.test.mean

    @property
    def normalised_test_loss(self) -> float:
        return self.test_loss / self.theory.null_loss

    @property
    def ratio_to_theory(self) -> float | None:
        if self.theory.theory_loss is None or self.theory.theory_loss == 0:
            return None
        return self.test_loss / self.theory.theory_loss

    def to_json(self) -> dict:
        return {
            "test_loss": self.test_loss,
            "test_loss_method": "exact" if self.exact_test_loss is not None else "monte-carlo",
            "test_loss_monte_carlo": self.test.mean,
            "test_loss_std_error": self.test.std_error,
            "test_prompts": self.test.num_prompts,
            "normalised_test_loss": self.normalised_test_loss,
            "theory_loss": self.theory.theory_loss,
            "theory_name": self.theory.theory_name,
            "bound_loss": self.theory.bound_loss,
            "null_loss": self.theory.null_loss,
            "ratio_to_theory": self.ratio_to_theory,
            "train_seconds": self.training.seconds,
            "steps": self.training.steps,
            "final_train_loss": float(np.mean(self.training.loss_history[-20:])),
            "device": self.device,
            "config": {
                "task": asdict(self.task),
                "model": asdict(self.model_config.resolved(self.task)),
                "train": asdict(self.train_config),
            },
        }


def run_experiment(
    task: TaskConfig,
    model_config: ModelConfig,
    train_config: TrainConfig,
    device: torch.device | str | None = "auto",
    progress: bool | None = None,
    relative_error: float = 0.01,
    callback=None,
    eval_batch_size: int = 20000,
) -> ExperimentResult:
    """Validate everything, then train, evaluate and compare with theory. ``eval_batch_size``
    is the batch of the test-loss estimate (smaller: less memory for long contexts)."""
    device = resolve_device(device)
    for name, value, kind in (("task", task, TaskConfig), ("model", model_config, ModelConfig),
                              ("train", train_config, TrainConfig)):
        if not isinstance(value, kind):
            raise ConfigError(name, type(value).__name__, f"a {kind.__name__}")
    values = theory_values(task, model_config)
    model = build_model(model_config, task, device, seed=train_config.seed)
    training = train(model, task, train_config, device, progress, callback)
    start = time.perf_counter()
    exact = exact_model_loss(model, task)
    # A GD-form stack without an exact loss: integrate the task and the query out exactly and
    # sample only contexts, so that heavy tails over the task do not bias the error bars. That
    # needs the exact Gaussian moments of its features, polynomials of degree up to 2^L when
    # the GLUs read the slots: beyond degree MAX_EXACT_FEATURE_DEGREE only the task is
    # integrated out (still exact given the inputs, the predictor being linear in the labels).
    integrate = "none"
    if exact is None and task.covariance is None and is_gd_form_stack(model):
        exact_query = slot_feature_degree(model) <= MAX_EXACT_FEATURE_DEGREE
        integrate = "task+query" if exact_query else "task"
    test = estimate_loss(model, task, device, seed=train_config.seed,
                         relative_error=relative_error, batch_size=eval_batch_size,
                         integrate=integrate)
    del start
    return ExperimentResult(task, model_config, train_config, values, test, exact, training,
                            describe_device(device), model)


def default_train_config(task: TaskConfig, model_config: ModelConfig, **overrides
                         ) -> TrainConfig:
    """Settings that converge for each model kind (checked in the tests); ``overrides`` win.

    Deeper stacks get a learning rate divided by the depth: the loss is a polynomial of degree
    about $2L+1$ in the weights, and a rate that suits one layer sends a deep LSA to NaN.
    GLU-LSA trains at half the LSA rate: the weakest feature direction of a GLU grows only
    slowly out of its initial value, and gradient noise at a larger rate can kill it for good
    (chapter 3 measures this; a quarter of the rate is too slow for it to grow at all).
    Deep GLU-LSA stacks at short contexts (n = 20) train to a low loss on typical prompts, but
    their test loss rests on rare contexts with unusually large empirical moments, on which the
    fixed steps overshoot (chapter 5); half the rate, twice the batch or no gradient clipping
    did not change that at depth 8 (issue 11), a longer context (n = 100) does.
    """
    config = model_config.resolved(task)
    if config.kind == "lsa":
        base = {"steps": 600, "batch_size": 2000, "learning_rate": 0.02 / config.depth}
    else:
        base = {"steps": 1000, "batch_size": 1000, "learning_rate": 0.01 / config.depth}
    base.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig(**base)
