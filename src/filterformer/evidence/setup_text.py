"""A comparison's setup in words, read from its ``results.json``: task, model, optimiser,
budget, seeds, baseline, how the runs' training ended, and where the results came from (commit,
command, wall time)."""

from __future__ import annotations

import json
from typing import Any

from ..training.compare.comparison_results import ComparisonResults
from ..training.compare.html_report import budget_length
from .numbers import format_wall_time

__all__ = ["config_text", "method_text", "provenance_text", "setup_lines", "training_end_text"]

_SPLITS = ("num_train", "num_validation", "num_test")


def config_text(value: Any) -> str:
    """A config value as written in the document: floats in their shortest form, mappings as
    ``key=value`` pairs, other values as JSON."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={config_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(config_text(v) for v in value) + "]"
    return str(value)


def _task_text(results: ComparisonResults) -> str:
    task, budget = results.task, results.budget
    text = f"`{task.get('name', budget.get('task', 'unknown'))}`"
    if task.get("kind"):
        text += f" ({task['kind']})"
    if all(task.get(k) is not None for k in _SPLITS):
        text += (f": {task['num_train']} train / {task['num_validation']} validation / "
                 f"{task['num_test']} test")
    facts = [f"{k} {config_text(v)}" for k, v in task.items()
             if k not in ("name", "kind", *_SPLITS) and v is not None]
    if facts:
        text += "; " + ", ".join(facts)
    if budget.get("task_options"):
        text += f"; options {config_text(budget['task_options'])}"
    return text


def _model_text(results: ComparisonResults) -> str:
    budget = results.budget
    pretrained = results.pretrained or budget.get("pretrained")
    model = budget.get("model") or {}
    text = f"pretrained `{pretrained}`, fine-tuned" if pretrained else "trained from scratch"
    if model:
        text += f"; {config_text(model)}"
    if budget.get("pooling"):
        text += f"; {budget['pooling']} pooling"
    return text


def _optimizer_text(budget: dict[str, Any]) -> str:
    optimizer = budget.get("optimizer") or {}
    schedule = budget.get("schedule") or {}
    text = (f"AdamW, lr {config_text(optimizer.get('lr'))}, weight decay "
            f"{config_text(optimizer.get('weight_decay'))}")
    if schedule.get("warmup_steps") is not None:
        text += f", {schedule['warmup_steps']} warm-up steps"
    elif schedule.get("warmup_ratio") is not None:
        text += f", warm-up {config_text(schedule['warmup_ratio'])} of the steps"
    if schedule.get("decay"):
        text += f", {schedule['decay']} decay"
    if budget.get("grad_clip") is not None:
        text += f", gradient norm clipped at {config_text(budget['grad_clip'])}"
    return text


def _budget_text(budget: dict[str, Any]) -> str:
    return f"{budget_length(budget)}, batch size {budget.get('batch_size')}"


def provenance_text(results: ComparisonResults) -> str:
    """``commit `abc1234` (+ local changes)`` and the command, ``unknown`` where the results do
    not record them."""
    record = results.provenance or {}
    commit = record.get("commit")
    text = f"commit `{commit[:7]}`" if commit else "commit unknown"
    if commit and record.get("modified"):
        text += " + local changes"
    command = record.get("command")
    return text + (f", command `{command}`" if command else ", command unknown")


def method_text(results: ComparisonResults, method: str) -> str:
    """A method's name, with its preset(s) and own overrides when the entry has them
    (``gfsa-even (gfsa; model.attention_layers=[1, 3, 5])``)."""
    entry = results.method_entries.get(method) or {}
    preset, overrides = entry.get("method", method), entry.get("set") or {}
    extra = [preset] if preset != method else []
    extra += [f"{k}={config_text(v)}" for k, v in overrides.items()]
    return f"{method} ({'; '.join(extra)})" if extra else method


def training_end_text(results: ComparisonResults) -> str | None:
    """How the trained runs' training ended: how many had their best validation at their last
    step (more steps might have improved them) and how many ``patience`` stopped; None where no
    run trained more than one step (a comparison of untrained models)."""
    trained = [run for run in results.runs if not run.get("diverged")
               and isinstance(run.get("steps"), int) and run["steps"] > 1]
    if not trained:
        return None
    at_end = sum(run.get("best_step") == run["steps"] for run in trained)
    text = (f"training length: {at_end} of {len(trained)} runs had their best validation at "
            "their last step (more steps might have improved them)")
    stopped = sum(bool(run.get("stopped_early")) for run in trained)
    if stopped:
        text += f"; {stopped} stopped early, their validation no longer improving (`patience`)"
    return text


def setup_lines(results: ComparisonResults) -> list[str]:
    """A comparison's setup as Markdown list items (without the leading ``- ``)."""
    budget = results.budget
    seeds = results.run_seeds()
    end = training_end_text(results)
    return [
        f"task: {_task_text(results)}",
        f"model: {_model_text(results)}",
        f"optimiser: {_optimizer_text(budget)}",
        f"budget: {_budget_text(budget)}; seeds "
        f"{', '.join(map(str, seeds))}; baseline {results.baseline}",
        *([end] if end else []),
        f"made by {provenance_text(results)}; wall time "
        f"{format_wall_time(results.elapsed_s)}",
    ]
