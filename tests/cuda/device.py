"""The device the CUDA tier runs on, and whether this machine has one."""

from __future__ import annotations

import torch

#: Every test of the tier runs its model here and compares it with a float64 copy on the CPU.
DEVICE = torch.device("cuda")

#: Why the tier is skipped on a machine without a GPU (shown by ``pytest -ra``).
NO_DEVICE_REASON = "CUDA tier: no CUDA device (torch.cuda.is_available() is False)"


def device_available() -> bool:
    """Whether :data:`DEVICE` can run tensors on this machine."""
    return torch.cuda.is_available()
