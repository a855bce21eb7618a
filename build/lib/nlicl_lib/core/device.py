"""The one device helper: every entry point takes ``device=`` and passes it here.

``resolve_device("auto")`` picks CUDA, then Apple MPS, then the CPU. Asking for a device that is
not there is a :class:`~nlicl_lib.core.errors.ConfigError`, raised before any work starts.

The thread policy lives here too: :func:`choose_threads` picks torch's intra-op thread count
for the size of the work (one thread for the book's small models) and :func:`use_threads` runs a
block with it. The command line (``--threads``), ``reproduce.run_experiments`` and the live
panels all go through them, and :func:`describe_device` prints the count that runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from nlicl_lib.core.errors import ConfigError

DeviceLike = torch.device | str
"""A device as callers may give it: ``torch.device("cuda")``, ``"cuda"``, ``"cpu"`` or ``"auto"``."""

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def available_devices() -> list[str]:
    """The devices this machine can run on, best first (always ends with ``"cpu"``)."""
    found = []
    if torch.cuda.is_available():
        found.append("cuda")
    if _mps_available():
        found.append("mps")
    found.append("cpu")
    return found


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """Turn ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or ``"mps"`` into a ``torch.device``.

    ``None`` and ``"auto"`` mean the best available: CUDA, then MPS, then CPU.
    """
    if isinstance(device, torch.device):
        device = str(device)
    if device is None or device == "auto":
        return torch.device(available_devices()[0])
    if not isinstance(device, str):
        raise ConfigError("device", device, "one of " + ", ".join(DEVICE_CHOICES))
    kind, _, index = device.partition(":")
    if kind not in DEVICE_CHOICES[1:] or (index and not index.isdigit()):
        raise ConfigError("device", device, "one of " + ", ".join(DEVICE_CHOICES) + " (or cuda:N)")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("device", device, "a device this machine has: " + _have())
        if index and int(index) >= torch.cuda.device_count():
            raise ConfigError(
                "device", device, f"cuda:0 .. cuda:{torch.cuda.device_count() - 1} on this machine"
            )
    if kind == "mps" and not _mps_available():
        raise ConfigError("device", device, "a device this machine has: " + _have())
    return torch.device(device)


def describe_device(device: torch.device, threads: int | None = None) -> str:
    """A human-readable name, e.g. ``"cpu (2 threads)"`` or ``"cuda (NVIDIA H200)"``: on the
    CPU with ``threads``, the count a run will use (default: torch's count now, which is what
    runs inside :func:`use_threads`)."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        threads = torch.get_num_threads() if threads is None else threads
        return f"cpu ({threads} thread{'' if threads == 1 else 's'})"
    return device.type


def _have() -> str:
    return ", ".join(available_devices())


# -- torch's intra-op threads ---------------------------------------------------------------

SMALL_WORK_TOKEN_DIM = 64
"""Tokens of at most this dimension $D$ make layers too small for torch's intra-op threads:
the book's models have $D \\le 50$ (``d + m + 1``). Measured (``tests/test_device.py``'s note):
ch. 1's default run, 600 steps of 2000 prompts, $D = 6$, takes 1.5 s on one thread and 9.2 s on
two on a 2-core machine under load 1.5 (each step 5-20x slower when the cores are busy: the
two threads wait for each other); idle, two threads gain at most 1.0-1.3x."""

SMALL_WORK_BATCH = 20000
"""Prompts per batch up to which one thread is chosen (the test-loss batch, ``EVAL_BATCH``)."""


def choose_threads(requested: int | str | None = "auto", token_dim: int | None = None,
                   batch_size: int | None = None) -> int:
    """Torch's intra-op thread count for a run: ``requested`` when it is a positive integer
    (``--threads N``), else (``"auto"`` or ``None``) one thread for the book's sizes (tokens
    of dimension ``token_dim`` $\\le$ :data:`SMALL_WORK_TOKEN_DIM` and batches of at most
    :data:`SMALL_WORK_BATCH` prompts, or sizes not given), torch's own default (the cores)
    for larger work. Sampling threads (:mod:`nlicl_lib.core.tasks`) are separate: they fill
    each batch on every core whatever this says. A bad value is a ``ConfigError`` naming
    ``threads``."""
    if requested is None or requested == "auto":
        small = ((token_dim is None or token_dim <= SMALL_WORK_TOKEN_DIM)
                 and (batch_size is None or batch_size <= SMALL_WORK_BATCH))
        return 1 if small else _default_threads()
    if isinstance(requested, str) and requested.strip().isdigit():
        requested = int(requested)
    if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
        raise ConfigError("threads", requested,
                          "auto or a whole number of threads of at least 1 (1 suits the book's "
                          "small models)")
    return requested


def _default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else (os.cpu_count() or 1))


@contextmanager
def use_threads(threads: int) -> Iterator[int]:
    """``with use_threads(n):`` torch runs its intra-op work on ``n`` threads (a
    :func:`choose_threads` answer), and the previous count is restored afterwards, also after
    an error. :func:`describe_device` inside the block prints ``n``."""
    threads = choose_threads(threads)
    previous = torch.get_num_threads()
    if threads != previous:
        torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)
