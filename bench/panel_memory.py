"""Benchmark: the memory estimate the panels and the command line check (nlicl_lib.core.planning)
against the measured peak of a run, on the CPU.

Each configuration runs in a fresh Python process: import everything, note the resident set,
run ``run_experiment`` with a few training steps (the peak of a training step does not grow
with the number of steps) and the usual test-loss estimate, then read the process's peak
resident set (``ru_maxrss``). The estimate should be above the measured increase, and not by
much more than a factor of 2, or panels refuse settings that would fit.

Usage: ``python bench/panel_memory.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, torch
torch.set_num_threads(1)
from nlicl_lib import ModelConfig, TaskConfig, TrainConfig, run_experiment
from nlicl_lib.core.planning import estimate, eval_batch_size
task, model, batch = json.loads(sys.argv[1])
task, model = TaskConfig(**task), ModelConfig(**model)
train = TrainConfig(steps=3, batch_size=batch)
eval_batch = eval_batch_size(task, model)
run_experiment(TaskConfig(kind="linear", input_dim=2, context_length=4), ModelConfig(),
               TrainConfig(steps=2, batch_size=8), device="cpu", progress=False)  # first-use allocations
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
run_experiment(task, model, train, device="cpu", progress=False, relative_error=0.05,
               eval_batch_size=eval_batch)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"measured": peak - base, "estimate": estimate(task, model, batch, eval_batch).peak_bytes}))
"""

CASES = [
    ({"kind": "linear", "input_dim": 5, "context_length": 20}, {"kind": "lsa"}, 2000),
    ({"kind": "poly", "input_dim": 3, "context_length": 20, "degree": 2}, {"kind": "lsa", "depth": 4},
     1000),
    ({"kind": "poly", "input_dim": 3, "context_length": 80, "degree": 3}, {"kind": "lsa"}, 1000),
    ({"kind": "poly", "input_dim": 3, "context_length": 20, "degree": 2}, {"kind": "glu-lsa"}, 1000),
    ({"kind": "poly", "input_dim": 3, "context_length": 160, "degree": 2}, {"kind": "glu-lsa"}, 500),
    ({"kind": "poly", "input_dim": 3, "context_length": 20, "degree": 3},
     {"kind": "glu-lsa", "depth": 3, "feature_slots": 6, "glu_reads": "x+slots"}, 500),
    ({"kind": "poly", "input_dim": 3, "context_length": 40, "degree": 2},
     {"kind": "glu-lsa", "depth": 4, "feature_slots": 3, "glu_reads": "x"}, 20000),
    ({"kind": "poly", "input_dim": 3, "context_length": 20, "degree": 2},
     {"kind": "glu-lsa", "feature_slots": 8, "glu_width": 8}, 20000),
]


def main() -> int:
    print(f"{'task':34s} {'model':32s} {'batch':>6s} {'measured':>9s} {'estimate':>9s} "
          f"{'ratio':>6s}")
    worst = []
    for task, model, batch in CASES:
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps([task, model, batch])],
                             capture_output=True, text=True, check=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        ratio = result["estimate"] / max(result["measured"], 1)
        worst.append(ratio)
        print(f"{json.dumps(task)[:34]:34s} {json.dumps(model)[:32]:32s} {batch:6d} "
              f"{result['measured'] / 2**20:8.0f}M {result['estimate'] / 2**20:8.0f}M "
              f"{ratio:6.2f}", flush=True)
    print(f"\nestimate / measured: {min(worst):.2f} to {max(worst):.2f}")
    return 0 if min(worst) >= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
