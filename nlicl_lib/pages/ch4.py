r"""Chapter 4 ("How big must one block be?"): the single GLU-LSA blocks it trains over slots $m$
and GLU widths $h$, its tables, the values its prose quotes and its figures. Every trained block
is set next to the exact best block of its size (:mod:`nlicl_lib.theory.capacity`).

Each trained block's test loss is exact: the loss of Theorem 9 (thm-feature-optimum),

$$\mathcal L(\Gamma) = \operatorname{tr}(\Gamma^\top T \Gamma B)
 - 2 \operatorname{tr}(\Gamma^\top C C^\top) + \operatorname{tr} S,$$

at the block's own $\Gamma$ and features $\psi = (x; s(x))$, and it is compared with the best loss
of a block of its size, $\mathcal L^*_m = \min_{V \subseteq \mathcal Q_2,\ \dim V \le m}
\mathcal L^*\big((x; V)\big)$ (Proposition 12 (prop-capacity)). The ratios trained / best are
$\ge 1$ up to the optimiser. Tables and figures show every loss over $\mathbb E[y^2]$.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from nlicl_lib.core.device import DeviceLike
from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import monomial_count, monomial_name
from nlicl_lib.core.tables import ResultTable
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.studies import (
    DEAD_USAGE,
    load_full_blocks,  # noqa: F401  (the page's stored runs)
)
from nlicl_lib.pages.chapter_exercises import (  # noqa: F401  (the page's exercises)
    check_block_size,
    check_fourth_slot_gain,
    check_one_slot_feature,
    check_slot_count,
    check_slots_for_degree_three,
)
from nlicl_lib.pages.display import glue, glue_values, show  # noqa: F401  (the page's display)
from nlicl_lib.pages.panels import block_size_panel  # noqa: F401  (the page's live panel)
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
from nlicl_lib.theory.capacity import (
    SLOT_DIRECTIONS,
    BlockOptimum,
    OneBlockReferences,
    best_coordinate_subset,
    best_feature_subspace,
    best_glu_features,
    check_capacity_task,
    degree_two_bound,
    required_embedding,
    slot_increments,
    slot_path,
    width_path,
)
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.theory.values import exact_model_loss
from nlicl_lib.training.train import TrainConfig, train

# --- the runs: blocks of every size, trained together --------------------------------------------


@dataclass
class CapacitySweep:
    r"""Single blocks trained over a range of slots $m$ (width $h = \max(m, p_2)$, so only the
    slots limit them) and of widths $h$ ($m = \max(h, p_2)$), with their references.

    ``slots_loss[m]``, ``width_loss[h]``: exact test losses of the trained blocks;
    ``subspace[m]``: :func:`best_feature_subspace`; ``coordinate[m]``:
    :func:`best_coordinate_subset`; ``glu[h]``: :func:`best_glu_features`;
    ``history[("slots", m)]`` and ``history[("width", h)]``: batch losses. All unnormalised.
    """

    task: TaskConfig
    slot_values: list[int]
    width_values: list[int]
    slots_loss: dict[int, float]
    width_loss: dict[int, float]
    subspace: dict[int, BlockOptimum]
    coordinate: dict[int, BlockOptimum]
    glu: dict[int, BlockOptimum]
    history: dict[tuple[str, int], np.ndarray]
    seconds: float
    device: str
    models: dict[tuple[str, int], object]


def _shapes(slot_values: Iterable[int], width_values: Iterable[int], p2: int
            ) -> dict[tuple[str, int], tuple[int, int]]:
    """``(slots m, width h)`` of each block: ``("slots", m)`` has $h = \\max(m, p_2)$,
    ``("width", h)`` has $m = \\max(h, p_2)$."""
    shapes = {("slots", m): (m, max(m, p2)) for m in slot_values}
    shapes.update({("width", h): (max(h, p2), h) for h in width_values})
    return shapes


def _train_blocks(task: TaskConfig, shapes: list[tuple[int, int]], train_config: TrainConfig,
                  device: DeviceLike, progress: bool | None
                  ) -> tuple[dict[tuple[int, int], object], dict[tuple[int, int], object], float]:
    """One block per ``(slots, width)`` of ``shapes``, trained at once on the same prompts
    (:func:`~nlicl_lib.training.train.train`; each keeps its own steps): the models, their
    training records and the wall time."""
    models = [build_model(ModelConfig(kind="glu-lsa", feature_slots=m, glu_width=h), task, device,
                          seed=train_config.seed) for m, h in shapes]
    start = time.perf_counter()
    results = train(models, task, train_config, device, progress)
    seconds = time.perf_counter() - start
    return dict(zip(shapes, models, strict=True)), dict(zip(shapes, results, strict=True)), seconds


def capacity_sweep(task: TaskConfig, slot_values: Iterable[int], width_values: Iterable[int],
                   train_config: TrainConfig, device: DeviceLike = "cpu",
                   progress: bool | None = None) -> CapacitySweep:
    r"""Train every single block of the two sweeps at once on the same prompts (a block in both
    sweeps is trained once) and compute its references."""
    check_capacity_task(task)
    p2 = monomial_count(task.input_dim, 2)
    slot_values = [check_int("slots", m, minimum=1) for m in slot_values]
    width_values = [check_int("width", h, minimum=1) for h in width_values]
    shapes = _shapes(slot_values, width_values, p2)
    trained, results, seconds = _train_blocks(task, sorted(set(shapes.values())), train_config,
                                              device, progress)
    models = {key: trained[shape] for key, shape in shapes.items()}
    losses = {key: exact_model_loss(model, task) for key, model in models.items()}
    return CapacitySweep(
        task, slot_values, width_values,
        {m: losses[("slots", m)] for m in slot_values},
        {h: losses[("width", h)] for h in width_values},
        {m: best_feature_subspace(task, m) for m in slot_values},
        {m: best_coordinate_subset(task, m) for m in slot_values},
        {h: best_glu_features(task, max(h, p2), h) for h in width_values},
        {key: results[shape].loss_history for key, shape in shapes.items()},
        seconds, next(iter(results.values())).device, models,
    )


@dataclass(frozen=True)
class SaturationCurve:
    r"""One input dimension $d$ of :func:`saturation_sweep`, every loss over ``null_loss``
    $= \mathbb E[y^2]$.

    ``slot_loss[m]``: the best loss $\mathcal L^*_m$ of one block with $m$ slots and width
    $h = \max(m, p_2)$, $m = 0, \dots, p_2 + $ ``beyond``; ``width_loss[h]``: that of one block
    with $h$ units and $m = \max(h, p_2)$ slots ($h = 0$: no slots); ``kernel``:
    $\mathcal L^*((x; \phi_2))$; ``linear``: $\mathcal L^*(x)$; ``trained_slots[m]`` and
    ``trained_widths[h]``: the exact test losses of trained blocks of those sizes.
    """

    task: TaskConfig
    p2: int
    slot_loss: dict[int, float]
    width_loss: dict[int, float]
    kernel: float
    linear: float
    null_loss: float
    trained_slots: dict[int, float]
    trained_widths: dict[int, float]

    def trained_ratios(self) -> list[float]:
        """Each trained block's loss over the best loss of its size (slots, then widths)."""
        return ([self.trained_slots[m] / self.slot_loss[m] for m in self.trained_slots]
                + [self.trained_widths[h] / self.width_loss[h] for h in self.trained_widths])

    def units_match_from(self, rel: float = 1e-9) -> int:
        r"""The smallest $h \ge 1$ from which $h$ units (and $p_2$ slots) do as well as $h$ slots
        (and $p_2$ units), to ``rel``, at every larger size in the sweep."""
        sizes = [h for h in self.width_loss if h >= 1]
        close = {h: abs(self.width_loss[h] - self.slot_loss[h]) <= rel * self.slot_loss[h]
                 for h in sizes}
        return min(h for h in sizes if all(close[g] for g in sizes if g >= h))


