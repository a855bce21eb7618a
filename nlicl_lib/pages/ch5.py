r"""Chapter 5's page ("Depth distributes the kernel"): its tables, glued values and figures,
and what the page imports besides the theory (:mod:`nlicl_lib.theory.depth`) and the package
root: the display functions, the panel, the trained sweeps and the stored studies
(:mod:`nlicl_lib.experiments.studies`).

Losses are printed over $\mathbb E[y^2]$; every trained stack is drawn next to the greedy
reference of Proposition 15 (prop-greedy-reference) of the same shape.
"""

from __future__ import annotations

import copy
import math
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
import torch

from nlicl_lib.core.errors import ConfigError, check_float
from nlicl_lib.core.models import GLU, InContextRegressor, gd_steps
from nlicl_lib.core.monomials import PolyMap, monomial_name
from nlicl_lib.core.tasks import Prompts
from nlicl_lib.experiments.studies import (
    CubicStudy,
    FreeRun,
    FreeSummary,
    budget_pairs,
    cubic_study,
    depth_sweep,
    first_test_prompts,
    free_agreement,
    free_stack_from_json,
    free_summaries,
    gd_form_losses,
    load_free_stacks,
    load_studies,
    reference_samples,
    sample_falls,
    shape_key,
    stack_weights,
)
from nlicl_lib.pages.chapter_exercises import (  # noqa: F401  (the page's exercises)
    check_depth_beats_one_block,
    check_slot_degree,
    check_wide_block_against_depth,
)
from nlicl_lib.pages.display import glue, glue_values, show, show_source
from nlicl_lib.pages.panels import depth_panel
from nlicl_lib.pages.plots import (
    COLORS,
    PALETTE,
    baseline_trace,
    bound_trace,
    new_figure,
    slider_figure,
    theory_trace,
    trained_trace,
)
from nlicl_lib.theory.depth import (
    GreedyReference,
    StreamResiduals,
    deep_glu_lsa,
    monomial_schedule,
    stack_as_bcd,
    stack_recursion_gap,
)
from nlicl_lib.training.evaluate import ERROR_BARS, LossEstimate, intervals_separate

__all__ = [
    "PRINT_WIDTH", "budget_report", "construction_report", "cubic_construction_report",
    "cubic_report", "cubic_study", "cubic_values", "curves_figure", "depth_figure",
    "depth_panel", "depth_sweep", "free_last_block_probe", "free_stack_claims",
    "free_stack_report", "free_stack_values",
    "gd_steps", "glue",
    "glue_values", "glu_unit_names", "greedy_reference_report", "greedy_reference_values",
    "load_free_stacks", "load_studies", "narrow_study_report", "reference_spread",
    "reference_spread_report", "residual_stream_figure", "shape_key", "show", "show_source",
    "stream_report", "study_report", "study_values", "trained_stack_report", "weights_figure",
]

PRINT_WIDTH = 76
"""Width the construction listings wrap to (the page prints at most 78 columns)."""


def _side(value: float, error: float, low: float, high: float, within: str) -> str:
    """Where ``value`` ± 2 ``error`` lies against ``[low, high]``."""
    if value + 2 * error < low:
        return "below"
    if value - 2 * error > high:
        return "above"
    return within


def _first_depth_from(depths: list[int], holds: list[bool]) -> str:
    """The first depth from which ``holds`` is true at every larger depth too."""
    first = None
    for L, ok in zip(depths, holds, strict=True):
        if ok and first is None:
            first = L
        elif not ok:
            first = None
    return "no depth" if first is None else str(first)


# ---------------------------------------------------------------------------------------------
# the construction and the recursion


def glu_unit_names(glu: GLU, reads: Sequence[str]) -> list[str]:
    r"""``"a*b"`` for each unit $u_j = (W_1 z)_j (W_2 z)_j$ of a constructed GLU whose rows of
    $W_1, W_2$ each pick one coordinate of its input $z$ (named by ``reads``)."""
    if len(reads) != glu.w1.shape[1]:
        raise ConfigError("reads", list(reads), f"one name per GLU input ({glu.w1.shape[1]})")
    return [f"{reads[int(glu.w1[u].argmax())]}*{reads[int(glu.w2[u].argmax())]}"
            for u in range(glu.width)]


def construction_report(schedule: Sequence[PolyMap], glu: GLU, input_names: Sequence[str]
                        ) -> str:
    """The feature block each block writes, then ``glu``'s units and what $W_3$ adds to each
    slot (e.g. ``x1*x2  ->  slots += (1, 0, 0)``)."""
    lines = [f"block {ell} writes phi_{ell} = ({', '.join(block.names)})"
             for ell, block in enumerate(schedule, start=1)]
    lines.append("\nblock 2's GLU units (W1 reads, W2 reads) and what W3 adds to each slot:")
    for unit, name in enumerate(glu_unit_names(glu, input_names)):
        added = ", ".join(str(int(round(v))) for v in glu.w3[:, unit].tolist())
        lines.append(f"  {name}  ->  slots += ({added})")
    return "\n".join(lines)


