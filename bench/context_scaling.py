"""Benchmark 3: the cost of one LSA layer is linear in the context length n.

Times one full-attention layer's forward pass (every token updated, the library's associative
order $S = \\sum_i z_i z_i^\\top$ first) at n=40 and n=640 with the same batch, in interleaved
rounds, and prints the ratio of the median times: 16x more tokens should cost about 16x, and at
most 24x. The reference that forms the (n+1)x(n+1) attention matrix is timed too, for contrast
(its cost grows like n^2). Usage: ``python bench/context_scaling.py [--batch B] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from reference import ReferenceLSA

from nlicl_lib.models import LSA
from nlicl_lib.tasks import TaskConfig, sample_prompts

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.manual_seed(0)
    layer, reference = LSA(D_IN + 1), ReferenceLSA(D_IN + 1)
    with torch.no_grad():
        reference.p.copy_(layer.p)
        reference.q.copy_(layer.q)
    inputs = {n: sample_prompts(TaskConfig("linear", D_IN, n), args.batch, 0, 0).embed()
              for n in (SHORT, LONG)}
    gap = (layer(inputs[SHORT]) - reference(inputs[SHORT])).abs().max().item()
    assert gap < 1e-4, gap
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):
        for n, z in inputs.items():
            # enough repeats for ~50 ms per measurement at either length
            repeats = max(3, int(40 * SHORT / n))
            times.setdefault(("library", n), []).append(forward_time(layer, z, repeats))
            times.setdefault(("reference", n), []).append(forward_time(reference, z, max(1, repeats // 4)))
    median = {key: statistics.median(values) for key, values in times.items()}
    print(f"one LSA layer forward, batch {args.batch}, d={D_IN}, cpu, {torch.get_num_threads()} threads, "
          f"{args.rounds} interleaved rounds")
    for kind in ("library", "reference"):
        ratio = median[(kind, LONG)] / median[(kind, SHORT)]
        print(f"  {kind:9s} n={SHORT}: {1e3 * median[(kind, SHORT)]:8.2f} ms   n={LONG}: "
              f"{1e3 * median[(kind, LONG)]:8.2f} ms   ratio {ratio:6.1f}x")
    ratio = median[("library", LONG)] / median[("library", SHORT)]
    print(f"cost ratio n={LONG} / n={SHORT} = {ratio:.1f}x for {LONG // SHORT}x the tokens "
          f"(target <= {TARGET:g}x): {'PASS' if ratio <= TARGET else 'FAIL'}")


if __name__ == "__main__":
    main()
