r"""Chapter 4's trained blocks against their exact references: the tables and the values the
page quotes from :func:`~nlicl_lib.experiments.capacity_sweeps.capacity_sweep` and
:func:`~nlicl_lib.experiments.capacity_sweeps.saturation_sweep`.

Each trained block's test loss is exact: the loss of Theorem 9 (thm-feature-optimum),

$$\mathcal L(\Gamma) = \operatorname{tr}(\Gamma^\top T \Gamma B)
 - 2 \operatorname{tr}(\Gamma^\top C C^\top) + \operatorname{tr} S,$$

at the block's own $\Gamma$ and features $\psi = (x; s(x))$, and it is compared with the best loss
of a block of its size, $\ell_m = \min_{V \subseteq \mathcal Q_2,\ \dim V \le m}
\mathcal L^*\big((x; V)\big)$ (Proposition 12 (prop-capacity)). The ratios trained / best are
$\ge 1$ up to the optimiser.
"""

from __future__ import annotations

from nlicl_lib.experiments.capacity_sweeps import CapacitySweep, SaturationSweep
from nlicl_lib.theory.capacity import SLOT_DIRECTIONS, slot_increments
from nlicl_lib.theory.ch4_analysis import OneBlockReferences
from nlicl_lib.training.train import TrainConfig


def distinct_blocks(sweep: CapacitySweep) -> int:
    """The number of blocks trained: a size in both sweeps ($m = h$) is trained once."""
    return len(set(map(id, sweep.models.values())))


def sweep_report(sweep: CapacitySweep, train_config: TrainConfig, normaliser: float) -> str:
    r"""The page's table of the slot and width sweeps: trained / reference loss over
    $\mathbb E[y^2]$ = ``normaliser`` for each size, references ``sweep.subspace[m]`` (slots) and
    ``sweep.glu[h]`` (units)."""
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
    best block with $p_2 - 1$ slots (``"d = 4 and d = 5"``, or ``"none of these d"``); and the
    width from which $h$ units do as well as $h$ slots (``"h = d"`` when that is $d$ for every
    $d$, Proposition 12 (prop-capacity), item 1)."""
    ratios = [r for c in saturation.curves.values() for r in c.trained_ratios()]
    part = [trained[v] / best[v] for c in saturation.curves.values()
            for trained, best in [(c.trained_slots, c.slot_loss), (c.trained_widths, c.width_loss)]
            for v in trained if v < c.p2]
    values: dict[str, float | str] = {"sat_min_ratio": min(ratios), "sat_max_ratio": max(ratios),
                                      "part_max_ratio": max(part, default=float("nan"))}
    for d, c in saturation.curves.items():
        values[f"kernel_d{d}"] = c.kernel
        values[f"short_d{d}"] = c.slot_loss[c.p2 - 1] / c.kernel
        values[f"full_d{d}"] = c.trained_slots[c.p2] / c.kernel
    above = [d for d, c in saturation.curves.items()
             if c.trained_slots[c.p2] > c.slot_loss[c.p2 - 1]]
    values["full_above_short"] = (" and ".join(f"d = {d}" for d in above) if above
                                  else "none of these d")
    first = [c.units_match_from() for c in saturation.curves.values()]
    values["units_match"] = "h = d" if first == list(saturation.curves) else f"h = {first}"
    return values


def increment_report(saturation: SaturationSweep) -> str:
    r"""The page's table of the drops of $\ell_m / \mathbb E[y^2]$ per slot for each $d$ of
    ``saturation``, from the closed form of Proposition 12 (prop-capacity), item 5
    (:func:`~nlicl_lib.theory.capacity.slot_increments`): each kind of direction with its drop
    and how many slots of that kind there are, in the order the best spans add them."""
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
"""The prose name of each kind of slot's drop of $\\ell_m$ (followed by ``_d{d}``)."""


def increment_values(saturation: SaturationSweep) -> dict[str, float | str]:
    r"""Glued by the page: for each $d$ of ``saturation``, the drop of $\ell_m / \mathbb E[y^2]$
    per slot of each kind, $\lambda / \mathbb E[y^2]$ (Proposition 12 (prop-capacity), item 5;
    :func:`~nlicl_lib.theory.capacity.slot_increments`): ``norm_drop_d{d}`` ($\|x\|^2$),
    ``square_drop_d{d}`` (a contrast of the squares), ``cross_drop_d{d}`` (a cross term);
    ``increment_order``: the kinds by decreasing drop, ``"the same at every d"`` prefixed when
    it is; ``closed_form_gap``: the largest $|\ell_m - \ell_m^{\rm closed}| / \mathbb E[y^2]$
    between the L-BFGS curve and the closed form, over every $d$ and $m$."""
    values: dict[str, float | str] = {}
    orders, gap = set(), 0.0
    for d, c in saturation.curves.items():
        closed = slot_increments(c.task)
        for name, (increment, *_) in closed.groups.items():
            values[f"{INCREMENT_KEYS[name]}_d{d}"] = increment / closed.null_loss
        orders.add(closed.order)
        gap = max(gap, *(abs(loss - closed.loss(m) / closed.null_loss)
                         for m, loss in c.slot_loss.items()))
    order = " > ".join(max(orders, key=len)) if len(orders) == 1 else "different at each d"
    values["increment_order"] = order
    values["closed_form_gap"] = gap
    return values
