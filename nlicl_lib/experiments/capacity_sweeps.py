r"""Single GLU-LSA blocks trained over slots $m$ and widths $h$, next to the exact best block of
each size (:mod:`nlicl_lib.theory.capacity`): the capacity and saturation figures of chapter 4."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from nlicl_lib.core.device import DeviceLike
from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import monomial_count
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.theory.capacity import (
    BlockOptimum,
    best_coordinate_subset,
    best_feature_subspace,
    best_glu_features,
    check_capacity_task,
    slot_path,
    width_path,
)
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.theory.values import exact_model_loss
from nlicl_lib.training.train import TrainConfig, train


@dataclass
class CapacitySweep:
    r"""Single blocks trained over a range of slots $m$ (width $h = \max(m, p_2)$, so only the
    slots limit them) and of widths $h$ ($m = \max(h, p_2)$), with their references.

    ``slots_loss[m]``, ``width_loss[h]``: exact test losses of the trained blocks (the loss
    $\mathcal L(\Gamma)$ of Theorem 9 (thm-feature-optimum) with their own features and
    $\Gamma$); ``subspace[m]``: :func:`best_feature_subspace`; ``coordinate[m]``:
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
    kernel_optimum: float
    linear_optimum: float
    null_loss: float
    seconds: float
    device: str
    models: dict[tuple[str, int], object]


def capacity_sweep(task: TaskConfig, slot_values: Iterable[int], width_values: Iterable[int],
                   train_config: TrainConfig, device: DeviceLike = "cpu",
                   progress: bool | None = None) -> CapacitySweep:
    r"""Train every single block of the two sweeps at once on the same prompts
    (:func:`~nlicl_lib.training.train.train`, each from ``build_model`` with
    ``train_config.seed``; a block appearing in both is trained once) and compute its
    references."""

    check_capacity_task(task)
    p2 = monomial_count(task.input_dim, 2)
    slot_values = [check_int("slots", m, minimum=1) for m in slot_values]
    width_values = [check_int("width", h, minimum=1) for h in width_values]
    shapes = {("slots", m): (m, max(m, p2)) for m in slot_values}
    shapes.update({("width", h): (max(h, p2), h) for h in width_values})
    unique = sorted(set(shapes.values()))
    trained, results, seconds = _train_blocks(task, unique, train_config, device, progress)
    models = {key: trained[shape] for key, shape in shapes.items()}
    losses = {key: exact_model_loss(model, task) for key, model in models.items()}
    history = {key: results[shape].loss_history for key, shape in shapes.items()}
    return CapacitySweep(
        task, slot_values, width_values,
        {m: losses[("slots", m)] for m in slot_values},
        {h: losses[("width", h)] for h in width_values},
        {m: best_feature_subspace(task, m) for m in slot_values},
        {m: best_coordinate_subset(task, m) for m in slot_values},
        {h: best_glu_features(task, max(h, p2), h) for h in width_values},
        history,
        best_coordinate_subset(task, p2).loss,
        best_coordinate_subset(task, 0).loss,
        null_loss(task), seconds, next(iter(results.values())).device, models,
    )


def _train_blocks(task: TaskConfig, shapes: list[tuple[int, int]], train_config: TrainConfig,
                  device: DeviceLike, progress: bool | None
                  ) -> tuple[dict[tuple[int, int], object], dict[tuple[int, int], object], float]:
    """One block per ``(slots, width)`` of ``shapes``, trained at once on the same prompts:
    the models, their training records and the wall time."""
    models = [build_model(ModelConfig(kind="glu-lsa", feature_slots=m, glu_width=h), task, device,
                          seed=train_config.seed) for m, h in shapes]
    start = time.perf_counter()
    results = train(models, task, train_config, device, progress)
    seconds = time.perf_counter() - start
    return dict(zip(shapes, models, strict=True)), dict(zip(shapes, results, strict=True)), seconds


