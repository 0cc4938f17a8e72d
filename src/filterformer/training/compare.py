"""``compare``: several methods, several seeds, one task, one budget; one table and report.

Every run shares the base :class:`TrainConfig` (task, model size, optimiser, schedule, steps)
and differs only in its method preset and seed. Each run is trained, its best-validation
checkpoint tested, and its over-smoothing measured on the validation split with
:func:`filterformer.diagnostics.diagnose`. The comparison directory holds::

    runs/<method>/seed-<seed>/   each run (metrics, checkpoints, summary.json, diagnostics.json)
    results.json                 per-method summary and per-run records
    results.csv                  the summary table
    figures/*.png                cosine similarity per layer, frequency and filter responses, …
    report.html                  the table and the figures

Re-running with the same output directory skips finished runs and resumes stopped ones, so an
interrupted comparison continues where it stopped.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..diagnostics import DiagnosticsReport, diagnose
from .aggregate import mean_report, mean_std, median
from .batches import evaluation_batches, make_loader
from .checkpoint import check_same_config, load_checkpoint, load_model_state
from .config import TrainConfig, run_identity
from .config_io import apply_overrides, read_config_file
from .evaluation import MODEL_SELECTION
from .fields import dataclass_from_dict
from .methods import DEFAULT_METHODS, method_changes
from .models import build_model, model_config_for
from .results import write_results
from .tasks import describe_task, load_task_data
from .trainer import Trainer

__all__ = [
    "DEFAULT_COMPARE_CONFIG",
    "METHOD_FIELDS",
    "CompareConfig",
    "compare",
    "load_compare_config",
]

#: The built-in comparison: ListOps (LRA's generator, expressions of 21–59 tokens, 10 classes)
#: and a 4-layer, width-64 model, sized so that the 7 default methods × 3 seeds train on a
#: 2-core CPU in well under 10 minutes.
DEFAULT_COMPARE_CONFIG: dict[str, Any] = {
    "task": "listops",
    "task_options": {"preset": "tiny", "max_len": 60, "num_train": 1500, "num_validation": 250,
                     "num_test": 250},
    "model": {"dim": 64, "depth": 4, "num_heads": 4, "mlp_ratio": 2.0},
    "optimizer": {"lr": 3e-3, "weight_decay": 0.05},
    "schedule": {"warmup_ratio": 0.1, "decay": "cosine"},
    "epochs": 3,
    "batch_size": 32,
    "output_dir": "runs/compare",
}

#: Model fields the method presets set: a comparison's base config must leave them alone.
METHOD_FIELDS = ("attention", "attention_options", "attention_layers", "neutreno_lambda",
                 "neutreno_learnable", "fusion")


@dataclass
class CompareConfig:
    """A comparison.

    Attributes:
        base: the budget every run shares; its ``output_dir`` is the comparison directory.
        methods: method names (presets of :mod:`filterformer.training.methods`, or
            combinations such as ``gfsa+neutreno``).
        seeds: one run per method and seed.
        diagnostics_batches: validation batches the over-smoothing diagnostics average over.
    """

    base: TrainConfig = field(default_factory=lambda: TrainConfig.from_dict(DEFAULT_COMPARE_CONFIG))
    methods: tuple[str, ...] = DEFAULT_METHODS
    seeds: tuple[int, ...] = (0, 1, 2)
    diagnostics_batches: int = 2

    def __post_init__(self) -> None:
        self.methods, self.seeds = tuple(self.methods), tuple(self.seeds)
        if not self.methods:
            raise ValueError("methods must name at least one method")
        for name in self.methods:
            method_changes(name)  # raises with the valid names
        duplicated = sorted({m for m in self.methods if self.methods.count(m) > 1})
        if duplicated:
            raise ValueError(f"methods names {duplicated} more than once")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct integers, at least one; got {self.seeds}")
        if self.diagnostics_batches < 1:
            raise ValueError(
                f"diagnostics_batches must be a positive integer; got {self.diagnostics_batches}"
            )
        if self.base.method is not None:
            raise ValueError(
                f"the base config sets method={self.base.method!r}, but compare sets the method "
                "of each run; remove it and list methods instead"
            )
        preset = sorted(set(self.base.model) & set(METHOD_FIELDS))
        if preset:
            raise ValueError(
                f"the base config sets model.{preset[0]}, which the method presets set per run; "
                f"a comparison's base may not set {', '.join(METHOD_FIELDS)}"
            )

    @property
    def output_dir(self) -> Path:
        return Path(self.base.output_dir)

    def run_config(self, method: str, seed: int) -> TrainConfig:
        """The configuration of one run."""
        run_dir = self.output_dir / "runs" / method / f"seed-{seed}"
        return dataclasses.replace(self.base, method=method, seed=seed, output_dir=str(run_dir))


def load_compare_config(
    path: str | os.PathLike | None = None, overrides: Sequence[str] = (), **options: Any
) -> CompareConfig:
    """A :class:`CompareConfig` from a config file (or the built-in comparison) and overrides.

    Args:
        path: a YAML/TOML train config: the budget every run shares, with an optional
            ``compare:`` section holding :class:`CompareConfig` fields other than ``base``.
            None starts from :data:`DEFAULT_COMPARE_CONFIG`.
        overrides: ``key=value`` overrides of the budget (see
            :func:`~filterformer.training.apply_overrides`).
        options: :class:`CompareConfig` fields (``methods``, ``seeds``, …) that win over the
            file's ``compare:`` section.
    """
    if path is None:
        data, section = copy.deepcopy(DEFAULT_COMPARE_CONFIG), {}
    else:
        data = read_config_file(path)
        section = data.pop("compare", None) or {}
    if not isinstance(section, dict):
        raise ValueError(f"the compare section of {path} must be a mapping; got {section!r}")
    if "base" in section or "base" in options:
        raise ValueError("the budget is the config itself; 'base' is not a compare option")
    base = TrainConfig.from_dict(apply_overrides(data, overrides))
    return dataclass_from_dict(CompareConfig, {**section, **options, "base": base},
                               prefix="compare.")


def _environment(device: str) -> dict[str, Any]:
    on_gpu = device != "cpu" and torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "device": torch.cuda.get_device_name() if on_gpu else "cpu",
        "cpu_threads": torch.get_num_threads(),
    }


def _finished_summary(config: TrainConfig) -> dict[str, Any] | None:
    """A finished run's summary when it was trained with ``config``; None when unfinished."""
    path = Path(config.output_dir) / "summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    check_same_config(run_identity(summary["config"]), run_identity(config.to_dict()), path)
    return summary


