"""Performance benchmarks: time and extra memory of every attention method against N, and the
targets, each a ratio of two cases measured side by side.

``filterformer bench`` runs :func:`run_and_write`: every method of :data:`BENCH_METHODS` at every
length and mode (:mod:`.method_table`, built by :mod:`.step_cases`), then every target of
:data:`TARGETS` (:mod:`.targets`; the GPU ones in :mod:`.gpu_rows`) with both its cases in one
process, their steps alternated (:mod:`.measure`); ``bench.json`` (with the machine), ``bench.md``
and ``bench.png`` are written. A new benchmark is a row of the method table; a new promise is a
:class:`Target` naming two :class:`Case` s, a bound and a direction.
"""

from .measure import CASE_METHODS, measure_cases
from .method_table import BENCH_METHODS, BenchMethod, build_case, get_method, method_names
from .records import BenchRecord, load_bench, save_bench
from .report import markdown_report
from .run import BenchSettings, machine_info, run_and_write, run_table
from .step_cases import ALL_MODES, MODES, BenchShape
from .targets import TARGETS, Case, Target, TargetResult, judge

__all__ = [
    "ALL_MODES", "BENCH_METHODS", "CASE_METHODS", "MODES", "TARGETS", "BenchMethod",
    "BenchRecord", "BenchSettings", "BenchShape", "Case", "Target", "TargetResult", "build_case",
    "get_method", "judge", "load_bench", "machine_info", "markdown_report", "measure_cases",
    "method_names", "run_and_write", "run_table", "save_bench",
]
