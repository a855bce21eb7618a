"""Benchmark: a run of each chapter's live panel at its default settings (nlicl_lib.pages.panels).

Target: 20 s or less on 2 CPU cores, test loss included. The machine this is developed on is
shared and busy, so wall time says little; this script measures the *CPU time* of each run
on one torch thread (the work of one core; on 2 idle cores the run takes at most that, as
sampling and the larger matrix products use both), and, in the same process, the same
measure for a reference run (one LSA layer, d=5, n=20, 600 steps of 2000 prompts), so the
ratios compare across machines. It also prints each run's test loss against its theory and
the panel's expected training time (its work at one thread's measured rate,
nlicl_lib.core.planning.work_units) against the run's wall time.

Usage: ``python bench/panel_times.py [ch2 ch3 ...]``.
"""

from __future__ import annotations

import os
import sys
import time

import torch

os.environ.pop("NLICL_BOOK_BUILD", None)

from nlicl_lib import ModelConfig, TaskConfig, TrainConfig, run_experiment  # noqa: E402
from nlicl_lib.core.planning import SECONDS_PER_WORK_UNIT, work_units  # noqa: E402
from nlicl_lib.pages.panels import PANELS  # noqa: E402

TARGET_SECONDS = 20.0


def cpu_seconds(function) -> tuple[float, float, object]:
    """(CPU seconds, wall seconds, result) of ``function()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = function()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def reference_run():
    return run_experiment(TaskConfig(kind="linear", input_dim=5, context_length=20), ModelConfig(kind="lsa"),
                          TrainConfig(steps=600, batch_size=2000), device="cpu", progress=False)


def main(chapters: list[str]) -> int:
    torch.set_num_threads(1)
    reference_run()  # imports, first-use set-up
    reference, _, _ = cpu_seconds(reference_run)
    print(f"reference run (1 LSA layer, d=5, n=20, 600 x 2000 prompts): {reference:.2f} s CPU\n")
    print(f"{'panel':5s} {'CPU s':>7s} {'/ref':>6s} {'expected':>9s} {'wall':>6s}  "
          f"{'loss/E[y2]':>10s} {'theory':>8s} {'ratio':>6s}  defaults")
    failed = []
    for chapter in chapters:
        panel = PANELS[chapter](device="cpu")
        panel.theory_at(panel.settings)  # theory is computed before a run, not timed here
        task, model, train = panel.configure()
        expected = work_units(task, model, train.steps, train.batch_size) * SECONDS_PER_WORK_UNIT
        cpu, wall, result = cpu_seconds(panel.train)
        theory = result.normalised_theory
        ratio = "" if theory is None else f"{result.normalised_test_loss / theory:6.3f}"
        theory_text = "" if theory is None else f"{theory:8.4f}"
        print(f"{chapter:5s} {cpu:7.2f} {cpu / reference:6.2f} {expected:9.2f} {wall:6.2f}  "
              f"{result.normalised_test_loss:10.4f} {theory_text:>8s} {ratio:>6s}  "
              f"{panel.describe(panel.settings)}", flush=True)
        if cpu > TARGET_SECONDS:
            failed.append(chapter)
    if failed:
        print(f"\nover {TARGET_SECONDS:.0f} s of one core: {', '.join(failed)}")
        return 1
    print(f"\nevery default run takes at most {TARGET_SECONDS:.0f} s of one core")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or list(PANELS)))
