r"""Chapter 5's trained stacks against the greedy block-coordinate reference: the tables of the
committed depth studies (:mod:`nlicl_lib.experiments.depth_study`) and the cubic study, where a
second block whose GLU reads the slots raises the degree of the features.

Both the trained stacks and the reference compute the recursion of Theorem 13
(thm-depth-bcd),

$$r^{(\ell)}_i = r^{(\ell-1)}_i - \psi_\ell(x_i)^\top\Gamma_\ell\, g_\ell, \qquad
\hat y = \sum_\ell \psi_\ell(x_{n+1})^\top\Gamma_\ell\, g_\ell,$$

the reference with the greedy $\Gamma_\ell$ of Proposition 15 (prop-greedy-reference), whose
exact loss can only fall with depth (its Monte Carlo estimate need not: the committed studies
hold it for several fitting samples). Losses are printed over $\mathbb E[y^2]$.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nlicl_lib.core.errors import ConfigError, check_int
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.depth_study import budget_pairs, reference_samples
from nlicl_lib.experiments.depth_sweep import DepthSweep, depth_sweep, shape_key
from nlicl_lib.theory.closed_forms import kernel_features, null_loss, one_step_gd_optimum
from nlicl_lib.theory.depth import GreedyReference, greedy_reference, schedule_features
from nlicl_lib.training.train import TrainConfig


def study_report(study: dict) -> str:
    r"""A committed depth study's table: per depth $L$ (up to the deepest), the trained stack
    of each slot count (``-`` where none was trained) and its greedy reference (mean over the
    fitting samples, :func:`~nlicl_lib.experiments.depth_study.reference_samples`)."""
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
    r"""Every greedy reference of a committed study over its fitting samples (each of
    :data:`~nlicl_lib.experiments.depth_study.FIT_CONTEXTS` contexts, all measured on the same
    test contexts): per depth each sample's test loss, their median, and the largest single
    test context's share of the loss in any sample."""
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
    number of features written (:func:`~nlicl_lib.experiments.depth_study.budget_pairs`)."""
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
    trained stack (± standard error) and reference (mean over the fitting samples), and, with
    two slot counts, narrow / wide at equal depth (trained, and references)."""
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


@dataclass
class CubicStudy:
    r"""One and two trained blocks with $m$ slots on a cubic task, the greedy reference over
    (quadratics, cubics), the best single block ($x$ and quadratics, any $m$: one GD step on
    $(x; \phi_2)$) and one GD step on all monomials of degree $\le 3$. Unnormalised losses;
    ``null_loss`` $= \mathbb E[y^2]$ of the task."""

    task: TaskConfig
    slots: int
    train_config: object
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

    def report(self) -> str:
        one, two = self.keys
        null, sweep, reference = self.null_loss, self.sweep, self.reference
        lines = [f"cubic task: 2 stacks, {self.train_config.steps} steps of "
                 f"{self.train_config.batch_size} prompts in {sweep.seconds:.1f} s"]
        for name, value, error in [
                ("trained, L = 1", sweep.loss[one], sweep.std_error[one]),
                ("trained, L = 2", sweep.loss[two], sweep.std_error[two]),
                ("greedy reference, L = 2", reference.loss[1], reference.std_error[1])]:
            lines.append(f"  {name:24s} {value / null:.4f} ± {error / null:.4f}")
        lines += [f"  one trained block, exact: {sweep.exact[one] / null:.4f}",
                  f"best single block, any m (x and quadratics): {self.one_block / null:.4f}",
                  f"one GD step on all {self.all_monomials} monomials of degree ≤ 3: "
                  f"{self.all_features / null:.4f}"]
        return "\n".join(lines)

    def side_of_all_features(self, value: float, error: float) -> str:
        """Where ``value`` ± 2 ``error`` lies against one GD step on all monomials."""
        if value + 2 * error < self.all_features:
            return "below"
        if value - 2 * error > self.all_features:
            return "above"
        return "within two standard errors of"

    def prose_values(self) -> dict[str, float | str]:
        """The values the page quotes, by ``prose`` name."""
        one, two = self.keys
        null, sweep, reference = self.null_loss, self.sweep, self.reference
        return {
            "cubic_depth1": sweep.exact[one] / null,
            "cubic_depth1_estimate": sweep.normalised(one),
            "cubic_depth1_err": sweep.std_error[one] / null,
            "cubic_depth2": sweep.normalised(two),
            "cubic_depth2_err": sweep.std_error[two] / null,
            "cubic_reference2": float(reference.normalised()[1]),
            "cubic_one_block": self.one_block / null,
            "cubic_all_features": self.all_features / null,
            "cubic_trained_vs_all": self.side_of_all_features(sweep.loss[two],
                                                              sweep.std_error[two]),
            "cubic_reference_vs_all": self.side_of_all_features(reference.loss[1],
                                                                reference.std_error[1]),
        }


def cubic_study(task: TaskConfig, slots: int, train_config: TrainConfig, test_prompts: int,
                fit_contexts: int, test_contexts: int, batch_size: int) -> CubicStudy:
    r"""Train stacks of 1 and 2 blocks with ``slots`` on the cubic ``task`` together
    (:func:`~nlicl_lib.experiments.depth_sweep.depth_sweep`, the second GLU reads the slots),
    then the greedy reference on the schedule (quadratics, cubics) and the two exact one-step
    optima (Theorem 9 (thm-feature-optimum)) on $(x; \phi_2)$ and on all monomials."""
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
