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
from nlicl_lib.core.tables import ResultTable
from nlicl_lib.core.tasks import Prompts
from nlicl_lib.experiments.studies import (
    CONVERGED,
    CubicStudy,
    FreeRun,
    FreeSummary,
    budget_pairs,
    converged,
    cubic_study,
    depth_sweep,
    first_test_prompts,
    free_agreement,
    free_stack_from_json,
    free_summaries,
    gd_form_losses,
    load_free_stacks,
    load_studies,
    reference_estimates,
    reference_samples,
    settled,
    shape_key,
    stack_weights,
    trained_estimate,
)
from nlicl_lib.pages.chapter_exercises import (  # noqa: F401  (the page's exercises)
    check_block_step,
    check_depth_beats_one_block,
    check_slot_degree,
    check_wide_block_against_depth,
    wide_against_deep,
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
    "PRINT_WIDTH", "DepthClaims", "budget_table", "construction_report",
    "cubic_construction_report", "cubic_report", "cubic_study", "cubic_values",
    "curves_figure", "depth_claims", "depth_figure", "depth_panel", "depth_sweep",
    "depth_table", "free_last_block_probe", "free_stack_claims", "free_stack_report",
    "gd_steps", "glue", "glue_values", "glu_unit_names", "greedy_reference_report",
    "load_free_stacks", "load_studies", "narrow_wide_ratio", "reference_spread",
    "reference_table", "residual_stream_figure", "shape_key", "show", "show_source",
    "stream_report", "trained_stack_report", "weights_figure",
]

PRINT_WIDTH = 76
"""Width the construction listings wrap to (the page prints at most 78 columns)."""


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


