"""Comparisons' results written in the test, with their statistics computed here, independently
of compare: summary rows with numpy, paired differences with ``scipy.stats.t``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import stats

from filterformer.training.compare.comparison_results import ComparisonResults

#: The run-record keys compare compares, with whether higher is better (accuracy tasks).
DIRECTIONS = {"test_accuracy": True, "last_layer_cosine_similarity": False, "step_time_s": False}
LAYERS = 4


def reference_difference(values: Mapping[int, float], baseline: Mapping[int, float],
                         higher: bool) -> dict[str, Any]:
    """The paired difference ``values − baseline`` over shared seeds: mean, 95 % t interval
    (``scipy.stats.t.interval``), verdict (better/worse when 0 is outside, too few seeds
    under 3)."""
    shared = [s for s in values if s in baseline]
    d = np.array([values[s] - baseline[s] for s in shared])
    n = len(d)
    if n < 2:
        return {"mean": float(d.mean()) if n else None, "ci_low": None, "ci_high": None,
                "verdict": "too few seeds", "seeds": n}
    sem = stats.sem(d)
    low, high = (stats.t.interval(0.95, n - 1, loc=d.mean(), scale=sem) if sem > 0
                 else (d.mean(), d.mean()))  # equal differences: an interval of zero width
    if n < 3:
        verdict = "too few seeds"
    elif low > 0 or high < 0:
        verdict = "better" if (d.mean() > 0) == higher else "worse"
    else:
        verdict = "no significant difference"
    return {"mean": float(d.mean()), "ci_low": float(low), "ci_high": float(high),
            "verdict": verdict, "seeds": n}


def null_differences(count: int) -> list[float]:
    """Random differences with mean exactly 0 (±a pairs, then 0): never significant."""
    half = torch.empty(count // 2).uniform_(0.01, 0.05).tolist()
    return [v for a in half for v in (a, -a)] + [0.0] * (count % 2)


def shifted(base: Mapping[int, float], shift: float | list[float],
            noise: float = 0.004) -> dict[int, float]:
    """``base`` plus ``shift`` (one value or one per seed) plus uniform noise of ±noise/2."""
    shifts = shift if isinstance(shift, list) else [shift] * len(base)
    jitter = ((torch.rand(len(base)) - 0.5) * noise).tolist()
    return {s: v + d + j for (s, v), d, j in zip(base.items(), shifts, jitter, strict=True)}


def make_results(
    values: Mapping[str, Mapping[str, Mapping[int, float]]],
    *,
    baseline: str = "softmax",
    depth: int = 4,
    norm: str = "post",
    method_entries: Mapping[str, dict[str, Any]] | None = None,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``results.json`` of an accuracy task.

    Args:
        values: per method, per key of :data:`DIRECTIONS` (and ``validation_accuracy``), the
            value per seed; every method has the same seeds. Missing keys get random values.
    """
    methods = list(values)
    seeds = list(next(iter(values[baseline].values())))
    keys = [*DIRECTIONS, "validation_accuracy"]
    filled = {m: {k: dict(values[m].get(k) or dict(zip(seeds, torch.rand(len(seeds)).tolist(),
                                                      strict=True)))
                  for k in keys} for m in methods}
    runs = []
    for method in methods:
        for seed in filled[method]["test_accuracy"]:
            curve = sorted(torch.rand(LAYERS).tolist())
            runs.append({"method": method, "seed": seed,
                         **{k: filled[method][k].get(seed) for k in keys},
                         "peak_memory_bytes": 1e6, "num_parameters": 1000, "train_time_s": 1.0,
                         "cosine_similarity_per_layer": [*curve, filled[method][
                             "last_layer_cosine_similarity"][seed]]})
    summary = []
    for method in methods:
        row: dict[str, Any] = {"method": method, "runs": len(filled[method]["test_accuracy"])}
        for key in ("test_accuracy", "validation_accuracy", "last_layer_cosine_similarity"):
            column = np.array(list(filled[method][key].values()))
            row[f"{key}_mean"] = float(column.mean())
            row[f"{key}_std"] = float(column.std(ddof=1))
        ratios = [filled[method]["step_time_s"][s] / filled[baseline]["step_time_s"][s]
                  for s in filled[method]["step_time_s"]]
        row["step_time_ratio"] = float(np.median(ratios))
        row["difference"] = None if method == baseline else {
            key: reference_difference(filled[method][key], filled[baseline][key], higher)
            for key, higher in DIRECTIONS.items()}
        summary.append(row)
    entries = {m: {"name": m, "method": m, "set": {}} for m in methods}
    entries.update(method_entries or {})
    return {
        "task": {"name": "digits", "kind": "classification", "num_train": 1000,
                 "num_validation": 200, "num_test": 300, "num_classes": 10, "max_len": 64},
        "metric": "accuracy",
        "methods": methods,
        "method_entries": entries,
        "baseline": baseline,
        "seeds": seeds,
        "pretrained": None,
        "budget": {"task": "digits", "task_options": {"num_train": 1000},
                   "model": {"dim": 32, "depth": depth, "norm": norm},
                   "optimizer": {"lr": 0.003, "weight_decay": 0.05},
                   "schedule": {"warmup_ratio": 0.1, "decay": "cosine"},
                   "epochs": 3, "max_steps": None, "batch_size": 32, "grad_clip": 1.0},
        "summary": summary,
        "runs": runs,
        "elapsed_s": 95.0,
        **({"provenance": provenance} if provenance is not None else {}),
    }


def comparison(results: dict[str, Any]) -> ComparisonResults:
    """``results`` as ``filterformer evidence`` reads it back from ``results.json``."""
    return ComparisonResults.from_dict(json.loads(json.dumps(results)))


def write_results(root: Path, name: str, results: dict[str, Any]) -> Path:
    """Write ``results`` as ``root/name/results.json``."""
    path = root / name / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    return path
