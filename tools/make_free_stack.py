"""Write chapter 5's free stacks (nlicl_lib/experiments/data/free_stack.json): GLU-LSA stacks
with full attention and GLUs reading and writing the whole token, trained on the depth study's
task, against the greedy reference and the GD-form stacks of the same shape
(nlicl_lib.experiments.studies). About 5 minutes on one CPU core.

    python tools/make_free_stack.py
    python tools/make_free_stack.py --depths 1 --steps 100 --out /tmp/free.json   # a quick look
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from nlicl_lib.experiments.studies import FREE_DEPTHS, FREE_STACK_FILE, run_free_stacks, save_study


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", nargs="+", type=int, default=list(FREE_DEPTHS))
    parser.add_argument("--steps", type=int, default=None, help="fewer training steps")
    parser.add_argument("--out", type=Path, default=FREE_STACK_FILE)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = run_free_stacks(tuple(args.depths), progress=False, steps=args.steps)
    save_study(result, args.out)
    print(f"wrote {args.out} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
