"""``compare``: several methods, several seeds, one task, one budget; one table and report.

:class:`CompareConfig` says what is compared (:mod:`.comparison_config`); :func:`compare`
(:mod:`.runner`) trains every run, alone or several at once (:mod:`.execution`), measures the
methods' cost side by side (:mod:`.cost`); :func:`dry_run` checks a comparison without
training it; :mod:`.statistics` summarises seeds and compares each
method with the baseline; :mod:`.results`, :mod:`.figures` and :mod:`.html_report` write the
files. Imported on its own (it draws figures), not by :mod:`filterformer.training`.
"""

from .comparison_config import (
    DEFAULT_COMPARE_CONFIG,
    METHOD_FIELDS,
    CompareConfig,
    MethodEntry,
    load_compare_config,
)
from .dry_run import dry_run
from .runner import compare

__all__ = [
    "DEFAULT_COMPARE_CONFIG",
    "METHOD_FIELDS",
    "CompareConfig",
    "MethodEntry",
    "compare",
    "dry_run",
    "load_compare_config",
]
