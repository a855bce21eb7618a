r"""Chapter 5's depth study: trained stacks of depth 1 to 8 against the greedy block-coordinate
reference, precomputed into a small data file (training the stacks takes minutes on a CPU).

Each study fixes a noise-free quadratic task and trains, in one ensemble, GLU-LSA stacks of every
``(slots, depth)`` pair (GLUs read $x$, width $h = m$, sparse attention;
:func:`nlicl_lib.experiments.depth_sweep.depth_sweep`). Next to them it stores, for every slot count $m$, the greedy
reference of Proposition 15 (prop-greedy-reference) on the monomial schedule
(:func:`nlicl_lib.theory.depth.greedy_reference`: with $m < p_2$ block-coordinate descent over chunks of
$m$ monomials; with $m \ge p_2$ every block holds all of $\phi_2$, so it is $L$ steps of
preconditioned GD on the whole kernel's features), and the exact loss of the best single block
with $m$ slots (Proposition 12 (prop-capacity), :func:`nlicl_lib.theory.capacity.best_feature_subspace`).

- :data:`STUDIES`: the studies the book shows, with :data:`STUDY_TRAINING`;
- :func:`run_study`: compute one study (or only its references) as plain JSON data;
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

from nlicl_lib.core.errors import ConfigError, check_choice
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
    # d = 5: m = 5 slots, a third of p_2 = 15; no single block of this token size holds phi_2
    "d5": Study(TaskConfig(kind="poly", input_dim=5, context_length=100, degree=2), (5,),
                (1, 2, 3, 4, 6, 8), 8),
}
STUDY_TRAINING = default_train_config(STUDIES["d3"].task, ModelConfig(kind="glu-lsa", feature_slots=3),
                                      purpose="narrow-stacks", seed=0)
"""Every stack of the studies trains with these, its peak rate divided by its depth: 1000 Adam
steps of 1000 prompts, eta = 0.02."""


def run_study(name: str, parts: tuple[str, ...] = PARTS, device: str = "cpu",
              progress: bool | None = None, shapes: list[tuple[int, int]] | None = None
              ) -> dict:
    """The results of study ``name`` as JSON data (unnormalised losses; ``null_loss`` is
    $\\mathbb E[y^2]$). ``parts``: ``"references"`` (greedy references and single-block optima,
    float64, seconds) and/or ``"trained"`` (the trained stacks, minutes). ``shapes``: train only
    these ``(slots, depth)`` pairs of the study (default: every pair)."""
    check_choice("study", name, tuple(STUDIES))
    for part in parts:
        check_choice("parts", part, PARTS)
    study = STUDIES[name]
    task = study.task
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
        for m in study.slots:
            ref = greedy_reference(task, schedule_features(task, m, study.reference_depth),
                                   FIT_CONTEXTS, TEST_CONTEXTS, device=device)
            references[str(m)] = {
                "loss": ref.loss.tolist(), "std_error": ref.std_error.tolist(),
                "gain_std_error": ref.gain_std_error.tolist(),
                "worst_share": ref.worst_share.tolist(), "fit_loss": ref.fit_loss.tolist(),
                "exact_first": ref.exact_first, "fit_contexts": ref.fit_contexts,
                "test_contexts": ref.test_contexts}
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
                  "parameters": sweep.parameters[key], "diverged": sweep.diverged[key],
                  "exact": sweep.exact.get(key),
                  # the batch-loss curve, mean of every 25 steps
                  "history": np.asarray(sweep.history[key])[: len(sweep.history[key]) // window
                                                            * window]
                  .reshape(-1, window).mean(axis=1).tolist()}
            for key, (m, L) in zip(map(lambda s: shape_key(*s), shapes), shapes, strict=True)}
        out["history_window"] = window
        out["train_seconds"] = sweep.seconds
    return out


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


def summary(study: dict, prefix: str) -> dict[str, float | int | str]:
    r"""The numbers chapter 5 quotes from ``study``, keyed ``f"{prefix}_..."`` (losses normalised
    by $\mathbb E[y^2]$): per slot count $m$ the first and last trained and reference losses;
    the best single block with $m$ slots and of any size; for the narrowest $m$ the gap to its
    single block, from which depth the trained stacks stay below the best block of any size, and
    how its deepest stack compares with its reference; with two slot counts, at how many depths
    the wide stack wins, from which depth it stays below its reference, and the budget pairs
    (:func:`budget_pairs`) the narrow stack wins."""
    null, depths, slots = study["null_loss"], list(study["depths"]), list(study["slots"])
    d = study["task"]["input_dim"]
    out: dict[str, float | int | str] = {"depth_count": len(depths),
                                         "kernel": study["kernel_optimum"] / null}
    for m in slots:
        out[f"block_weights{m}"] = stack_weights(d, m, 1)
    trained = {m: [study["trained"][shape_key(m, L)] for L in depths] for m in slots}
    losses = {m: [r["loss"] / null for r in trained[m]] for m in slots}
    references = {m: [v / null for v in study["references"][str(m)]["loss"]] for m in slots}
    for m in slots:
        out[f"trained{m}_first"], out[f"trained{m}_last"] = losses[m][0], losses[m][-1]
        out[f"trained{m}_last_err"] = trained[m][-1]["std_error"] / null
        out[f"ref{m}_first"], out[f"ref{m}_last"] = references[m][0], references[m][-1]
        if m < study["p2"]:
            out[f"single{m}"] = study["single_block"][str(m)] / null
    out["worst"] = max(r["worst_share"] for m in slots for r in trained[m])
    narrow = slots[0]
    if narrow < study["p2"]:
        out["gap"] = out[f"single{narrow}"] / losses[narrow][-1]
        below = _first_depth_from(depths, [v < out[f"single{narrow}"] for v in losses[narrow]])
        out["below_single_from"] = "no depth" if below is None else str(below)
    below = _first_depth_from(depths, [v < out["kernel"] for v in losses[narrow]])
    out["below_kernel_from"] = "no depth" if below is None else str(below)
    last, error = trained[narrow][-1]["loss"], trained[narrow][-1]["std_error"]
    ref_last = study["references"][str(narrow)]["loss"][-1]
    ref_error = study["references"][str(narrow)]["std_error"][-1]
    margin = 2 * float(np.hypot(error, ref_error))
    out["trained_vs_ref"] = ("within two standard errors of" if abs(last - ref_last) <= margin
                             else "below" if last < ref_last else "above")
    if len(slots) == 2:
        wide = slots[1]
        out["wide_wins"] = sum(w < n for w, n in zip(losses[wide], losses[narrow], strict=True))
        beats = [t < references[wide][L - 1] for t, L in zip(losses[wide], depths, strict=True)]
        first = _first_depth_from(depths, beats)
        out["wide_beats_ref_from"] = "no depth" if first is None else str(first)
        for kind in ("weights", "features"):
            pairs = budget_pairs(study, narrow, wide, kind)
            out[f"{kind[:-1]}_pairs"] = len(pairs)
            out[f"{kind[:-1]}_wins"] = sum(p.narrow_loss < p.wide_loss for p in pairs)
    return {f"{prefix}_{key}": (float(v) if isinstance(v, float | np.floating) else v)
            for key, v in out.items()}


def load_studies(path: Path | str | None = None) -> dict[str, dict]:
    """The committed study results (:data:`DATA_FILE`), keyed by study name."""
    path = Path(path) if path is not None else DATA_FILE
    if not path.exists():
        raise ConfigError("path", str(path), "the depth-study data file; make it with "
                          "`python tools/make_depth_study.py`")
    return json.loads(path.read_text())
