"""``compare``: several methods, several seeds, one task, one budget; one table and report.

Every run shares the base :class:`TrainConfig` (task, model size, optimiser, schedule, steps)
and differs only in its method preset and seed. Each run is trained, its best-validation
checkpoint tested, and its over-smoothing measured on the validation split with
:func:`filterformer.diagnostics.diagnose`. The comparison directory holds::

    runs/<method>/seed-<seed>/   each run (metrics, checkpoints, summary.json, diagnostics.json)
    results.json                 per-method summary and per-run records, and how far each
                                 method's own parameters moved (:mod:`.activity`)
    cost.json                    the paired time-per-step measurement (:mod:`.cost`)
    results.csv                  the summary table
    figures/*.png                cosine similarity per layer, frequency and filter responses, …
    report.html                  the table and the figures

The runs train one after another, or ``jobs`` at a time in worker processes, with the same
results (:mod:`.execution`); the diagnostics, the summary and the files are made here once every
run has finished. Re-running with the same output directory skips finished runs and resumes
stopped ones, so an interrupted comparison continues where it stopped. One comparison at a
time writes in a directory: a second is refused, naming the first's process.

A run that diverged (a non-finite loss or gradient) is kept in ``runs`` with its step and reason
under ``diverged`` and every measured figure None; no statistic, diagnostic or figure uses it,
and each method's row counts its diverged runs.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ...data.reference_scores import reference_scores
from ...data.task import GRAPH_KINDS
from ...diagnostics import DiagnosticsReport, diagnose
from ...machine import cpu_name
from ...models.pretrained_classifier import PretrainedClassifier
from ...provenance import provenance
from ..batches import evaluation_batches, make_loader
from ..checkpoint import load_checkpoint, load_model_state
from ..directory_lock import directory_lock
from ..evaluation import MODEL_SELECTION
from ..model_building import (
    build_model,
    describe_task,
    load_task_data,
    model_config_from_dict,
)
from ..progress import print_line
from ..run_config import TrainConfig
from ..run_files import CorruptRunFileError, read_json, write_json
from .activity import activity_summary
from .comparison_config import CompareConfig
from .comparison_results import ComparisonResults
from .cost import measure_cost, with_step_times
from .execution import train_runs
from .results import write_results
from .run_plans import resolve_models
from .statistics import mean_report, summarize

__all__ = ["compare"]


def _environment(device: str) -> dict[str, Any]:
    on_gpu = device != "cpu" and torch.cuda.is_available()
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "device": torch.cuda.get_device_name() if on_gpu else "cpu",
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "cpu_threads": torch.get_num_threads(),
    }


def _task_facts(task: Any) -> dict[str, Any]:
    """The task's description, with what a classifier scores without learning (chance level and
    the majority class, :mod:`filterformer.data.reference_scores`) where it has classes."""
    facts = describe_task(task)
    scores = reference_scores(task)
    if scores is not None:
        facts["reference_scores"] = scores.to_dict()
    return facts


#: What becomes of a run's ``diagnostics.json`` that cannot be read.
DIAGNOSTICS_RECOVERY = "it is computed again from the run's best checkpoint"


def _read_diagnostics(path: Path) -> DiagnosticsReport:
    """A run's ``diagnostics.json``; CorruptRunFileError naming it when it cannot be read."""
    data = read_json(path, recovery=DIAGNOSTICS_RECOVERY)
    try:
        return DiagnosticsReport.from_dict(data)
    except (TypeError, ValueError) as err:
        raise CorruptRunFileError(path, f"{type(err).__name__}: {err}",
                                  DIAGNOSTICS_RECOVERY) from None


def _diagnostics(config: TrainConfig, task: Any, batches: int, label: str,
                 echo: Callable[[str], None]) -> DiagnosticsReport:
    """The run's diagnostics (computed once from its best checkpoint, then read back; computed
    again, with a line to ``echo``, when the file is damaged)."""
    path = Path(config.output_dir) / "diagnostics.json"
    if path.exists():
        try:
            return _read_diagnostics(path)
        except CorruptRunFileError as error:
            echo(str(error))
    best = Path(config.output_dir) / "checkpoints" / "best.pt"
    state = load_checkpoint(best)
    model = build_model(model_config_from_dict(state["model_config"]), task, config.pooling)
    load_model_state(model, state["model"], best)
    size = config.eval_batch_size or config.batch_size
    chosen = evaluation_batches(task.validation, size)[:batches]
    loader = make_loader(task.validation, chosen, task.collate, seed=config.seed)
    if task.kind in GRAPH_KINDS:
        # Graphs become token sequences in the tokenizer; the Transformer behind it is measured.
        model.eval()
        loader = ({"inputs_embeds": tokens, "padding_mask": mask}
                  for tokens, mask in map(model.tokenizer, loader))
        model = model.sequence_model
    elif isinstance(model, PretrainedClassifier):
        # The pretrained backbone is measured (its own outputs), called with its own inputs.
        loader = map(model.backbone_inputs, loader)
        model = model.backbone
    with torch.random.fork_rng():
        report = diagnose(model, loader, label=label)
    write_json(path, report.to_dict())
    return report


