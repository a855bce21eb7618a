r"""The precomputed studies (training that takes minutes on a CPU), stored in small data files,
with their loaders: chapter 4's full blocks trained long, chapter 5's trained stacks.

- The full blocks (:func:`run_full_blocks`, :func:`load_full_blocks`): one block with
  $m = h = p_2$ per seed at $d = 3, 4, 5$, trained five times as long as chapter 4's sweeps, each
  with the directions it uses (Proposition 12 (prop-capacity), item 5: a run either reaches the
  kernel optimum or stops on the best block one slot short). ``python tools/make_full_blocks.py``
  rewrites the file.

- :func:`depth_sweep`, :func:`shape_key`: stacks of every ``(slots, depth)`` pair trained on
  the same prompts, peak rate $\eta / L$, measured on the same test contexts.
- The depth study (:data:`STUDIES`, :func:`run_study`, :func:`load_studies`): trained stacks
  of depth 1 to 8 (GLUs read $x$, width $h = m$, sparse attention) against, for every slot
  count $m$, the greedy reference of Proposition 15 (prop-greedy-reference) on the monomial
  schedule (:func:`~nlicl_lib.theory.depth.greedy_reference`; with $m \ge p_2$ it is $L$ steps
  of preconditioned GD on the whole kernel's features), fitted on :data:`FIT_SAMPLES`
  independent samples of contexts, and the best single block with $m$ slots (Proposition 12
  (prop-capacity)). ``python tools/make_depth_study.py`` rewrites the file.
- The free stacks (:func:`run_free_stacks`, :func:`load_free_stacks`, :func:`free_summaries`):
  stacks that drop both assumptions of Theorem 13 (thm-depth-bcd): each block learns all of
  $P_\ell, Q_\ell$ and its GLU reads the whole token (label included) and writes every entry
  (:func:`free_model_config`). Trained from the GD-form stack of the same shape written into
  them exactly (:func:`free_stack_from_gd_form`) and from random starts over seeds and rates
  (:func:`free_plan`). Their prediction need not be linear in the labels, so their test loss is
  the Monte Carlo mean of $(\hat y - y_{n+1})^2$ on independent test samples; how much of the
  block-coordinate picture holds is $A_\ell$ (:func:`free_agreement`) of the blocks $\ell < L$,
  whose writes into the context labels reach the prediction. ``python tools/make_free_stack.py``
  rewrites the file.
- :func:`cubic_study`: one and two trained blocks on a cubic task, where a second block whose
  GLU reads the slots raises the degree of the features.

Losses are unnormalised; ``null_loss`` is $\mathbb E[y^2]$.
"""

from __future__ import annotations

import copy
import json
import math
import platform
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from nlicl_lib.core.errors import (
    ConfigError,
    TrainingDivergedError,
    check_choice,
    check_float,
    check_int,
)
from nlicl_lib.core.models import InContextRegressor, ModelConfig, build_model
from nlicl_lib.core.monomials import monomial_count, monomial_name
from nlicl_lib.core.tasks import Prompts, TaskConfig
from nlicl_lib.theory.capacity import best_feature_subspace, slot_increments
from nlicl_lib.theory.closed_forms import kernel_features, null_loss, one_step_gd_optimum
from nlicl_lib.theory.depth import (
    GreedyReference,
    greedy_reference,
    schedule_features,
    stream_agreement,
)
from nlicl_lib.theory.kernel import block_summaries
from nlicl_lib.theory.values import exact_model_loss
from nlicl_lib.training.evaluate import (
    ERROR_BARS,
    LossEstimate,
    batches_of_test_prompts,
    combine_samples,
    intervals_separate,
    test_loss,
)
from nlicl_lib.training.settings import base_settings, default_train_config
from nlicl_lib.training.train import TrainConfig, TrainResult, train

DATA = Path(__file__).parent / "data"
STUDY_FILE = DATA / "depth_study.json"
FREE_STACK_FILE = DATA / "free_stack.json"
FIT_CONTEXTS = 100_000
TEST_CONTEXTS = 100_000
FIT_SAMPLES = 5
"""Every greedy reference of the depth study is fitted on this many independent samples of
:data:`FIT_CONTEXTS` contexts, each measured on its own :data:`TEST_CONTEXTS` fresh test
contexts (seed $s$ draws both samples of reference $s$): at $n = 100$ its deep blocks depend on
the fitting sample, and its test loss has heavy tails, so the spread over the samples holds
both variations (:func:`reference_estimates`)."""
TRAINED_TEST_CONTEXTS = 20_000
TEST_SAMPLES = 5
"""Every trained stack of the depth study is measured on this many independent samples of
:data:`TRAINED_TEST_CONTEXTS` test contexts (``test_loss(..., test_samples=...)``)."""
HISTORY_WINDOW = 25
"""Stored training curves are means of every this many batch losses."""


def shape_key(slots: int, depth: int) -> str:
    """The key of a stack of ``depth`` blocks with ``slots`` in a :class:`DepthSweep`."""
    return f"m{slots}-L{depth}"


@dataclass
class DepthSweep:
    r"""Trained GLU-LSA stacks of several shapes (:func:`depth_sweep`), keyed by
    :func:`shape_key`. ``loss``, ``std_error``: test losses on the same ``test_prompts`` fresh
    contexts for every model, task and query integrated out exactly; ``worst_share``: the
    largest single context's share of that sum; ``exact``: the exact loss of the depth-1 models
    (Theorem 9 (thm-feature-optimum) with the model's own features and $\Gamma$);
    ``parameters``: trained weights per model; ``estimates``: the whole
    :class:`~nlicl_lib.training.evaluate.LossEstimate` of every model (its independent test
    samples, interval)."""

    task: TaskConfig
    shapes: list[tuple[int, int]]
    models: dict[str, InContextRegressor]
    loss: dict[str, float]
    std_error: dict[str, float]
    exact: dict[str, float]
    history: dict[str, np.ndarray]
    null_loss: float
    seconds: float
    device: str
    test_prompts: int
    worst_share: dict[str, float]
    parameters: dict[str, int]
    estimates: dict[str, LossEstimate]

    def normalised(self, key: str) -> float:
        return self.loss[key] / self.null_loss