def _diagnostics(config: TrainConfig, task: Any, batches: int, label: str) -> DiagnosticsReport:
    """The run's diagnostics (computed once from its best checkpoint, then read back)."""
    path = Path(config.output_dir) / "diagnostics.json"
    if path.exists():
        return DiagnosticsReport.load(path)
    best = Path(config.output_dir) / "checkpoints" / "best.pt"
    model = build_model(config, task)
    load_model_state(model, load_checkpoint(best)["model"], best)
    size = config.eval_batch_size or config.batch_size
    chosen = evaluation_batches(task.validation, size)[:batches]
    loader = make_loader(task.validation, chosen, task.collate, seed=config.seed)
    if task.kind == "graph_classification":
        # Graphs become token sequences in the tokenizer; the Transformer behind it is measured.
        model.eval()
        loader = ({"inputs_embeds": tokens, "padding_mask": mask}
                  for tokens, mask in map(model.tokenizer, loader))
        model = model.classifier
    with torch.random.fork_rng():
        report = diagnose(model, loader, label=label)
    report.save(path)
    return report


def _run_record(method: str, seed: int, summary: dict[str, Any], metric: str,
                report: DiagnosticsReport) -> dict[str, Any]:
    return {
        "method": method,
        "seed": seed,
        "run_dir": summary["run_dir"],
        f"test_{metric}": summary["test"][metric],
        f"validation_{metric}": summary["best_validation"][metric],
        "test": summary["test"],
        "best_validation": summary["best_validation"],
        "best_step": summary["best_step"],
        "steps": summary["steps"],
        "step_time_s": summary["step_time_s"],
        "peak_memory_bytes": summary["peak_memory_bytes"],
        "num_parameters": summary["num_parameters"],
        "train_time_s": summary["train_time_s"],
        "memory_measure": summary["memory_measure"],
        "last_layer_cosine_similarity": report.token_cosine_similarity[-1],
        "cosine_similarity_per_layer": report.token_cosine_similarity,
    }


