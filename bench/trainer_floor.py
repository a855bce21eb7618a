"""Benchmark 4: the trainer against a lean loop and the full-attention reference.

One linear-regression LSA layer, d=5, batch 4000 (the CLI's ``--batch 4000``), CPU, at n=20 and
n=100, at torch threads 1 and 2. Every side trains the same kind of model for ``--steps`` steps,
measured in the same process in interleaved rounds (medians, the order alternating):

- **trainer**: :func:`nlicl_lib.training.train.train` as the CLI calls it (onecycle schedule,
  clipping at 1, the library's sampler: parts of 1000 prompts on one thread per core).
- **lean, full P, Q**: a bare loop with the model's parametrisation (``(d+1)^2`` entries of P and
  of Q, the same query-only forward as ``LSA.query_label``, checked equal to the model's), the
  trainer's Adam (``foreach=False``, constant rate, no clipping) and the *lean sampler*: one
  generator, one thread (``reference_sample_prompts``), embedding by one ``cat``.
- **lean, Gamma only**: the same loop training only the preconditioner,
  ``x_q^T Gamma (1/n) sum_i y_i x_i`` (the reviewer's 40-line loop).
- **reference**: ``bench/reference.py``'s loop, full attention matrix, every token updated.

Targets: trainer / lean(full P, Q) <= 1.25; reference / trainer >= 8x. Then a breakdown
(ms per call, median) of the parts of a step at each n (one torch thread).
Usage: ``python bench/trainer_floor.py [--rounds R] [--steps K] [--ns 20,100] [--threads 1,2]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import datetime, timezone

import torch
from reference import ReferenceLSA, reference_sample_prompts, reference_train_step

from nlicl_lib.core.models import ModelConfig, build_model
from nlicl_lib.core.tasks import TaskConfig, sample_prompts
from nlicl_lib.theory.closed_forms import null_loss
from nlicl_lib.training.settings import default_train_config
from nlicl_lib.training.train import clip_per_member, train

BATCH, D = 4000, 5
LEAN_TARGET, REFERENCE_TARGET = 1.25, 8.0


def lean_embed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Z_0 = [x; y], the query's label 0, by one ``cat`` (no clone, no slot columns)."""
    labels = torch.cat([y[:, :-1], y.new_zeros(y.shape[0], 1)], dim=1)
    return torch.cat([x, labels.unsqueeze(-1)], dim=-1)