def greedy_reference_report(reference: GreedyReference, slots: int) -> str:
    """The greedy reference's table: test loss ± standard error on fresh contexts, the loss on
    the fitting contexts and the largest test context's share, per depth."""
    null = reference.null_loss
    lines = [f"n = {reference.task.context_length}, m = {slots}: greedy reference, "
             "loss / E[y²]",
             " L   test (fresh)       fitting   largest context's share of the test"]
    for L in reference.depths:
        lines.append(f" {L}  {reference.normalised()[L - 1]:7.4f} ± "
                     f"{reference.std_error[L - 1] / null:6.4f}  "
                     f"{reference.fit_loss[L - 1] / null:7.4f}   "
                     f"{reference.worst_share[L - 1]:6.1%}")
    return "\n".join(lines)


def greedy_reference_values(reference: GreedyReference, prefix: str) -> dict[str, float | int]:
    """Glued as ``{prefix}_...``: the deepest fit and test losses, the deepest largest
    context's share, and the depth with the lowest test loss."""
    return {f"{prefix}_fit_last": float(reference.fit_loss[-1] / reference.null_loss),
            f"{prefix}_test_last": float(reference.normalised()[-1]),
            f"{prefix}_worst_last": float(reference.worst_share[-1]),
            f"{prefix}_best_depth": int(np.argmin(reference.loss)) + 1}


def stream_report(residuals: StreamResiduals) -> str:
    r"""Per stack: $\max |\text{label} - (y_i - \hat y_\ell(x_i))|$ and the mean of $r_i^2$ after
    each block."""
    lines = ["max |label slot - (y_i - prediction at x_i)|; mean r_i^2 after blocks 0.."
             f"{max(len(v) for v in residuals.labels_seen.values()) - 1}"]
    for name, seen in residuals.labels_seen.items():
        mean_squares = ", ".join(f"{v:.2f}" for v in (seen**2).mean(dim=1).tolist())
        gap = float((seen - residuals.requeried[name]).abs().max())
        lines.append(f"  {name:11s}  {gap:.2g};  {mean_squares}")
    return "\n".join(lines)


def trained_stack_report(model: InContextRegressor, prompts: Prompts, share: float = 0.1) -> str:
    r"""A trained stack read as the recursion on its own features: the largest difference
    between its output and the recursion (:func:`~nlicl_lib.theory.depth.stack_recursion_gap`),
    and the quadratic forms its first block writes into the slots (terms of at least ``share``
    of the largest)."""
    share = check_float("share", share, minimum=0.0, maximum=1.0)
    first = stack_as_bcd(model)[0][0]
    lines = ["trained stack against the recursion on its own features (polynomials of x):",
             f"  largest |difference| {stack_recursion_gap(model, prompts):.2g}",
             "the trained stack's slots after block 1 (the quadratic forms it found):"]
    for row in first.coefficients[prompts.x.shape[-1]:]:
        big = np.abs(row).max()
        terms = zip(row, first.exponents, strict=True)
        lines.append("  " + " ".join(f"{c:+.2f} {monomial_name(a)}" for c, a in terms
                                     if abs(c) > share * big))
    return "\n".join(lines)


def cubic_construction_report(input_dim: int, slots: int) -> str:
    r"""Two blocks on the cubic task whose second GLU reads $(x; \text{slots})$: block 1 writes
    the quadratics, block 2 replaces them by the cubic monomials with units $x_j \cdot s_i$
    and erases them with units $x_j x_k$. What each block writes and block 2's units, wrapped
    to :data:`PRINT_WIDTH` columns without breaking a monomial such as ``x1 x2``."""
    schedule = monomial_schedule(input_dim, slots, 2, max_degree=3)
    size = input_dim + slots
    construction = deep_glu_lsa(input_dim, schedule, [np.zeros((size, size))] * 2, slots,
                                glu_reads="x+slots")
    slot_names = list(schedule[0].names) + ["0"] * (slots - schedule[0].num_outputs)
    reads = [f"x{j + 1}" for j in range(input_dim)] + [
        f"slot{i + 1}[{n.replace(' ', '')}]" for i, n in enumerate(slot_names)]
    units = glu_unit_names(construction.blocks[1].glu, reads)
    lines = [f"block {b} writes: {', '.join(f.names)}" for b, f in zip((1, 2), schedule,
                                                                       strict=True)]
    lines.append("block 2's units: " + ", ".join(units))
    wrapped = [textwrap.fill(line.replace(" x", "\u00a0x").replace(",\u00a0", ", "), PRINT_WIDTH,
                             subsequent_indent="  ", break_on_hyphens=False) for line in lines]
    return "\n".join(w.replace("\u00a0", " ") for w in wrapped)


# ---------------------------------------------------------------------------------------------
# the stored depth studies


def study_report(study: dict) -> str:
    r"""A stored depth study's table: per depth $L$ (up to the deepest), the trained stack of
    each slot count (``-`` where none was trained) and its greedy reference (mean over the
    fitting samples)."""
    null = study["null_loss"]
    means = {m: reference_samples(study, m).mean(axis=0) for m in study["slots"]}
    first = study["references"][str(study["slots"][0])]
    lines = [f"{len(study['trained'])} stacks, {study['training']['steps']} steps of "
             f"{study['training']['batch_size']} prompts, {study['train_seconds']:.0f} s on "
             f"{study['device']};\ntest: {first['test_contexts']:,} fresh contexts; references: "
             f"mean of {len(first['fit_samples']['loss'])} fitting samples",
             " L" + "".join(f"   trained m={m:<2d}  reference" for m in study["slots"])
             + "  (loss / E[y²])"]
    for L in range(1, max(study["depths"]) + 1):
        row = f" {L}"
        for m in study["slots"]:
            run = study["trained"].get(shape_key(m, L))
            row += f"   {run['loss'] / null:.4f}" if run else "         - "
            row += f"      {means[m][L - 1]:.4f}"
        lines.append(row)
    return "\n".join(lines)