def _method_summary(method: str, runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    test_mean, test_std = mean_std([r[f"test_{metric}"] for r in runs])
    val_mean, val_std = mean_std([r[f"validation_{metric}"] for r in runs])
    cos_mean, cos_std = mean_std([r["last_layer_cosine_similarity"] for r in runs])
    return {
        "method": method,
        "runs": len(runs),
        f"test_{metric}_mean": test_mean,
        f"test_{metric}_std": test_std,
        f"validation_{metric}_mean": val_mean,
        f"validation_{metric}_std": val_std,
        "step_time_s_median": median([r["step_time_s"] for r in runs]),
        "peak_memory_bytes_median": median([r["peak_memory_bytes"] for r in runs]),
        "num_parameters": runs[0]["num_parameters"],
        "last_layer_cosine_similarity_mean": cos_mean,
        "last_layer_cosine_similarity_std": cos_std,
        "train_time_s_mean": mean_std([r["train_time_s"] for r in runs])[0],
    }


def compare(
    config: CompareConfig,
    *,
    task: Any = None,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Train every method with every seed on one task and write the comparison.

    Args:
        config: the comparison.
        task: a ready ``TaskData`` (loaded from ``config.base.task`` when None).
        echo: where one line per run goes.

    Returns:
        The content of ``results.json``.
    """
    started = time.perf_counter()
    task = task if task is not None else load_task_data(config.base.task, config.base.task_options)
    for method in config.methods:  # every method must fit the task before any run starts
        model_config_for(config.run_config(method, config.seeds[0]), task)
    metric, _ = MODEL_SELECTION[task.kind]
    runs: list[dict[str, Any]] = []
    reports: dict[str, list[DiagnosticsReport]] = {}
    total = len(config.methods) * len(config.seeds)
    for method in config.methods:
        for seed in config.seeds:
            run_config = config.run_config(method, seed)
            summary = _finished_summary(run_config)
            state = "reused"
            if summary is None:
                resume = (Path(run_config.output_dir) / "checkpoints" / "last.pt").exists()
                Trainer(run_config, task=task, resume=resume).fit()
                summary = _finished_summary(run_config)
                state = "resumed" if resume else "trained"
            report = _diagnostics(run_config, task, config.diagnostics_batches, method)
            reports.setdefault(method, []).append(report)
            runs.append(_run_record(method, seed, summary, metric, report))
            echo(f"[{len(runs)}/{total}] {method} seed {seed} ({state}): test {metric} "
                 f"{summary['test'][metric]:.4f}, {summary['train_time_s']:.1f} s")
    results = {
        "task": describe_task(task),
        "metric": metric,
        "methods": list(config.methods),
        "seeds": list(config.seeds),
        "budget": config.base.to_dict(),
        "environment": _environment(config.base.device),
        "memory_measure": runs[0]["memory_measure"],
        "summary": [_method_summary(m, [r for r in runs if r["method"] == m], metric)
                    for m in config.methods],
        "runs": runs,
        "elapsed_s": time.perf_counter() - started,
    }
    return write_results(results, {m: mean_report(r, m) for m, r in reports.items()},
                         config.output_dir)

