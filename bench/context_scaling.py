"""Benchmark 3: the cost of one LSA layer is linear in the context length n.

Times one full-attention layer's forward pass (every token updated, the library's associative
order $S = \\sum_i z_i z_i^\\top$ first) at n=40 and n=640 with the same batch, in interleaved
rounds, and prints the ratio of the median times: 16x more tokens should cost about 16x, and at
most 24x. The reference that forms the (n+1)x(n+1) attention matrix is timed too, for contrast
(its cost grows like n^2). Both are timed at torch's default thread count and at one thread;
the verdict uses the worse library ratio.
Usage: ``python bench/context_scaling.py [--batch B] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
from reference import ReferenceLSA

from nlicl_lib.core.models import LSA
from nlicl_lib.core.tasks import TaskConfig, sample_prompts

D_IN = 5
SHORT, LONG = 40, 640
TARGET = 24.0


def forward_time(layer: torch.nn.Module, z: torch.Tensor, repeats: int) -> float:
    with torch.no_grad():
        layer(z)
        start = time.perf_counter()
        for _ in range(repeats):
            layer(z)
    return (time.perf_counter() - start) / repeats


def measure(batch: int, rounds: int) -> dict[tuple[str, int], float]:
    """Median forward seconds of the library layer and the reference at n = 40 and 640."""
    torch.manual_seed(0)
    layer, reference = LSA(D_IN + 1), ReferenceLSA(D_IN + 1)
    with torch.no_grad():
        reference.p.copy_(layer.p)
        reference.q.copy_(layer.q)
    inputs = {n: sample_prompts(TaskConfig(kind="linear", input_dim=D_IN, context_length=n), batch, 0, 0).embed()
              for n in (SHORT, LONG)}
    with torch.no_grad():
        gap = (layer(inputs[SHORT]) - reference(inputs[SHORT])).abs().max().item()
    assert gap < 1e-4, gap
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(rounds):
        for n, z in inputs.items():
            repeats = max(3, int(40 * SHORT / n))
            times.setdefault(("library", n), []).append(forward_time(layer, z, repeats))
            times.setdefault(("reference", n), []).append(
                forward_time(reference, z, max(1, repeats // 4)))
    return {key: statistics.median(values) for key, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"one LSA layer forward, batch {args.batch}, d={D_IN}, cpu ({os.cpu_count()} cores), "
          f"{args.rounds} interleaved rounds; load average {os.getloadavg()[0]:.2f}")
    default_threads = torch.get_num_threads()
    worst = 0.0
    for threads in sorted({default_threads, 1}, reverse=True):
        torch.set_num_threads(threads)
        median = measure(args.batch, args.rounds)
        print(f"  torch threads {threads}:")
        for kind in ("library", "reference"):
            ratio = median[(kind, LONG)] / median[(kind, SHORT)]
            print(f"    {kind:9s} n={SHORT}: {1e3 * median[(kind, SHORT)]:8.2f} ms   n={LONG}: "
                  f"{1e3 * median[(kind, LONG)]:8.2f} ms   ratio {ratio:6.1f}x")
        worst = max(worst, median[("library", LONG)] / median[("library", SHORT)])
    torch.set_num_threads(default_threads)
    print(f"cost ratio n={LONG} / n={SHORT}, worst over thread counts = {worst:.1f}x for "
          f"{LONG // SHORT}x the tokens (target <= {TARGET:g}x): "
          f"{'PASS' if worst <= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()
