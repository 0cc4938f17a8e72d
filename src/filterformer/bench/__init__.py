"""Performance benchmarks: time and extra memory of every attention method against N.

``filterformer bench`` (see :mod:`filterformer.cli.bench`) runs :func:`run_benchmarks` and writes
``bench.json``, a markdown report with the targets, and a log-log plot.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .budget import Budget, skip_reason
from .config import DEFAULT_LENGTHS, MODES, QUICK_LENGTHS, BenchConfig, BenchShape
from .explicit import explicit_gfsa
from .machine import machine_info
from .measure import measure_config
from .methods import BENCH_METHODS, BenchMethod, build_case, get_method, method_names
from .records import BenchRecord, find_record, load_records, save_records
from .report import markdown_report
from .runner import BenchSettings, run_benchmarks
from .targets import TARGETS, Target, TargetResult, evaluate_targets

# matplotlib loads on first use, so the per-configuration worker processes start light.
_LAZY = {"plot_records": "filterformer.bench.plot"}

__all__ = [
    "BENCH_METHODS",
    "DEFAULT_LENGTHS",
    "MODES",
    "QUICK_LENGTHS",
    "TARGETS",
    "BenchConfig",
    "BenchMethod",
    "BenchRecord",
    "BenchSettings",
    "BenchShape",
    "Budget",
    "Target",
    "TargetResult",
    "build_case",
    "evaluate_targets",
    "explicit_gfsa",
    "find_record",
    "get_method",
    "load_records",
    "machine_info",
    "markdown_report",
    "measure_config",
    "method_names",
    "plot_records",
    "run_benchmarks",
    "save_records",
    "skip_reason",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'filterformer.bench' has no attribute {name!r}")