def reference_spread_report(study: dict) -> str:
    """Every greedy reference of a stored study over its fitting samples (all measured on the
    same test contexts): per depth each sample's test loss, their median, and the largest
    single test context's share of the loss in any sample."""
    lines = []
    for m in study["slots"]:
        ref = study["references"][str(m)]
        samples, shares = reference_samples(study, m), np.asarray(ref["fit_samples"]["worst_share"])
        seeds = ref["fit_samples"]["fit_seeds"]
        lines += [f"reference m = {m}: fitting samples of {ref['fit_contexts']:,} contexts,",
                  f"  fit seeds {', '.join(map(str, seeds))}; loss / E[y²]",
                  " L" + "".join(f"   seed {s}" for s in seeds) + "   median   largest share"]
        for L in range(1, samples.shape[1] + 1):
            lines.append(f" {L}" + "".join(f"   {v:.4f}" for v in samples[:, L - 1])
                         + f"   {np.median(samples[:, L - 1]):.4f}   {shares[:, L - 1].max():6.1%}")
    return "\n".join(lines)


def budget_report(study: dict, narrow: int, wide: int) -> str:
    """The narrow and wide stacks paired at at most the same trained weights, then at the same
    number of features written (:func:`~nlicl_lib.experiments.studies.budget_pairs`)."""
    lines = []
    for kind in ("weights", "features"):
        lines.append(f"at most the same {kind}:  narrow (m = {narrow})        wide (m = {wide})")
        for pair in budget_pairs(study, narrow, wide, kind):
            lines.append(f"  L = {pair.narrow_depth} ({pair.narrow_budget:4d}): "
                         f"{pair.narrow_loss:.4f}      L = {pair.wide_depth} "
                         f"({pair.wide_budget:4d}): {pair.wide_loss:.4f}")
    return "\n".join(lines)


def narrow_study_report(study: dict) -> str:
    r"""A study whose narrowest slot count $m$ is below $p_2$: the best single block with $m$
    slots and with all $p_2$ (token size $D = d + p_2 + 1$), then per depth every slot count's
    trained stack (± standard error) and reference, and, with two slot counts, narrow / wide
    at equal depth (trained, and references)."""
    null, slots = study["null_loss"], list(study["slots"])
    d, n, p2 = study["task"]["input_dim"], study["task"]["context_length"], study["p2"]
    m = slots[0]
    means = {k: reference_samples(study, k).mean(axis=0) for k in slots}
    samples = len(study["references"][str(m)]["fit_samples"]["loss"])
    lines = [f"d = {d}, n = {n}; best single block with {m} slots "
             f"{study['single_block'][str(m)] / null:.4f},",
             f"  with all {p2} {study['kernel_optimum'] / null:.4f} (D = {d + p2 + 1})",
             f"references: mean of {samples} fitting samples"
             + (f"; m={slots[0]} / m={slots[1]}: trained, references" if len(slots) == 2
                else ""),
             " L" + "".join(f"   {'trained m=' + str(k):15s}  {'ref':6s}" for k in slots)
             + ("   trained    ref" if len(slots) == 2 else "")]
    for L in study["depths"]:
        row = f" {L}"
        for k in slots:
            run = study["trained"][shape_key(k, L)]
            row += (f"   {run['loss'] / null:.4f} ± {run['std_error'] / null:.4f}"
                    f"  {means[k][L - 1]:.4f}")
        if len(slots) == 2:
            ratio = (study["trained"][shape_key(slots[0], L)]["loss"]
                     / study["trained"][shape_key(slots[1], L)]["loss"])
            row += f"   {ratio:7.2f}  {means[slots[0]][L - 1] / means[slots[1]][L - 1]:5.2f}"
        lines.append(row)
    return "\n".join(lines)


def _rise_text(losses: np.ndarray) -> str:
    """Where fitting samples' references rise: ``"no depth"`` or e.g. ``"depth 7 (1 of 3
    samples)"``."""
    falls = sample_falls(losses)
    return ", ".join(f"depth {L} ({k} of {falls.samples} samples)"
                     for L, k in falls.rises.items()) or "no depth"


