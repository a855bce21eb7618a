"""Rewrite ``binder/requirements.txt``: every package a fresh venv gets from
``binder/requirements.in``, pinned (``make binder-lock``).

Binder (repo2docker) installs ``binder/requirements.txt`` and then runs ``binder/postBuild``.
Pinning only the direct packages would let Binder pick any version of the hundred others, so
the file pins what ``pip freeze`` finds after installing the direct ones into a new venv with
this machine's Python (3.11, as ``binder/runtime.txt`` asks). Binder reaches PyTorch's CPU-only
index (``--extra-index-url``), where ``torch==2.13.0+cpu`` lies; here the same wheel is on disk.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
HEADER = """\
# Binder (repo2docker) environment for running the chapters live: every package pinned.
# Written by `make binder-lock` (tools/lock_binder.py) from binder/requirements.in, the direct
# packages; do not edit by hand. Binder has internet access, so torch comes from PyTorch's
# CPU-only index (the default wheel pulls GBs of CUDA). Then binder/postBuild installs nlicl_lib.
--extra-index-url https://download.pytorch.org/whl/cpu
"""


def frozen(requirements_in: Path) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip"]
        subprocess.run([*pip, "install", "--quiet", "-r", str(requirements_in)], check=True)
        out = subprocess.run([*pip, "freeze", "--all", "--exclude", "pip", "--exclude",
                              "setuptools", "--exclude", "wheel"], check=True, capture_output=True,
                             text=True).stdout
    return sorted((line for line in out.splitlines() if line.strip()), key=str.lower)


def main() -> int:
    lines = frozen(BINDER / "requirements.in")
    (BINDER / "requirements.txt").write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"binder/requirements.txt: {len(lines)} packages pinned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
