"""Speed of every chapter's training sweep through the one trainer, in one process (run from the
repository root, inside .venv).

1. For each chapter, the models of its sweep (the page's shapes, tasks and settings, fewer
   steps) trained by one ``train`` call, against the same models trained one after the other
   with ``train`` (the same steps and prompts: a model's run is the same either way). Both on
   the machine's cores as the pages run them; the ratio is of wall times measured back to
   back, and the ms per step are of the whole sweep.
2. The exact theory, the linear bound of Corollary 7 (cor-linear-bound) and the one-step optima
   of Theorem 9 (thm-feature-optimum), for every d <= 5, degree <= 3 (target: well under a
   second each).

Prints one line per chapter and PASS/FAIL lines (targets: together no slower than one after
the other, 0.95x allowing for noise; theory < 0.5 s each).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

import torch

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.monomials import monomial_count
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.pages.ch3 import context_length_grid
from nlicl_lib.theory import closed_forms
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import train

STEPS = 60


def poly(d: int, n: int, degree: int = 2) -> TaskConfig:
    return TaskConfig(kind="poly", input_dim=d, context_length=n, degree=degree)


def sweeps() -> dict[str, list[tuple[TaskConfig, ModelConfig, str, int]]]:
    """Per chapter: (task, model, purpose of its settings, data seed) of every model."""
    linear = [TaskConfig(kind="linear", input_dim=5, context_length=20, noise_std=s)
              for s in (0.0, 0.5, 1.0)]
    quadratic = poly(3, 20)  # chapter 2's "linear + quadratic" task
    pure = TaskConfig(kind="poly", input_dim=3, context_length=20, degree=2, homogeneous=True)
    p2 = monomial_count(3, 2)
    shapes = sorted({(m, max(m, p2)) for m in range(1, 9)} | {(max(h, p2), h) for h in range(1, 9)})
    return {
        "ch1 LSA depth sweep": [(t, ModelConfig(kind="lsa", depth=L), "lsa-depth-sweep", 1)
                                for L in (1, 2, 3, 4) for t in linear],
        "ch2 LSA stacks": [(t, ModelConfig(kind="lsa", depth=L, attention=a), "default", 0)
                           for a in ("full", "sparse") for t in (pure, quadratic)
                           for L in (1, 2, 3, 4)],
        "ch3 one-block grid": [(poly(3, n, k), ModelConfig(kind="glu-lsa", glu_init="large"),
                                "one-block", 0)
                               for k in (1, 2, 3) for n in context_length_grid(10, 160)],
        "ch4 capacity sweep": [(quadratic, ModelConfig(kind="glu-lsa", feature_slots=m,
                                                       glu_width=h), "short-sweeps", 0)
                               for m, h in shapes],
        "ch5 narrow stacks": [(quadratic, ModelConfig(kind="glu-lsa", depth=L, feature_slots=3),
                               "narrow-stacks", 0) for L in (1, 2, 3, 4)],
    }


def run(models_and_tasks: list, configs: list, together: bool) -> float:
    models = [build_model(m, t, seed=s) for (t, m, _, s) in models_and_tasks]
    tasks = [t for (t, *_) in models_and_tasks]
    start = time.perf_counter()
    if together:
        train(models, tasks, configs, progress=False)
    else:
        for model, task, config in zip(models, tasks, configs, strict=True):
            train(model, task, config, progress=False)
    return time.perf_counter() - start


def together_vs_alone() -> float:
    worst = float("inf")
    for name, runs in sweeps().items():
        configs = [replace(default_train_config(t, m, purpose=p, seed=s), steps=STEPS)
                   for t, m, p, s in runs]
        run(runs[:2], configs[:2], True)  # warm-up
        times = {"together": [], "alone": []}
        for _ in range(2):
            for mode in ("together", "alone"):
                times[mode].append(run(runs, configs, mode == "together"))
        together, alone = min(times["together"]), min(times["alone"])
        ratio = alone / together
        worst = min(worst, ratio)
        print(f"{name}: {len(runs)} models, {STEPS} steps: together {1e3 * together / STEPS:.1f} "
              f"ms per step, one after the other {1e3 * alone / STEPS:.1f}: {ratio:.2f}x")
    print(f"slowest ratio {worst:.2f}x  {'PASS' if worst >= 0.95 else 'FAIL'} (target >= 0.95x)")
    return worst


def exact_theory() -> float:
    worst = 0.0
    for d in range(1, 6):
        for k in range(1, 4):
            task = TaskConfig(kind="poly", input_dim=d, context_length=20, degree=k)
            start = time.perf_counter()
            closed_forms.one_step_kernel_gd_optimum(task)
            closed_forms.best_linear_loss(task)
            closed_forms.one_step_gd_optimum(task.target_features, closed_forms.kernel_features(d, 2), 20)
            worst = max(worst, time.perf_counter() - start)
    print(f"exact one-step optima and linear bound, d <= 5, degree <= 3: slowest {worst:.3f} s  "
          f"{'PASS' if worst < 0.5 else 'FAIL'} (target < 0.5 s)")
    return worst


if __name__ == "__main__":
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    together_vs_alone()
    exact_theory()
