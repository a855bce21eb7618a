"""Benchmark 1: the training step, batch 4000, d=5, n=20, one LSA layer, CPU.

Two comparisons, each measured in the same process in interleaved rounds (medians):

- **trainer vs floor.** :func:`nlicl_lib.training.train.train` called exactly as the CLI's
  ``train`` calls it (``run_experiment``: the config of ``default_train_config`` with
  ``--batch 4000``, i.e. onecycle schedule and gradient clipping, the model built with the
  run's seed, no callback; evaluation excluded, no progress bar) against the floor: a bare loop
  of sampling, forward, backward and a default Adam step on the same model. Target: the
  trainer's time per step within 15% of the floor's.
- **library vs reference.** The same trainer against the straightforward reference of
  ``bench/reference.py`` (single-threaded sampling, full attention matrix per prompt).
  Target: at least 3x.

It measures at torch's default thread count (one per core) and at one thread, and compares
each side at its best. Usage: ``python bench/train_step.py [--rounds R] [--steps K]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from reference import ReferenceLSA, reference_embed, reference_sample_prompts, reference_train_step

from nlicl_lib.core.device import resolve_device
from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import TrainConfig, clip_per_member, train

BATCH, D, N = 4000, 5, 20
TARGET = 3.0  # library / reference, steps per second
FLOOR_TARGET = 1.15  # trainer / floor, seconds per step


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


def cli_config(task: TaskConfig, steps: int) -> tuple[ModelConfig, TrainConfig]:
    """The model and training settings of ``python -m nlicl_lib train --batch 4000 --steps K``."""
    model_config = ModelConfig()
    return model_config, default_train_config(task, model_config, steps=steps, batch_size=BATCH)


def trainer_seconds(task: TaskConfig, steps: int) -> float:
    """Seconds per step of the trainer, called as ``run_experiment`` calls it."""
    model_config, config = cli_config(task, steps)
    device = resolve_device("cpu")
    model = build_model(model_config, task, device, seed=config.seed)
    return train(model, task, config, device, False, None).seconds / steps


def floor_seconds(task: TaskConfig, steps: int) -> float:
    """Seconds per step of the bare loop: sampling, forward, backward, Adam step (torch's
    default options); the same model, prompts and rate as the trainer, without its clipping,
    schedule, loss history and divergence checks."""
    model_config, config = cli_config(task, steps)
    model = build_model(model_config, task, seed=config.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    normaliser, slots = null_loss(task), model.feature_slots
    start = time.perf_counter()
    for step in range(steps):
        prompts = sample_prompts(task, config.batch_size, config.seed, step)
        loss = torch.mean((model(prompts.embed(slots)) - prompts.query_label) ** 2)
        optimizer.zero_grad()
        (loss / normaliser).backward()
        optimizer.step()
    return (time.perf_counter() - start) / steps


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
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-9)

    def backward(module_prediction):
        loss = torch.mean((module_prediction - prompts.query_label) ** 2)
        loss.backward()

    backward(model(z))
    gradients = [parameter.grad for parameter in model.parameters()]
    parts = {
        "sampling, library (parts on threads)": lambda: sample_prompts(task, BATCH, 0, 1),
        "sampling, reference (one thread)": lambda: reference_sample_prompts(D, N, BATCH, 0, 1),
        "forward+backward, library (query row only)": lambda: backward(model(z)),
        "forward+backward, reference (attention matrix)": lambda: backward(reference.predict(z)),
        "Adam step (library's model)": optimizer.step,
        "gradient clipping (trainer, one member)": lambda: clip_per_member(
            [g.unsqueeze(0) for g in gradients], 1e9),
        "gradient clipping (torch.nn.utils.clip_grad_norm_)":
            lambda: torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9),
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


def measure(task: TaskConfig, rounds: int, steps: int) -> dict[str, float]:
    """Median seconds per step of the trainer, the floor and the reference over interleaved
    rounds at the current thread count (the order within a round alternates)."""
    sides = {"trainer": trainer_seconds, "floor": floor_seconds,
             "reference": lambda task, steps: 1 / reference_rate(task, steps)}
    for side in sides.values():
        side(task, 3)  # warm up
    times: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(rounds):
        for name in sorted(sides, reverse=bool(round_ % 2)):
            times[name].append(sides[name](task, steps))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
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
    seconds = {}
    for threads in sorted({default_threads, 1}, reverse=True):
        torch.set_num_threads(threads)
        seconds[threads] = measure(task, args.rounds, args.steps)
        ms = {name: 1e3 * value for name, value in seconds[threads].items()}
        print(f"  torch threads {threads}: trainer {ms['trainer']:6.2f} ms/step, floor "
              f"{ms['floor']:6.2f} ms/step (trainer/floor {ms['trainer'] / ms['floor']:.3f}), "
              f"reference {ms['reference']:6.2f} ms/step (library/reference "
              f"{ms['reference'] / ms['trainer']:.2f}x)")
        for name, part in time_parts(task).items():
            print(f"      {name:52s} {part:6.3f} ms")
    torch.set_num_threads(default_threads)
    best = {name: min(values[name] for values in seconds.values())
            for name in ("trainer", "floor", "reference")}
    ratio = best["reference"] / best["trainer"]
    overhead = best["trainer"] / best["floor"]
    print(f"load average after: {os.getloadavg()[0]:.2f} (timings on a busy machine are noisy)")
    print(f"trainer/floor, each at its best thread count = {1e3 * best['trainer']:.2f} / "
          f"{1e3 * best['floor']:.2f} ms = {overhead:.3f} (target <= {FLOOR_TARGET:g}): "
          f"{'PASS' if overhead <= FLOOR_TARGET else 'FAIL'}")
    print(f"ratio library/reference, each at its best thread count = {1 / best['trainer']:.1f} / "
          f"{1 / best['reference']:.1f} steps/s = {ratio:.2f}x (target >= {TARGET:g}x): "
          f"{'PASS' if ratio >= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()
