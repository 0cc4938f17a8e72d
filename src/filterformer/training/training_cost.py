"""What a run's training cost over every stretch of it: the first start and each resume.

A run stopped and resumed trains in stretches, each in its own process. Its figures are those
of the whole run: the wall times of the stretches added up, every optimiser step's time (the
median is taken over all of them), and the highest peak of memory. The figures so far travel in
the resumable checkpoint (:meth:`TrainingCost.to_state`), so a resume adds its stretch to them,
and a resume with nothing left to train reports them unchanged.

Where a figure cannot cover every stretch it is None, never the part that was measured: a
checkpoint written before the figures were kept, or stretches whose peak memory was measured
in different ways (a run resumed on another kind of device).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["TrainingCost"]

#: The ``memory_measure`` of stretches measured in different ways.
MIXED_MEASURES = "mixed: stretches measured peak memory in different ways"
#: The ``memory_measure`` of a checkpoint that kept no figures.
UNKNOWN_MEASURE = "unknown: the checkpoint resumed from kept no measurements"


@dataclass(frozen=True)
class TrainingCost:
    """A run's training cost so far.

    Attributes:
        train_time_s: wall time of the training loops (validation included), summed over the
            stretches; None when a stretch's is unknown.
        step_times_s: the wall time of every optimiser step, in order; None when a stretch's
            are unknown.
        peak_memory_bytes: the highest peak of the stretches
            (:class:`~filterformer.training.resources.PeakMemory`); None when a stretch's is
            unknown or the stretches measured it in different ways.
        memory_measure: what ``peak_memory_bytes`` measures.
        stretches: the stretches counted (0: nothing trained yet).
    """

    train_time_s: float | None = 0.0
    step_times_s: tuple[float, ...] | None = ()
    peak_memory_bytes: int | None = None
    memory_measure: str = ""
    stretches: int = 0

    @property
    def step_time_s(self) -> float | None:
        """The median time of an optimiser step over every stretch (None without steps)."""
        return statistics.median(self.step_times_s) if self.step_times_s else None

    def extended(self, train_time_s: float, step_times_s: Sequence[float],
                 peak_memory_bytes: int | None, memory_measure: str) -> TrainingCost:
        """These figures with one more stretch's (measured by this process)."""
        if not self.stretches:
            return TrainingCost(train_time_s, tuple(step_times_s), peak_memory_bytes,
                                memory_measure, 1)
        same_measure = memory_measure == self.memory_measure
        measure = memory_measure if same_measure else (
            self.memory_measure if self.memory_measure == UNKNOWN_MEASURE else MIXED_MEASURES)
        peaks = (self.peak_memory_bytes, peak_memory_bytes)
        return TrainingCost(
            train_time_s=None if self.train_time_s is None else self.train_time_s + train_time_s,
            step_times_s=None if self.step_times_s is None
            else (*self.step_times_s, *step_times_s),
            peak_memory_bytes=max(peaks) if same_measure and None not in peaks else None,
            memory_measure=measure,
            stretches=self.stretches + 1,
        )

    def to_state(self) -> dict[str, Any]:
        """Plain data and a tensor, for a checkpoint (``torch.load(weights_only=True)``)."""
        steps = None if self.step_times_s is None else torch.tensor(self.step_times_s,
                                                                    dtype=torch.float64)
        return {"train_time_s": self.train_time_s, "step_times_s": steps,
                "peak_memory_bytes": self.peak_memory_bytes,
                "memory_measure": self.memory_measure, "stretches": self.stretches}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> TrainingCost:
        """Inverse of :meth:`to_state`; None (a checkpoint that kept no figures) gives figures
        that are unknown, but count as one stretch, so that what is added stays unknown."""
        if state is None:
            return cls(None, None, None, UNKNOWN_MEASURE, 1)
        steps = state["step_times_s"]
        return cls(state["train_time_s"], None if steps is None else tuple(steps.tolist()),
                   state["peak_memory_bytes"], state["memory_measure"], state["stretches"])
