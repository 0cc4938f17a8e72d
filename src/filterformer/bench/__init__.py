"""Performance benchmarks: time and extra memory of every attention method against N.

``filterformer bench`` runs :func:`run_and_write`: :func:`run_benchmarks` over
:data:`BENCH_METHODS`, the :data:`TARGETS` checked (close calls re-measured side by side), and
``bench.json``, ``bench.md``, ``bench.png``, ``targets.json`` and ``machine.json`` written. The
plot (:mod:`.figures`) is imported where it is drawn, so workers do not load matplotlib.
"""

from .markdown_report import markdown_report
from .measurement import BenchConfig, BenchRecord, load_records, measure_config, save_records
from .method_table import BENCH_METHODS, BenchMethod, build_case, get_method, method_names
from .performance_targets import TARGETS, Target, TargetResult, evaluate_targets
from .run_outputs import machine_info, run_and_write
from .step_cases import MODES, BenchShape
from .sweep import DEFAULT_LENGTHS, QUICK_LENGTHS, BenchSettings, Budget, run_benchmarks

__all__ = [
    "BENCH_METHODS", "DEFAULT_LENGTHS", "MODES", "QUICK_LENGTHS", "TARGETS", "BenchConfig",
    "BenchMethod", "BenchRecord", "BenchSettings", "BenchShape", "Budget", "Target",
    "TargetResult", "build_case", "evaluate_targets", "get_method", "load_records",
    "machine_info", "markdown_report", "measure_config", "method_names", "run_and_write",
    "run_benchmarks", "save_records",
]