def study_values(study: dict, prefix: str) -> dict[str, float | int | str]:
    r"""The numbers the page quotes from ``study``, keyed ``f"{prefix}_..."``: per slot count
    the trained and reference losses (the reference's spread over its fitting samples, and
    where a sample rises), the single-block optima, the heaviest test contexts; for the
    narrowest slot count where its stacks cross the single blocks and its reference; with two
    slot counts, narrow / wide at equal depth and the budget pairs the narrow stack wins
    (:func:`~nlicl_lib.experiments.studies.budget_pairs`)."""
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
        out[f"ref{m}_falling"] = sample_falls(samples[m]).falling
        out[f"ref{m}_rises"] = _rise_text(samples[m])
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
        out["below_single_from"] = _first_depth_from(
            depths, [v < out[f"single{narrow}"] for v in losses[narrow]])
    out["below_kernel_from"] = _first_depth_from(depths, [v < out["kernel"] for v in losses[narrow]])
    errors = np.asarray(study["references"][str(narrow)]["fit_samples"]["std_error"]) / null
    last, spread = samples[narrow][:, -1], errors[:, -1]
    out["trained_vs_ref"] = _side(losses[narrow][-1], out[f"trained{narrow}_last_err"],
                                  float(np.min(last - 2 * spread)),
                                  float(np.max(last + 2 * spread)), "within the spread of")
    if len(slots) == 2:
        wide = slots[1]
        out["wide_wins"] = sum(w < n for w, n in zip(losses[wide], losses[narrow], strict=True))
        cost = [n / w for n, w in zip(losses[narrow], losses[wide], strict=True)]
        ref_cost = [means[narrow][L - 1] / means[wide][L - 1] for L in depths]
        out["cost_min"], out["cost_max"] = float(min(cost)), float(max(cost))
        out["cost_last"], out["ref_cost_last"] = float(cost[-1]), float(ref_cost[-1])
        out["ref_cost_min"], out["ref_cost_max"] = float(min(ref_cost)), float(max(ref_cost))
        out["wide_beats_ref_from"] = _first_depth_from(
            depths, [t < samples[wide][:, L - 1].min()
                     for t, L in zip(losses[wide], depths, strict=True)])
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


# ---------------------------------------------------------------------------------------------
# the stored free stacks


def _rounded(value: float, half_width: float) -> str:
    """``value ± half_width`` to the precision the half width allows: the half width to one
    significant digit (two when that digit is 1), the value to the same decimal."""
    if not half_width > 0:
        return f"{value:.4f}"
    exponent = math.floor(math.log10(half_width))
    leading_one = f"{half_width / 10**exponent:.0f}" == "1"
    digits = max(0, -exponent + (1 if leading_one else 0))
    return f"{value:.{digits}f} ± {half_width:.{digits}f}"


def _interval(estimate: LossEstimate) -> str:
    """A loss as its interval, mean ± :data:`ERROR_BARS` standard errors (``.error``)."""
    return _rounded(estimate.mean, ERROR_BARS * estimate.error)


def _agreement(run: FreeSummary, block: int) -> str:
    return _rounded(run.agreement[block], ERROR_BARS * run.agreement_error[block])


def _versus(run: FreeSummary) -> str:
    """Where a free run's interval lies against its family's GD-form one."""
    return "below" if run.below else "within" if run.reaches else "above"


def _convergence(run: FreeSummary) -> str:
    if run.reaches:
        return "yes: reaches"
    if run.doubled_change is None:
        return "not tested"
    verdict = "yes" if run.doubled_change < 1 else "no"
    return f"{verdict} (x2: {run.doubled_change:.1f})"


def _run_label(run: FreeSummary) -> str:
    start = "GD-form" if run.start == "gd-form" else "random"
    return f"{start:7s} {run.seed:4d}  {run.eta:<5g}  {run.steps:5d}"


def free_stack_report(data: dict) -> str:
    r"""The stored free stacks' tables, every interval the mean $\pm$ 2 standard errors. First,
    per depth, the GD-form stacks (the depth study's, then trained on in GD form with the free
    settings) and every free run: its test loss over $\mathbb E[y^2]$, where its interval lies
    against the GD-form loss of its family (the lower of the two), and whether it converged
    (:class:`~nlicl_lib.experiments.studies.FreeSummary`: it reaches that loss, or doubling its
    steps moves its loss by less than 2 standard errors; the number is that move over 2
    standard errors). Then $A_\ell$ of the blocks $\ell < L$ of every run of depth $L \ge 2$."""
    runs, test, training = free_summaries(data), data["test"], data["training"]
    gd_seconds = data["gd_form_seconds"] + data.get("continued_seconds", 0.0)
    header = (f"Free stacks, {training['batch_size']} prompts a step at peak rate eta / L: "
              f"{data['free_seconds'] / 60:.0f} min (the GD-form stacks {gd_seconds:.0f} s) "
              f"on {data['device']}, {data['threads']} thread, torch {data['torch']}. Test: "
              f"{test['test_samples']} independent samples of {test['num_prompts']:,} "
              "prompts. Every interval is the mean ± 2 standard errors. loss / E[y²]: plain "
              "Monte Carlo (the GD-form stacks: task and query integrated out); vs GD: "
              "against the GD-form loss of the family; converged (x2: the move on doubling "
              "the steps over 2 standard errors).")
    lines = [*textwrap.wrap(header, PRINT_WIDTH), "",
             " L  start   seed  eta    steps  loss / E[y²]     vs GD  converged"]
    depth = None
    for run in runs:
        if run.depth != depth:
            depth = run.depth
            gd = gd_form_losses(data, depth)
            lines.append(f" {depth}  GD-form stack, study settings     {_interval(gd['study'])}")
            if "continued" in gd:
                lines.append(f" {depth}  GD-form, trained on in GD form    "
                             f"{_interval(gd['continued'])}")
        if run.loss is None:
            lines.append(f" {run.depth}  {_run_label(run)}  diverged at step {run.diverged_at}")
            continue
        lines.append(f" {run.depth}  {_run_label(run)}  {_interval(run.loss):16s} "
                     f"{_versus(run):6s} {_convergence(run)}")
    agreement = (f"A_l of the blocks l < L, whose writes reach the prediction, on "
                 f"{data['agreement_prompts']:,} prompts: the mean of "
                 f"{data['agreement_groups']} groups ± 2 standard errors (the GD-form stacks: "
                 f"|1-A_l| <= {free_gd_agreement_gap(data):.0e}); hit: the run reaches the "
                 "GD-form loss of its family.")
    lines += ["", *textwrap.wrap(agreement, PRINT_WIDTH), "",
              " L  start   seed  eta    steps  hit  A_1                 A_2"]
    for run in runs:
        if run.depth < 2 or run.loss is None:
            continue
        cells = [f"{_agreement(run, b):19s}" for b in range(run.depth - 1)]
        lines.append(f" {run.depth}  {_run_label(run)}  {'yes' if run.reaches else 'no':3s}  "
                     + " ".join(cells).rstrip())
    return "\n".join(lines)


