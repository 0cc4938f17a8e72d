"""The performance targets, a list of named records: a quantity of two cases measured side by side
in one run (``numerator`` over ``denominator``), bounded by ``bound`` in a ``direction``.

Quantities: ``time`` the median over rounds of the ratio of the sides' round means, ``memory``
the ratio of their first steps' extra memory, ``difference`` the largest absolute difference of
their outputs on the same inputs (not a ratio), ``first`` the numerator's first step over the
denominator's median step. ``info`` rows are shown beside their bound, without a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..methods import DEFAULT_METHODS
from ..timing import PairedStepTimes
from .decoding import CONTEXTS, DECODING_SHAPE, FAMILIES
from .records import BenchRecord
from .step_cases import COMPILED, BenchShape

__all__ = ["DIRECTIONS", "QUANTITIES", "TARGETS", "Case", "PairMeasurement", "Target",
           "TargetResult", "judge"]

QUANTITIES = ("time", "memory", "difference", "first")
DIRECTIONS = ("<=", ">=", "info")


class Case(NamedTuple):
    """A benchmark case: a method's name (the method table's, or a decoding or GPU row's), N and
    the mode."""

    method: str
    N: int
    mode: str


@dataclass(frozen=True)
class Target:
    """``quantity`` of ``numerator`` over ``denominator`` must be ``direction`` ``bound``; the
    sides are built at ``shape`` (the run's where None) under autocast to ``precision``, and a
    target with a ``device`` is judged only in a run on that device."""

    name: str
    numerator: Case
    denominator: Case
    bound: float
    direction: str
    quantity: str = "time"
    shape: BenchShape | None = None
    precision: str = "fp32"
    device: str | None = None

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS or self.quantity not in QUANTITIES:
            raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)} and quantity "
                             f"one of {', '.join(QUANTITIES)}; got {self.direction!r} and "
                             f"{self.quantity!r}")

    def holds(self, value: float) -> bool | None:
        """Whether ``value`` meets the bound; None for an ``info`` row."""
        return None if self.direction == "info" else (
            value <= self.bound if self.direction == "<=" else value >= self.bound)


@dataclass
class PairMeasurement:
    """Two cases measured side by side: their ``records``, their alternated ``times`` (None where
    a side was not measured) and the ``difference`` of their outputs where it was asked for."""

    records: list[BenchRecord]
    times: PairedStepTimes | None = None
    difference: float | None = None


@dataclass
class TargetResult:
    """A target on one run: its ``value`` (None where it was not measured), why it has no
    verdict (``note``), its two cases' records (``sides``) and, for a time ratio, the rounds'
    ratios' quartiles ``spread``."""

    target: Target
    value: float | None
    spread: tuple[float, float] | None = None
    sides: list[BenchRecord] = field(default_factory=list)
    note: str | None = None

    @property
    def passed(self) -> bool | None:
        """The verdict; None where nothing was measured or ``note`` says why none is given."""
        return None if self.value is None or self.note else self.target.holds(self.value)

    def to_row(self) -> dict[str, Any]:
        """Its row of ``bench.json``."""
        t = self.target
        return {"name": t.name, "numerator": list(t.numerator), "denominator": list(t.denominator),
                "quantity": t.quantity, "direction": t.direction, "bound": t.bound,
                "precision": t.precision, "value": self.value, "spread": self.spread,
                "passed": self.passed, "note": self.note,
                "sides": [{"N": r.N, "median_ms": r.median_ms, "peak_mb": r.peak_mb}
                          for r in self.sides]}


def judge(target: Target, pair: PairMeasurement) -> TargetResult:
    """The target's value from its two sides measured side by side."""
    a, b = pair.records
    unmeasured = next((r for r in (a, b) if not r.measured), None)
    if unmeasured is not None:
        return TargetResult(target, None, sides=[a, b],
                            note=f"not measured: {unmeasured.method}: {unmeasured.skipped}")
    if target.quantity == "time" and pair.times is not None:
        value, low, high = pair.times.ratio(0, 1)
        return TargetResult(target, value, (low, high), [a, b])
    value = {"memory": (a.peak_mb, b.peak_mb), "first": (a.first_ms, b.median_ms),
             "difference": (pair.difference, 1.0)}.get(target.quantity, (None, None))
    ok = None not in value and value[1] > 0
    return TargetResult(target, value[0] / value[1] if ok else None, sides=[a, b],
                        note=None if ok else f"its {target.quantity} was not measured")


_MODEL_ROWS = {"softmax": "model-softmax", "gfsa": "model-gfsa", "neutreno": "model-neutreno",
               "agf": "model-agf", "samsa_soft": "model-samsa-soft", "samsa_hard": "model-samsa",
               "fusion": "model-fusion"}
#: ``(preset, N)`` of the compiled-step targets: every method at 4096, and AGF at 16384.
COMPILED_CONFIGURATIONS = (*((method, 4096) for method in DEFAULT_METHODS), ("agf", 16384))

TARGETS: tuple[Target, ...] = (
    Target("GFSA two-pass / softmax SDPA time (N=4096)", Case("gfsa", 4096, "train"),
          Case("sdpa", 4096, "train"), 2.1, "<="),
    # The explicit formulation is compared in the forward pass: its O(N³) training step at
    # N=4096 takes over half a minute on a CPU. At equal kernel speed the time ratio is
    # N/(4d) + ½ (d=64): 32.5 at N=8192; at N=4096, 16.5, too near any bound to settle.
    Target("authors' explicit GFSA / GFSA two-pass time (N=8192; ceiling 32.5)",
          Case("gfsa-explicit", 8192, "inference"), Case("gfsa", 8192, "inference"), 25.0, ">="),
    Target("authors' explicit GFSA / GFSA two-pass time (N=4096), beside its ceiling 16.5",
          Case("gfsa-explicit", 4096, "inference"), Case("gfsa", 4096, "inference"), 16.5,
          "info"),
    Target("authors' explicit GFSA / GFSA two-pass extra memory (N=4096)",
           Case("gfsa-explicit", 4096, "inference"), Case("gfsa", 4096, "inference"), 10.0, ">=",
           quantity="memory"),
    Target("NeuTRENO / softmax module time (N=4096)", Case("neutreno", 4096, "train"),
          Case("softmax-module", 4096, "train"), 1.05, "<="),
    Target("softmax module / AGF time (N=16384)", Case("softmax-module", 16384, "train"),
          Case("agf", 16384, "train"), 5.0, ">="),
    Target("AGF time at N=16384 / at N=2048 (linear is 8)", Case("agf", 16384, "train"),
          Case("agf", 2048, "train"), 10.0, "<="),
    Target("softmax module / SAMSA hard k=256 time (N=4096)",
          Case("softmax-module", 4096, "inference"), Case("samsa-hard-k256", 4096, "inference"),
          2.0, ">="),
    Target("our softmax Transformer / x-transformers Encoder step time (N=1024)",
          Case("model-softmax", 1024, "train"), Case("model-xtransformers", 1024, "train"),
          1.10, "<="),
    *(Target(f"{label} / softmax decoding time per token ({family}, prompt N={C})",
            Case(f"decode-{family}-{method}", C, "inference"),
            Case(f"decode-{family}-softmax", C, "inference"), bound, "<=", shape=DECODING_SHAPE)
      for method, label, bound in (("gfsa", "GFSA", 2.2), ("neutreno", "NeuTRENO", 1.05))
      for family in FAMILIES for C in CONTEXTS),
    *(target for preset, N in COMPILED_CONFIGURATIONS for target in (
        Target(f"{preset} eager / compiled training step (N={N})",
              Case(_MODEL_ROWS[preset], N, "train"), Case(_MODEL_ROWS[preset], N, COMPILED),
              0.95 if N == 4096 else 1.5, ">="),
        Target(f"{preset} compiled outputs, largest difference from eager (N={N})",
               Case(_MODEL_ROWS[preset], N, COMPILED), Case(_MODEL_ROWS[preset], N, "train"),
               1e-5, "<=", quantity="difference"))),
)
