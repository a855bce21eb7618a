r"""Chapter 5's depth study: trained stacks of depth 1 to 8 against the greedy block-coordinate
reference, precomputed into a small data file (training the stacks takes minutes on a CPU).

Each study fixes a noise-free quadratic task and trains, together, GLU-LSA stacks of every
``(slots, depth)`` pair (GLUs read $x$, width $h = m$, sparse attention;
:func:`nlicl_lib.experiments.depth_sweep.depth_sweep`). Next to them it stores, for every slot count $m$, the greedy
reference of Proposition 15 (prop-greedy-reference) on the monomial schedule
(:func:`nlicl_lib.theory.depth.greedy_reference`: with $m < p_2$ block-coordinate descent over chunks of
$m$ monomials; with $m \ge p_2$ every block holds all of $\phi_2$, so it is $L$ steps of
preconditioned GD on the whole kernel's features), and the exact loss of the best single block
with $m$ slots (Proposition 12 (prop-capacity), :func:`nlicl_lib.theory.capacity.best_feature_subspace`).

- :data:`STUDIES`: the studies the book shows, with :data:`STUDY_TRAINING`;
- :func:`run_study`: compute one study (or only its references) as plain JSON data, every
  reference fitted on :data:`FIT_SAMPLES` independent samples of contexts;
- :func:`sample_statistics`, :func:`sample_falls`, :func:`summary`: the spread over those samples,
  whether each sample's estimate falls at every block, and the numbers chapter 5 quotes;
- :func:`load_studies`, :data:`DATA_FILE`: the committed results that chapter 5 draws.
  ``python tools/make_depth_study.py`` rewrites the file; a test reruns part of it.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from nlicl_lib.core.errors import ConfigError, check_choice, check_int
from nlicl_lib.core.models import ModelConfig
from nlicl_lib.core.monomials import monomial_count
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.depth_sweep import depth_sweep, shape_key
from nlicl_lib.theory.capacity import best_feature_subspace
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.theory.depth import greedy_reference, schedule_features
from nlicl_lib.training.settings import default_train_config

DATA_FILE = Path(__file__).parent / "data" / "depth_study.json"
FIT_CONTEXTS = 100_000
TEST_CONTEXTS = 40_000
FIT_SAMPLES = 3
"""Every greedy reference is fitted on this many independent samples of :data:`FIT_CONTEXTS`
contexts: at $n = 100$ its deep blocks depend on the sample (heavy tails)."""
PARTS = ("references", "trained")
BUDGETS = ("depth", "weights", "features")
CLOSE_BUDGET = 0.75


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
                                      purpose="narrow-stacks", seed=0)
"""Every stack of the studies trains with these, its peak rate divided by its depth: 1000 Adam
steps of 1000 prompts, eta = 0.02."""


def run_study(name: str, parts: tuple[str, ...] = PARTS, device: str = "cpu",
              progress: bool | None = None, shapes: list[tuple[int, int]] | None = None,
              reference_slots: list[int] | None = None, reference_depth: int | None = None,
              fit_samples: int = FIT_SAMPLES) -> dict:
    """The results of study ``name`` as JSON data (unnormalised losses; ``null_loss`` is
    $\\mathbb E[y^2]$). ``parts``: ``"references"`` (greedy references and single-block optima,
    float64, minutes) and/or ``"trained"`` (the trained stacks, minutes). ``shapes``: train only
    these ``(slots, depth)`` pairs of the study (default: every pair). Every reference is fitted
    on ``fit_samples`` independent samples of :data:`FIT_CONTEXTS` contexts (fit seeds 0, 1, ...)
    and measured on the same :data:`TEST_CONTEXTS` test contexts; its ``loss`` etc. are those of
    fit seed 0, ``fit_samples`` holds every sample and :func:`sample_statistics`.
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
    if shapes is not None:
        for shape in shapes:
            if tuple(shape) not in every:
                raise ConfigError("shapes", shape, f"(slots, depth) pairs of the study: {every}")
    out: dict = {"name": name, "task": asdict(task), "slots": list(study.slots),
                 "depths": list(study.depths), "null_loss": null_loss(task),
                 "p2": monomial_count(task.input_dim, 2), "device": device,
                 "torch": torch.__version__, "machine": platform.machine()}
    if "references" in parts:
        start = time.perf_counter()
        references, single = {}, {}
        for m in study.slots if reference_slots is None else reference_slots:
            features = schedule_features(task, m, study.reference_depth if reference_depth is None
                                         else reference_depth)
            samples = [greedy_reference(task, features, FIT_CONTEXTS, TEST_CONTEXTS, device=device,
                                        fit_seed=seed) for seed in range(fit_samples)]
            ref = samples[0]
            references[str(m)] = {
                "loss": ref.loss.tolist(), "std_error": ref.std_error.tolist(),
                "gain_std_error": ref.gain_std_error.tolist(),
                "worst_share": ref.worst_share.tolist(), "fit_loss": ref.fit_loss.tolist(),
                "exact_first": ref.exact_first, "fit_contexts": ref.fit_contexts,
                "test_contexts": ref.test_contexts,
                "fit_samples": {"fit_seeds": list(range(fit_samples)),
                                "loss": [r.loss.tolist() for r in samples],
                                "std_error": [r.std_error.tolist() for r in samples],
                                "worst_share": [r.worst_share.tolist() for r in samples],
                                **sample_statistics([r.loss for r in samples])}}
            single[str(m)] = best_feature_subspace(task, m).loss
        out["references"] = references
        out["single_block"] = single
        out["kernel_optimum"] = best_feature_subspace(task, out["p2"]).loss
        out["reference_seconds"] = time.perf_counter() - start
    if "trained" in parts:
        shapes = every if shapes is None else [tuple(s) for s in shapes]
        sweep = depth_sweep(task, shapes, STUDY_TRAINING, test_prompts=TEST_CONTEXTS,
                            device=device, progress=progress)
        window = 25
        out["training"] = asdict(STUDY_TRAINING)
        out["trained"] = {
            key: {"slots": m, "depth": L, "loss": sweep.loss[key],
                  "std_error": sweep.std_error[key], "worst_share": sweep.worst_share[key],
                  "parameters": sweep.parameters[key],
                  "exact": sweep.exact.get(key),
                  # the batch-loss curve, mean of every 25 steps
                  "history": np.asarray(sweep.history[key])[: len(sweep.history[key]) // window
                                                            * window]
                  .reshape(-1, window).mean(axis=1).tolist()}
            for key, (m, L) in zip(map(lambda s: shape_key(*s), shapes), shapes, strict=True)}
        out["history_window"] = window
        out["train_seconds"] = sweep.seconds
    return out


