"""Benchmark 1: training steps per second, batch 4000, d=5, n=20, one LSA layer, CPU.

The library's :func:`nlicl_lib.training.train.train` against the straightforward reference of
``bench/reference.py`` (single-threaded sampling, full attention matrix per prompt), measured
in the same process in interleaved rounds; the ratio of the median rates is printed.
It measures at torch's default thread count (one per core) and at one thread, and compares
each side at its best. Target: at least 3x. Usage:
``python bench/train_step.py [--rounds R] [--steps K]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from reference import ReferenceLSA, reference_embed, reference_sample_prompts, reference_train_step

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.training.train import TrainConfig, train

BATCH, D, N = 4000, 5, 20
TARGET = 3.0


def check_same_function() -> None:
    """The reference computes the library's LSA (float64, same P and Q)."""
    task = TaskConfig(kind="linear", input_dim=D, context_length=N)
    model = build_model(ModelConfig(attention_init_std=0.3), task, seed=1, dtype=torch.float64)
    reference = ReferenceLSA(D + 1).double()
    with torch.no_grad():
        reference.p.copy_(model.blocks[0].lsa.p)
        reference.q.copy_(model.blocks[0].lsa.q)
    prompts = sample_prompts(task, 64, seed=2, step=0, dtype=torch.float64)
    z = prompts.embed()
    gap = (model(z) - reference.predict(z)).abs().max() / model(z).abs().max()
    assert gap < 1e-12, gap
    x, y = reference_sample_prompts(D, N, 700, seed=3, step=4)
    same = sample_prompts(task, 700, seed=3, step=4)  # one part: the same numbers
    assert torch.equal(x, same.x) and torch.equal(reference_embed(x, y), same.embed())


def library_rate(task: TaskConfig, steps: int) -> float:
    model = build_model(ModelConfig(), task, seed=0)
    config = TrainConfig(steps=steps, batch_size=BATCH, learning_rate=0.01, schedule="constant")
    return train(model, task, config, progress=False).steps_per_second


def reference_rate(task: TaskConfig, steps: int) -> float:
    torch.manual_seed(0)
    model = ReferenceLSA(D + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    normaliser = null_loss(task)
    start = time.perf_counter()
    for step in range(steps):
        reference_train_step(model, optimizer, D, N, BATCH, 0, step, normaliser)
    return steps / (time.perf_counter() - start)


def time_parts(task: TaskConfig, repeats: int = 20) -> dict[str, float]:
    """Milliseconds per call of each part of a step (median), for the breakdown."""
    model = build_model(ModelConfig(), task, seed=0)
    reference = ReferenceLSA(D + 1)
    prompts = sample_prompts(task, BATCH, 0, 0)
    z = prompts.embed()

    def backward(module_prediction):
        loss = torch.mean((module_prediction - prompts.query_label) ** 2)
        loss.backward()

    parts = {
        "sampling, library (parts on threads)": lambda: sample_prompts(task, BATCH, 0, 1),
        "sampling, reference (one thread)": lambda: reference_sample_prompts(D, N, BATCH, 0, 1),
        "forward+backward, library (query row only)": lambda: backward(model(z)),
        "forward+backward, reference (attention matrix)": lambda: backward(reference.predict(z)),
    }
    out = {}
    for name, call in parts.items():
        call()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        out[name] = 1e3 * statistics.median(times)
    return out


def measure(task: TaskConfig, rounds: int, steps: int) -> tuple[float, float]:
    """Median steps/s of (library, reference) over interleaved rounds at the current threads."""
    library_rate(task, 3), reference_rate(task, 3)  # warm up
    ours, theirs = [], []
    for _ in range(rounds):
        theirs.append(reference_rate(task, steps))
        ours.append(library_rate(task, steps))
    return statistics.median(ours), statistics.median(theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args()
    check_same_function()
    task = TaskConfig(kind="linear", input_dim=D, context_length=N)
    cores = os.cpu_count() or 1
    print(f"training step, batch {BATCH}, d={D}, n={N}, 1 layer, cpu ({cores} cores), "
          f"{args.rounds} interleaved rounds of {args.steps} steps; load average before: "
          f"{os.getloadavg()[0]:.2f}")
    # each side at its best: torch's intra-op threads help the reference's larger products,
    # and cost the library's small ones more than they give (its sampling uses every core
    # either way)
    default_threads = torch.get_num_threads()
    rates = {}
    for threads in sorted({default_threads, 1}, reverse=True):
        torch.set_num_threads(threads)
        rates[threads] = measure(task, args.rounds, args.steps)
        ours, theirs = rates[threads]
        print(f"  torch threads {threads}: library {ours:7.1f} steps/s, reference {theirs:7.1f} "
              f"steps/s, ratio {ours / theirs:.2f}x")
        for name, ms in time_parts(task).items():
            print(f"      {name:48s} {ms:6.2f} ms")
    torch.set_num_threads(default_threads)
    best_ours = max(ours for ours, _ in rates.values())
    best_theirs = max(theirs for _, theirs in rates.values())
    ratio = best_ours / best_theirs
    print(f"load average after: {os.getloadavg()[0]:.2f} (timings on a busy machine are noisy)")
    print(f"ratio library/reference, each at its best thread count = {best_ours:.1f} / "
          f"{best_theirs:.1f} = {ratio:.2f}x (target >= {TARGET:g}x): "
          f"{'PASS' if ratio >= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()
