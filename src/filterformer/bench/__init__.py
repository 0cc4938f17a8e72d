"""Performance benchmarks: time and extra memory of every attention method against N.

``filterformer bench`` runs :func:`run_and_write`: :func:`run_benchmarks` measures every method of
:data:`BENCH_METHODS` at every length and mode, each in a fresh process, then the extra
benchmarks (decoding, the training loop, compiled steps), each in one; the :data:`TARGETS` are
checked (close calls re-measured side by side); ``bench.json``, ``bench.md``, ``bench.png``,
``targets.json`` and ``machine.json`` are written.

A new benchmark plugs in as a row of the method table (``method_table.py``): a
``BenchMethod(name=, level=, timed=, build=, baseline=)`` whose ``build(shape, N, mode, device)``
returns a :class:`~.step_cases.BenchCase` (``forward`` and its ``step``); ``kernel_case``,
``module_case`` and ``model_case`` build those for a kernel, an attention module or a model.
Every run then measures it, tables, plots and ``bench.json`` show it, and ``--methods NAME``
runs it alone. A new promise is a :class:`Target` in ``performance_targets.py``: the ratio of two
``Measure(method=, N=, mode=, quantity=)`` bounded by ``op`` and ``bound``; full runs add the
lengths targets read, and ``--paired`` re-measures time targets side by side. A benchmark whose
sides must alternate in one process is an ``ExtraBenchmark`` in ``extras.py``: its
``run(quick, device)`` returns records (:func:`~.records.round_records` makes them from
:func:`~filterformer.timing.paired_step_times`), and targets read their paired ratios as they are.
The GPU targets' rows are such benchmarks, written as data in ``gpu_rows.py`` (``--gpu-targets``),
and their targets (``GPU_TARGETS``, a ``Target`` with ``device="cuda"``) are judged only on CUDA.
"""

from .markdown_report import markdown_report
from .measurement import BenchConfig, measure_config
from .method_table import BENCH_METHODS, BenchMethod, build_case, get_method, method_names
from .performance_targets import TARGETS, Target, TargetResult, evaluate_targets
from .records import BenchRecord, load_records, save_records
from .step_cases import MODES, BenchShape
from .sweep import BenchSettings, machine_info, run_and_write, run_benchmarks

__all__ = [
    "BENCH_METHODS", "MODES", "TARGETS", "BenchConfig", "BenchMethod", "BenchRecord",
    "BenchSettings", "BenchShape", "Target", "TargetResult", "build_case", "evaluate_targets",
    "get_method", "load_records", "machine_info", "markdown_report", "measure_config",
    "method_names", "run_and_write", "run_benchmarks", "save_records",
]
