"""A target: a quantity of two cases measured side by side, ``numerator`` over ``denominator``
(``time``: the median of the rounds' ratios; ``memory``: of the first steps' extra memory;
``first``: a first step over a median one), bounded by ``bound`` in a ``direction``; ``info``
rows get no verdict."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..timing import PairedStepTimes
from .records import BenchRecord
from .step_cases import BenchShape

__all__ = ["Case", "PairMeasurement", "Target", "TargetResult", "judge"]

QUANTITIES = ("time", "memory", "first")
DIRECTIONS = ("<=", ">=", "info")


class Case(NamedTuple):  # a row of the method table at length N in a mode

    method: str
    N: int
    mode: str


@dataclass(frozen=True)
class Target:
    """``quantity`` of ``numerator`` over ``denominator`` must be ``direction`` ``bound``; the
    sides are built at ``shape`` (the run's where None) under autocast to ``precision`` and
    alternated for ``time_factor`` times the run's time per target (more rounds where the
    rounds' ratios spread about as wide as the bound's margin)."""

    name: str
    numerator: Case
    denominator: Case
    bound: float
    direction: str
    quantity: str = "time"
    shape: BenchShape | None = None
    precision: str = "fp32"
    time_factor: float = 1.0

    def __post_init__(self) -> None:
        if not self.time_factor > 0:
            raise ValueError(f"time_factor must be > 0; got {self.time_factor!r}")
        if self.direction not in DIRECTIONS or self.quantity not in QUANTITIES:
            raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)} and quantity "
                             f"one of {', '.join(QUANTITIES)}; got {self.direction!r} and "
                             f"{self.quantity!r}")


@dataclass
class PairMeasurement:
    """Cases measured side by side: their records, their alternated ``times`` (None where one
    was not measured)."""

    records: list[BenchRecord]
    times: PairedStepTimes | None = None

    def side(self, case: Case) -> int:  # the index of ``case``'s record
        return next(i for i, r in enumerate(self.records) if (r.method, r.N, r.mode) == case)


@dataclass
class TargetResult:
    """A target on one run: its ``value`` (None: not measured), why it has no verdict
    (``note``), its cases' records (``sides``), a time ratio's quartiles (``spread``)."""

    target: Target
    value: float | None
    spread: tuple[float, float] | None = None
    sides: list[BenchRecord] = field(default_factory=list)
    note: str | None = None

    @property
    def passed(self) -> bool | None:
        t = self.target
        if self.value is None or self.note or t.direction == "info":
            return None
        return self.value <= t.bound if t.direction == "<=" else self.value >= t.bound

    def to_row(self) -> dict[str, Any]:
        """Its row of ``bench.json``: the target's fields, then what this run found."""
        return {**dataclasses.asdict(self.target), "value": self.value, "spread": self.spread,
                "passed": self.passed, "note": self.note, "sides": [
                    {"N": r.N, "median_ms": r.median_ms, "peak_mb": r.peak_mb} for r in self.sides]}


def judge(target: Target, pair: PairMeasurement) -> TargetResult:
    """The target's value from its two sides measured side by side (in either order)."""
    i, j = pair.side(target.numerator), pair.side(target.denominator)
    a, b = sides = [pair.records[i], pair.records[j]]
    unmeasured = next((r for r in sides if not r.measured), None)
    if unmeasured is not None:
        return TargetResult(target, None, sides=sides,
                            note=f"not measured: {unmeasured.method}: {unmeasured.skipped}")
    if target.quantity == "time" and pair.times is not None:
        value, low, high = pair.times.ratio(i, j)
        return TargetResult(target, value, (low, high), sides)
    value = {"memory": (a.peak_mb, b.peak_mb), "first": (a.first_ms, b.median_ms)}.get(
        target.quantity, (None, None))
    ok = None not in value and value[1] > 0
    return TargetResult(target, value[0] / value[1] if ok else None, sides=sides,
                        note=None if ok else f"its {target.quantity} was not measured")