def _side(value: float, error: float, low: float, high: float, within: str) -> str:
    """Where ``value`` ± 2 ``error`` lies against ``[low, high]``."""
    if value + 2 * error < low:
        return "below"
    if value - 2 * error > high:
        return "above"
    return within


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
    lines = [f"block {ell} writes chi_{ell} = ({', '.join(block.names)})"
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


def _sizes(study: dict, trained: bool = True, references: bool = True) -> str:
    """The samples behind a study's intervals, for a table's caption: the trained stacks'
    test samples and/or the references' independent fits."""
    ref = study["references"][str(study["slots"][0])]
    record = next(iter(study["trained"].values()))
    parts = []
    if trained:
        parts.append(f"trained: {study['test_samples']} test samples of "
                     f"{record['loss']['num_prompts'] // study['test_samples']:,} contexts")
    if references:
        parts.append(f"references: {len(ref['loss'])} fits, each on {ref['fit_contexts']:,} "
                     f"fitting and {ref['test_contexts']:,} test contexts")
    return f"± {ERROR_BARS:g} standard errors ({'; '.join(parts)})"


def depth_table(study: dict) -> ResultTable:
    r"""A stored depth study per trained depth $L$: every slot count's trained stack and its
    greedy reference (intervals, :func:`~nlicl_lib.experiments.studies.trained_estimate`,
    :func:`~nlicl_lib.experiments.studies.reference_estimates`), a trained stack neither
    converged nor at its reference marked ``*`` (:func:`~nlicl_lib.experiments.studies.settled`),
    and with two slot
    counts the ratio narrow / wide of the trained stacks with its interval (delta method)."""
    slots = list(study["slots"])
    refs = {m: reference_estimates(study, m) for m in slots}
    header = ["L"]
    for m in slots:
        header += [f"trained, m = {m}", f"reference, m = {m}"]
    if len(slots) == 2:
        header.append(f"trained m = {slots[0]} / m = {slots[1]}")
    rows = []
    for L in study["depths"]:
        row = [str(L)]
        for m in slots:
            mark = "" if settled(study, m, L) else " *"
            trained = trained_estimate(study, m, L)
            row += [f"{_interval(trained)} ({trained.median:.4f}){mark}",
                    _interval(refs[m][L - 1])]
        if len(slots) == 2:
            ratio, error = narrow_wide_ratio(study, L)
            row.append(_rounded(ratio, ERROR_BARS * error))
        rows.append(tuple(row))
    steps = study["training"]["steps"]
    return ResultTable(
        tuple(header), tuple(rows),
        caption=f"Test loss / E[y²] by depth, d = {study['task']['input_dim']}: trained stacks "
                f"({steps} steps) and greedy references, {_sizes(study)}",
        notes=("In brackets: the median of a trained stack's sample means.",
               "* still improving and above its reference: the last doubling of its steps "
               f"lowered the median of its sample means by more than {CONVERGED:.0%}."))


def narrow_wide_ratio(study: dict, depth: int) -> tuple[float, float]:
    r"""Narrow over wide trained loss at ``depth`` and its standard error by the delta method,
    $r\sqrt{(\mathrm{se}_a/a)^2 + (\mathrm{se}_b/b)^2}$ (independent estimates: the two stacks'
    samples are paired on the same contexts, which this leaves out, erring wide)."""
    narrow, wide = (trained_estimate(study, m, depth) for m in study["slots"][:2])
    ratio = narrow.mean / wide.mean
    return ratio, ratio * float(np.hypot(narrow.error / narrow.mean, wide.error / wide.mean))


def reference_table(study: dict) -> ResultTable:
    r"""Every greedy reference of a stored study, per depth: its interval over the independent
    samples (fitting and test contexts), the median of the sample means, how many samples'
    estimates rose from the depth before, and the largest single test context's share of a
    sample's loss."""
    slots = list(study["slots"])
    header = ["L"]
    for m in slots:
        header += [f"m = {m}", "median", "rose in", "largest share"]
    refs = {m: reference_estimates(study, m) for m in slots}
    samples = {m: reference_samples(study, m) for m in slots}
    rose = {m: np.diff(samples[m], axis=1) > 0 for m in slots}
    shares = {m: np.asarray(study["references"][str(m)]["worst_share"]) for m in slots}
    rows = []
    for L in range(1, len(refs[slots[0]]) + 1):
        row = [str(L)]
        for m in slots:
            up = "-" if L == 1 else f"{int(rose[m][:, L - 2].sum())} of {samples[m].shape[0]}"
            row += [_interval(refs[m][L - 1]), f"{refs[m][L - 1].median:.4f}", up,
                    f"{shares[m][:, L - 1].max():.0%}"]
        rows.append(tuple(row))
    return ResultTable(tuple(header), tuple(rows),
                       caption="Greedy references / E[y²]: interval, median of the samples, "
                               "samples whose estimate rose, largest single context's share; "
                               f"{_sizes(study, trained=False)}")


def budget_table(study: dict, narrow: int, wide: int) -> ResultTable:
    """The narrow and wide trained stacks paired at at most the same trained weights, then at
    the same number of features written (:func:`~nlicl_lib.experiments.studies.budget_pairs`),
    with their intervals and which is lower where the intervals separate."""
    rows = []
    for kind in ("weights", "features"):
        for pair in budget_pairs(study, narrow, wide, kind):
            a = trained_estimate(study, narrow, pair.narrow_depth)
            b = trained_estimate(study, wide, pair.wide_depth)
            verdict = (("narrow" if a.mean < b.mean else "wide") if intervals_separate(a, b)
                       else "not separated")
            rows.append((kind, f"L = {pair.narrow_depth} ({pair.narrow_budget})", _interval(a),
                         f"L = {pair.wide_depth} ({pair.wide_budget})", _interval(b), verdict))
    return ResultTable(
        ("budget", f"narrow, m = {narrow}", "loss", f"wide, m = {wide}", "loss", "lower"),
        tuple(rows), caption="Narrow and wide trained stacks at (at most) the same budget, "
                             f"{_sizes(study, references=False)}")


@dataclass(frozen=True)
class DepthClaims:
    r"""What the page says of a stored depth study, recomputed from it (the tests hold it):
    per trained depth, ``wide_vs_narrow``: ``"wide"`` or ``"narrow"`` where the trained stacks'
    intervals separate (the lower one), ``"-"`` where not; ``narrow_vs_reference``,
    ``wide_vs_reference``: ``"below"``, ``"above"`` or ``"-"`` for each trained stack against
    its greedy reference; ``unconverged``: the shapes the last doubling of the steps still
    improved by more than :data:`~nlicl_lib.experiments.studies.CONVERGED`; ``unsettled``: those
    of them above their reference (:func:`~nlicl_lib.experiments.studies.settled`);
    ``narrow_below_single``, ``narrow_below_kernel``: the depths whose narrow stack's interval
    lies wholly below the best single block with its slots, and below the best single block of
    any size; ``budget_wins``: per budget, the (narrow depth, wide depth) pairs the narrow stack
    wins with separated intervals, ``budget_losses``: those the wide stack wins; ``cost``: the
    narrow / wide ratio and its standard error at the depths where the wide stack is lower."""

    depths: tuple[int, ...]
    wide_vs_narrow: tuple[str, ...]
    narrow_vs_reference: tuple[str, ...]
    wide_vs_reference: tuple[str, ...]
    unconverged: tuple[str, ...]
    unsettled: tuple[str, ...]
    narrow_below_single: tuple[int, ...]
    narrow_below_kernel: tuple[int, ...]
    budget_wins: dict[str, tuple[tuple[int, int], ...]]
    budget_losses: dict[str, tuple[tuple[int, int], ...]]
    cost: dict[int, tuple[float, float]]


def _order(a: LossEstimate, b: LossEstimate, lower: str, higher: str) -> str:
    if not intervals_separate(a, b):
        return "-"
    return lower if a.mean < b.mean else higher


def depth_claims(study: dict) -> DepthClaims:
    """:class:`DepthClaims` of a stored study with two slot counts (narrow first)."""
    narrow, wide = study["slots"][:2]
    depths = tuple(study["depths"])
    null = study["null_loss"]
    refs = {m: reference_estimates(study, m) for m in (narrow, wide)}
    trained = {m: {L: trained_estimate(study, m, L) for L in depths} for m in (narrow, wide)}
    versus = tuple(_order(trained[wide][L], trained[narrow][L], "wide", "narrow") for L in depths)
    single = study["single_block"][str(narrow)] / null if narrow < study["p2"] else -np.inf
    kernel = study["kernel_optimum"] / null
    wins, losses = {}, {}
    for kind in ("weights", "features"):
        verdicts = {(p.narrow_depth, p.wide_depth): _order(trained[narrow][p.narrow_depth],
                                                          trained[wide][p.wide_depth], "n", "w")
                    for p in budget_pairs(study, narrow, wide, kind)}
        wins[kind] = tuple(pair for pair, v in verdicts.items() if v == "n")
        losses[kind] = tuple(pair for pair, v in verdicts.items() if v == "w")
    return DepthClaims(
        depths, versus,
        tuple(_order(trained[narrow][L], refs[narrow][L - 1], "below", "above") for L in depths),
        tuple(_order(trained[wide][L], refs[wide][L - 1], "below", "above") for L in depths),
        tuple(shape_key(m, L) for m in (narrow, wide) for L in depths
              if not converged(study, m, L)),
        tuple(shape_key(m, L) for m in (narrow, wide) for L in depths
              if not settled(study, m, L)),
        tuple(L for L in depths if trained[narrow][L].interval[1] < single),
        tuple(L for L in depths if trained[narrow][L].interval[1] < kernel),
        wins, losses,
        {L: narrow_wide_ratio(study, L) for L, v in zip(depths, versus, strict=True)
         if v == "wide"})


# ---------------------------------------------------------------------------------------------
# the stored free stacks


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
    standard errors). Then $\rho_\ell$ of the blocks $\ell < L$ of every run of depth $L \ge 2$."""
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
    r"""A power of ten at or above the largest $|1 - \rho_\ell|$ of the stored GD-form stacks
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
    ``reach_agreement``: the lowest and highest $\rho_\ell$ ($\ell < L$) of the runs that reach,
    as ``(value, standard error)``, ``reach_below_one``: each such $\rho_\ell$ is below 1 by more
    than 2 standard errors; ``lowest_agreement``: the lowest $\rho_\ell$ of any run and whether
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