def free_gd_agreement_gap(data: dict) -> float:
    r"""A power of ten at or above the largest $|1 - A_\ell|$ of the stored GD-form stacks
    (float64), at least $10^{-16}$."""
    gaps = [abs(1 - a) for entry in data["depth_runs"].values()
            for stack in (entry["gd_form"], entry.get("continued", {}))
            for a in stack.get("agreement", [])]
    return 10.0 ** max(-16, math.ceil(math.log10(max([*gaps, 1e-300]))))


@dataclass(frozen=True)
class LastBlockProbe:
    r"""Why the page leaves out $A_L$: in the stored one-block free stack (random start, seed
    and rate of the purpose), $A_1$ ``before`` and ``after`` zeroing the label column of
    $Q_1$, each ``(mean, standard error)`` (:func:`~nlicl_lib.experiments.studies.free_agreement`
    with ``last``, float64), and ``shift``, the relative change of its predictions on the same
    prompts, $\sqrt{\sum_b (\hat y_b - \hat y'_b)^2 / \sum_b \hat y_b^2}$."""

    before: tuple[float, float]
    after: tuple[float, float]
    shift: float


def free_last_block_probe(data: dict) -> LastBlockProbe:
    """:class:`LastBlockProbe` on the first stored agreement prompts (a few seconds)."""
    training = data["training"]
    key = FreeRun("random", data["seeds"][0], training["learning_rate"], training["steps"]).key
    run = next(r for r in data["depth_runs"]["1"]["runs"] if r["key"] == key)
    model = free_stack_from_json(1, run["weights"], dtype=torch.float64)
    cut = copy.deepcopy(model)
    with torch.no_grad():
        cut.blocks[0].lsa.q[:, -1] = 0.0
    prompts = first_test_prompts(data["agreement_prompts"]).to(torch.float64)
    groups = data["agreement_groups"]
    (before, before_error), (after, after_error) = (
        free_agreement(m, prompts, groups, last=True) for m in (model, cut))
    with torch.no_grad():
        z = prompts.embed(model.feature_slots)
        a, b = model(z), cut(z)
    shift = float(((a - b) ** 2).sum().sqrt() / (a**2).sum().sqrt())
    return LastBlockProbe((float(before[0]), float(before_error[0])),
                          (float(after[0]), float(after_error[0])), shift)


@dataclass(frozen=True)
class FreeStackClaims:
    r"""What the page says of the stored free stacks, recomputed (the tests hold it).
    ``gd_start_above``: the depths at which a run from the GD-form start ends above the GD-form
    loss of its family (a rate too high to keep it); ``gd_start_within``, ``gd_start_below``:
    the depths at which every such run is within it, or below it (intervals separate);
    ``continued_above``: at every depth of ``gd_start_below`` the GD-form stack trained on in
    GD form with the same settings stays above every GD-form-start run (intervals separate);
    ``random_reaching``: ``(depth, seed, eta, steps)`` of every random-start run that reaches,
    of ``random_runs``; ``seeds_apart``: the depths at which the highest and the lowest loss
    of the seeds (random start, the purpose's rate and steps) separate;
    ``doubling_unsettled``: the depths at which doubling the steps moves the loss by 2
    standard errors or more; ``doubled_reaching``: where the doubled run reaches;
    ``reach_agreement``: the lowest and highest $A_\ell$ ($\ell < L$) of the runs that reach,
    as ``(value, standard error)``, ``reach_below_one``: each such $A_\ell$ is below 1 by more
    than 2 standard errors; ``lowest_agreement``: the lowest $A_\ell$ of any run and whether
    that run reaches; ``widest``: the reaching random-start run with the largest prompt share,
    as ``(depth, seed, share, interval half width over its mean)``."""

    gd_start_above: tuple[int, ...]
    gd_start_within: tuple[int, ...]
    gd_start_below: tuple[int, ...]
    continued_above: bool
    random_reaching: tuple[tuple[int, int, float, int], ...]
    random_runs: int
    seeds_apart: tuple[int, ...]
    doubling_unsettled: tuple[int, ...]
    doubled_reaching: tuple[int, ...]
    reach_agreement: tuple[tuple[float, float], tuple[float, float]]
    reach_below_one: bool
    lowest_agreement: tuple[float, float, bool]
    widest: tuple[int, int, float, float] | None