@dataclass(frozen=True)
class SaturationCurve:
    r"""One input dimension $d$ of :func:`saturation_sweep`. Every loss is normalised by
    ``null_loss`` $= \mathbb E[y^2]$.

    ``slot_loss[m]``: the best loss $\ell_m$ of one block with $m$ slots and width
    $h = \max(m, p_2)$, for $m = 0, \dots, p_2 + $ ``beyond``; ``width_loss[h]``: that of one
    block with $h$ GLU units and $m = \max(h, p_2)$ slots ($h = 0$: the slots stay empty);
    ``kernel``: $\mathcal L^*((x; \phi_2))$; ``linear``: $\mathcal L^*(x)$ (no slots);
    ``trained_slots[m]`` and ``trained_widths[h]``: the exact test losses of trained blocks of
    those sizes (the other size as above).
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
    exact references and on training (all blocks of one $d$ train together), and the
    device they trained on."""

    curves: dict[int, SaturationCurve]
    train_config: object
    reference_seconds: float
    train_seconds: float
    device: str


def saturation_sweep(input_dims: Sequence[int], context_lengths: Sequence[int], train_config: TrainConfig,
                    trained_sizes: Callable[[int], Iterable[int]] | None = None,
                    beyond: int = 2, restarts: int = 1, seed: int = 0, device: DeviceLike = "cpu",
                    progress: bool | None = None) -> SaturationSweep:
    r"""The best single-block loss against the number of slots $m$ and against the GLU width $h$,
    for each input dimension $d$, with trained blocks at a few sizes (Proposition 12
    (prop-capacity)).

    For the quadratic task (degree $\le 2$) in $d$ dimensions with $n$ = ``context_lengths[k]``
    context examples and $p_2 = \binom{d+1}{2}$, the reference is

    $$\ell_m = \min_{V \subseteq \mathcal Q_2,\ \dim V \le m} \mathcal L^*\big((x; V)\big),
    \qquad \ell_0 = \mathcal L^*(x), \qquad \ell_m = \mathcal L^*\big((x; \phi_2)\big)
    \text{ for } m \ge p_2,$$

    with $\mathcal L^*$ the exact one-step optimum of Theorem 9 (thm-feature-optimum), computed
    by :func:`best_feature_subspace` for $m = 0, \dots, p_2 +$ ``beyond`` (slots, width
    $\max(m, p_2)$), and by :func:`best_glu_features` with $m = p_2$ slots for the widths
    $h = 1, \dots, p_2 +$ ``beyond`` ($m = 0$ or $h = 0$: linear GD on $x$). Between $1$ and
    $p_2 - 1$ each size starts from the previous size's optimum plus its best monomial (slot) or
    monomial unit, and from ``restarts`` random starts: no enumeration of subsets, which keeps
    $d = 5$ cheap. For this task $\ell_m$ also has a closed form,
    $\ell_m = \ell_0 - \sum_{i \le m} \lambda_i$ with $\lambda_i$ the eigenvalues of
    $S_E^3 K_E^{-1}$ (Proposition 12 (prop-capacity), item 5,
    :func:`~nlicl_lib.theory.capacity.slot_increments`), which the tests compare with these
    searches.

    ``trained_sizes(p2)`` (default $1$, $\lceil p_2/2 \rceil$, $p_2$) lists the sizes trained
    in both sweeps (slots $m$ with $h = \max(m, p_2)$; widths $h$ with $m = \max(h, p_2)$); for
    each $d$ the blocks train together (:func:`~nlicl_lib.training.train.train`) under
    ``train_config``, and their test loss is the exact $\mathcal L(\Gamma)$ of Theorem 9
    (thm-feature-optimum) at their own features and $\Gamma$
    (:func:`nlicl_lib.theory.values.exact_model_loss`). ``train_config=None`` trains nothing (the
    references only).
    """

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
        shapes = {("slots", v): (v, max(v, p2)) for v in sizes}
        shapes.update({("width", v): (max(v, p2), v) for v in sizes})
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
    return SaturationSweep(curves, train_config, reference_seconds, train_seconds, device_name)
