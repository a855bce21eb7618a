"""Speed of chapter 3's sweeps, in one process (run from the repository root, inside .venv).

1. Joint training (``sweeps.train_one_block_runs``) of four GLU-LSA blocks (four
   initialisations, shared prompts) per context length n = 10, 20, 40, 80, 160 (quadratic task,
   d = 3), as in chapter 3's sweep, against training the same twenty blocks one after the other
   with ``train.train``, the same number of steps and prompts per step. Both on one torch
   thread; the ratio is of wall times measured back to back.
2. The exact theory, the linear bound of Corollary 7 (cor-linear-bound) and the one-step optima of
   Theorem 9 (thm-feature-optimum), for every d <= 5, degree <= 3 (target: well under a second
   each).

Prints the ratio and PASS/FAIL lines (targets: joint >= 3x faster; theory < 0.5 s each).
"""

from __future__ import annotations

import os
import time

import torch

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig
from nlicl_lib.experiments.sweeps import context_length_grid
from nlicl_lib.theory import closed_forms
from nlicl_lib.training.one_block import Run, train_one_block_runs
from nlicl_lib.training.train import TrainConfig, train

STEPS, BATCH = 60, 500


def joint_vs_sequential() -> float:
    tasks = [TaskConfig(kind="poly", input_dim=3, context_length=n, degree=2) for n in context_length_grid(10, 160)]
    seeds = [0, 1, 2, 3]
    config = TrainConfig(steps=STEPS, batch_size=BATCH, learning_rate=0.01)
    start = time.perf_counter()
    train_one_block_runs([Run(t, ModelConfig(kind="glu-lsa"), seed=s, data_seed=0)
                          for t in tasks for s in seeds], config)
    joint = time.perf_counter() - start
    start = time.perf_counter()
    for task in tasks:
        for s in seeds:
            train(build_model(ModelConfig(kind="glu-lsa"), task, seed=s), task, config,
                  progress=False)
    sequential = time.perf_counter() - start
    ratio = sequential / joint
    print(f"20 blocks (n = 10..160, 4 seeds), {STEPS} steps of {BATCH} prompts: joint "
          f"{joint:.2f} s, "
          f"one after the other {sequential:.2f} s: {ratio:.1f}x  "
          f"{'PASS' if ratio >= 3 else 'FAIL'} (target >= 3x)")
    return ratio


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
    joint_vs_sequential()
    exact_theory()