def depth_sweep(task: TaskConfig, shapes: Sequence[tuple[int, int]], train_config: TrainConfig,
                glu_reads: str | None = None, test_prompts: int = 20000,
                device: torch.device | str = "cpu", progress: bool | None = None,
                test_samples: int = 1) -> DepthSweep:
    r"""Train, at once, one GLU-LSA stack per ``(slots, depth)`` in ``shapes`` (GLUs read $x$
    for quadratic tasks, $(x; \text{slots})$ in the later blocks of cubic ones; width $h = m$),
    each from its own default initialisation (seed ``train_config.seed``) with peak learning
    rate ``train_config.learning_rate`` $/L$, all on the same prompts; then
    :func:`~nlicl_lib.training.evaluate.test_loss` on ``test_samples`` independent samples of
    ``test_prompts`` contexts, task and query integrated out."""
    reads = glu_reads or ("x" if max(task.degree, 2) == 2 else "x+slots")
    shapes = [(check_int("slots", m, minimum=1), check_int("depth", L, minimum=1))
              for m, L in shapes]
    if not shapes:
        raise ConfigError("shapes", "[]", "at least one (slots, depth) pair")
    keys = [shape_key(m, L) for m, L in shapes]
    if len(set(keys)) != len(keys):
        raise ConfigError("shapes", shapes, "distinct (slots, depth) pairs")
    stacks = [build_model(ModelConfig(kind="glu-lsa", depth=L, feature_slots=m,
                                      glu_reads=reads if L > 1 else "x"),
                          task, device, seed=train_config.seed) for m, L in shapes]
    configs = [replace(train_config, learning_rate=train_config.learning_rate / L)
               for _, L in shapes]
    start = time.perf_counter()
    results = train(stacks, task, configs, device, progress)
    seconds = time.perf_counter() - start
    losses = dict(zip(keys, test_loss(stacks, task, test_prompts, seed=train_config.seed,
                                      device=device, batch_size=10_000,
                                      integrate="task+query", test_samples=test_samples),
                        strict=True))
    models = dict(zip(keys, stacks, strict=True))
    exact = {key: exact_model_loss(model, task) for key, model in models.items() if model.depth == 1}
    return DepthSweep(
        task, shapes, models, {k: v.mean for k, v in losses.items()},
        {k: v.std_error for k, v in losses.items()},
        {key: value for key, value in exact.items() if value is not None},
        {key: result.loss_history for key, result in zip(keys, results, strict=True)},
        null_loss(task), seconds, results[0].device, test_prompts,
        {k: v.worst_share for k, v in losses.items()},
        {key: sum(p.numel() for p in model.parameters()) for key, model in models.items()},
        losses)


def _windowed(history: np.ndarray) -> list[float]:
    """Means of every :data:`HISTORY_WINDOW` steps of a batch-loss history."""
    usable = len(history) // HISTORY_WINDOW * HISTORY_WINDOW
    return np.asarray(history[:usable]).reshape(-1, HISTORY_WINDOW).mean(axis=1).tolist()


def _platform(device: str) -> dict[str, str]:
    return {"device": device, "torch": torch.__version__, "machine": platform.machine()}


def save_study(data: dict, path: Path | str) -> Path:
    """Write a study's JSON data to ``path`` (its folder made if needed), as the loaders read it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def _load(path: Path | str, script: str) -> dict:
    path = Path(path)
    if not path.exists():
        raise ConfigError("path", str(path), f"a stored study; make it with `python {script}`")
    return json.loads(path.read_text())


def _reference(task: TaskConfig, slots: int, depth: int, device: str, seed: int = 0
               ) -> GreedyReference:
    """The greedy reference fitted on the contexts of ``seed`` and measured on its test contexts."""
    return greedy_reference(task, schedule_features(task, slots, depth), FIT_CONTEXTS,
                            TEST_CONTEXTS, device=device, seed=seed)


# ---------------------------------------------------------------------------------------------
# the depth study


@dataclass(frozen=True)
class Study:
    """One study: ``task``, the slot counts ``slots`` (trained at every depth of ``depths``), and
    ``reference_depth``, how deep the references go."""

    task: TaskConfig
    slots: tuple[int, ...]
    depths: tuple[int, ...]
    reference_depth: int


STUDIES = {
    # d = 3: narrow (m = 3) against wide (m = p_2 = 6) at every depth
    "d3": Study(TaskConfig(kind="poly", input_dim=3, context_length=100, degree=2), (3, 6),
                (1, 2, 3, 4, 6, 8), 8),
    # d = 5: m = 5 slots, a third of p_2 = 15 (no single block of this token size holds phi_2),
    # against the depth-matched wide control m = 15
    "d5": Study(TaskConfig(kind="poly", input_dim=5, context_length=100, degree=2), (5, 15),
                (1, 2, 3, 4, 6, 8), 8),
}
STUDY_TRAINING = default_train_config(STUDIES["d3"].task, ModelConfig(kind="glu-lsa", feature_slots=3),
                                      purpose="depth-study", seed=0)
"""Every stack of the depth study trains with these, its peak rate divided by its depth: 4000
Adam steps of 1000 prompts, eta = 0.02; and, as its convergence check, half as many."""
GD_FORM_TRAINING = default_train_config(STUDIES["d3"].task,
                                        ModelConfig(kind="glu-lsa", feature_slots=3),
                                        purpose="narrow-stacks", seed=0)
"""The GD-form stacks the free stacks are compared with: 1000 steps, the narrow stacks' rate."""
PARTS = ("references", "trained")
BUDGETS = ("depth", "weights", "features")
CLOSE_BUDGET = 0.75


