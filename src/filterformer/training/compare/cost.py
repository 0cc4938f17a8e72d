"""The time-per-step column: every method's training step measured side by side.

Runs trained one after another on a shared machine meet different loads, so their in-training
step times compare moments, not methods. After training, :func:`measure_cost` builds, for each
seed, every method's model in this one process (with the run's seed, its AdamW optimiser and the
same few training batches) and alternates their training steps in rounds, as the benchmark's
paired check does (:func:`filterformer.timing.paired_step_times`):

- warm-up rounds of one step per method come first; they are not reported, and each method's
  fastest warm-up step sets how many steps it runs per round, so that a method with a short step
  runs several, about as long in all as the longest method's one (at most 8);
- in each timed round every method runs its steps back to back; the order changes from round to
  round (``A B C``, ``C B A``, ``B C A``, …: a Williams design) so that no method always follows
  the same one;
- each round uses its own training batch, the same for every method;
- a method's time per step for a seed is the median over rounds of its mean step in each round.

Drifts in the machine's load over seconds fall on every method alike. The step timed is the
training loop's (forward, backward, gradient clipping, optimiser step, gradients cleared) without
the learning-rate schedule; the models are freshly initialised, not the trained weights, because
a step's cost does not depend on the weights' values.

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
from ..batches import make_loader, training_batches
from ..compilation import compile_model, mark_sequence_dynamic
from ..distributed import setup_distributed
from ..evaluation import model_inputs
from ..model_building import ModelConfig, build_model
from ..optimization import build_optimizer, training_step
from ..precision import grad_scaler, resolve_precision
from ..run_config import TrainConfig, run_identity
from ..run_files import CorruptRunFileError, read_json, write_json
from .comparison_config import CompareConfig
from .run_plans import resolve_models

__all__ = [
    "COST_FILE",
    "TrainingStep",
    "cost_note",
    "measure_cost",
    "training_inputs",
    "with_step_times",
]

#: The cached measurement, in the comparison directory.
COST_FILE = "cost.json"


class TrainingStep:
    """One run's model, AdamW optimiser and batches, ready to take training steps.

    With ``config.compile`` the steps run the compiled model, as the run's training does
    (:mod:`filterformer.training.compilation`; the first step compiles, in the warm-up).

    Args:
        config: the run (its seed initialises the model).
        model_config: its model's configuration, resolved once for the method
            (:func:`~.run_plans.resolve_models`).
        task: the ``TaskData``.
        device: where the model lives.
        batches: the model's inputs (on ``device``), one per round.
    """

    def __init__(self, config: TrainConfig, model_config: ModelConfig, task: Any,
                 device: torch.device, batches: list[dict[str, Any]]) -> None:
        torch.manual_seed(config.seed)
        self.model = build_model(model_config, task, config.pooling).to(device)
        self.model.train()
        # The step the run trains with: compiled when the run is (its first call compiles).
        self.step_model = compile_model(self.model) if config.compile else self.model
        self.optimizer = build_optimizer(self.model, config.optimizer)
        self.device = device
        self.precision = resolve_precision(config.precision, device)
        self.scaler = grad_scaler(self.precision, device)
        self.grad_clip = config.grad_clip
        self.batches = batches
        if config.compile:
            for inputs in batches:
                mark_sequence_dynamic(inputs)
        self.inputs = batches[0]

    def use_batch(self, index: int) -> None:
        """Take the next steps on batch ``index`` (modulo the batches there are)."""
        self.inputs = self.batches[index % len(self.batches)]

    def step(self) -> torch.Tensor:
        """One training step, as the training loop takes it (without the schedule); returns
        the step's loss (a 0-dimensional tensor; reading it waits for the device)."""
        loss, _ = training_step(self.step_model, self.inputs, self.optimizer, self.scaler,
                                precision=self.precision, device=self.device,
                                grad_clip=self.grad_clip, parameters=self.model)
        return loss


def training_inputs(task: Any, batch_size: int, seed: int, count: int,
                     device: torch.device) -> list[dict[str, Any]]:
    """The first ``count`` training batches of the seed's first epoch, as model inputs."""
    chosen = training_batches(task.train, batch_size, epoch=0, seed=seed)[:count]
    loader = make_loader(task.train, chosen, task.collate, seed=seed)
    return [model_inputs(batch, device) for batch in loader]


def _measure_seed(config: CompareConfig, models: dict[str, ModelConfig], task: Any, seed: int,
                  device: torch.device, timer: StepTimer) -> PairedStepTimes:
    inputs: dict[int, list[dict[str, Any]]] = {}
    steps = []
    for plan in (plan for plan in config.plans if plan.seed == seed):
        run = plan.config
        if run.batch_size not in inputs:
            inputs[run.batch_size] = training_inputs(task, run.batch_size, seed,
                                                      config.cost_rounds, device)
        steps.append(TrainingStep(run, models[plan.name], task, device, inputs[run.batch_size]))
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
    echo: Callable[[str], None] = print,
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
        f"clipping, AdamW update) alternated in {cost['rounds']} rounds, the order changing "
        f"each round, after {cost['warmup_steps']} untimed warm-up round(s), on "
        f"{cost['device']} with {threads} CPU thread{'s' if threads != 1 else ''}; a run's "
        "time is the median over rounds of its mean step, so the machine's load falls on "
        "every method alike. Each run's own training wall time and in-training median step "
        "are kept in results.json (train_time_s, train_step_time_s)."
    )
