"""Seeding, and saving and restoring every random stream a run draws from.

States are kept as tensors and plain Python data, so checkpoints load with
``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ["rng_state", "seed_everything", "set_rng_state"]


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's global generators (CPU and every GPU)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """The state of Python's, NumPy's and torch's global generators (CPU and CUDA)."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    version, internal, gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)),
            "position": int(position), "has_gauss": int(has_gauss), "cached": float(cached),
        },
        "python": {"version": version, "internal": list(internal), "gauss": gauss},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore generators saved by :func:`rng_state`."""
    torch.set_rng_state(state["torch"])
    numpy = state["numpy"]
    np.random.set_state((
        numpy["kind"], numpy["keys"].numpy().astype(np.uint32), numpy["position"],
        numpy["has_gauss"], numpy["cached"],
    ))
    python = state["python"]
    random.setstate((python["version"], tuple(python["internal"]), python["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
