"""Write chapter 5's free stacks (nlicl_lib/experiments/data/free_stack.json): GLU-LSA stacks
with full attention and GLUs reading and writing the whole token, trained on the depth study's
task at depths 1 to 3 from the GD-form solution and from random starts (several seeds and
rates, one run twice as long), each measured against the GD-form stack of its shape on
independent test samples, with the agreement A_l of its blocks l < L; and the GD-form stack
trained on in GD form with the same settings (nlicl_lib.experiments.studies.run_free_stacks).
About 30 minutes on one CPU core (the free runs; the rest about 2 minutes).

    python tools/make_free_stack.py
    python tools/make_free_stack.py --parts continued --merge   # keep the stored free runs
    python tools/make_free_stack.py --depths 1 --steps 100 --out /tmp/free.json   # a quick look
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from nlicl_lib.experiments.studies import (
    FREE_DEPTHS,
    FREE_PARTS,
    FREE_STACK_FILE,
    run_free_stacks,
    save_study,
)


def merge(stored: dict, fresh: dict) -> dict:
    """``stored`` with the parts ``fresh`` computed replaced (per depth and their times and
    commits); the GD-form stacks both start from must be the same (training is deterministic
    on one machine), as must every setting."""
    same = ("task", "slots", "depths", "training", "gd_form_training", "test", "seeds", "rates",
            "doubling", "agreement_prompts", "agreement_groups")
    for key in same:
        if stored.get(key) != fresh[key]:
            raise SystemExit(f"--merge: {key} differs from the stored file's; rerun every part")
    out = dict(stored)
    for depth, entry in fresh["depth_runs"].items():
        kept = stored["depth_runs"][depth]
        if kept["gd_form"]["weights"] != entry["gd_form"]["weights"]:
            raise SystemExit(f"--merge: the GD-form stack of depth {depth} trained differently "
                             "from the stored one; rerun every part")
        updated = {"continued": ("continued",), "free": ("runs", "evaluation_seconds")}
        for part in fresh["parts"]:
            kept.update({key: entry[key] for key in updated[part]})
    for part in fresh["parts"]:
        out[f"{part}_seconds"] = fresh[f"{part}_seconds"]
        out.setdefault("commits", {})[part] = fresh["commit"]
    out["parts"] = [p for p in FREE_PARTS if p in set(stored.get("parts", [])) | set(fresh["parts"])]
    out["seconds"] = out["gd_form_seconds"] + sum(out[f"{p}_seconds"] for p in out["parts"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", nargs="+", type=int, default=list(FREE_DEPTHS))
    parser.add_argument("--parts", nargs="+", choices=FREE_PARTS, default=list(FREE_PARTS))
    parser.add_argument("--steps", type=int, default=None, help="fewer training steps (T)")
    parser.add_argument("--merge", action="store_true",
                        help="replace only the computed parts in --out, keep the rest")
    parser.add_argument("--out", type=Path, default=FREE_STACK_FILE)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = run_free_stacks(tuple(args.depths), progress=False, steps=args.steps,
                             parts=tuple(args.parts))
    result["commits"] = dict.fromkeys(args.parts, result["commit"])
    if args.merge and args.out.exists():
        result = merge(json.loads(args.out.read_text()), result)
    save_study(result, args.out)
    print(f"wrote {args.out} ({result['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
