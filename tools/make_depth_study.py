"""Write chapter 5's depth study (nlicl_lib/data/depth_study.json): trained GLU-LSA stacks of
depth 1 to 8 and the greedy block-coordinate references, for every study in
nlicl_lib.experiments.depth_study.STUDIES. About 10 minutes on two CPU cores.

    python tools/make_depth_study.py                  # every study, every part
    python tools/make_depth_study.py --only d3 --parts references --out /tmp/check.json
    python tools/make_depth_study.py --only d3 --parts trained --shapes 3:1 3:2 --out /tmp/t.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from nlicl_lib.experiments.depth_study import DATA_FILE, PARTS, STUDIES, run_study


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(STUDIES), default=sorted(STUDIES))
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--shapes", nargs="+", default=None, metavar="SLOTS:DEPTH",
                        help="train only these stacks of the study, e.g. 3:1 3:2")
    parser.add_argument("--out", type=Path, default=DATA_FILE)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    shapes = None
    if args.shapes is not None:
        try:
            shapes = [tuple(int(v) for v in item.split(":")) for item in args.shapes]
        except ValueError:
            parser.error(f"--shapes: {args.shapes} are not SLOTS:DEPTH pairs such as 3:1")
    results = {}
    for name in args.only:
        results[name] = run_study(name, tuple(args.parts), progress=False, shapes=shapes)
        print(f"{name}: done", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
