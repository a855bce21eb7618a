"""Seeding: one function for global seeds, and batches that are pure functions of (seed, step).

Following Raventós et al., the prompts of training step ``t`` of a run with seed ``s`` depend on
``(s, t)`` only, not on what ran before, so a run is reproducible and resumable. Model
initialisation draws from :func:`seed_everything`'s global seed.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from nlicl_lib.core.errors import check_int

# Streams keep the random numbers of different purposes apart for the same seed.
STREAM_TRAIN = 0
STREAM_TEST = 1
STREAM_INIT = 2
STREAM_OTHER = 3
STREAM_REFERENCE = 4  # contexts that fit a reference's preconditioners (depth.greedy_reference)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (all devices) from one integer. Call once per run."""
    seed = check_int("seed", seed, minimum=0)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def derive_seed(seed: int, stream: int, step: int, part: int = 0) -> int:
    """A 63-bit seed that depends only on ``(seed, stream, step, part)``.

    Mixing with SplitMix64 keeps nearby inputs (step 1, step 2) from giving related streams.
    """
    x = (seed * 0x9E3779B97F4A7C15 + stream * 0xBF58476D1CE4E5B9 + step * 0x94D049BB133111EB
         + part * 0xD6E8FEDA3A1F5F4B) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (x ^ (x >> 31)) & 0x7FFFFFFFFFFFFFFF


def generator(seed: int, stream: int, step: int, device: torch.device, part: int = 0
              ) -> torch.Generator:
    """A fresh ``torch.Generator`` on ``device`` for one ``(seed, stream, step, part)``."""
    gen = torch.Generator(device=device)
    gen.manual_seed(derive_seed(seed, stream, step, part))
    return gen