def free_stack_claims(data: dict) -> FreeStackClaims:
    """:class:`FreeStackClaims` of the stored free stacks (:func:`free_summaries`)."""
    runs = [r for r in free_summaries(data) if r.loss is not None]
    depths = sorted({r.depth for r in runs})
    starts = {L: [r for r in runs if r.depth == L and r.start == "gd-form"] for L in depths}
    above = tuple(L for L in depths if any(not r.reaches for r in starts[L]))
    below = tuple(L for L in depths if starts[L] and all(r.below for r in starts[L]))
    within = tuple(L for L in depths if starts[L] and all(r.reaches and not r.below
                                                          for r in starts[L]))
    continued = True
    for L in below:
        control = gd_form_losses(data, L).get("continued")
        continued &= control is not None and all(
            intervals_separate(control, r.loss) and control.mean > r.loss.mean for r in starts[L])
    random = [r for r in runs if r.start == "random"]
    reaching = tuple((r.depth, r.seed, r.eta, r.steps) for r in random if r.reaches)
    base = data["training"]["steps"]
    seeds = {L: [r.loss for r in random if r.depth == L and r.steps == base
                 and r.eta == data["training"]["learning_rate"]] for L in depths}
    apart = tuple(L for L in depths if len(seeds[L]) > 1 and intervals_separate(
        min(seeds[L], key=lambda e: e.mean), max(seeds[L], key=lambda e: e.mean)))
    doubled = [r for r in random if r.steps > base and r.doubled_change is not None]
    unsettled = tuple(sorted({r.depth for r in doubled if r.doubled_change >= 1}))
    doubled_reaching = tuple(sorted({r.depth for r in doubled if r.reaches}))
    values = [(a, e, r.reaches) for r in runs
              for a, e in zip(r.agreement, r.agreement_error, strict=True)]
    reached = [(a, e) for a, e, ok in values if ok]
    lowest = min(values)
    tails = [r for r in random if r.reaches]
    widest = max(tails, key=lambda r: r.loss.worst_share, default=None)
    return FreeStackClaims(
        above, within, below, continued, reaching, len(random), apart, unsettled,
        doubled_reaching,
        (min(reached), max(reached)) if reached else ((math.nan, math.nan),) * 2,
        all(a + ERROR_BARS * e < 1 for a, e in reached), (lowest[0], lowest[1], lowest[2]),
        None if widest is None else (widest.depth, widest.seed, widest.loss.worst_share,
                                     ERROR_BARS * widest.loss.error / widest.loss.mean))


def _depth_list(depths: Sequence[int]) -> str:
    """``"1"``, ``"1 and 2"``, ``"1, 2 and 3"``; ``"none"`` for none."""
    words = [str(L) for L in depths]
    return "none" if not words else " and ".join([", ".join(words[:-1]), words[-1]]
                                                 if len(words) > 1 else words)


def free_stack_values(data: dict, probe: LastBlockProbe | None = None
                      ) -> dict[str, float | str]:
    r"""The numbers and phrases the page quotes, keyed ``free_...``, from the stored settings,
    :func:`free_stack_claims` and ``probe`` (default: :func:`free_last_block_probe`)."""
    claims, test, training = free_stack_claims(data), data["test"], data["training"]
    probe = probe or free_last_block_probe(data)
    depths = sorted(int(L) for L in data["depth_runs"])
    deepest = max(claims.gd_start_below) if claims.gd_start_below else depths[-1]
    gd_deep = [r for r in free_summaries(data) if r.depth == deepest and r.start == "gd-form"
               and r.eta == training["learning_rate"] and r.steps == training["steps"]][0]
    controls = gd_form_losses(data, deepest)
    reaching = "; ".join(
        f"depth {L}, seed {s}" + ("" if T == training["steps"] else f", {T} steps")
        + ("" if eta == training["learning_rate"] else f", η = {eta:g}")
        for L, s, eta, T in claims.random_reaching) or "none"
    (low, low_error), (high, high_error) = claims.reach_agreement
    runs = [r for r in free_summaries(data) if r.loss is not None]
    return {
        "free_steps": training["steps"], "free_batch": training["batch_size"],
        "free_rate": training["learning_rate"], "free_low_rate": min(data["rates"]),
        "free_other_rates": " and ".join(f"{r:g}" for r in data["rates"]),
        "free_gd_rate": data["gd_form_training"]["learning_rate"],
        "free_seed": data["seeds"][0], "free_seed_count": len(data["seeds"]),
        "free_doubled_steps": data["doubling"] * training["steps"],
        "free_depths": _depth_list(depths),
        "free_test_samples": test["test_samples"], "free_test_prompts": f"{test['num_prompts']:,}",
        "free_agreement_prompts": f"{data['agreement_prompts']:,}",
        "free_agreement_groups": data["agreement_groups"],
        "free_minutes": data["free_seconds"] / 60,
        "free_worst_share": max(r.loss.worst_share for r in runs),
        "free_gd_above": ("no run" if not claims.gd_start_above
                          else f"at depth {_depth_list(claims.gd_start_above)} a run"),
        "free_gd_within": _depth_list(claims.gd_start_within),
        "free_gd_below": _depth_list(claims.gd_start_below),
        "free_gd_deep_depth": deepest, "free_gd_deep": _interval(gd_deep.loss),
        "free_gd_deep_family": _interval(controls["study"]),
        "free_gd_deep_continued": _interval(controls.get("continued", controls["study"])),
        "free_random_reach": len(claims.random_reaching), "free_random_count": claims.random_runs,
        "free_random_reach_list": reaching,
        "free_seeds_apart": _depth_list(claims.seeds_apart),
        "free_doubling_unsettled": _depth_list(claims.doubling_unsettled),
        "free_doubled_reaching": _depth_list(claims.doubled_reaching),
        "free_doubling_open": _depth_list(sorted(set(claims.doubling_unsettled)
                                                 - set(claims.doubled_reaching))),
        "free_reach_a_low": _rounded(low, ERROR_BARS * low_error),
        "free_reach_a_high": _rounded(high, ERROR_BARS * high_error),
        "free_a_lowest": _rounded(claims.lowest_agreement[0],
                                  ERROR_BARS * claims.lowest_agreement[1]),
        "free_tail_depth": claims.widest[0] if claims.widest else "",
        "free_tail_share": claims.widest[2] if claims.widest else math.nan,
        "free_tail_width": 100 * claims.widest[3] if claims.widest else math.nan,
        "free_probe_before": _rounded(probe.before[0], ERROR_BARS * probe.before[1]),
        "free_probe_after": _rounded(probe.after[0], ERROR_BARS * probe.after[1]),
        "free_probe_shift": 100 * probe.shift,
    }