def run_study(name: str, parts: tuple[str, ...] = PARTS, device: str = "cpu",
              progress: bool | None = None, shapes: list[tuple[int, int]] | None = None,
              reference_slots: list[int] | None = None, reference_depth: int | None = None,
              fit_samples: int = FIT_SAMPLES) -> dict:
    """The results of study ``name`` as JSON data. ``parts``: ``"references"`` (greedy
    references and single-block optima, float64) and/or ``"trained"`` (the trained stacks).
    ``shapes``: train only these ``(slots, depth)`` pairs of the study. Every reference is
    fitted and measured on ``fit_samples`` independent samples (seeds 0, 1, ...; per sample
    :data:`FIT_CONTEXTS` fitting and :data:`TEST_CONTEXTS` test contexts), stored per sample
    (:func:`reference_estimates` joins them). Every stack trains with :data:`STUDY_TRAINING` and,
    as the convergence check (:func:`converged`), with half its steps; both are measured on
    :data:`TEST_SAMPLES` independent samples of :data:`TRAINED_TEST_CONTEXTS` test contexts.
    ``reference_slots``, ``reference_depth``: only these slot counts, only this deep (a cheaper
    rerun: the greedy reference's first blocks do not depend on the later ones)."""
    check_choice("study", name, tuple(STUDIES))
    for part in parts:
        check_choice("parts", part, PARTS)
    study = STUDIES[name]
    task = study.task
    fit_samples = check_int("fit_samples", fit_samples, minimum=1)
    if reference_depth is not None:
        check_int("reference_depth", reference_depth, minimum=1, maximum=study.reference_depth)
    for m in reference_slots or []:
        if m not in study.slots:
            raise ConfigError("reference_slots", m, f"slot counts of the study: {study.slots}")
    every = [(m, L) for m in study.slots for L in study.depths]
    for shape in shapes or []:
        if tuple(shape) not in every:
            raise ConfigError("shapes", shape, f"(slots, depth) pairs of the study: {every}")
    out: dict = {"name": name, "task": asdict(task), "slots": list(study.slots),
                 "depths": list(study.depths), "null_loss": null_loss(task),
                 "p2": monomial_count(task.input_dim, 2), **_platform(device)}
    if "references" in parts:
        start = time.perf_counter()
        references, single = {}, {}
        for m in study.slots if reference_slots is None else reference_slots:
            depth = reference_depth or study.reference_depth
            samples = [_reference(task, m, depth, device, seed) for seed in range(fit_samples)]
            references[str(m)] = {
                "exact_first": samples[0].exact_first, "fit_contexts": FIT_CONTEXTS,
                "test_contexts": TEST_CONTEXTS, "seeds": list(range(fit_samples)),
                "loss": [r.loss.tolist() for r in samples],
                "std_error": [r.std_error.tolist() for r in samples],
                "gain_std_error": [r.gain_std_error.tolist() for r in samples],
                "worst_share": [r.worst_share.tolist() for r in samples],
                "fit_loss": [r.fit_loss.tolist() for r in samples],
                "seconds": [r.seconds for r in samples]}
            single[str(m)] = best_feature_subspace(task, m).loss
        out["references"] = references
        out["single_block"] = single
        out["kernel_optimum"] = best_feature_subspace(task, out["p2"]).loss
        out["reference_seconds"] = time.perf_counter() - start
    if "trained" in parts:
        shapes = every if shapes is None else [tuple(s) for s in shapes]
        check = replace(STUDY_TRAINING, steps=STUDY_TRAINING.steps // 2)
        sweeps = [depth_sweep(task, shapes, config, test_prompts=TRAINED_TEST_CONTEXTS,
                              device=device, progress=progress, test_samples=TEST_SAMPLES)
                  for config in (check, STUDY_TRAINING)]
        out["training"] = asdict(STUDY_TRAINING)
        out["trained"] = {
            shape_key(m, L): {
                "slots": m, "depth": L, "parameters": sweeps[1].parameters[key],
                "exact": sweeps[1].exact.get(key), "history": _windowed(sweeps[1].history[key]),
                "loss": _estimate_json(sweeps[1].estimates[key]),
                "half_steps": {"loss": _estimate_json(sweeps[0].estimates[key])}}
            for m, L in shapes for key in [shape_key(m, L)]}
        out["history_window"] = HISTORY_WINDOW
        out["test_samples"] = TEST_SAMPLES
        out["train_seconds"] = sweeps[1].seconds
        out["half_steps_seconds"] = sweeps[0].seconds
    return out


def _estimate_json(estimate: LossEstimate) -> dict:
    """What a study stores of a loss estimate (unnormalised); :func:`estimate_from_json` reads it."""
    return {"mean": estimate.mean, "std_error": estimate.std_error,
            "num_prompts": estimate.num_prompts, "integrated": estimate.integrated,
            "sample_means": list(estimate.sample_means), "worst": estimate.worst,
            "worst_share": estimate.worst_share}


def estimate_from_json(entry: dict, null: float = 1.0) -> LossEstimate:
    r"""A stored loss as the :class:`~nlicl_lib.training.evaluate.LossEstimate` it was, every
    loss divided by ``null`` (e.g. $\mathbb E[y^2]$). ``worst`` is ``None`` (read as NaN) where
    it was not kept: the depth study's trained stacks were measured before the estimate kept it."""
    worst = math.nan if entry["worst"] is None else entry["worst"]
    return LossEstimate(entry["mean"], entry["std_error"], entry["num_prompts"],
                        entry["integrated"], worst=worst, worst_share=entry["worst_share"],
                        sample_means=tuple(entry["sample_means"])).scaled(null)


def trained_estimate(study: dict, slots: int, depth: int, half_steps: bool = False
                     ) -> LossEstimate:
    r"""The test loss of the stored trained stack of ``depth`` blocks with ``slots`` over
    $\mathbb E[y^2]$, with its independent test samples (``half_steps``: the same stack trained
    half as long, on the same test contexts)."""
    record = study["trained"][shape_key(slots, depth)]
    return estimate_from_json((record["half_steps"] if half_steps else record)["loss"],
                              study["null_loss"])


CONVERGED = 0.02
"""A trained stack of the depth study has *converged* when doubling its steps lowered its test
loss (the median of its sample means, on the same test contexts) by less than this fraction
(:func:`converged`)."""


def converged(study: dict, slots: int, depth: int) -> bool:
    r"""Whether the stored stack's loss at the study's steps $T$ is above $(1 -$
    :data:`CONVERGED`$)$ times its loss at $T / 2$: training it twice as long gained less than
    that fraction. The loss compared is the median of the sample means: the mean of a deep
    stack can rest on one test context, which would decide the comparison alone."""
    full, half = (trained_estimate(study, slots, depth, h).median for h in (False, True))
    return full > (1 - CONVERGED) * half


def settled(study: dict, slots: int, depth: int) -> bool:
    r"""Whether the stored stack's training is done by the study's criterion: it
    :func:`converged`, or it reached its greedy reference (its interval not wholly above the
    reference's), so more training could only take it further below."""
    reference = reference_estimates(study, slots)[depth - 1]
    return (converged(study, slots, depth)
            or trained_estimate(study, slots, depth).interval[0] <= reference.interval[1])


def reference_estimates(study: dict, slots: int) -> list[LossEstimate]:
    r"""Per depth $\ell = 1, \dots, L$, the greedy reference's test loss with ``slots`` over
    $\mathbb E[y^2]$: the :data:`FIT_SAMPLES` references, each fitted and measured on its own
    independent contexts, joined by :func:`~nlicl_lib.training.evaluate.combine_samples` (their
    spread holds both the fitting and the test contexts' variation)."""
    ref = study["references"][str(slots)]
    per_depth = zip(*(zip(loss, error, share, strict=True) for loss, error, share in
                      zip(ref["loss"], ref["std_error"], ref["worst_share"], strict=True)),
                    strict=True)
    return [combine_samples([LossEstimate(m, e, ref["test_contexts"], "task+query",
                                          worst_share=w) for m, e, w in samples])
            .scaled(study["null_loss"]) for samples in per_depth]


def load_studies(path: Path | str = STUDY_FILE) -> dict[str, dict]:
    """The stored depth studies, keyed by study name."""
    return _load(path, "tools/make_depth_study.py")


@dataclass(frozen=True)
class SampleFalls:
    r"""Whether each sample's reference falls at every block on its test contexts:
    ``falling`` of ``samples`` samples do; ``rises``: per depth $\ell \ge 2$ where some sample's
    test loss is above its loss at $\ell - 1$, how many samples rise there."""

    samples: int
    falling: int
    rises: dict[int, int]


def sample_falls(losses: list | np.ndarray) -> SampleFalls:
    """:class:`SampleFalls` of the test losses ``(samples, L)`` of references fitted on
    independent samples (a rise: strictly above the loss one block earlier)."""
    a = np.asarray(losses, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] < 2:
        raise ConfigError("losses", a.shape, "a (samples, depth >= 2) array")
    up = np.diff(a, axis=1) > 0
    rises = {L: int(up[:, L - 2].sum()) for L in range(2, a.shape[1] + 1) if up[:, L - 2].any()}
    return SampleFalls(a.shape[0], int((~up.any(axis=1)).sum()), rises)


def reference_samples(study: dict, slots: int) -> np.ndarray:
    r"""The test losses of the greedy reference with ``slots``, one row per independent sample
    (fitting and test contexts), normalised by $\mathbb E[y^2]$: ``(samples, L)``."""
    return np.asarray(study["references"][str(slots)]["loss"]) / study["null_loss"]


def stack_weights(input_dim: int, slots: int, depth: int) -> int:
    r"""Trained weights of a stack of ``depth`` GLU-LSA blocks whose GLUs read $x$ (width
    $h = m$, sparse attention): per block $\Gamma$ has $(d + m)^2$, $W_1, W_2$ have $hd$ each and
    $W_3$ has $mh$."""
    d, m = input_dim, slots
    return depth * ((d + m) ** 2 + 2 * m * d + m * m)


@dataclass(frozen=True)
class BudgetPair:
    r"""A narrow and a wide stack of one study compared at a budget (``"depth"``, ``"weights"``:
    the narrow one has at most the wide one's trained weights, or ``"features"``: both write
    $L m$ features in all); losses normalised by $\mathbb E[y^2]$."""

    narrow_depth: int
    wide_depth: int
    narrow_budget: int
    wide_budget: int
    narrow_loss: float
    wide_loss: float
    narrow_error: float
    wide_error: float


def budget(study: dict, slots: int, depth: int, kind: str) -> int:
    """What a stack of ``depth`` blocks with ``slots`` spends: blocks, trained weights
    (:func:`stack_weights`) or features written ($L m$)."""
    check_choice("budget", kind, BUDGETS)
    if kind == "depth":
        return depth
    if kind == "weights":
        return stack_weights(study["task"]["input_dim"], slots, depth)
    return slots * depth


def budget_pairs(study: dict, narrow: int, wide: int, kind: str) -> list[BudgetPair]:
    """For every trained wide stack (``wide`` slots), the trained narrow stack (``narrow``
    slots) with the largest budget ``kind`` not above the wide one's. Left out: pairs with no
    such narrow stack, with none of equal budget (``"depth"``, ``"features"``), or with none of
    at least :data:`CLOSE_BUDGET` of the wide one's weights (a far smaller narrow stack is no
    comparison at equal weights)."""
    if narrow >= wide:
        raise ConfigError("narrow", narrow, f"fewer slots than wide={wide}")
    pairs = []
    for wide_depth in study["depths"]:
        wide_budget = budget(study, wide, wide_depth, kind)
        fits = [L for L in study["depths"] if budget(study, narrow, L, kind) <= wide_budget]
        if not fits:
            continue
        narrow_depth = max(fits, key=lambda L: budget(study, narrow, L, kind))
        narrow_budget = budget(study, narrow, narrow_depth, kind)
        if kind != "weights" and narrow_budget != wide_budget:
            continue
        if narrow_budget < CLOSE_BUDGET * wide_budget:
            continue
        a, b = (trained_estimate(study, *shape) for shape in ((narrow, narrow_depth),
                                                             (wide, wide_depth)))
        pairs.append(BudgetPair(narrow_depth, wide_depth, narrow_budget, wide_budget,
                                a.mean, b.mean, a.std_error, b.std_error))
    return pairs


# ---------------------------------------------------------------------------------------------
# the free stacks


FREE_TASK: TaskConfig = STUDIES["d3"].task
FREE_SLOTS = 3
FREE_DEPTHS = (1, 2, 3)
FREE_SEED = 0
FREE_SEEDS = (0, 1, 2)
"""The random starts trained at the free rate (initial weights and prompts of each seed)."""
FREE_RATES = (0.005, 0.02)
r"""The other rates $\eta$ (one block's, divided by $L$) tried for :data:`FREE_SEED` from the
random start, beside the purpose's $\eta$ = 0.01 (``"free-stacks"``)."""
FREE_DOUBLING = 2
"""The convergence check: seed :data:`FREE_SEED` at the free rate is also trained this many
times as long (:func:`free_summaries`)."""
STARTS = ("random", "gd-form")
FREE_TEST_PROMPTS = 10_000
FREE_TEST_SAMPLES = 10
"""Every loss of a free stack: :data:`FREE_TEST_SAMPLES` independent samples of
:data:`FREE_TEST_PROMPTS` test prompts (plain Monte Carlo: its prediction is not linear in the
labels)."""
TEST_BATCH = 1000
"""Test prompts are drawn in batches of this many (one sampling thread on the CPU)."""
AGREEMENT_PROMPTS = 2000
AGREEMENT_GROUPS = 20
r"""$A_\ell$ is measured on :data:`AGREEMENT_GROUPS` groups of prompts,
:data:`AGREEMENT_PROMPTS` in all (:func:`free_agreement`)."""
HISTORY_HEAD = 50
"""Raw batch losses stored from the start of each free run, for the rerun check."""
KEPT_WEIGHTS = ((1, "random", FREE_SEED), (2, "gd-form", FREE_SEED))
"""The free runs (depth, start, seed; at the free rate, the purpose's steps) whose trained
weights are stored, for the tests; the GD-form stacks' weights are stored at every depth."""


def free_model_config(depth: int, slots: int = FREE_SLOTS) -> ModelConfig:
    """A free stack: full $P, Q$ attention, GLUs of width $h = m$ reading and writing the whole
    token (initialisation: :func:`build_free_stack`)."""
    return ModelConfig(kind="glu-lsa", depth=depth, feature_slots=slots, glu_width=slots,
                       attention="full", glu_reads="all", glu_writes="all", glu_init="normal")


def gd_form_config(depth: int, slots: int = FREE_SLOTS) -> ModelConfig:
    """The GD-form stack of the same shape, as :func:`depth_sweep` builds it (width $h = m$,
    GLUs reading $x$, sparse attention)."""
    return ModelConfig(kind="glu-lsa", depth=depth, feature_slots=slots, glu_reads="x")


def free_training(depth: int, steps: int | None = None, seed: int = FREE_SEED,
                  eta: float | None = None) -> TrainConfig:
    r"""The settings of a free stack of ``depth`` blocks: purpose ``"free-stacks"``, peak rate
    $\eta / L$ as for every stack (``eta``: another $\eta$), prompts of ``seed`` (``steps``:
    another number of steps)."""
    rate = None if eta is None else check_float("eta", eta, 0.0, strict_minimum=True) / depth
    return default_train_config(FREE_TASK, free_model_config(depth), purpose="free-stacks",
                                seed=seed, steps=steps, learning_rate=rate)


def build_free_stack(depth: int, dtype: torch.dtype = torch.float32, seed: int = FREE_SEED
                     ) -> InContextRegressor:
    r"""A freshly initialised free stack (initial weights of ``seed``). The ``"normal"``
    initialisation starts the columns of $W_1, W_2$ that read the slots at zero; here the
    columns that read the label start at zero too: with $\mathcal N(0, 1)$ there each block
    squares the label, and the forward pass overflows in float32 at depth 3 before any step.
    They are trained like every other weight."""
    model = build_model(free_model_config(depth), FREE_TASK, seed=seed, dtype=dtype)
    with torch.no_grad():
        for block in model.blocks:
            block.glu.w1[:, -1] = 0.0
            block.glu.w2[:, -1] = 0.0
    return model


@torch.no_grad()
def free_stack_from_gd_form(model: InContextRegressor) -> InContextRegressor:
    r"""The free stack with the same prediction as the GD-form stack ``model`` (width $h = m$,
    GLUs reading $x$ and writing the slots, sparse attention), in its dtype. Per block, with
    $D = d + m + 1$,

    $$P_\ell = e_D e_D^\top, \qquad Q_\ell = -\begin{pmatrix}\Gamma_\ell^\top & 0 \\ 0 & 0
    \end{pmatrix}, \qquad W^{\mathrm{free}}_{1,2} = (W_{1,2} \;\; 0), \qquad
    W^{\mathrm{free}}_3 = \begin{pmatrix} 0_{d \times h} \\ W_3 \\ 0_{1 \times h}\end{pmatrix}:$$

    the sparse form is the full one with these $P, Q$ (``LSA.P``, ``LSA.Q``), the GLU's branches
    read the first $d$ rows of the token and $W_3$ adds to the slots only. Every step below is a
    copy, so the two stacks' predictions agree to rounding."""
    if not model.gd_form or any(b.glu is None for b in model.blocks):
        raise ConfigError("model", model.extra_repr(), "a GD-form GLU-LSA stack (sparse "
                          "attention, bilinear GLUs reading x and writing the slots)")
    d, m = model.input_dim, model.feature_slots
    if (d, m) != (FREE_TASK.input_dim, FREE_SLOTS) or any(b.glu.width != m for b in model.blocks):
        raise ConfigError("model", f"d={d}, m={m}, widths {[b.glu.width for b in model.blocks]}",
                          f"d={FREE_TASK.input_dim}, m = h = {FREE_SLOTS} (the free stacks' shape)")
    dtype = next(model.parameters()).dtype
    free = build_free_stack(model.depth, dtype=dtype)
    for source, target in zip(model.blocks, free.blocks, strict=True):
        target.lsa.p.copy_(source.lsa.P)
        target.lsa.q.copy_(source.lsa.Q)
        glu, out = source.glu, target.glu
        for w in (out.w1, out.w2, out.w3):
            w.zero_()
        out.w1[:, :d] = glu.w1
        out.w2[:, :d] = glu.w2
        out.w3[d:d + m] = glu.w3
    return free


def _state_json(model: InContextRegressor) -> dict[str, list]:
    return {k: v.detach().cpu().tolist() for k, v in model.state_dict().items()}


def _load_state(model: InContextRegressor, weights: dict[str, list]) -> InContextRegressor:
    dtype = next(model.parameters()).dtype
    model.load_state_dict({k: torch.tensor(v, dtype=dtype) for k, v in weights.items()})
    return model


def free_stack_from_json(depth: int, weights: dict[str, list],
                         dtype: torch.dtype = torch.float32) -> InContextRegressor:
    """A free stack of ``depth`` blocks with the stored ``weights`` (a state dict as lists;
    float32 values are exact in JSON's doubles)."""
    return _load_state(build_free_stack(depth, dtype=dtype), weights)


def gd_form_stack_from_json(depth: int, weights: dict[str, list],
                            dtype: torch.dtype = torch.float32) -> InContextRegressor:
    """The GD-form stack of ``depth`` blocks (:func:`gd_form_config`) with the stored ``weights``."""
    return _load_state(build_model(gd_form_config(depth), FREE_TASK, dtype=dtype), weights)


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def first_test_prompts(count: int) -> Prompts:
    """The first ``count`` prompts of the test stream of :data:`FREE_SEED` (batches of
    :data:`TEST_BATCH`, as the free stacks' test losses draw them)."""
    batches = list(batches_of_test_prompts(FREE_TASK, FREE_SEED, "cpu", torch.float32,
                                           TEST_BATCH, count))
    return Prompts(torch.cat([b.x for b in batches]), torch.cat([b.y for b in batches]),
                   torch.cat([b.coefficients for b in batches]))


@torch.no_grad()
def free_agreement(model: InContextRegressor, prompts: Prompts, groups: int = AGREEMENT_GROUPS,
                   last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    r"""$A_\ell$ (:func:`~nlicl_lib.theory.depth.stream_agreement`) of the blocks
    $\ell < L$ of ``model``, with its standard error: the prompts split into ``groups`` groups
    $g$ of equal size, $A_\ell^{(g)}$ on each, and

    $$\bar A_\ell = \frac1G \sum_g A_\ell^{(g)}, \qquad
      \mathrm{se}_\ell = \frac{s_G(A_\ell^{(g)})}{\sqrt G}.$$

    The blocks $\ell < L$ are those whose label changes the next block's attention reads. The
    last block's label change includes what its attention writes into the context labels,
    which nothing reads (the prediction is the query's label entry alone), so the loss hardly
    constrains $A_L$; ``last``: measure it too. Returns ``(mean, std_error)``, shape
    ``(L - 1,)`` each (empty for one block), ``(L,)`` with ``last``."""
    groups = check_int("groups", groups, minimum=2)
    size = prompts.x.shape[0] // groups
    if size < 1:
        raise ConfigError("groups", groups, f"at most the {prompts.x.shape[0]} prompts")
    blocks = model.depth if last else model.depth - 1
    if blocks == 0:
        return np.zeros(0), np.zeros(0)
    values = np.array([stream_agreement(model, Prompts(
        prompts.x[g * size:(g + 1) * size], prompts.y[g * size:(g + 1) * size],
        prompts.coefficients[g * size:(g + 1) * size]))[:blocks] for g in range(groups)])
    return values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(groups)


@dataclass(frozen=True)
class FreeRun:
    r"""One planned free run: ``start`` ``"random"`` (:func:`build_free_stack` of ``seed``) or
    ``"gd-form"`` (:func:`free_stack_from_gd_form` of the trained GD-form stack), prompts of
    ``seed``, one block's rate ``eta`` ($\eta / L$ per stack), ``steps``."""

    start: str
    seed: int
    eta: float
    steps: int

    def __post_init__(self) -> None:
        check_choice("start", self.start, STARTS)
        check_int("seed", self.seed, minimum=0)
        check_float("eta", self.eta, 0.0, strict_minimum=True)
        check_int("steps", self.steps, minimum=1)

    @property
    def key(self) -> str:
        return f"{self.start}-s{self.seed}-eta{self.eta:g}-T{self.steps}"


def free_plan(steps: int | None = None) -> list[FreeRun]:
    r"""The runs of every depth, $T$ steps each unless said: the GD-form start at the
    purpose's $\eta$ and at the lowest of :data:`FREE_RATES` (a start at the GD-form solution
    that ends above it says the rate is too high); every seed of :data:`FREE_SEEDS` from the
    random start at the purpose's $\eta$; seed :data:`FREE_SEED` at :data:`FREE_RATES`; and
    seed :data:`FREE_SEED` at the purpose's $\eta$ for :data:`FREE_DOUBLING` $T$ steps.
    ``steps``: another $T$ (a quick look)."""
    base = base_settings("glu-lsa", "free-stacks")
    eta, steps = float(base["learning_rate"]), int(steps or base["steps"])
    return ([FreeRun("gd-form", FREE_SEED, rate, steps) for rate in (eta, min(FREE_RATES))]
            + [FreeRun("random", s, eta, steps) for s in FREE_SEEDS]
            + [FreeRun("random", FREE_SEED, rate, steps) for rate in FREE_RATES]
            + [FreeRun("random", FREE_SEED, eta, FREE_DOUBLING * steps)])


def _train_free(models: list[InContextRegressor], configs: list[TrainConfig], device: str,
                progress: bool | None) -> list[TrainResult | TrainingDivergedError]:
    """Train free stacks of one config (seeds aside) at once; when the group diverges, each
    alone, so that one diverging run does not take the others with it."""
    try:
        return list(train(models, FREE_TASK, configs, device=device, progress=progress))
    except TrainingDivergedError:
        if len(models) == 1:
            raise
    out: list[TrainResult | TrainingDivergedError] = []
    for model, config in zip(models, configs, strict=True):
        try:
            out.append(train(model, FREE_TASK, config, device=device, progress=progress))
        except TrainingDivergedError as error:
            out.append(error)
    return out


FREE_PARTS = ("free", "continued")
"""What :func:`run_free_stacks` computes besides the GD-form stacks: the free runs of
:func:`free_plan`, and the GD-form stack trained on in GD form with the free settings (whether
what a run from the GD-form start gains over it is more than more steps)."""


def run_free_stacks(depths: tuple[int, ...] = FREE_DEPTHS, device: str = "cpu",
                    progress: bool | None = None, steps: int | None = None,
                    parts: tuple[str, ...] = FREE_PARTS) -> dict:
    r"""The GD-form stack of every depth in ``depths``, trained with the depth study's settings
    (:data:`GD_FORM_TRAINING`), and the ``parts`` (:data:`FREE_PARTS`): ``"free"``, the free
    stacks of :func:`free_plan` (the GD-form start is the GD-form stack's copy,
    :func:`free_stack_from_gd_form`; runs of one config, seeds and starts aside, train at once,
    mapped over the models, one group at a time); ``"continued"``, a copy of the GD-form stack
    trained on in GD form with the free stacks' settings (:func:`free_training`). ``steps``:
    another $T$ for every training, for a quick look. Per depth, on the same test prompts,
    :data:`FREE_TEST_SAMPLES` independent samples of :data:`FREE_TEST_PROMPTS`: the GD-form
    stacks' losses (task and query integrated out) and every free run's (plain Monte Carlo);
    $A_\ell$ of the blocks $\ell < L$ on :data:`AGREEMENT_PROMPTS` prompts
    (:func:`free_agreement`; the GD-form stacks in float64). JSON data; ``seconds``: the whole
    call, ``<part>_seconds``: each part's training and evaluation."""
    for L in depths:
        check_int("depth", L, minimum=1)
    if not depths:
        raise ConfigError("depths", depths, "at least one depth")
    for part in parts:
        check_choice("parts", part, FREE_PARTS)
    start = time.perf_counter()
    gd_training = GD_FORM_TRAINING if steps is None else replace(GD_FORM_TRAINING, steps=steps)
    sweep = depth_sweep(FREE_TASK, [(FREE_SLOTS, L) for L in depths], gd_training,
                        test_prompts=TEST_CONTEXTS, device=device, progress=progress)
    shown = first_test_prompts(AGREEMENT_PROMPTS)
    test = {"num_prompts": FREE_TEST_PROMPTS, "test_samples": FREE_TEST_SAMPLES,
            "seed": FREE_SEED, "batch_size": TEST_BATCH}
    seconds = dict.fromkeys(parts, 0.0)
    out_depths = {}
    for L in depths:
        gd_form = sweep.models[shape_key(FREE_SLOTS, L)].cpu()
        agreement = free_agreement(copy.deepcopy(gd_form).double(), shown.to(torch.float64))
        entry: dict = {"depth": L, "gd_form": {
            "loss": _estimate_json(test_loss(gd_form, FREE_TASK, integrate="task+query", **test)),
            "study_loss": sweep.loss[shape_key(FREE_SLOTS, L)], "agreement": agreement[0].tolist(),
            "weights": _state_json(gd_form)}}
        if "continued" in parts:
            began = time.perf_counter()
            entry["continued"] = _continued_gd_form(gd_form, L, steps, device, progress, test,
                                                    shown)
            seconds["continued"] += time.perf_counter() - began
        if "free" in parts:
            began = time.perf_counter()
            entry.update(_free_runs(gd_form, L, steps, device, progress, test, shown))
            seconds["free"] += time.perf_counter() - began
        out_depths[str(L)] = entry
    return {"task": asdict(FREE_TASK), "slots": FREE_SLOTS, "depths": list(depths),
            "null_loss": null_loss(FREE_TASK), "training": asdict(free_training(1, steps)),
            "gd_form_training": asdict(gd_training), "seeds": list(FREE_SEEDS),
            "rates": list(FREE_RATES), "doubling": FREE_DOUBLING, "test": test,
            "agreement_prompts": AGREEMENT_PROMPTS, "agreement_groups": AGREEMENT_GROUPS,
            "history_window": HISTORY_WINDOW, "parts": list(parts), "depth_runs": out_depths,
            "gd_form_seconds": sweep.seconds, "seconds": time.perf_counter() - start,
            **{f"{part}_seconds": value for part, value in seconds.items()},
            **_platform(device), "threads": torch.get_num_threads(), "commit": _commit()}


def _continued_gd_form(gd_form: InContextRegressor, depth: int, steps: int | None, device: str,
                       progress: bool | None, test: dict, shown: Prompts) -> dict:
    """A copy of the GD-form stack trained on in GD form with :func:`free_training`, measured."""
    model = copy.deepcopy(gd_form)
    config = free_training(depth, steps)
    result = train(model, FREE_TASK, config, device=device, progress=progress)
    model = model.cpu()
    return {"learning_rate": config.learning_rate, "steps": config.steps,
            "seconds": result.seconds, "history_head": result.loss_history[:HISTORY_HEAD].tolist(),
            "history": _windowed(result.loss_history),
            "loss": _estimate_json(test_loss(model, FREE_TASK, integrate="task+query", **test)),
            "agreement": free_agreement(copy.deepcopy(model).double(),
                                        shown.to(torch.float64))[0].tolist(),
            "weights": _state_json(model)}


def _free_runs(gd_form: InContextRegressor, depth: int, steps: int | None, device: str,
               progress: bool | None, test: dict, shown: Prompts) -> dict:
    """The free runs of :func:`free_plan` at ``depth``, trained and measured (``"runs"``)."""
    plan = free_plan(steps)
    models = [free_stack_from_gd_form(gd_form) if run.start == "gd-form"
              else build_free_stack(depth, seed=run.seed) for run in plan]
    configs = [free_training(depth, run.steps, run.seed, run.eta) for run in plan]
    results: list[TrainResult | TrainingDivergedError | None] = [None] * len(plan)
    groups: dict[tuple[float, int], list[int]] = {}
    for i, run in enumerate(plan):
        groups.setdefault((run.eta, run.steps), []).append(i)
    for indices in groups.values():
        trained = _train_free([models[i] for i in indices], [configs[i] for i in indices],
                              device, progress)
        for i, result in zip(indices, trained, strict=True):
            results[i] = result
    finished = [i for i, r in enumerate(results) if isinstance(r, TrainResult)]
    evaluated = time.perf_counter()
    losses = test_loss([models[i].cpu() for i in finished], FREE_TASK, **test)
    runs = []
    for i, (run, config, result) in enumerate(zip(plan, configs, results, strict=True)):
        entry = {**asdict(run), "key": run.key, "learning_rate": config.learning_rate}
        if isinstance(result, TrainingDivergedError):
            runs.append({**entry, "diverged_at": result.step})
            continue
        mean, error = free_agreement(models[i].cpu(), shown)
        entry.update({
            "seconds": result.seconds, "trained_with": result.trained_with,
            "history_head": result.loss_history[:HISTORY_HEAD].tolist(),
            "history": _windowed(result.loss_history),
            "loss": _estimate_json(losses[finished.index(i)]),
            "agreement": mean.tolist(), "agreement_std_error": error.tolist()})
        if ((depth, run.start, run.seed) in KEPT_WEIGHTS
                and (run.eta, run.steps) == (plan[0].eta, plan[0].steps)):
            entry["weights"] = _state_json(models[i])
        runs.append(entry)
    return {"runs": runs, "evaluation_seconds": time.perf_counter() - evaluated}


def load_free_stacks(path: Path | str = FREE_STACK_FILE) -> dict:
    """The stored free stacks (:func:`run_free_stacks`)."""
    return _load(path, "tools/make_free_stack.py")


@dataclass(frozen=True)
class FreeSummary:
    r"""One stored free run read against its family (losses over $\mathbb E[y^2]$): ``loss``
    and ``gd_form`` (the GD-form loss of its family, :func:`family_gd_form_loss`) as
    estimates; ``reaches``: its
    interval is not above the GD-form one; ``below``: the intervals separate, the free run
    below; ``doubled_change``: for a run at $T$ steps with a run of the same start, seed and
    rate at :data:`FREE_DOUBLING` $T$ stored (and for that run), the change of the loss from
    $T$ to the doubled steps over :data:`~nlicl_lib.training.evaluate.ERROR_BARS` standard
    errors of the longer run (below 1: doubling moves the loss by less than half its
    interval); ``converged``: ``reaches`` or ``doubled_change < 1``; ``agreement``,
    ``agreement_error``: $A_\ell$ for $\ell < L$ and its standard error. A diverged run has
    ``loss`` ``None`` and ``diverged_at`` its first non-finite step."""

    depth: int
    start: str
    seed: int
    eta: float
    steps: int
    loss: LossEstimate | None
    gd_form: LossEstimate
    reaches: bool
    below: bool
    doubled_change: float | None
    converged: bool
    agreement: tuple[float, ...]
    agreement_error: tuple[float, ...]
    seconds: float
    diverged_at: int | None = None


def gd_form_losses(data: dict, depth: int) -> dict[str, LossEstimate]:
    r"""The stored GD-form stacks of ``depth`` blocks, losses over $\mathbb E[y^2]$:
    ``"study"``, trained with the depth study's settings, and (when stored) ``"continued"``,
    that stack trained on in GD form with the free stacks' settings."""
    entry, null = data["depth_runs"][str(depth)], data["null_loss"]
    out = {"study": estimate_from_json(entry["gd_form"]["loss"], null)}
    if "continued" in entry:
        out["continued"] = estimate_from_json(entry["continued"]["loss"], null)
    return out


def family_gd_form_loss(data: dict, depth: int) -> LossEstimate:
    """The GD-form loss of the free stacks' family at ``depth``: the lower (by its mean) of the
    stored GD-form stacks' losses (:func:`gd_form_losses`); the free family contains both."""
    return min(gd_form_losses(data, depth).values(), key=lambda estimate: estimate.mean)


def free_summaries(data: dict) -> list[FreeSummary]:
    """Every stored free run (:func:`load_free_stacks`) read by the convergence criterion of
    :class:`FreeSummary` against the GD-form loss of its family
    (:func:`family_gd_form_loss`), depth by depth in the stored order."""
    null, out = data["null_loss"], []
    for key, entry in data["depth_runs"].items():
        gd = family_gd_form_loss(data, int(key))
        stored = {run["key"]: run for run in entry["runs"]}
        for run in entry["runs"]:
            if "diverged_at" in run:
                out.append(FreeSummary(int(key), run["start"], run["seed"], run["eta"],
                                       run["steps"], None, gd, False, False, None, False, (),
                                       (), 0.0, run["diverged_at"]))
                continue
            loss = estimate_from_json(run["loss"], null)
            plan = FreeRun(run["start"], run["seed"], run["eta"], run["steps"])
            longer = replace(plan, steps=plan.steps * data["doubling"]).key
            shorter = (replace(plan, steps=plan.steps // data["doubling"]).key
                       if plan.steps % data["doubling"] == 0 else None)
            pair = ((run, stored[longer]) if longer in stored and "loss" in stored[longer]
                    else (stored[shorter], run) if shorter in stored
                    and "loss" in stored[shorter] else None)
            change = None
            if pair is not None:
                short, long = (estimate_from_json(p["loss"], null) for p in pair)
                change = abs(long.mean - short.mean) / (ERROR_BARS * long.error)
            reaches = not loss.interval[0] > gd.interval[1]
            below = intervals_separate(loss, gd) and loss.mean < gd.mean
            out.append(FreeSummary(
                int(key), run["start"], run["seed"], run["eta"], run["steps"], loss, gd,
                reaches, below, change, reaches or (change is not None and change < 1),
                tuple(run["agreement"]), tuple(run["agreement_std_error"]), run["seconds"]))
    return out


# ---------------------------------------------------------------------------------------------
# the cubic study


@dataclass
class CubicStudy:
    r"""One and two trained blocks with $m$ slots on a cubic task, the greedy reference over
    (quadratics, cubics), the best single block ($x$ and quadratics, any $m$: one GD step on
    $(x; \phi_2)$) and one GD step on all ``all_monomials`` monomials of degree $\le 3$."""

    task: TaskConfig
    slots: int
    train_config: TrainConfig
    sweep: DepthSweep
    reference: GreedyReference
    null_loss: float
    one_block: float
    all_features: float
    all_monomials: int

    @property
    def keys(self) -> tuple[str, str]:
        """The sweep keys of the one- and two-block stacks."""
        return shape_key(self.slots, 1), shape_key(self.slots, 2)


def cubic_study(task: TaskConfig, slots: int, train_config: TrainConfig, test_prompts: int,
                fit_contexts: int, test_contexts: int, batch_size: int) -> CubicStudy:
    r"""Train stacks of 1 and 2 blocks with ``slots`` on the cubic ``task`` together (the
    second GLU reads the slots), then the greedy reference on the schedule (quadratics, cubics)
    and the two exact one-step optima (Theorem 9 (thm-feature-optimum)) on $(x; \phi_2)$ and on
    all monomials."""
    if task.kind != "poly" or task.degree != 3:
        raise ConfigError("task", f"kind={task.kind!r}, degree={task.degree}",
                          "the cubic task: kind='poly', degree=3")
    slots = check_int("slots", slots, minimum=1)
    sweep = depth_sweep(task, [(slots, 1), (slots, 2)], train_config, test_prompts=test_prompts)
    reference = greedy_reference(task, schedule_features(task, slots, 2),
                                 fit_contexts=fit_contexts, test_contexts=test_contexts,
                                 batch_size=batch_size)
    n, d = task.context_length, task.input_dim
    everything = kernel_features(d, 3)
    one_block = one_step_gd_optimum(task.target_features, kernel_features(d, 2), n).loss
    all_features = one_step_gd_optimum(task.target_features, everything, n).loss
    return CubicStudy(task, slots, train_config, sweep, reference, null_loss(task), one_block,
                      all_features, everything.num_outputs)


# ---------------------------------------------------------------------------------------------
# chapter 4's full blocks

FULL_BLOCK_FILE = DATA / "full_blocks.json"
FULL_BLOCK_TASKS = ((3, 20), (4, 30), (5, 45))
"""$(d, n)$ of chapter 4's saturation sweep ($n / (d + p_2)$ about the same at every $d$)."""
FULL_BLOCK_SEEDS = 6
DEAD_USAGE = 0.5
"""A direction a block writes but weights at most this share of the optimum's weight
(:func:`~nlicl_lib.theory.kernel.direction_usage`) is *dead*."""


def full_block_training(task: TaskConfig, seed: int = 0, steps: int | None = None) -> TrainConfig:
    """The training of chapter 4's full blocks (purpose ``"full-blocks"``), seed ``seed``."""
    return default_train_config(task, ModelConfig(kind="glu-lsa"), purpose="full-blocks",
                                seed=seed, steps=steps)


def run_full_blocks(tasks: Sequence[tuple[int, int]] = FULL_BLOCK_TASKS,
                    seeds: int = FULL_BLOCK_SEEDS, device: str = "cpu",
                    steps: int | None = None) -> dict:
    r"""Full blocks ($m = h = p_2$, Proposition 12 (prop-capacity)) on the quadratic task of every
    $(d, n)$ in ``tasks``, one run per seed $s < $ ``seeds`` (initial weights and prompts of
    seed $s$; trained together, each takes the steps it takes alone) with
    :func:`full_block_training` (``steps``: fewer, for a quick look). Per run: its exact loss
    over the kernel optimum $\mathcal L^*((x; \phi_2))$, the usage of every direction it writes
    and the best loss on the directions it uses over $\mathcal L^*$
    (:func:`~nlicl_lib.theory.kernel.block_summaries`), its dead directions (usage at most
    :data:`DEAD_USAGE`) as coefficients over the quadratic monomials, and its batch losses in
    windows of :data:`HISTORY_WINDOW` steps. Per $(d, n)$: ``one_short`` $=
    \mathcal L^*_{p_2-1} / \mathcal L^*_{p_2}$, the best block one slot short (item 5). JSON data."""
    seeds = check_int("seeds", seeds, minimum=1)
    out: dict = {"seeds": seeds, **_platform(device), "commit": _commit(), "tasks": {}}
    for d, n in tasks:
        task = TaskConfig(kind="poly", input_dim=d, context_length=n, degree=2)
        p2 = monomial_count(d, 2)
        configs = [full_block_training(task, s, steps) for s in range(seeds)]
        models = [build_model(ModelConfig(kind="glu-lsa", feature_slots=p2, glu_width=p2), task,
                              device, seed=s) for s in range(seeds)]
        start = time.perf_counter()
        results = train(models, task, configs, device, progress=False)
        seconds = time.perf_counter() - start
        optimum = one_step_gd_optimum(task.target_features, kernel_features(d, 2), n)
        summaries = block_summaries({str(s): m for s, m in enumerate(models)}, task, optimum)
        slots = slot_increments(task)
        runs = []
        for s, result in enumerate(results):
            summary = summaries[str(s)]
            dead = summary.usage.directions.coefficients[summary.usage.usage <= DEAD_USAGE]
            runs.append({"seed": s, "ratio": summary.ratio, "used_ratio": summary.used_ratio,
                         "usage": summary.usage.usage.tolist(),
                         "strengths": summary.usage.strengths.tolist(), "dead": dead.tolist(),
                         "history": _windowed(result.loss_history)})
        exponents = summaries["0"].usage.directions.exponents
        out["tasks"][str(d)] = {
            "task": asdict(task), "p2": p2, "training": asdict(configs[0]),
            "monomials": [monomial_name(e) for e in exponents], "null_loss": null_loss(task),
            "kernel_optimum": float(optimum.loss), "one_short": slots.loss(p2 - 1) / slots.loss(p2),
            "seconds": seconds, "runs": runs}
    return out


def load_full_blocks(path: Path | str = FULL_BLOCK_FILE) -> dict:
    """The stored full blocks (:func:`run_full_blocks`)."""
    return _load(path, "tools/make_full_blocks.py")
