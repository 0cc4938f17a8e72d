"""The time-per-step column: every method's training step measured side by side.

Runs trained one after another on a shared machine meet different loads, so their in-training
step times compare moments, not methods. After training, :func:`measure_cost` builds, for each
seed, every method's training step in this one process
(:func:`~filterformer.training.training_steps.run_training_step`: the run's model from its seed,
its AdamW settings, clipping and precision, on the same few real training batches of the task)
and alternates the methods' steps in rounds (:func:`filterformer.timing.paired_step_times`):

- warm-up rounds of one step per method come first; they are not reported, and each method's
  fastest warm-up step sets how many steps it runs per round, so that a method with a short step
  runs several, about as long in all as the longest method's one (at most 8);
- in each timed round every method runs its steps back to back, in the same order every round
  (plain alternation: ``A B C``, ``A B C``, …);
- each round uses its own training batch, the same for every method;
- a method's time per step for a seed is the median over rounds of its mean step in each round.

Drifts in the machine's load over seconds fall on every method alike. The step timed is the
training loop's (forward, backward, gradient clipping, optimiser step, gradients cleared) without
the learning-rate schedule; the models are freshly initialised, not the trained weights, because
a step's cost does not depend on the weights' values. The benchmark's classifier case builds its
step the same way (:class:`~filterformer.training.training_steps.TrainingStep`).

With ``compile`` the steps timed are compiled, as the runs' were; each method compiles in its
first warm-up step, which is not reported.

The measurement is kept in ``cost.json`` in the comparison directory and reused while the runs,
the seeds and the measurement's settings (``compile`` among them) are unchanged; delete the file
to measure again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import torch

from ...timing import PairedStepTimes, StepTimer, paired_step_times, time_step
from ..distributed import setup_distributed
from ..model_building import ModelConfig
from ..progress import print_line
from ..run_config import run_identity
from ..run_files import CorruptRunFileError, read_json, write_json
from ..training_steps import run_training_step, training_inputs
from .comparison_config import CompareConfig
from .run_plans import resolve_models

__all__ = [
    "COST_FILE",
    "cost_note",
    "measure_cost",
    "with_step_times",
]

#: The cached measurement, in the comparison directory.
COST_FILE = "cost.json"


def _measure_seed(config: CompareConfig, models: dict[str, ModelConfig], task: Any, seed: int,
                  device: torch.device, timer: StepTimer) -> PairedStepTimes:
    inputs: dict[int, list[dict[str, Any]]] = {}
    steps = []
    for plan in (plan for plan in config.plans if plan.seed == seed):
        run = plan.config
        if run.batch_size not in inputs:
            inputs[run.batch_size] = training_inputs(task, run.batch_size, seed,
                                                      config.cost_rounds, device)
        steps.append(run_training_step(run, models[plan.name], task, device,
                                       inputs[run.batch_size]))
    return paired_step_times(
        [s.step for s in steps], rounds=config.cost_rounds,
        warmup_steps=config.cost_warmup_steps, timer=timer,
        prepare=lambda side, index: steps[side].use_batch(index),
    )


def _settings(config: CompareConfig, device: torch.device) -> dict[str, Any]:
    """How the time per step is measured (``results.json``'s ``cost``, less the numbers)."""
    measure = "paired" if config.cost_rounds else "in-training"
    # compile changes the time per step, not the weights, so the runs' identities leave it out.
    return {"measure": measure, "rounds": config.cost_rounds,
            "warmup_steps": config.cost_warmup_steps, "threads": torch.get_num_threads(),
            "device": str(device), "compile": config.base.compile}


def measure_cost(
    config: CompareConfig,
    task: Any,
    *,
    models: dict[str, ModelConfig] | None = None,
    timer: StepTimer | None = None,
    echo: Callable[[str], None] = print_line,
) -> dict[str, Any]:
    """Measure every method's time per training step, paired, for every seed (see the module).

    Call it after the runs are trained (the measurement wants the machine to itself). With
    ``config.cost_rounds == 0`` nothing is measured and :func:`with_step_times` falls back to
    each run's in-training median.

    Args:
        config: the comparison (its run plans, ``cost_rounds``, ``cost_warmup_steps``).
        task: the ``TaskData``.
        models: each method's model configuration, as the runs were built
            (:func:`~.run_plans.resolve_models`; resolved here when None).
        timer: runs a step once and returns its ms (default:
            :func:`~filterformer.timing.time_step`).
        echo: where one line about the measurement goes.

    Returns:
        ``results.json``'s ``cost``: the settings (``measure``, ``rounds``, ``warmup_steps``,
        ``threads``, ``device``, ``compile``) and, when measured, ``seeds``: per seed (a
        string), per method ``steps_per_round``, ``round_step_time_s`` and their median
        ``step_time_s``, and ``elapsed_s``.
    """
    device = setup_distributed(config.base.device).device
    settings = _settings(config, device)
    if not config.cost_rounds:
        return settings
    path = config.output_dir / COST_FILE
    key = json.loads(json.dumps({
        **settings, "seeds": list(config.seeds),
        "runs": {plan.name: run_identity(plan.config.to_dict())
                 for plan in config.plans if plan.seed == config.seeds[0]},
    }))
    if path.exists():
        try:
            cached = read_json(path, recovery="the step times are measured again")
        except CorruptRunFileError as error:
            echo(f"cost: {error}")
            cached = {}
        if cached.get("key") == key and isinstance(cached.get("cost"), dict):
            echo(f"cost: paired step times reused from {path}")
            return cached["cost"]
    timer = timer or time_step
    models = models if models is not None else resolve_models(config.plans, task)
    started = time.perf_counter()
    seeds = {}
    with torch.random.fork_rng(devices=[device.index] if device.type == "cuda" else []):
        for seed in config.seeds:
            measured = _measure_seed(config, models, task, seed, device, timer)
            seeds[str(seed)] = {
                "steps_per_round": dict(zip(config.methods, measured.steps_per_round,
                                            strict=True)),
                "round_step_time_s": dict(zip(config.methods, measured.round_step_s,
                                              strict=True)),
                "step_time_s": dict(zip(config.methods, measured.median_s, strict=True)),
            }
    cost = {**settings, "seeds": seeds, "elapsed_s": time.perf_counter() - started}
    write_json(path, {"key": key, "cost": cost})
    echo(f"cost: {len(config.methods)} methods' training steps alternated in "
         f"{config.cost_rounds} rounds per seed, {len(config.seeds)} seeds "
         f"({cost['elapsed_s']:.1f} s)")
    return cost


def with_step_times(runs: list[dict[str, Any]], cost: dict[str, Any]) -> list[dict[str, Any]]:
    """The run records with ``step_time_s`` set: the paired median of the run's method and seed
    (:func:`measure_cost`), or the run's in-training median (``train_step_time_s``) when the
    paired measurement was off; None for a diverged run, which no statistic uses."""

    def step_time(run: dict[str, Any]) -> float | None:
        if run.get("diverged"):
            return None
        if cost["measure"] != "paired":
            return run["train_step_time_s"]
        return cost["seeds"][str(run["seed"])]["step_time_s"][run["method"]]

    return [{**run, "step_time_s": step_time(run)} for run in runs]


def cost_note(cost: dict[str, Any] | None) -> str:
    """The report's note on what the time-per-step column measures (``cost`` as
    :func:`measure_cost` returns it; None: the in-training median)."""
    if cost is None or cost["measure"] != "paired":
        return ("Time / step: median wall time of one optimiser step (forward, backward, "
                "clipping, update) during each run's own training; runs trained one after "
                "another, so each carries the machine's load of its moment.")
    threads = cost["threads"]
    compiled = " (compiled with torch.compile)" if cost.get("compile") else ""
    return (
        "Time / step: measured after training, not during it. For each seed every method's "
        f"model was built in one process and their training steps{compiled} (forward, backward, "
        f"clipping, AdamW update) alternated in {cost['rounds']} rounds, in the same order "
        f"each round, after {cost['warmup_steps']} untimed warm-up round(s), on "
        f"{cost['device']} with {threads} CPU thread{'s' if threads != 1 else ''}; a run's "
        "time is the median over rounds of its mean step, so the machine's load falls on "
        "every method alike. Each run's own training wall time and in-training median step "
        "are kept in results.json (train_time_s, train_step_time_s)."
    )
