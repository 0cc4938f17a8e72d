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

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ...diagnostics import DiagnosticsReport, diagnose
from ...models import TransformerConfig
from ..batches import evaluation_batches, make_loader
from ..checkpoint import check_same_config, load_checkpoint, load_model_state
from ..evaluation import MODEL_SELECTION
from ..model_building import build_model, describe_task, load_task_data, resolve_model_config
from ..run_config import TrainConfig, run_identity
from ..trainer import Trainer
from .comparison_config import CompareConfig
from .results import write_results
from .statistics import mean_report, mean_std, median

__all__ = ["compare"]


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
    state = load_checkpoint(best)
    model = build_model(TransformerConfig.from_dict(state["model_config"]), task, config.pooling)
    load_model_state(model, state["model"], best)
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
    # Every method must fit the task before any run starts; each is resolved once, here.
    model_configs = {method: resolve_model_config(config.run_config(method, config.seeds[0]), task)
                     for method in config.methods}
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
                Trainer(run_config, task=task, resume=resume,
                        model_config=model_configs[method]).fit()
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

