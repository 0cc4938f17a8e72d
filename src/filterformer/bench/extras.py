"""The extra benchmarks: each alternates the steps of its rows in rounds in one process
(:func:`~filterformer.timing.paired_step_times`), so that a ratio of two rows is already paired.
Their rows join ``bench.json`` in the methods' record shape, one ``round_group`` per alternation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import compiled_steps, decoding_latency, loop_overhead
from .records import BenchRecord

__all__ = ["EXTRAS", "QUICK_EXTRAS", "ExtraBenchmark"]


@dataclass(frozen=True)
class ExtraBenchmark:
    """``run(quick, device)``: its records, rows named ``prefix…`` (a module-level function, as
    it runs in a fresh process); ``title``: its section of ``bench.md``."""

    run: Callable[[bool, str], list[BenchRecord]]
    prefix: str
    title: str


EXTRAS: dict[str, ExtraBenchmark] = {
    "decoding": ExtraBenchmark(decoding_latency.run, "decode-",
                               "Cached greedy decoding: ms per token after a prompt of N tokens"),
    "loop": ExtraBenchmark(loop_overhead.run, "loop-",
                           "filterformer train's loop against a bare loop: ms per step"),
    "compiled": ExtraBenchmark(compiled_steps.run, "step-",
                               "Eager against compiled training steps: ms per step"),
}
#: What ``--quick`` runs unless asked for others (compiling takes a while at any size).
QUICK_EXTRAS = ("decoding", "loop")