# ---------------------------------------------------------------------------------------------
# the cubic study


def cubic_report(study: CubicStudy) -> str:
    """The cubic study's table: the trained stacks of one and two blocks and the reference
    (± two standard errors), the exact loss of the trained block, and the two one-step optima."""
    one, two = study.keys
    null, sweep, reference = study.null_loss, study.sweep, study.reference
    lines = [f"cubic task: 2 stacks, {study.train_config.steps} steps of "
             f"{study.train_config.batch_size} prompts in {sweep.seconds:.1f} s"]
    for name, value, error in [
            ("trained, L = 1", sweep.loss[one], sweep.std_error[one]),
            ("trained, L = 2", sweep.loss[two], sweep.std_error[two]),
            ("greedy reference, L = 2", reference.loss[1], reference.std_error[1])]:
        lines.append(f"  {name:24s} {value / null:.4f} ± {ERROR_BARS * error / null:.4f}")
    lines += [f"  one trained block, exact: {sweep.exact[one] / null:.4f}",
              f"best single block, any m (x and quadratics): {study.one_block / null:.4f}",
              f"one GD step on all {study.all_monomials} monomials of degree ≤ 3: "
              f"{study.all_features / null:.4f}"]
    return "\n".join(lines)


def cubic_values(study: CubicStudy) -> dict[str, str]:
    """Where the page's cubic sentences place the trained two-block stack and the greedy
    reference (their intervals, :data:`~nlicl_lib.training.evaluate.ERROR_BARS` standard
    errors): against the best single block (``cubic_two_vs_one``) and against one GD step on
    all monomials (``cubic_trained_vs_all``, ``cubic_reference_vs_all``)."""
    _, two = study.keys
    sweep, reference = study.sweep, study.reference

    def side(value: float, error: float, line: float) -> str:
        return _side(value, error, line, line, "within two standard errors of")

    return {
        "cubic_two_vs_one": side(sweep.loss[two], sweep.std_error[two], study.one_block),
        "cubic_trained_vs_all": side(sweep.loss[two], sweep.std_error[two], study.all_features),
        "cubic_reference_vs_all": side(reference.loss[1], reference.std_error[1],
                                       study.all_features),
    }


