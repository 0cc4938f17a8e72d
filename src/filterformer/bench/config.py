"""What one benchmark configuration is: a method, a length, a mode, a device and the shapes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from .allocator import ALLOCATORS

__all__ = [
    "DEFAULT_LENGTHS",
    "DEVICES",
    "MODES",
    "QUICK_LENGTHS",
    "BenchConfig",
    "BenchShape",
    "check_choice",
    "resolve_device",
]

#: ``train`` times forward + backward, ``inference`` forward only under ``torch.inference_mode``.
MODES = ("train", "inference")
#: ``auto`` picks CUDA when it is available, else the CPU.
DEVICES = ("auto", "cpu", "cuda")
#: The sequence lengths of a full run (which adds those the targets read, e.g. AGF at 2048).
DEFAULT_LENGTHS = (256, 1024, 4096, 16384)
#: The lengths of ``--quick`` runs (tests and smoke checks).
QUICK_LENGTHS = (32, 64)


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """Raise ValueError naming ``name`` and listing ``choices`` when ``value`` is not one."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is present, else ``cpu``; explicit choices are checked."""
    check_choice("device", device, DEVICES)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but CUDA is not available; use cpu or auto")
    return device


@dataclass(frozen=True)
class BenchShape:
    """The sizes every method is measured at.

    Kernels take q, k, v of shape ``(batch, heads, N, head_dim)``; modules and models take hidden
    states ``(batch, N, width)`` with ``width = heads · head_dim``.

    Attributes:
        batch: B.
        heads: h.
        head_dim: d.
        depth: blocks of the whole-model benchmarks.
        mlp_ratio: MLP inner width over the width, in the whole-model benchmarks.
    """

    batch: int = 2
    heads: int = 4
    head_dim: int = 64
    depth: int = 4
    mlp_ratio: float = 4.0

    def __post_init__(self) -> None:
        for name in ("batch", "heads", "head_dim", "depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer; got {value!r}")
        if not self.mlp_ratio > 0:
            raise ValueError(f"mlp_ratio must be positive; got {self.mlp_ratio}")

    @property
    def width(self) -> int:
        """The model width D = h · d."""
        return self.heads * self.head_dim

    @classmethod
    def quick(cls) -> BenchShape:
        """Tiny sizes for tests and smoke runs."""
        return cls(batch=1, heads=2, head_dim=8, depth=1, mlp_ratio=2.0)


@dataclass(frozen=True)
class BenchConfig:
    """One configuration, as handed to :func:`~filterformer.bench.measure.measure_config`.

    Attributes:
        method: a name of :data:`~filterformer.bench.methods.BENCH_METHODS`.
        N: the sequence length.
        mode: one of :data:`MODES`.
        device: ``cpu`` or ``cuda`` (already resolved).
        shape: the sizes.
        repeats: the most timed repeats (the median is reported).
        min_repeats: the fewest timed repeats, however long a step takes.
        warmup: untimed steps before the timed ones, besides the memory step.
        time_budget_s: the repeats stop at ``min_repeats`` once they have used this much time.
        seed: the seed of the weights (inputs have their own, fixed seed).
        allocator: ``reuse`` or ``system``: the CPU heap policy while timing (see
            :mod:`~filterformer.bench.allocator`).
    """

    method: str
    N: int
    mode: str
    device: str = "cpu"
    shape: BenchShape = field(default_factory=BenchShape)
    repeats: int = 5
    min_repeats: int = 3
    warmup: int = 1
    time_budget_s: float = 30.0
    seed: int = 0
    allocator: str = "reuse"

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, MODES)
        check_choice("allocator", self.allocator, ALLOCATORS)
        check_choice("device", self.device, ("cpu", "cuda"))
        if isinstance(self.N, bool) or not isinstance(self.N, int) or self.N < 1:
            raise ValueError(f"N must be a positive integer; got {self.N!r}")
        if not 1 <= self.min_repeats <= self.repeats:
            raise ValueError(
                f"repeats ({self.repeats}) and min_repeats ({self.min_repeats}) must satisfy "
                "1 <= min_repeats <= repeats"
            )
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0; got {self.warmup}")

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the worker process receives it as JSON)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchConfig:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        data["shape"] = BenchShape(**data.get("shape", {}))
        return cls(**data)
