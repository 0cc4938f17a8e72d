"""The performance targets, each a ratio of two measurements of the same run."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .records import BenchRecord, find_record

__all__ = [
    "TARGETS",
    "Measure",
    "Target",
    "TargetResult",
    "evaluate_targets",
    "target_configurations",
]

_QUANTITIES = {"median_ms": "time", "peak_mb": "extra memory"}


@dataclass(frozen=True)
class Measure:
    """One measured quantity: ``quantity`` of ``(method, N, mode)``."""

    method: str
    N: int
    mode: str
    quantity: str = "median_ms"

    def __post_init__(self) -> None:
        if self.quantity not in _QUANTITIES:
            raise ValueError(
                f"quantity must be one of {', '.join(_QUANTITIES)}; got {self.quantity!r}"
            )

    def read(self, records: list[BenchRecord]) -> float | None:
        record = find_record(records, self.method, self.N, self.mode)
        if record is None or not record.measured:
            return None
        return getattr(record, self.quantity)

    def __str__(self) -> str:
        return f"{self.method} ({self.mode}, N={self.N}) {_QUANTITIES[self.quantity]}"


@dataclass(frozen=True)
class Target:
    """``numerator / denominator`` must be ``<=`` or ``>=`` ``bound``.

    Attributes:
        name: what the ratio is.
        numerator, denominator: the two measurements.
        op: ``<=`` or ``>=``.
        bound: the bound.
        fallback_mode: when either side was not measured in its own mode (e.g. skipped as too
            slow), read both in this mode instead.
    """

    name: str
    numerator: Measure
    denominator: Measure
    op: str
    bound: float
    fallback_mode: str | None = None

    def __post_init__(self) -> None:
        if self.op not in ("<=", ">="):
            raise ValueError(f"op must be one of <=, >=; got {self.op!r}")

    def holds(self, ratio: float) -> bool:
        """Whether ``ratio`` meets the bound."""
        return ratio <= self.bound if self.op == "<=" else ratio >= self.bound

    def ratio(self, records: list[BenchRecord]) -> tuple[float | None, str]:
        """The ratio in the first mode where both sides were measured, and that mode."""
        pairs = [(self.numerator, self.denominator)]
        if self.fallback_mode is not None:
            pairs.append(tuple(replace(m, mode=self.fallback_mode) for m in pairs[0]))
        for top, bottom in pairs:
            a, b = top.read(records), bottom.read(records)
            if a is not None and b is not None and b > 0:
                return a / b, top.mode
        return None, self.numerator.mode


@dataclass(frozen=True)
class TargetResult:
    """A target evaluated on one run, and whether it holds.

    Attributes:
        target: the target.
        ratio: the ratio of the two table records (None if either was not measured).
        mode: the mode both were read in.
        paired: the ratio re-measured with both sides alternated in one process (the median of
            its rounds' ratios), or why that failed; None when no paired check was made.
        paired_spread: the first and third quartiles of the rounds' ratios (the middle half of
            them), when ``paired`` was measured.
    """

    target: Target
    ratio: float | None
    mode: str
    paired: float | str | None = None
    paired_spread: tuple[float, float] | None = None

    @property
    def verdict_ratio(self) -> float | None:
        """The ratio the verdict reads: the paired check's where one was measured (both sides
        side by side), else the table's."""
        return self.paired if isinstance(self.paired, float) else self.ratio

    @property
    def passed(self) -> bool | None:
        ratio = self.verdict_ratio
        return None if ratio is None else self.target.holds(ratio)


def _time(method: str, N: int, mode: str = "train") -> Measure:
    return Measure(method, N, mode)


TARGETS: tuple[Target, ...] = (
    Target(
        "GFSA two-pass / softmax SDPA time (N=4096)",
        _time("gfsa", 4096), _time("sdpa", 4096), "<=", 2.1,
    ),
    # The explicit A·A is O(N³): on a CPU its training step at N=4096 (about a minute) is
    # usually over the time budget, and the forward is compared instead.
    Target(
        "authors' explicit GFSA / GFSA two-pass time (N=4096)",
        _time("gfsa-explicit", 4096), _time("gfsa", 4096), ">=", 15.0, "inference",
    ),
    Target(
        "authors' explicit GFSA / GFSA two-pass extra memory (N=4096)",
        Measure("gfsa-explicit", 4096, "train", "peak_mb"),
        Measure("gfsa", 4096, "train", "peak_mb"), ">=", 10.0, "inference",
    ),
    Target(
        "NeuTRENO / softmax module time (N=4096)",
        _time("neutreno", 4096), _time("softmax-module", 4096), "<=", 1.05,
    ),
    Target(
        "softmax module / AGF time (N=16384)",
        _time("softmax-module", 16384), _time("agf", 16384), ">=", 5.0,
    ),
    Target(
        "AGF time at N=16384 / at N=2048 (linear is 8)",
        _time("agf", 16384), _time("agf", 2048), "<=", 10.0,
    ),
    Target(
        "softmax module / SAMSA hard k=256 time (N=4096)",
        _time("softmax-module", 4096, "inference"), _time("samsa-hard-k256", 4096, "inference"),
        ">=", 2.0,
    ),
    Target(
        "our softmax Transformer / x-transformers Encoder step time (N=1024)",
        _time("model-softmax", 1024), _time("model-xtransformers", 1024), "<=", 1.10,
    ),
)


def evaluate_targets(
    records: list[BenchRecord], targets: tuple[Target, ...] = TARGETS
) -> list[TargetResult]:
    """Every target's ratio from ``records`` (None where either side was not measured)."""
    return [TargetResult(target, *target.ratio(records)) for target in targets]


def target_configurations(targets: tuple[Target, ...] = TARGETS) -> set[tuple[str, int, str]]:
    """Every ``(method, N, mode)`` a target reads, its fallback mode included."""
    keys = set()
    for target in targets:
        modes = {target.numerator.mode, target.denominator.mode, target.fallback_mode} - {None}
        for measure in (target.numerator, target.denominator):
            keys |= {(measure.method, measure.N, mode) for mode in modes}
    return keys