def full_query(p: torch.Tensor, q: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """-(query's label after the layer): the model's prediction, P and Q in full."""
    n = z.shape[1] - 1
    context, query = z[:, :n], z[:, n]
    row = torch.einsum("bi,bid->bd", context @ p[-1], context)
    return -(query[:, -1] + torch.einsum("bd,de,be->b", row, q, query) / n)


def gamma_query(gamma: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x_q^T Gamma (1/n) sum_i y_i x_i: the preconditioner only."""
    n = x.shape[1] - 1
    g = torch.einsum("bi,bid->bd", y[:, :n], x[:, :n]) / n
    return torch.einsum("bd,de,be->b", x[:, n], gamma, g)


def trainer_seconds(task: TaskConfig, steps: int) -> float:
    model_config = ModelConfig()
    config = default_train_config(task, model_config, steps=steps, batch_size=BATCH)
    model = build_model(model_config, task, "cpu", seed=config.seed)
    return train(model, task, config, "cpu", False, None).seconds / steps


def lean_full_seconds(task: TaskConfig, steps: int) -> float:
    config = default_train_config(task, ModelConfig(), steps=steps, batch_size=BATCH)
    lsa = build_model(ModelConfig(), task, seed=config.seed).blocks[0].lsa
    p, q = lsa.p, lsa.q
    optimizer = torch.optim.Adam([p, q], lr=config.learning_rate, foreach=False)
    normaliser, n = null_loss(task), task.context_length
    start = time.perf_counter()
    for step in range(steps):
        x, y = reference_sample_prompts(D, n, BATCH, config.seed, step)
        loss = torch.mean((full_query(p, q, lean_embed(x, y)) - y[:, -1]) ** 2)
        p.grad = q.grad = None
        (loss / normaliser).backward()
        optimizer.step()
    return (time.perf_counter() - start) / steps


def lean_gamma_seconds(task: TaskConfig, steps: int) -> float:
    torch.manual_seed(0)
    gamma = torch.nn.Parameter(0.02 * torch.randn(D, D))
    optimizer = torch.optim.Adam([gamma], lr=0.02, foreach=False)
    normaliser, n = null_loss(task), task.context_length
    start = time.perf_counter()
    for step in range(steps):
        x, y = reference_sample_prompts(D, n, BATCH, 0, step)
        loss = torch.mean((gamma_query(gamma, x, y) - y[:, -1]) ** 2)
        gamma.grad = None
        (loss / normaliser).backward()
        optimizer.step()
    return (time.perf_counter() - start) / steps


def reference_seconds(task: TaskConfig, steps: int) -> float:
    torch.manual_seed(0)
    model = ReferenceLSA(D + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    normaliser = null_loss(task)
    start = time.perf_counter()
    for step in range(steps):
        reference_train_step(model, optimizer, D, task.context_length, BATCH, 0, step, normaliser)
    return (time.perf_counter() - start) / steps


SIDES = {"trainer": trainer_seconds, "lean full": lean_full_seconds,
         "lean gamma": lean_gamma_seconds, "reference": reference_seconds}
CPU: dict[str, list[float]] = {name: [] for name in SIDES}
"""CPU seconds per step (every thread of the process, ``time.process_time``) of each round:
less sensitive to other jobs than wall time, which also counts the waits for descheduled
threads. For the trainer it includes the call's setup (building the optimizer, copying the
initial weights: well under 1% of 20 steps)."""


def run_side(name: str, task: TaskConfig, steps: int) -> float:
    """Wall seconds per step of side ``name``; its CPU seconds per step go to :data:`CPU`."""
    cpu = time.process_time()
    wall = SIDES[name](task, steps)
    CPU[name].append((time.process_time() - cpu) / steps)
    return wall


def check_same_function(task: TaskConfig) -> None:
    """The lean full loop predicts what the model predicts (float64, same P and Q)."""
    model = build_model(ModelConfig(attention_init_std=0.3), task, seed=1, dtype=torch.float64)
    prompts = sample_prompts(task, 64, seed=2, step=0, dtype=torch.float64)
    lsa = model.blocks[0].lsa
    mine = full_query(lsa.p, lsa.q, lean_embed(prompts.x, prompts.y))
    gap = (model(prompts.embed()) - mine).abs().max() / mine.abs().max()
    assert gap < 1e-12, gap


def measure(task: TaskConfig, rounds: int, steps: int) -> dict[str, float]:
    """Median seconds per step of every side over interleaved rounds (order alternating);
    the reference, the slowest, runs a quarter of the steps (at least 3)."""
    counts = {name: steps if name != "reference" else max(3, steps // 4) for name in SIDES}
    for side in SIDES.values():
        side(task, 2)  # warm up
    times: dict[str, list[float]] = {name: [] for name in SIDES}
    for values in CPU.values():
        values.clear()
    for round_ in range(rounds):
        for name in (list(SIDES) if round_ % 2 == 0 else list(reversed(SIDES))):
            times[name].append(run_side(name, task, counts[name]))
    wall = {name: statistics.median(values) for name, values in times.items()}
    return wall | {f"{name} cpu": statistics.median(CPU[name]) for name in SIDES}


def median_ms(call, repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def breakdown(task: TaskConfig, repeats: int = 15) -> dict[str, float]:
    """ms per call of each part of a step (median) at the current thread count."""
    n = task.context_length
    model = build_model(ModelConfig(), task, seed=0)
    parameters = list(model.parameters())
    lsa = model.blocks[0].lsa
    prompts = sample_prompts(task, BATCH, 0, 0)
    z = prompts.embed(model.feature_slots)
    x, y = prompts.x, prompts.y
    gamma = torch.nn.Parameter(0.02 * torch.randn(D, D))
    reference = ReferenceLSA(D + 1)
    normaliser = null_loss(task)

    def backward(prediction: torch.Tensor) -> None:
        (torch.mean((prediction - y[:, -1]) ** 2) / normaliser).backward()

    backward(model(z))
    backward(gamma_query(gamma, x, y))
    adam_full = torch.optim.Adam(parameters, lr=1e-9)
    adam_gamma = torch.optim.Adam([gamma], lr=1e-9, foreach=False)
    config = default_train_config(task, ModelConfig(), steps=100, batch_size=BATCH)
    grads = [p.grad for p in parameters]
    parts = {
        "sampling, library (4 parts on the pool)": lambda: sample_prompts(task, BATCH, 0, 1),
        "sampling, lean (one generator, one thread)": lambda: reference_sample_prompts(D, n, BATCH, 0, 1),
        "embedding, library (Prompts.embed)": lambda: prompts.embed(model.feature_slots),
        "embedding, lean (one cat)": lambda: lean_embed(x, y),
        "fwd+bwd, full P,Q query-only (model)": lambda: backward(model(z)),
        "fwd+bwd, full P,Q query-only (lean)": lambda: backward(full_query(lsa.p, lsa.q, z)),
        "fwd+bwd, Gamma only (lean)": lambda: backward(gamma_query(gamma, x, y)),
        "fwd+bwd, full attention (reference)": lambda: backward(reference.predict(z)),
        "Adam step, P and Q (torch's default)": adam_full.step,
        "Adam step, Gamma": adam_gamma.step,
        "clipping (trainer's clip_per_member, one member)": lambda: clip_per_member(
            [g.unsqueeze(0) for g in grads], 1e9),
        "schedule: learning_rate_at + set group lr": lambda: [
            g.__setitem__("lr", config.learning_rate_at(7)) for g in adam_full.param_groups],
    }
    return {name: median_ms(call, repeats) for name, call in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--ns", default="20,100")
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    ns = [int(v) for v in args.ns.split(",")]
    thread_counts = [int(v) for v in args.threads.split(",")]
    default_threads = torch.get_num_threads()
    print(f"trainer vs lean loop vs full-attention reference: d={D}, batch {BATCH}, 1 LSA layer, "
          f"cpu ({os.cpu_count()} cores), torch {torch.__version__}, {args.rounds} interleaved "
          f"rounds of {args.steps} steps (reference: {max(3, args.steps // 4)}); "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, load average "
          f"{os.getloadavg()[0]:.2f}")
    print("lean loops sample with the lean sampler (one generator, one thread); the trainer with "
          "the library's (parts of 1000 on one thread per core)")
    verdicts = []
    per_thread: dict[tuple[int, int], dict[str, float]] = {}
    for n in ns:
        task = TaskConfig(kind="linear", input_dim=D, context_length=n)
        check_same_function(task)
        for threads in thread_counts:
            torch.set_num_threads(threads)
            seconds = measure(task, args.rounds, args.steps)
            per_thread[(n, threads)] = seconds
            ms = {name: 1e3 * value for name, value in seconds.items()}
            lean, ref = ms["trainer"] / ms["lean full"], ms["reference"] / ms["trainer"]
            print(f"n={n:3d} threads {threads}: trainer {ms['trainer']:7.2f} | lean full P,Q "
                  f"{ms['lean full']:7.2f} | lean Gamma {ms['lean gamma']:7.2f} | reference "
                  f"{ms['reference']:8.2f} ms/step;  trainer/lean(full) {lean:.3f}, "
                  f"trainer/lean(Gamma) {ms['trainer'] / ms['lean gamma']:.3f}, "
                  f"reference/trainer {ref:.2f}x  (load {os.getloadavg()[0]:.2f})")
            print(f"           CPU ms/step: trainer {ms['trainer cpu']:7.2f} | lean full P,Q "
                  f"{ms['lean full cpu']:7.2f} | lean Gamma {ms['lean gamma cpu']:7.2f} | reference "
                  f"{ms['reference cpu']:8.2f};  trainer/lean(full) "
                  f"{ms['trainer cpu'] / ms['lean full cpu']:.3f}, reference/trainer "
                  f"{ms['reference cpu'] / ms['trainer cpu']:.2f}x")
            verdicts.append((n, threads, lean, ref))
        if set(thread_counts) >= {1, 2}:
            one, two = per_thread[(n, 1)], per_thread[(n, 2)]
            print(f"n={n:3d} 2 threads / 1 thread (ms/step ratio): " + ", ".join(
                f"{name} {two[name] / one[name]:.2f}" for name in SIDES))
        torch.set_num_threads(1)
        print(f"n={n:3d} breakdown, ms per call (torch threads 1, median of 15):")
        for name, value in breakdown(task).items():
            print(f"      {name:48s} {value:8.3f}")
    torch.set_num_threads(default_threads)
    for n in ns:  # each side at its best thread count, as bench/train_step.py compares
        best = {name: min(per_thread[(n, t)][name] for t in thread_counts) for name in SIDES}
        print(f"n={n:3d} each side at its best thread count: trainer {1e3 * best['trainer']:.2f}, "
              f"lean full P,Q {1e3 * best['lean full']:.2f}, reference {1e3 * best['reference']:.2f} "
              f"ms/step: trainer/lean(full) {best['trainer'] / best['lean full']:.3f}, "
              f"reference/trainer {best['reference'] / best['trainer']:.2f}x")
    for n, threads, lean, ref in verdicts:
        print(f"n={n:3d} threads {threads}: trainer/lean(full P,Q) {lean:.3f} (target <= "
              f"{LEAN_TARGET:g}): {'PASS' if lean <= LEAN_TARGET else 'FAIL'};  reference/trainer "
              f"{ref:.2f}x (target >= {REFERENCE_TARGET:g}x): "
              f"{'PASS' if ref >= REFERENCE_TARGET else 'FAIL'}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