def sample_statistics(losses: list | np.ndarray) -> dict[str, list[float]]:
    r"""Per depth, over the fitting samples (``losses``: ``(samples, L)``, one greedy reference
    per sample, all measured on the same test contexts): ``mean``, ``median`` (robust to one
    sample's heavy tail), ``min``, ``max`` and ``std`` (``ddof=1``; 0 with one sample)."""
    a = np.asarray(losses, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 1:
        raise ConfigError("losses", a.shape, "a (samples, depth) array")
    std = a.std(axis=0, ddof=1) if a.shape[0] > 1 else np.zeros(a.shape[1])
    return {"mean": a.mean(axis=0).tolist(), "median": np.median(a, axis=0).tolist(),
            "min": a.min(axis=0).tolist(), "max": a.max(axis=0).tolist(), "std": std.tolist()}


@dataclass(frozen=True)
class SampleFalls:
    r"""Whether each fitting sample's reference falls at every block on the test contexts:
    ``falling`` of ``samples`` samples do; ``rises``: per depth $\ell \ge 2$ where some sample's
    test loss is above its loss at $\ell - 1$, how many samples rise there."""

    samples: int
    falling: int
    rises: dict[int, int]

    def rise_text(self) -> str:
        """``"no depth"`` or e.g. ``"depth 7 (1 of 3 samples)"``."""
        if not self.rises:
            return "no depth"
        return ", ".join(f"depth {L} ({k} of {self.samples} samples)"
                         for L, k in self.rises.items())


def sample_falls(losses: list | np.ndarray) -> SampleFalls:
    """:class:`SampleFalls` of the test losses ``(samples, L)`` of references fitted on
    independent samples (a rise: strictly above the loss one block earlier)."""
    a = np.asarray(losses, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] < 2:
        raise ConfigError("losses", a.shape, "a (samples, depth >= 2) array")
    up = np.diff(a, axis=1) > 0
    rises = {L: int(up[:, L - 2].sum()) for L in range(2, a.shape[1] + 1) if up[:, L - 2].any()}
    return SampleFalls(a.shape[0], int((~up.any(axis=1)).sum()), rises)


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
    null, pairs = study["null_loss"], []
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
        a = study["trained"][shape_key(narrow, narrow_depth)]
        b = study["trained"][shape_key(wide, wide_depth)]
        pairs.append(BudgetPair(narrow_depth, wide_depth, narrow_budget, wide_budget,
                                a["loss"] / null, b["loss"] / null, a["std_error"] / null,
                                b["std_error"] / null))
    return pairs


def _first_depth_from(depths: list[int], holds: list[bool]) -> int | None:
    """The first depth from which ``holds`` is true at every larger depth too."""
    first = None
    for L, ok in zip(depths, holds, strict=True):
        if ok and first is None:
            first = L
        elif not ok:
            first = None
    return first


def reference_samples(study: dict, slots: int) -> np.ndarray:
    r"""The test losses of the greedy reference with ``slots`` fitted on every fitting sample,
    normalised by $\mathbb E[y^2]$: ``(samples, L)``."""
    return np.asarray(study["references"][str(slots)]["fit_samples"]["loss"]) / study["null_loss"]


def side_of_spread(value: float, error: float, samples: np.ndarray, errors: np.ndarray) -> str:
    """Where ``value`` ± 2 ``error`` lies against the estimates ``samples`` ± 2 ``errors`` of
    one reference over its fitting samples: ``"below"``, ``"above"`` or ``"within the spread
    of"``."""
    low, high = float(np.min(samples - 2 * errors)), float(np.max(samples + 2 * errors))
    if value + 2 * error < low:
        return "below"
    if value - 2 * error > high:
        return "above"
    return "within the spread of"


def summary(study: dict, prefix: str) -> dict[str, float | int | str]:
    r"""The numbers chapter 5 quotes from ``study``, keyed ``f"{prefix}_..."`` (losses normalised
    by $\mathbb E[y^2]$). The fitting samples' number and size, the test contexts' number. Per
    slot count $m$: the first and last trained losses; the reference's
    first loss and, at the deepest block, its mean, median, min and max over the fitting samples
    (:func:`sample_statistics`), how many samples fall at every block and where some rise
    (:func:`sample_falls`), and the largest test context's share in any sample; the best single
    block with $m$ slots and of any size; the largest single test context's share of any trained
    stack's loss, and which stack. For the narrowest $m$: the gap to its single block,
    from which depth the trained stacks stay below the best block of any size, and where its
    deepest stack lies against its reference's spread (:func:`side_of_spread`). With two slot
    counts: at how many depths the wide stack wins, the range over depths of narrow / wide
    (trained, and references' means), from which depth the wide stack stays below every sample
    of its reference, and the budget pairs (:func:`budget_pairs`) the narrow stack wins, with how
    many of those wins pair a deeper narrow stack and the depth ratio they share."""
    null, depths, slots = study["null_loss"], list(study["depths"]), list(study["slots"])
    d = study["task"]["input_dim"]
    out: dict[str, float | int | str] = {"depth_count": len(depths),
                                         "kernel": study["kernel_optimum"] / null}
    for m in slots:
        out[f"block_weights{m}"] = stack_weights(d, m, 1)
    trained = {m: [study["trained"][shape_key(m, L)] for L in depths] for m in slots}
    losses = {m: [r["loss"] / null for r in trained[m]] for m in slots}
    samples = {m: reference_samples(study, m) for m in slots}
    means = {m: samples[m].mean(axis=0) for m in slots}
    out["fit_samples"] = samples[slots[0]].shape[0]
    out["fit_contexts"] = study["references"][str(slots[0])]["fit_contexts"]
    out["test_contexts"] = study["references"][str(slots[0])]["test_contexts"]
    for m in slots:
        out[f"trained{m}_first"], out[f"trained{m}_last"] = losses[m][0], losses[m][-1]
        out[f"trained{m}_last_err"] = trained[m][-1]["std_error"] / null
        out[f"ref{m}_first"], out[f"ref{m}_last"] = means[m][0], means[m][-1]
        out[f"ref{m}_last_median"] = float(np.median(samples[m][:, -1]))
        out[f"ref{m}_last_min"] = float(samples[m][:, -1].min())
        out[f"ref{m}_last_max"] = float(samples[m][:, -1].max())
        falls = sample_falls(samples[m])
        out[f"ref{m}_falling"], out[f"ref{m}_rises"] = falls.falling, falls.rise_text()
        out[f"ref{m}_worst"] = float(np.max(study["references"][str(m)]["fit_samples"]
                                            ["worst_share"]))
        if m < study["p2"]:
            out[f"single{m}"] = study["single_block"][str(m)] / null
    worst = max((r for m in slots for r in trained[m]), key=lambda r: r["worst_share"])
    out["worst"], out["worst_at"] = worst["worst_share"], f"m = {worst['slots']}, L = {worst['depth']}"
    narrow = slots[0]
    if narrow < study["p2"]:
        out["gap"] = out[f"single{narrow}"] / losses[narrow][-1]
        out["depth_gain"] = losses[narrow][0] / losses[narrow][-1]
        out["kernel_gap"] = out["kernel"] / losses[narrow][-1]
        below = _first_depth_from(depths, [v < out[f"single{narrow}"] for v in losses[narrow]])
        out["below_single_from"] = "no depth" if below is None else str(below)
    below = _first_depth_from(depths, [v < out["kernel"] for v in losses[narrow]])
    out["below_kernel_from"] = "no depth" if below is None else str(below)
    errors = np.asarray(study["references"][str(narrow)]["fit_samples"]["std_error"]) / null
    out["trained_vs_ref"] = side_of_spread(losses[narrow][-1], out[f"trained{narrow}_last_err"],
                                           samples[narrow][:, -1], errors[:, -1])
    if len(slots) == 2:
        wide = slots[1]
        out["wide_wins"] = sum(w < n for w, n in zip(losses[wide], losses[narrow], strict=True))
        cost = [n / w for n, w in zip(losses[narrow], losses[wide], strict=True)]
        ref_cost = [means[narrow][L - 1] / means[wide][L - 1] for L in depths]
        out["cost_min"], out["cost_max"] = float(min(cost)), float(max(cost))
        out["cost_last"], out["ref_cost_last"] = float(cost[-1]), float(ref_cost[-1])
        out["ref_cost_min"], out["ref_cost_max"] = float(min(ref_cost)), float(max(ref_cost))
        beats = [t < samples[wide][:, L - 1].min() for t, L in zip(losses[wide], depths,
                                                                     strict=True)]
        first = _first_depth_from(depths, beats)
        out["wide_beats_ref_from"] = "no depth" if first is None else str(first)
        ratios = set()
        for kind in ("weights", "features"):
            pairs = budget_pairs(study, narrow, wide, kind)
            wins = [p for p in pairs if p.narrow_loss < p.wide_loss]
            out[f"{kind[:-1]}_pairs"], out[f"{kind[:-1]}_wins"] = len(pairs), len(wins)
            out[f"{kind[:-1]}_wins_deeper"] = sum(p.narrow_depth > p.wide_depth for p in wins)
            ratios |= {p.narrow_depth / p.wide_depth for p in wins}
        out["win_ratio"] = (f"{ratios.pop():g}" if len(ratios) == 1
                            else "no single ratio" if ratios else "no win")
    return {f"{prefix}_{key}": (float(v) if isinstance(v, float | np.floating) else v)
            for key, v in out.items()}


def load_studies(path: Path | str | None = None) -> dict[str, dict]:
    """The committed study results (:data:`DATA_FILE`), keyed by study name."""
    path = Path(path) if path is not None else DATA_FILE
    if not path.exists():
        raise ConfigError("path", str(path), "the depth-study data file; make it with "
                          "`python tools/make_depth_study.py`")
    return json.loads(path.read_text())
