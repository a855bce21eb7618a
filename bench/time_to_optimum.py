"""Benchmark 2: seconds of training until a 1-layer LSA is within 2% of the optimal loss.

Task: linear regression, d=5, n=20, no noise; optimum: theory.md 3.1, d(d+1)/(n+d+1) = 30/26.
Trains with :func:`nlicl_lib.train.train` on the CPU with the settings below, reports the
training time and the Monte Carlo test loss over the optimum (with its error bar). Target:
within 2% of the optimum in at most 5 s of training on 2 cores.
Usage: ``python bench/time_to_optimum.py [--steps S] [--batch B] [--lr LR] [--seed SEED]``.
"""

from __future__ import annotations

import argparse

import torch

from nlicl_lib.evaluate import estimate_loss
from nlicl_lib.experiment import ModelConfig, build_model
from nlicl_lib.tasks import TaskConfig
from nlicl_lib.theory import linear_gd_optimum
from nlicl_lib.train import TrainConfig, train

TARGET_SECONDS, TARGET_RATIO = 5.0, 1.02


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    task = TaskConfig("linear", input_dim=5, context_length=20)
    optimum = linear_gd_optimum(task).loss
    model = build_model(ModelConfig(), task, seed=args.seed)
    config = TrainConfig(steps=args.steps, batch_size=args.batch, learning_rate=args.lr,
                         seed=args.seed)
    result = train(model, task, config, progress=False)
    test = estimate_loss(model, task, seed=args.seed, relative_error=0.003)
    ratio = test.mean / optimum
    error = test.std_error / optimum
    ok = result.seconds <= TARGET_SECONDS and ratio <= TARGET_RATIO
    print(f"1-layer LSA, {task.describe()}, cpu, {torch.get_num_threads()} threads: {args.steps} steps "
          f"of batch {args.batch}, lr {args.lr:g}")
    print(f"  training time {result.seconds:.2f} s ({result.steps_per_second:.0f} steps/s)")
    print(f"  test loss {test.mean:.4f} +- {test.std_error:.4f} ({test.num_prompts} prompts), "
          f"optimum {optimum:.4f}")
    print(f"loss/optimum = {ratio:.4f} +- {error:.4f} in {result.seconds:.2f} s "
          f"(target <= {TARGET_RATIO} within {TARGET_SECONDS:g} s): {'PASS' if ok else 'FAIL'}")


if __name__ == "__main__":
    main()
