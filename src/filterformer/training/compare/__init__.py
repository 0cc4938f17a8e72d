"""``compare``: several methods, several seeds, one task, one budget; one table and report.

:class:`CompareConfig` says what is compared (:mod:`.comparison_config`, each method a
:class:`MethodEntry`); loading it plans every run once (:class:`RunPlan`, :mod:`.run_plans`).
:func:`compare` (:mod:`.runner`) trains the planned runs, alone or several at once
(:mod:`.execution`), measures the methods' cost side by side (:mod:`.cost`); :func:`dry_run`
checks a comparison without training it; :mod:`.statistics` summarises seeds and compares each
method with the baseline. The results are one :class:`ComparisonResults`
(:mod:`.comparison_results`, versioned), which :mod:`.results`, :mod:`.figures` and
:mod:`.html_report` write and ``filterformer evidence`` reads. Imported on its own (it draws
figures), not by :mod:`filterformer.training`.
"""

from .comparison_config import (
    DEFAULT_COMPARE_CONFIG,
    METHOD_FIELDS,
    CompareConfig,
    MethodEntry,
    RunPlan,
    load_compare_config,
)
from .comparison_results import ComparisonResults
from .dry_run import dry_run
from .runner import compare

__all__ = [
    "DEFAULT_COMPARE_CONFIG",
    "METHOD_FIELDS",
    "CompareConfig",
    "ComparisonResults",
    "MethodEntry",
    "RunPlan",
    "compare",
    "dry_run",
    "load_compare_config",
]