# ---------------------------------------------------------------------------------------------
# figures


def residual_stream_figure(residuals: StreamResiduals) -> go.Figure:
    r"""For each stack (slider "depth-L stack") and block $\ell = 0, \dots, L$ (slider "after
    block ℓ"): the labels $y_i$, the stream's label entries (filled markers) and
    $y_i - \hat y_\ell(x_i)$ (open circles) against the context index $i$, Theorem 13
    (thm-depth-bcd); it opens after block 1, where the stream first holds residuals. Every
    stack needs the same $L$ and $n$."""
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
                         [names, list(range(blocks))], initial=(names[0], min(1, blocks - 1)))


def _normalised(study: dict, values: Iterable[float]) -> list[float]:
    return [float(v) / study["null_loss"] for v in values]


def reference_spread(study: dict, m: int) -> tuple[list[int], np.ndarray, np.ndarray,
                                                    np.ndarray]:
    """The greedy reference with ``m`` slots per depth, normalised: its mean over the
    independent samples and the ends of its interval (the figures' error bars)."""
    estimates = reference_estimates(study, m)
    return (list(range(1, len(estimates) + 1)), np.array([e.mean for e in estimates]),
            np.array([e.interval[0] for e in estimates]),
            np.array([e.interval[1] for e in estimates]))


def _trace_pairs(study: dict, x_of: Callable[[int, int], float]) -> list[go.Scatter]:
    """Per slot count: the trained stacks and their reference, with their intervals."""
    traces = []
    for index, m in enumerate(study["slots"]):
        color = PALETTE[index]
        depths = list(study["depths"])
        runs = [trained_estimate(study, m, L) for L in depths]
        traces.append(trained_trace([x_of(m, L) for L in depths], [r.mean for r in runs],
                                    f"trained, m = {m} slots", color=color,
                                    error_y=[ERROR_BARS * r.error for r in runs]))
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
                reference = reference_estimates(study, m)[L - 1].mean
                panels[(shape, L)] = [
                    trained_trace(steps, curve, "batch loss (mean of 25 steps)", mode="lines"),
                    trained_trace([steps[-1]], [run["loss"]["mean"] / study["null_loss"]],
                                  "test loss after training", color=COLORS["trained2"],
                                  mode="markers", marker={"size": 10}),
                    theory_trace([steps[0], steps[-1]], [reference] * 2,
                                 "reference of the same shape"),
                ]
    base = new_figure(title, "training step", "loss / E[y²]", log_y=True)
    return slider_figure(base, panels, ["study, slots", "depth L"], [shapes, depths])