# ---------------------------------------------------------------------------------------------
# the cubic study


def cubic_report(study: CubicStudy) -> str:
    """The cubic study's table: the trained stacks of one and two blocks and the reference
    (± standard error), the exact loss of the trained block, and the two one-step optima."""
    one, two = study.keys
    null, sweep, reference = study.null_loss, study.sweep, study.reference
    lines = [f"cubic task: 2 stacks, {study.train_config.steps} steps of "
             f"{study.train_config.batch_size} prompts in {sweep.seconds:.1f} s"]
    for name, value, error in [
            ("trained, L = 1", sweep.loss[one], sweep.std_error[one]),
            ("trained, L = 2", sweep.loss[two], sweep.std_error[two]),
            ("greedy reference, L = 2", reference.loss[1], reference.std_error[1])]:
        lines.append(f"  {name:24s} {value / null:.4f} ± {error / null:.4f}")
    lines += [f"  one trained block, exact: {sweep.exact[one] / null:.4f}",
              f"best single block, any m (x and quadratics): {study.one_block / null:.4f}",
              f"one GD step on all {study.all_monomials} monomials of degree ≤ 3: "
              f"{study.all_features / null:.4f}"]
    return "\n".join(lines)


def cubic_values(study: CubicStudy) -> dict[str, float | str]:
    """The cubic study's numbers the page quotes, and where the trained stack and the
    reference lie (± 2 standard errors) against one GD step on all monomials."""
    one, two = study.keys
    null, sweep, reference = study.null_loss, study.sweep, study.reference

    def side(value: float, error: float) -> str:
        return _side(value, error, study.all_features, study.all_features,
                     "within two standard errors of")

    return {
        "cubic_depth1": sweep.exact[one] / null,
        "cubic_depth1_estimate": sweep.normalised(one),
        "cubic_depth1_err": sweep.std_error[one] / null,
        "cubic_depth2": sweep.normalised(two),
        "cubic_depth2_err": sweep.std_error[two] / null,
        "cubic_reference2": float(reference.normalised()[1]),
        "cubic_one_block": study.one_block / null,
        "cubic_all_features": study.all_features / null,
        "cubic_trained_vs_all": side(sweep.loss[two], sweep.std_error[two]),
        "cubic_reference_vs_all": side(reference.loss[1], reference.std_error[1]),
    }


# ---------------------------------------------------------------------------------------------
# figures


def residual_stream_figure(residuals: StreamResiduals) -> go.Figure:
    r"""For each stack (slider "depth-L stack") and block $\ell = 0, \dots, L$ (slider "after
    block ℓ"): the labels $y_i$, the stream's label entries (filled markers) and
    $y_i - \hat y_\ell(x_i)$ (open circles) against the context index $i$, Theorem 13
    (thm-depth-bcd). Every stack needs the same $L$ and $n$."""
    names = list(residuals.labels_seen)
    shapes = {tuple(residuals.labels_seen[name].shape) for name in names}
    if len(shapes) != 1:
        raise ValueError(f"every stack needs the same blocks and context length, got {shapes}")
    blocks, n = shapes.pop()
    index = np.arange(1, n + 1)
    panels = {}
    for name in names:
        seen = residuals.labels_seen[name].numpy()
        requeried = residuals.requeried[name].numpy()
        for ell in range(blocks):
            panels[(name, ell)] = [
                baseline_trace(index, seen[0], "labels y_i (block 0)"),
                trained_trace(index, seen[ell], "label entry of token i after block ℓ",
                              mode="markers", marker={"size": 9}),
                go.Scatter(x=index, y=requeried[ell], mode="markers",
                           name="y_i − prediction of the first ℓ blocks",
                           marker={"size": 15, "symbol": "circle-open",
                                   "color": COLORS["theory"], "line": {"width": 2}}),
            ]
    base = new_figure("Context labels in the residual stream", "context example i",
                      "label entry")
    return slider_figure(base, panels, [f"depth-{blocks - 1} stack", "after block ℓ"],
                         [names, list(range(blocks))])


