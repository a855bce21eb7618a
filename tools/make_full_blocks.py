"""Write chapter 4's full blocks (nlicl_lib/experiments/data/full_blocks.json): blocks with
m = h = p_2 slots and units trained long, six seeds at each d = 3, 4, 5. About 5 minutes on two
idle CPU cores.

    python tools/make_full_blocks.py
    python tools/make_full_blocks.py --steps 300 --out /tmp/quick.json   # a quick look
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from nlicl_lib.experiments.studies import (
    FULL_BLOCK_FILE,
    FULL_BLOCK_SEEDS,
    run_full_blocks,
    save_study,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=FULL_BLOCK_SEEDS)
    parser.add_argument("--steps", type=int, default=None, help="fewer steps, for a quick look")
    parser.add_argument("--out", type=Path, default=FULL_BLOCK_FILE)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    results = run_full_blocks(seeds=args.seeds, steps=args.steps)
    save_study(results, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
