"""Performance benchmarks: time and extra memory of every attention method against N (a row of
:mod:`.method_table` each), and the targets (:mod:`.target_list`), each a quantity of two cases
measured side by side. ``filterformer bench`` runs :func:`run_and_write`; docs/bench.md."""

from .measure import measure_cases
from .method_table import BENCH_METHODS, BenchMethod, build_case, get_method, method_names
from .records import BenchRecord, save_bench
from .report import markdown_report
from .run import BenchSettings, run_and_write, run_table
from .step_cases import ALL_MODES, MODES, BenchShape
from .target_list import GPU_TARGETS, TARGETS
from .targets import Case, Target, TargetResult, judge

__all__ = [
    "ALL_MODES", "BENCH_METHODS", "GPU_TARGETS", "MODES", "TARGETS", "BenchMethod", "BenchRecord",
    "BenchSettings", "BenchShape", "Case", "Target", "TargetResult", "build_case", "get_method",
    "judge", "markdown_report", "measure_cases", "method_names",
    "run_and_write", "run_table", "save_bench",
]