@dataclass(frozen=True)
class SaturationSweep:
    r"""``curves[d]``: a :class:`SaturationCurve` per input dimension; the seconds spent on the
    exact references and on training, and the device the blocks trained on."""

    curves: dict[int, SaturationCurve]
    reference_seconds: float
    train_seconds: float
    device: str


def saturation_sweep(input_dims: Sequence[int], context_lengths: Sequence[int],
                     train_config: TrainConfig | None,
                     trained_sizes: Callable[[int], Iterable[int]] | None = None,
                     beyond: int = 2, restarts: int = 1, seed: int = 0,
                     device: DeviceLike = "cpu", progress: bool | None = None) -> SaturationSweep:
    r"""The best single-block loss against the slots $m$ and against the GLU width $h$ for each
    input dimension $d$ (the quadratic task, $n$ = ``context_lengths[k]``), with trained blocks
    at a few sizes (Proposition 12 (prop-capacity)):

    $$\mathcal L^*_m = \min_{V \subseteq \mathcal Q_2,\ \dim V \le m} \mathcal L^*\big((x; V)\big),
    \qquad \mathcal L^*_0 = \mathcal L^*(x), \qquad \mathcal L^*_m = \mathcal L^*\big((x; \phi_2)\big)
    \text{ for } m \ge p_2,$$

    for $m = 0, \dots, p_2 +$ ``beyond`` (:func:`~nlicl_lib.theory.capacity.slot_path`), and
    the same for $h$ units writing $p_2$ slots (:func:`~nlicl_lib.theory.capacity.width_path`):
    each size starts from the previous one's optimum, with ``restarts`` random starts, no
    enumeration of subsets. ``trained_sizes(p2)`` (default $1$, $\lceil p_2/2 \rceil$, $p_2$)
    lists the sizes trained in both sweeps; the blocks of one $d$ train together under
    ``train_config`` (``None``: the references only)."""
    dims = [check_int("d", d, minimum=1) for d in input_dims]
    lengths = [check_int("context length", n, minimum=1) for n in context_lengths]
    if len(lengths) != len(dims):
        raise ConfigError("context_lengths", lengths, f"one context length per d ({len(dims)})")
    if trained_sizes is None:
        trained_sizes = lambda p2: (1, (p2 + 1) // 2, p2)  # noqa: E731
    curves, reference_seconds, train_seconds, device_name = {}, 0.0, 0.0, str(device)
    for d, n in zip(dims, lengths, strict=True):
        task = TaskConfig(kind="poly", input_dim=d, context_length=n, degree=2)
        p2 = monomial_count(d, 2)
        start = time.perf_counter()
        linear = best_coordinate_subset(task, 0)
        kernel = best_coordinate_subset(task, p2)
        slots = {0: linear, **slot_path(task, restarts, seed)}
        widths = {0: linear, **width_path(task, restarts, seed)}
        top = list(range(p2, p2 + beyond + 1))
        slots.update({m: kernel for m in top})
        widths.update({h: kernel for h in top})
        reference_seconds += time.perf_counter() - start
        norm = linear.null_loss
        sizes = [] if train_config is None else sorted(
            {check_int("trained size", v, minimum=1) for v in trained_sizes(p2)})
        shapes = _shapes(sizes, sizes, p2)
        unique = sorted(set(shapes.values()))
        trained = {}
        if unique:
            models, results, seconds = _train_blocks(task, unique, train_config, device, progress)
            train_seconds += seconds
            device_name = next(iter(results.values())).device
            trained = {shape: float(exact_model_loss(model, task) / norm)
                       for shape, model in models.items()}
        curves[d] = SaturationCurve(
            task, p2, {m: float(slots[m].loss / norm) for m in sorted(slots)},
            {h: float(widths[h].loss / norm) for h in sorted(widths)},
            float(kernel.loss / norm), float(linear.loss / norm), float(norm),
            {v: trained[shapes[("slots", v)]] for v in sizes},
            {v: trained[shapes[("width", v)]] for v in sizes})
    return SaturationSweep(curves, reference_seconds, train_seconds, device_name)


# --- the full blocks trained long (stored) ------------------------------------------------------


def _alive_and_dead(entry: dict) -> tuple[list[dict], list[dict]]:
    """The runs of one $d$ of the stored full blocks that use every direction, and the others."""
    return ([r for r in entry["runs"] if not r["dead"]], [r for r in entry["runs"] if r["dead"]])


def _ratio_range(values: Sequence[float]) -> str:
    values = sorted(values)
    if not values:
        return "-"
    return f"{values[0]:.4f}" if values[0] == values[-1] else f"{values[0]:.4f}-{values[-1]:.4f}"


def full_block_table(full: dict) -> ResultTable:
    r"""The stored full blocks (:func:`~nlicl_lib.experiments.studies.run_full_blocks`): per $d$,
    the best block one slot short, $\mathcal L^*_{p_2-1} / \mathcal L^*_{p_2}$, and the runs that use every
    direction and those with a dead one, their exact loss over the kernel optimum
    $\mathcal L^*_{p_2} = \mathcal L^*((x; \phi_2))$ and, for the latter, the best loss on the
    directions they use (over $\mathcal L^*_{p_2}$ too)."""
    rows = []
    for d, entry in full["tasks"].items():
        runs = entry["runs"]
        alive, dead = _alive_and_dead(entry)
        rows.append((d, str(entry["p2"]), f"{entry['one_short']:.4f}",
                     f"{len(alive)} of {len(runs)}", _ratio_range([r["ratio"] for r in alive]),
                     f"{len(dead)} of {len(runs)}", _ratio_range([r["ratio"] for r in dead]),
                     _ratio_range([r["used_ratio"] for r in dead])))
    steps = next(iter(full["tasks"].values()))["training"]["steps"]
    return ResultTable(
        ("d", "p2", "one slot short", "every direction used", "loss / optimum",
         "a direction dead", "loss / optimum", "best on the used directions"),
        tuple(rows),
        caption=f"Full blocks (m = h = p2) after {steps} steps, one run per seed: exact loss "
                "over the kernel optimum")


def full_block_values(full: dict) -> dict[str, float | int]:
    r"""Glued by the page: the seeds (``full_seeds``) and steps (``full_steps``) of the stored
    full blocks; per $d$ the runs that use every direction (``alive_d{d}``); ``plateau_gap``:
    the largest gap between a run with a dead direction and the best loss on the directions it
    uses, over that best loss; ``dead_strength``: the largest strength of a lost direction
    relative to the strongest direction of its GLU."""
    entry = next(iter(full["tasks"].values()))
    values: dict[str, float | int] = {"full_seeds": full["seeds"],
                                      "full_steps": entry["training"]["steps"]}
    gaps, strengths = [], []
    for d, entry in full["tasks"].items():
        alive, dead = _alive_and_dead(entry)
        values[f"alive_d{d}"] = len(alive)
        gaps += [r["ratio"] / r["used_ratio"] - 1 for r in dead]
        strengths += [r["strengths"][-1] for r in dead]
    values["plateau_gap"] = max(gaps, default=float("nan"))
    values["dead_strength"] = max(strengths, default=float("nan"))
    return values


@dataclass(frozen=True)
class FullBlockClaims:
    r"""What the page says of the stored full blocks, recomputed (the tests hold it):
    ``alive_below_short``: every run that uses all its directions ends below the best block one
    slot short, so it shows the last slot; ``dead_counts``: how many directions the other runs
    lost; ``dead_cross_only``: each lost direction is a combination of cross terms $x_jx_k$
    (the squares hold under 1% of its squared coefficients); ``dead_weakest``: it is the direction
    the GLU writes most weakly; ``used_is_one_short``: the best step on the directions each such
    run uses is the best block one slot short, $\mathcal L^*_{p_2-1}$ (item 5's staircase, one step up)."""

    alive_below_short: bool
    dead_counts: frozenset[int]
    dead_cross_only: bool
    dead_weakest: bool
    used_is_one_short: bool


def full_block_claims(full: dict, tolerance: float = 1e-3) -> FullBlockClaims:
    """:class:`FullBlockClaims` of the stored full blocks; ``tolerance``: relative, for "the best
    step on the used directions is the best block one slot short"."""
    below, counts, cross_only, weakest, one_short = True, set(), True, True, True
    for entry in full["tasks"].values():
        squares = [k for k, name in enumerate(entry["monomials"]) if "^2" in name]
        alive, dead = _alive_and_dead(entry)
        below &= all(r["ratio"] < entry["one_short"] for r in alive)
        for r in dead:
            counts.add(len(r["dead"]))
            for row in np.asarray(r["dead"]) ** 2:
                cross_only &= bool(row[squares].sum() < 0.01 * row.sum())
            usage = np.asarray(r["usage"])
            weakest &= bool(usage[-1] <= DEAD_USAGE and np.all(usage[:-1] > DEAD_USAGE))
            one_short &= abs(r["used_ratio"] / entry["one_short"] - 1) < tolerance
    return FullBlockClaims(below, frozenset(counts), cross_only, weakest, one_short)


# --- the tables and the values the prose quotes ---------------------------------------------------

GAP_FROM = 3
"""From this many slots (units) on the page compares the best monomials (units) with the best
span: below it the best span ($\\|x\\|^2$ first) is strictly better."""


def best_single_slot(references: OneBlockReferences) -> str:
    r"""The best one-slot feature $s(x) = c^\top\phi_2(x)$, scaled so that its largest
    coefficient is 1 (e.g. ``"1.00 x1^2 + 1.00 x2^2 + 1.00 x3^2"``)."""
    features = references.subspace[1].features
    coefficients = features.coefficients[0]
    coefficients = coefficients / coefficients[np.abs(coefficients).argmax()]
    terms = zip(coefficients, features.exponents, strict=True)
    return " + ".join(f"{c:.2f} {monomial_name(a)}" for c, a in terms if abs(c) > 1e-6)


def references_report(references: OneBlockReferences) -> str:
    """The page's table: best loss / E[y²] against $m$ (span, monomials) and $h$ (units)."""
    r, norm = references, references.normaliser
    lines = [f"E[y^2] = {norm:.0f}; references computed in {r.seconds:.1f} s\n",
             "best loss / E[y^2] with m slots (best span, best monomials) or h units:",
             " m, h  span    monomials  units   the best monomials"]
    for m in range(r.p2 + 1):
        unit_loss = f"{r.units[m].loss / norm:.4f}" if m in r.units else "  -"
        names = ", ".join(r.coordinate[m].features.names or ()) or "(none: x only)"
        lines.append(f" {m}     {r.subspace[m].loss / norm:.4f}  "
                     f"{r.coordinate[m].loss / norm:.4f}"
                     f"     {unit_loss:6s}  {names}")
    lines.append("\nbest single slot: " + best_single_slot(r))
    return "\n".join(lines)


def _gap_text(references: OneBlockReferences, losses: dict[int, BlockOptimum]) -> str:
    r"""``"equal"`` when ``losses[m]`` equals the best span's for every $m \ge$ :data:`GAP_FROM`,
    otherwise the largest difference as a share of $\mathbb E[y^2]$."""
    gap = max(abs(losses[m].loss - references.subspace[m].loss)
              for m in range(GAP_FROM, references.p2 + 1)) / references.normaliser
    return "equal" if gap == 0 else f"equal to {gap:.0e} of E[y²]"


def references_values(references: OneBlockReferences) -> dict[str, float | int | str]:
    """Glued by the page: the values its prose quotes from the table of best blocks."""
    r, norm = references, references.normaliser
    return {
        "kernel_norm": r.kernel / norm,
        "linear_norm": r.linear / norm,
        "one_slot_span": r.subspace[1].loss / norm,
        "one_slot_monomial": r.coordinate[1].loss / norm,
        "one_unit": r.units[1].loss / norm,
        "p2": r.p2,
        "monomial_gap": _gap_text(r, r.coordinate),
        "unit_gap": _gap_text(r, r.units),
    }


def short_context_values(input_dim: int = 5, context_length: int = 20) -> dict[str, float]:
    r"""Glued by the page: the kernel optimum $\mathcal L^*((x; \phi_2))$ and linear GD's
    $\mathcal L^*(x)$, over $\mathbb E[y^2]$, of the quadratic task with ``input_dim`` $d$ and
    ``context_length`` $n$, as ``kernel_d{d}_n{n}`` and ``linear_d{d}_n{n}``."""
    task = TaskConfig(kind="poly", input_dim=input_dim, context_length=context_length, degree=2)
    key = f"d{input_dim}_n{context_length}"
    return {f"kernel_{key}": best_coordinate_subset(task, monomial_count(input_dim, 2))
            .normalised_loss,
            f"linear_{key}": best_coordinate_subset(task, 0).normalised_loss}


def embedding_table(input_dims: Sequence[int], degrees: Sequence[int]) -> str:
    r"""For each $d$ and $k$: $p_k$, the slots $p_2 + \dots + p_k$, the token size $D$ and the
    entries of $\Gamma$ (:func:`~nlicl_lib.theory.capacity.required_embedding`)."""
    lines = ["a token holding every monomial of degree 2..k (if a GLU wrote them):",
             "  d  k      p_k  p2+..+pk        D     Gamma entries"]
    for d in input_dims:
        for k in degrees:
            r = required_embedding(d, k)
            lines.append(f"{d if k == degrees[0] else '':>3}  {k}  {r.monomials:7,d}  "
                         f"{r.slots:8,d}  {r.token_dim:7,d}  {r.gamma_entries:16,d}")
    return "\n".join(lines)


def embedding_values(cubic_task: TaskConfig) -> dict[str, float | int]:
    r"""Glued by the page: the slots for $d = 10$, $k = 3$ and $k = 4$, and the degree-2 bound
    of ``cubic_task`` over $\mathbb E[y^2]$ (Proposition 12 (prop-capacity), item 4)."""
    return {"slots_d10_k3": required_embedding(10, 3).slots,
            "slots_d10_k4": required_embedding(10, 4).slots,
            "cubic_bound": degree_two_bound(cubic_task) / null_loss(cubic_task)}


def distinct_blocks(sweep: CapacitySweep) -> int:
    """The number of blocks trained: a size in both sweeps ($m = h$) is trained once."""
    return len(set(map(id, sweep.models.values())))


def sweep_report(sweep: CapacitySweep, train_config: TrainConfig, normaliser: float) -> str:
    r"""The page's table of the slot and width sweeps: trained / reference loss over
    $\mathbb E[y^2]$ = ``normaliser`` for each size."""
    lines = [f"{distinct_blocks(sweep)} distinct blocks, {train_config.steps} steps of "
             f"{train_config.batch_size} prompts,\ntrained together in {sweep.seconds:.1f} s on "
             f"{sweep.device}\n",
             "loss / E[y^2] of one block, trained / reference:",
             " size   m slots (h = max(m, p2))   h units (m = max(h, p2))"]
    for m, h in zip(sweep.slot_values, sweep.width_values, strict=True):
        lines.append(f"  {m}     {sweep.slots_loss[m] / normaliser:.4f} / "
                     f"{sweep.subspace[m].loss / normaliser:.4f}"
                     f"            {sweep.width_loss[h] / normaliser:.4f} / "
                     f"{sweep.glu[h].loss / normaliser:.4f}")
    return "\n".join(lines)


def sweep_ratios(sweep: CapacitySweep) -> list[float]:
    r"""Trained loss over the best loss of its size: every slot count, then every width."""
    return ([sweep.slots_loss[m] / sweep.subspace[m].loss for m in sweep.slot_values]
            + [sweep.width_loss[h] / sweep.glu[h].loss for h in sweep.width_values])


def sweep_values(sweep: CapacitySweep, references: OneBlockReferences) -> dict[str, float | int]:
    r"""Glued by the page: the smallest and largest trained / best ratio, the block with
    $m = p_2$ slots over the kernel optimum $\mathcal L^*((x; \phi_2))$, the training seconds and
    the number of distinct blocks."""
    ratios = sweep_ratios(sweep)
    return {"min_ratio": min(ratios), "max_ratio": max(ratios),
            "all_slots_ratio": sweep.slots_loss[references.p2] / references.kernel,
            "train_seconds": sweep.seconds, "distinct_blocks": distinct_blocks(sweep)}


def saturation_report(saturation: SaturationSweep) -> str:
    r"""The page's table of :func:`saturation_sweep`: for each $d$ (with its $n$ and $p_2$) and
    each trained size, trained / best loss over $\mathbb E[y^2]$ with slots and with units."""
    lines = [f"references {saturation.reference_seconds:.1f} s, blocks trained "
             f"{saturation.train_seconds:.1f} s\n",
             "loss / E[y^2] of one block, trained / best of its size:",
             " d   n  p2  size  m slots, h = max(m, p2)  h units, m = max(h, p2)"]
    for d, c in saturation.curves.items():
        for k, v in enumerate(c.trained_slots):
            lead = f"{d:2d}  {c.task.context_length:2d}  {c.p2:2d}" if k == 0 else " " * 10
            lines.append(f"{lead}  {v:4d}  {c.trained_slots[v]:.4f} / {c.slot_loss[v]:.4f}"
                         f"        {c.trained_widths[v]:.4f} / {c.width_loss[v]:.4f}")
    return "\n".join(lines)


def saturation_values(saturation: SaturationSweep) -> dict[str, float | str]:
    r"""Glued by the page: the range of trained / best ratios (``part_max_ratio``: the largest
    among the blocks with fewer than $p_2$ slots or units); per $d$ the kernel optimum, the
    best block one slot short of $p_2$ and the trained full block over it;
    ``full_above_short``: the $d$ at which the trained full block ($m = h = p_2$) is above the
    best block with $p_2 - 1$ slots; ``units_match``: the width from which $h$ units do as well
    as $h$ slots (``"h = d"`` when that is $d$ for every $d$, Proposition 12 (prop-capacity),
    item 1)."""
    curves = saturation.curves
    ratios = [r for c in curves.values() for r in c.trained_ratios()]
    part = [trained[v] / best[v] for c in curves.values()
            for trained, best in [(c.trained_slots, c.slot_loss), (c.trained_widths, c.width_loss)]
            for v in trained if v < c.p2]
    values: dict[str, float | str] = {"sat_min_ratio": min(ratios), "sat_max_ratio": max(ratios),
                                      "part_max_ratio": max(part, default=float("nan"))}
    for d, c in curves.items():
        values[f"kernel_d{d}"] = c.kernel
        values[f"short_d{d}"] = c.slot_loss[c.p2 - 1] / c.kernel
        values[f"full_d{d}"] = c.trained_slots[c.p2] / c.kernel
    above = [d for d, c in curves.items() if c.trained_slots[c.p2] > c.slot_loss[c.p2 - 1]]
    values["full_above_short"] = (" and ".join(f"d = {d}" for d in above) if above
                                  else "none of these d")
    first = [c.units_match_from() for c in curves.values()]
    values["units_match"] = "h = d" if first == list(curves) else f"h = {first}"
    return values


def increment_report(saturation: SaturationSweep) -> str:
    r"""The page's table of the drops of $\mathcal L^*_m / \mathbb E[y^2]$ per slot for each $d$, from
    the closed form of Proposition 12 (prop-capacity), item 5
    (:func:`~nlicl_lib.theory.capacity.slot_increments`): each kind of direction with its drop
    and how many slots of that kind there are."""
    lines = ["drop of the best loss / E[y^2] per slot (closed form), x how many slots:",
             " d   n  p2" + "".join(f"{name.split(' of ')[0]:>16s}" for name in SLOT_DIRECTIONS)]
    for d, c in saturation.curves.items():
        closed = slot_increments(c.task)
        cells = [f"{closed.groups[name][0] / closed.null_loss:.4f} x {closed.groups[name][1]:2d}"
                 if name in closed.groups else "-" for name in SLOT_DIRECTIONS]
        lines.append(f"{d:2d}  {c.task.context_length:2d}  {c.p2:2d}"
                     + "".join(f"{cell:>16s}" for cell in cells))
    return "\n".join(lines)


INCREMENT_KEYS = dict(zip(SLOT_DIRECTIONS, ("norm_drop", "square_drop", "cross_drop"), strict=True))
"""The prose name of each kind of slot's drop of $\\mathcal L^*_m$ (followed by ``_d{d}``)."""


def increment_values(saturation: SaturationSweep) -> dict[str, float | str]:
    r"""Glued by the page: for each $d$, the drop of $\mathcal L^*_m / \mathbb E[y^2]$ per slot of each
    kind, $\lambda / \mathbb E[y^2]$ (Proposition 12 (prop-capacity), item 5):
    ``norm_drop_d{d}`` ($\|x\|^2$), ``square_drop_d{d}`` (a contrast of the squares),
    ``cross_drop_d{d}`` (a cross term); ``increment_order``: the kinds by decreasing drop;
    ``closed_form_gap``: the largest $|\mathcal L^*_m - \mathcal L^{*,\rm closed}_m| / \mathbb E[y^2]$ between
    the L-BFGS curve and the closed form, over every $d$ and $m$."""
    values: dict[str, float | str] = {}
    orders, gap = set(), 0.0
    for d, c in saturation.curves.items():
        closed = slot_increments(c.task)
        for name, (increment, *_) in closed.groups.items():
            values[f"{INCREMENT_KEYS[name]}_d{d}"] = increment / closed.null_loss
        orders.add(closed.order)
        gap = max(gap, *(abs(loss - closed.loss(m) / closed.null_loss)
                         for m, loss in c.slot_loss.items()))
    values["increment_order"] = (" > ".join(max(orders, key=len)) if len(orders) == 1
                                 else "different at each d")
    values["closed_form_gap"] = gap
    return values


# --- the figures ------------------------------------------------------------------------------

KINDS = ["slots m", "width h"]
"""The two sweeps of a slider: block size by slots $m$ (width $\\max(m, p_2)$) or by GLU width
$h$ (slots $\\max(h, p_2)$)."""

SMOOTHING_STEPS = 20
"""Steps in the running mean of :func:`training_curves_figure`'s batch losses."""


def _sweep_panel(sweep: CapacitySweep, references: OneBlockReferences, kind: str
                 ) -> list[go.Scatter]:
    norm, kernel, linear, p2 = (references.normaliser, references.kernel, references.linear,
                                references.p2)
    slots = kind == KINDS[0]
    values = sweep.slot_values if slots else sweep.width_values
    trained = sweep.slots_loss if slots else sweep.width_loss
    best = ({m: sweep.subspace[m].loss for m in values} if slots
            else {h: sweep.glu[h].loss for h in values})
    traces = [
        trained_trace(values, [trained[v] / norm for v in values],
                      "trained block (exact test loss)"),
        theory_trace(values, [best[v] / norm for v in values],
                     "best span the block can write"),
    ]
    if slots:
        traces.append(theory_trace(values, [sweep.coordinate[v].loss / norm for v in values],
                                   "best m monomials", color=COLORS["trained2"],
                                   dash="longdashdot"))
    traces += [
        bound_trace(values, [kernel / norm] * len(values), "full one-step kernel GD (m = h = p₂)"),
        baseline_trace(values, [linear / norm] * len(values), "no slots: linear GD on x"),
        baseline_trace([p2, p2], [kernel / norm * 0.97, linear / norm * 1.01],
                       f"saturates at m = p₂ = {p2}", dash="longdash"),
    ]
    return traces


def capacity_figure(sweep: CapacitySweep, references: OneBlockReferences) -> go.Figure:
    r"""The slot and width sweeps of one block (a slider between them): trained exact test loss
    against the best span a block of that size can write, the best $m$ monomials (slots only),
    the kernel step $\mathcal L^*((x; \phi_2))$ and linear GD $\mathcal L^*(x)$."""
    base = new_figure("One block against the best span it can write",
                      "block size: slots m or GLU width h", "test loss / E[y²]")
    base.update_xaxes(tickvals=sweep.slot_values)
    return slider_figure(base, {(k,): _sweep_panel(sweep, references, k) for k in KINDS},
                         ["vary"], [KINDS],
                         panel_titles={("slots m",): "One block, m slots (h = max(m, p₂))",
                                       ("width h",): "One block, h GLU units (m = max(h, p₂))"})


def training_curves_figure(sweep: CapacitySweep, references: OneBlockReferences,
                           window: int = SMOOTHING_STEPS) -> go.Figure:
    """The batch loss of every block of the two sweeps (mean of ``window`` steps), one panel per
    sweep and size, with the best loss of its size and the full kernel step."""
    window = check_int("window", window, minimum=1)
    norm, kernel = references.normaliser, references.kernel
    if sweep.slot_values != sweep.width_values:
        raise ConfigError("sweep", (sweep.slot_values, sweep.width_values),
                          "the same sizes in the slot and the width sweep (one size slider)")
    steps_total = len(sweep.history[("slots", sweep.slot_values[0])])
    if window > steps_total:
        raise ConfigError("window", window, f"at most the {steps_total} training steps")
    steps = np.arange(window, steps_total + 1)
    base = new_figure("Training one block", "training step",
                      f"loss / E[y²] (mean of {window} steps)", log_y=True)
    panels = {}
    for kind, prefix, best in [(KINDS[0], "slots", sweep.subspace), (KINDS[1], "width", sweep.glu)]:
        for v in sweep.slot_values:
            smoothed = np.convolve(sweep.history[(prefix, v)], np.ones(window) / window,
                                   mode="valid")
            panels[(kind, v)] = [
                trained_trace(steps, smoothed / norm, "trained block", mode="lines"),
                theory_trace([1, steps_total], [best[v].loss / norm] * 2,
                             "reference (best span of this size)"),
                bound_trace([1, steps_total], [kernel / norm] * 2, "full one-step kernel GD"),
            ]
    return slider_figure(base, panels, ["vary", "size"], [KINDS, sweep.slot_values])


def _saturation_panel(saturation: SaturationSweep, d: int, kind: str) -> list[go.Scatter]:
    c = saturation.curves[d]
    best, trained = ((c.slot_loss, c.trained_slots) if kind == KINDS[0]
                     else (c.width_loss, c.trained_widths))
    ends = [min(best), max(best)]
    traces = [theory_trace(list(best), list(best.values()), "best block of this size (exact)"),
              trained_trace(list(trained), list(trained.values()), "trained block (exact loss)",
                            mode="markers", marker={"size": 10}),
              bound_trace(ends, [c.kernel] * 2, "kernel optimum L*((x; φ₂))"),
              baseline_trace([c.p2] * 2, [c.kernel * 0.97, c.linear * 1.01],
                             f"saturates at m = p₂ = {c.p2}", dash="longdash")]
    if kind == KINDS[1]:  # the slots curve, for comparison
        traces.insert(1, theory_trace(list(c.slot_loss), list(c.slot_loss.values()),
                                      "best block with h slots", color=COLORS["trained2"],
                                      dash="longdashdot"))
    return traces


def saturation_figure(saturation: SaturationSweep) -> go.Figure:
    r"""For each $d$ (a slider) and each sweep (slots or units): the best one-block loss $\mathcal L^*_m$
    against the size (piecewise linear in $m$, Proposition 12 (prop-capacity), item 5), the
    trained blocks, the kernel optimum and the point $m = p_2$ where $\mathcal L^*_m$ saturates."""
    dims = list(saturation.curves)
    sizes = {KINDS[0]: "m slots, h = max(m, p₂)", KINDS[1]: "h units, m = max(h, p₂)"}
    titles = {(d, k): f"d = {d}: {sizes[k]}" for d in dims for k in KINDS}
    base = new_figure("Best one-block loss (flat from m = p₂ on)", "slots m or GLU width h",
                      "test loss / E[y²]")
    return slider_figure(base, {key: _saturation_panel(saturation, *key) for key in titles},
                         ["d", "vary"], [dims, KINDS], panel_titles=titles)


def embedding_figure(degrees: Sequence[int], max_input_dim: int = 50) -> go.Figure:
    r"""Slots $m = p_2 + \dots + p_k$ to hold every monomial of degree 2 to $k$, for
    $d = 1, \dots,$ ``max_input_dim`` (log-log), each degree with its growth $d^k / k!$."""
    grid = np.arange(1, check_int("max_input_dim", max_input_dim, minimum=2) + 1)
    if not degrees or len(degrees) > len(PALETTE):
        raise ConfigError("degrees", list(degrees), f"1 to {len(PALETTE)} degrees")
    fig = new_figure("Slots to hold degrees 2 to k", "input dimension d",
                     "slots m = p₂ + … + pₖ", log_x=True, log_y=True)
    for k, color in zip(degrees, PALETTE[:len(degrees)], strict=True):
        k = check_int("degree", k, minimum=2)
        fig.add_trace(trained_trace(grid, [required_embedding(int(d), k).slots for d in grid],
                                    f"k = {k}: p₂ + … + pₖ", color=color, mode="lines"))
        fig.add_trace(theory_trace(grid, grid.astype(float) ** k / np.prod(range(1, k + 1)),
                                   f"k = {k}: dᵏ / k!", color=color))
    return fig