def _run_record(method: str, seed: int, summary: dict[str, Any], metric: str,
                report: DiagnosticsReport | None) -> dict[str, Any]:
    """A run's record in ``results.json``; a diverged run's (``report`` None) keeps its
    identity and ``diverged``, with every measured figure None."""
    diverged = summary.get("diverged")
    if diverged:
        measured = ("test", "best_validation", "best_step", "train_step_time_s",
                    "peak_memory_bytes", "train_time_s", "last_layer_cosine_similarity",
                    "cosine_similarity_per_layer", f"test_{metric}", f"validation_{metric}")
        return {"method": method, "seed": seed, "run_dir": summary["run_dir"],
                **dict.fromkeys(measured), "steps": summary["steps"], "step_time_s": None,
                "num_parameters": summary["num_parameters"],
                "memory_measure": summary["memory_measure"], "diverged": diverged,
                "method_activity": None, "stopped_early": False}
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
        # Whether patience ended it at ``steps`` (a summary from before patience: it did not).
        "stopped_early": summary.get("stopped_early", False),
        "step_time_s": None,  # the paired measurement's, set once every run is trained
        "train_step_time_s": summary["step_time_s"],
        "peak_memory_bytes": summary["peak_memory_bytes"],
        "num_parameters": summary["num_parameters"],
        "train_time_s": summary["train_time_s"],
        "memory_measure": summary["memory_measure"],
        "last_layer_cosine_similarity": report.token_cosine_similarity[-1],
        "cosine_similarity_per_layer": report.token_cosine_similarity,
        "diverged": None,
        # A summary written before activity was measured has none.
        "method_activity": summary.get("method_activity"),
    }


def compare(
    config: CompareConfig,
    *,
    task: Any = None,
    echo: Callable[[str], None] = print_line,
    jobs: int | None = 1,
    command: str | None = None,
) -> ComparisonResults:
    """Train every method with every seed on one task and write the comparison.

    Args:
        config: the comparison.
        task: a ready ``TaskData`` (loaded from ``config.base.task`` when None).
        echo: where one line per run goes (with the runs done and the estimated time left).
        jobs: runs trained at once: 1 in this process, more in worker processes, None as many
            as fit the cores (:func:`~filterformer.training.compare.execution.train_runs`); the
            results do not depend on it, timings aside.
        command: the command line that runs this comparison, recorded in ``results.json``
            beside the source commit (:func:`filterformer.provenance.provenance`).

    Returns:
        The results, as written to ``results.json``.

    Raises:
        ValueError: before any run, when ``output_dir`` is no directory files can be written
            under (:func:`~filterformer.checks.check_writable_directory`), or a method does not
            fit the task.
        DirectoryInUseError: (a ValueError) before any run, when another process is writing
            in ``output_dir`` (:func:`~filterformer.training.directory_lock.directory_lock`);
            it is locked until this comparison ends.
    """
    started = time.perf_counter()
    # Before the task loads and any run starts: an unusable comparison directory, or one
    # another comparison is writing, fails now.
    with directory_lock(config.output_dir, name="output_dir", command=command):
        return _compare(config, task, echo, jobs, command, started)


def _compare(config: CompareConfig, task: Any, echo: Callable[[str], None], jobs: int | None,
             command: str | None, started: float) -> ComparisonResults:
    """:func:`compare` in its locked directory."""
    task = task if task is not None else load_task_data(config.base.task, config.base.task_options)
    # Every method must fit the task before any run starts; each is resolved once, here.
    model_configs = resolve_models(config.plans, task)
    metric, _ = MODEL_SELECTION[task.kind]
    runs: list[dict[str, Any]] = []
    reports: dict[str, list[DiagnosticsReport]] = {}
    for run in train_runs(config, task, model_configs, jobs=jobs, echo=echo):
        report = None
        if not run.summary.get("diverged"):
            plan = config.plan(run.method, run.seed)
            report = _diagnostics(plan.config, task, config.diagnostics_batches, run.method, echo)
            reports.setdefault(run.method, []).append(report)
        runs.append(_run_record(run.method, run.seed, run.summary, metric, report))
    cost = measure_cost(config, task, models=model_configs, echo=echo)
    runs = with_step_times(runs, cost)
    results = ComparisonResults(
        task=_task_facts(task),
        metric=metric,
        methods=tuple(config.methods),
        method_entries={m: config.method_entries[m].to_dict() for m in config.methods},
        baseline=config.baseline,
        seeds=tuple(config.seeds),
        pretrained=config.base.pretrained,
        budget=config.base.to_dict(),
        environment=_environment(config.base.device),
        memory_measure=runs[0]["memory_measure"],
        cost=cost,
        summary=tuple(summarize(runs, config.methods, metric, config.baseline)),
        method_activity=activity_summary(runs, config.methods),
        runs=tuple(runs),
        elapsed_s=time.perf_counter() - started,
        provenance=provenance(command),
    )
    return write_results(results, {m: mean_report(r, m) for m, r in reports.items()},
                         config.output_dir)