def _normalised(study: dict, values: Iterable[float]) -> list[float]:
    return [float(v) / study["null_loss"] for v in values]


def reference_spread(study: dict, m: int) -> tuple[list[int], np.ndarray, np.ndarray,
                                                    np.ndarray]:
    """The greedy reference with ``m`` slots per depth, normalised: the mean over its fitting
    samples, and the lowest and highest of every sample's estimate ∓ 2 standard errors (over
    the test contexts): the error bars of the figures."""
    samples = reference_samples(study, m)
    errors = np.asarray(study["references"][str(m)]["fit_samples"]["std_error"]) / study[
        "null_loss"]
    return (list(range(1, samples.shape[1] + 1)), samples.mean(axis=0),
            (samples - 2 * errors).min(axis=0), (samples + 2 * errors).max(axis=0))


def _trace_pairs(study: dict, x_of: Callable[[int, int], float]) -> list[go.Scatter]:
    """Per slot count: the trained stacks (± 2 standard errors) and their reference (its
    fitting samples' spread)."""
    traces = []
    for index, m in enumerate(study["slots"]):
        color = PALETTE[index]
        depths = list(study["depths"])
        runs = [study["trained"][shape_key(m, L)] for L in depths]
        traces.append(trained_trace([x_of(m, L) for L in depths],
                                    _normalised(study, [r["loss"] for r in runs]),
                                    f"trained, m = {m} slots", color=color,
                                    error_y=_normalised(study, [2 * r["std_error"] for r in runs])))
        depths, mean, low, high = reference_spread(study, m)
        name = (f"L steps of kernel GD, best Γ (m = {study['p2']})" if m >= study["p2"]
                else f"block-coordinate reference, m = {m}")
        traces.append(theory_trace([x_of(m, L) for L in depths], mean.tolist(), name,
                                   color=color, dash="dash" if index == 0 else "longdash",
                                   error_y={"type": "data", "symmetric": False,
                                            "array": (high - mean).tolist(),
                                            "arrayminus": (mean - low).tolist(),
                                            "visible": True}))
    return traces


def depth_figure(study: dict, title: str) -> go.Figure:
    """Normalised test loss against depth for every slot count of ``study``, with the best
    single block of each size as horizontal lines."""
    fig = new_figure(title, "depth L (blocks)", "test loss / E[y²]", log_y=True)
    fig.update_yaxes(dtick="D2")  # labels at 1, 2, 5 of each decade: two decades stay readable
    for trace in _trace_pairs(study, lambda m, L: L):
        fig.add_trace(trace)
    last = max(study["depths"])
    for m in study["slots"]:
        if m < study["p2"]:
            single = _normalised(study, [study["single_block"][str(m)]] * 2)
            fig.add_trace(bound_trace([1, last], single,
                                      f"best single block, m = {m} (any width)"))
    fig.add_trace(baseline_trace([1, last], _normalised(study, [study["kernel_optimum"]] * 2),
                                 f"best single block of any size (m = {study['p2']})"))
    return fig


def weights_figure(study: dict, title: str) -> go.Figure:
    """The trained stacks and references of ``study`` against their trained weights
    (:func:`~nlicl_lib.experiments.studies.stack_weights`)."""
    d = study["task"]["input_dim"]
    fig = new_figure(title, "trained weights of the stack", "test loss / E[y²]", log_x=True,
                     log_y=True)
    fig.update_xaxes(dtick="D2")
    fig.update_yaxes(dtick="D2")
    for trace in _trace_pairs(study, lambda m, L: stack_weights(d, m, L)):
        fig.add_trace(trace)
    return fig


def curves_figure(studies: dict[str, dict], title: str) -> go.Figure:
    """Training curves (batch loss, mean of every ``history_window`` steps) of every run, with
    the run's final test loss and its reference at the same depth. Two sliders, the study and
    its slot count, then the depth $L$ (the studies share their depths): few enough steps each
    that a finger can hit every one on a phone."""
    depth_lists = {tuple(study["depths"]) for study in studies.values()}
    if len(depth_lists) != 1:
        raise ConfigError("studies", sorted(depth_lists), "studies trained at the same depths")
    depths = list(next(iter(depth_lists)))
    panels, shapes = {}, []
    for study in studies.values():
        window = study["history_window"]
        for m in study["slots"]:
            shape = f"d={study['task']['input_dim']}, m={m}"
            shapes.append(shape)
            for L in depths:
                run = study["trained"][shape_key(m, L)]
                curve = _normalised(study, run["history"])
                steps = (np.arange(len(curve)) + 1) * window
                reference = float(reference_samples(study, m)[:, L - 1].mean())
                panels[(shape, L)] = [
                    trained_trace(steps, curve, "batch loss (mean of 25 steps)", mode="lines"),
                    trained_trace([steps[-1]], [run["loss"] / study["null_loss"]],
                                  "test loss after training", color=COLORS["trained2"],
                                  mode="markers", marker={"size": 10}),
                    theory_trace([steps[0], steps[-1]], [reference] * 2,
                                 "reference of the same shape"),
                ]
    base = new_figure(title, "training step", "loss / E[y²]", log_y=True)
    return slider_figure(base, panels, ["study, slots", "depth L"], [shapes, depths])
