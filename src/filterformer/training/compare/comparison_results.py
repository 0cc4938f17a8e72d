"""A comparison's results: one dataclass, written to and read from ``results.json``.

:class:`ComparisonResults` is what ``compare`` writes (:mod:`.results`) and what its HTML report
and ``filterformer evidence`` read. The file carries :data:`RESULTS_SCHEMA_VERSION`; reading
checks it first, so a file of a layout this library does not know is refused, naming the file,
instead of being read field by field into wrong numbers. A file without a version is of
version 1 (the layout written before the version was), which is read as it is.

The per-method summary rows and per-run records stay mappings, with the keys compare writes
(``test_<metric>_mean``, ``difference``, ``run_dir``, …): their keys depend on the task's metric.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...jsonsafe import plain_data

__all__ = [
    "KNOWN_SCHEMA_VERSIONS",
    "RESULTS_FILE",
    "RESULTS_SCHEMA_VERSION",
    "ComparisonResults",
    "check_schema_version",
    "read_results_data",
]

#: The file of a comparison directory that holds its results.
RESULTS_FILE = "results.json"
#: The layout :class:`ComparisonResults` writes.
RESULTS_SCHEMA_VERSION = 1
#: The layouts read; a file without ``schema_version`` is of version 1.
KNOWN_SCHEMA_VERSIONS = (1,)
#: Keys every ``results.json`` has; a file without one is not compare's.
REQUIRED_KEYS = ("metric", "methods", "baseline", "summary", "runs")


@dataclass(frozen=True, kw_only=True)
class ComparisonResults:
    """The content of a comparison's ``results.json``, in the file's key order.

    Attributes:
        schema_version: the layout (:data:`RESULTS_SCHEMA_VERSION`).
        task: the task's description (name, kind, split sizes, classes, …).
        metric: the model-selection metric (``accuracy``, ``perplexity``, …).
        methods: the compared methods' names, in order.
        method_entries: per method, its ``{name, method, set}`` entry.
        baseline: the method every other is compared with.
        seeds: the seeds every method ran with.
        pretrained: the pretrained model fine-tuned, or None.
        budget: the shared training config (``TrainConfig.to_dict``).
        environment: torch, python, machine, device and CPU threads.
        memory_measure: what the peak memory column measures.
        cost: the time-per-step measurement (:func:`~.cost.measure_cost`).
        summary: per method, its row: means, standard deviations, ratios and its
            ``difference`` from the baseline per compared metric (None for the baseline).
        method_activity: per method, how far its own parameters moved (:mod:`.activity`).
        runs: per run, its record (method, seed, run directory, measured figures).
        elapsed_s: the comparison's wall time.
        provenance: the source commit and the command (:func:`filterformer.provenance.provenance`).
        figures: the figures drawn (file, title, caption).
        diagnostics: per method, the diagnostics averaged over seeds.
    """

    schema_version: int = RESULTS_SCHEMA_VERSION
    task: dict[str, Any] = field(default_factory=dict)
    metric: str
    methods: tuple[str, ...]
    method_entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    baseline: str
    seeds: tuple[int, ...] = ()
    pretrained: str | None = None
    budget: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    memory_measure: str | None = None
    cost: dict[str, Any] | None = None
    summary: tuple[dict[str, Any], ...]
    method_activity: dict[str, Any] = field(default_factory=dict)
    runs: tuple[dict[str, Any], ...]
    elapsed_s: float | None = None
    provenance: dict[str, Any] | None = None
    figures: tuple[dict[str, Any], ...] = ()
    diagnostics: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, as ``results.json`` holds it."""
        return {f.name: plain_data(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Any, path: str | Path = RESULTS_FILE) -> ComparisonResults:
        """The results of ``data`` (the content of ``path``, named in errors).

        Raises:
            ValueError: naming ``path``: not a mapping, a schema version this library does not
                read, a key compare does not write, or a required key missing.
        """
        check_schema_version(data, path)
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"{path} holds key(s) {', '.join(map(str, unknown))} that "
                             f"schema version {data.get('schema_version', 1)} does not have: "
                             "not a results.json written by filterformer compare")
        missing = [k for k in REQUIRED_KEYS if k not in data]
        if missing:
            raise ValueError(f"{path} lacks {', '.join(missing)}: not a results.json written by "
                             "filterformer compare")
        values = {k: tuple(v) if k in _SEQUENCES and isinstance(v, list) else v
                  for k, v in data.items() if not (v is None and k in _EMPTY_WHEN_NULL)}
        return cls(**{**values, "schema_version": data.get("schema_version", 1)})

    def summary_row(self, method: str, where: str) -> dict[str, Any]:
        """The summary row of ``method``; ValueError naming ``where`` and the compared methods
        when it is not one of them."""
        for row in self.summary:
            if row["method"] == method:
                return row
        raise ValueError(f"{where}: method {method!r} is not compared there; methods: "
                         f"{', '.join(self.methods)}")

    def seed_values(self, method: str, key: str) -> dict[int, Any]:
        """Per seed, the run record's value of ``key`` for ``method`` (None where missing)."""
        return {run["seed"]: run.get(key) for run in self.runs if run["method"] == method}

    def run_seeds(self) -> list[int]:
        """The comparison's seeds: its ``seeds``, else those of its run records."""
        return list(self.seeds) or sorted({run["seed"] for run in self.runs})

    def value_at(self, path: str, where: str) -> Any:
        """The value at a dotted path of the file (``budget.model.depth``); ValueError naming
        ``where`` and the keys present when it is missing."""
        value: Any = self.to_dict()
        for i, part in enumerate(path.split(".")):
            if not isinstance(value, dict) or part not in value:
                present = (", ".join(map(str, value)) if isinstance(value, dict)
                           else "(not a mapping)")
                prefix = ".".join(path.split(".")[:i]) or RESULTS_FILE
                raise ValueError(f"{where}: {path!r} is not in {RESULTS_FILE} ({prefix} has: "
                                 f"{present})")
            value = value[part]
        return value


#: Fields held as tuples (lists in the file).
_SEQUENCES = ("methods", "seeds", "summary", "runs", "figures")
#: Optional fields whose null (version 1 allows it) reads as their empty default.
_EMPTY_WHEN_NULL = ("task", "method_entries", "seeds", "budget", "environment",
                    "method_activity", "figures", "diagnostics")


def check_schema_version(data: Any, path: str | Path) -> int:
    """The schema version of ``data`` (the content of ``path``): its ``schema_version``, or 1
    where it has none.

    Raises:
        ValueError: naming ``path``, for content that is no mapping or a version not in
            :data:`KNOWN_SCHEMA_VERSIONS`.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping (a JSON object), as filterformer compare "
                         f"writes it; got a {type(data).__name__}")
    version = data.get("schema_version", 1)
    if type(version) is not int or version not in KNOWN_SCHEMA_VERSIONS:
        raise ValueError(
            f"{path}: schema_version {version!r} is not one this filterformer reads (it reads "
            f"{', '.join(map(str, KNOWN_SCHEMA_VERSIONS))}); the file was written by another "
            "version of filterformer, or changed by hand: read it with the version that wrote "
            "it, or rerun the comparison"
        )
    return version


def read_results_data(path: str | Path) -> Any:
    """The JSON content of the ``results.json`` at ``path``.

    Raises:
        ValueError: naming ``path``: it cannot be read, is not UTF-8 text or is not JSON.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}): not a "
                         "results.json written by filterformer compare") from None
    except OSError as err:
        raise ValueError(f"{path} cannot be read: {err.strerror or err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from None
