"""Write chapter 5's depth study (nlicl_lib/experiments/data/depth_study.json): trained GLU-LSA stacks of
depth 1 to 8, each trained STUDY_TRAINING's steps and, as a convergence check, half as many,
and the greedy block-coordinate references (each fitted and measured on FIT_SAMPLES independent
samples), for every study in nlicl_lib.experiments.studies.STUDIES. About an hour on two busy
CPU cores (training 47 minutes, references 33, measuring the stacks 36, some of it side by side).

    python tools/make_depth_study.py                  # every study, every part
    python tools/make_depth_study.py --only d3 --parts references --merge   # keep the rest
    python tools/make_depth_study.py --only d3 --parts references --out /tmp/check.json
    python tools/make_depth_study.py --only d3 --parts trained --shapes 3:1 3:2 --out /tmp/t.json
    python tools/make_depth_study.py --only d5 --parts references --reference-slots 15 \
        --reference-depth 2 --fit-samples 2 --out /tmp/r.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from nlicl_lib.experiments.studies import (
    FIT_SAMPLES,
    PARTS,
    STUDIES,
    STUDY_FILE,
    run_study,
    save_study,
    shape_key,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(STUDIES), default=sorted(STUDIES))
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--shapes", nargs="+", default=None, metavar="SLOTS:DEPTH",
                        help="train only these stacks of the study, e.g. 3:1 3:2")
    parser.add_argument("--reference-slots", nargs="+", type=int, default=None, metavar="SLOTS",
                        help="references of only these slot counts")
    parser.add_argument("--reference-depth", type=int, default=None,
                        help="references only this deep (default: the study's)")
    parser.add_argument("--fit-samples", type=int, default=FIT_SAMPLES,
                        help=f"fitting samples per reference (default: {FIT_SAMPLES})")
    parser.add_argument("--merge", action="store_true",
                        help="replace only the computed parts of the studies in --out, keep the rest")
    parser.add_argument("--out", type=Path, default=STUDY_FILE)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default: 2)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    shapes = None
    if args.shapes is not None:
        try:
            shapes = [tuple(int(v) for v in item.split(":")) for item in args.shapes]
        except ValueError:
            parser.error(f"--shapes: {args.shapes} are not SLOTS:DEPTH pairs such as 3:1")
    results = json.loads(args.out.read_text()) if args.merge and args.out.exists() else {}
    for name in args.only:
        kept = results.get(name, {})
        study = STUDIES[name]
        if ("trained" not in args.parts and "trained" in kept and set(kept["trained"])
                != {shape_key(m, L) for m in study.slots for L in study.depths}):
            parser.error(f"--merge: the stored trained stacks of {name} are not the study's "
                         "shapes; recompute them (--parts trained)")
        results[name] = {**kept, **run_study(
            name, tuple(args.parts), progress=False, shapes=shapes,
            reference_slots=args.reference_slots, reference_depth=args.reference_depth,
            fit_samples=args.fit_samples)}
        print(f"{name}: done", flush=True)
    save_study(results, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
