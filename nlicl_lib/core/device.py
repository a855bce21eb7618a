"""The one device helper: every entry point takes ``device=`` and passes it here.

``resolve_device("auto")`` picks CUDA, then Apple MPS, then the CPU. Asking for a device that is
not there is a :class:`~nlicl_lib.core.errors.ConfigError`, raised before any work starts.
"""

from __future__ import annotations

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


def describe_device(device: torch.device) -> str:
    """A human-readable name, e.g. ``"cpu (2 threads)"`` or ``"cuda (NVIDIA H200)"``."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        threads = torch.get_num_threads()
        return f"cpu ({threads} thread{'' if threads == 1 else 's'})"
    return device.type


def _have() -> str:
    return ", ".join(available_devices())
