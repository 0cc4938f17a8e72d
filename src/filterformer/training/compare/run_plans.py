"""A comparison's runs, planned once: every (method, seed) with its whole training config.

:func:`plan_runs` is the one place a compared method's preset and overrides meet the shared
budget. It runs when the comparison is loaded (:class:`CompareConfig`), so that an override
that does not fit fails before any run trains; the runner, the workers, the cost measurement
and the dry run then receive :class:`RunPlan` objects and resolve nothing again. A method's
overrides are set on the budget's mapping (:func:`~filterformer.training.config_files.
set_values`), never written out as text and parsed back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...method_spec import MethodSpec
from ..config_files import set_values
from ..model_building import ModelConfig, resolve_model_config
from ..run_config import TrainConfig
from .method_entry import MethodEntry

__all__ = ["RunPlan", "method_config", "plan_runs", "resolve_models", "run_directory"]


@dataclass(frozen=True)
class RunPlan:
    """One run of a comparison.

    Attributes:
        name: the compared method's name (its label and ``runs/<name>/``).
        seed: the run's seed.
        spec: the method as the run builds or patches it (its preset under its overrides).
        config: the run's whole training config: the budget, the method, its overrides, the
            seed and the run directory.
        run_dir: the run directory, ``<output_dir>/runs/<name>/seed-<seed>``.
    """

    name: str
    seed: int
    spec: MethodSpec
    config: TrainConfig
    run_dir: Path

    @property
    def label(self) -> str:
        """``<name> seed <seed>``, as progress lines and errors name the run."""
        return f"{self.name} seed {self.seed}"


def run_directory(output_dir: str | Path, name: str, seed: int) -> Path:
    """Where a comparison in ``output_dir`` keeps the run of method ``name`` and ``seed``."""
    return Path(output_dir) / "runs" / name / f"seed-{seed}"


def method_config(base: TrainConfig, entry: MethodEntry) -> TrainConfig:
    """The budget with the method's preset and its own overrides (``set``) on top.

    Raises:
        ValueError: naming the method, for an override the config does not take.
    """
    if not entry.overrides:
        return dataclasses.replace(base, method=entry.method)
    try:
        data = set_values(base.to_dict(), entry.overrides)
        data["method"] = entry.method
        return TrainConfig.from_dict(data)
    except ValueError as err:
        raise ValueError(f"method {entry.name!r} (its set): {err}") from None


def plan_runs(base: TrainConfig, entries: Iterable[MethodEntry],
              seeds: Sequence[int]) -> tuple[RunPlan, ...]:
    """Every run of a comparison, methods first, then seeds (the order runs are listed in).

    Args:
        base: the budget every run shares; its ``output_dir`` is the comparison directory.
        entries: the compared methods.
        seeds: the seeds every method runs with.

    Raises:
        ValueError: naming the method, for an override that does not fit the config.
    """
    plans = []
    for entry in entries:
        config = method_config(base, entry)
        spec = config.method_spec()
        for seed in seeds:
            run_dir = run_directory(base.output_dir, entry.name, seed)
            plans.append(RunPlan(entry.name, seed, spec,
                                 dataclasses.replace(config, seed=seed, output_dir=str(run_dir)),
                                 run_dir))
    return tuple(plans)


def resolve_models(plans: Iterable[RunPlan], task: Any) -> dict[str, ModelConfig]:
    """Each method's model configuration on ``task``, resolved once, from its first run (its
    seeds share the model; :func:`~filterformer.training.model_building.resolve_model_config`).

    Raises:
        ValueError: naming the method, for one that does not fit the task.
    """
    models: dict[str, ModelConfig] = {}
    for plan in plans:
        if plan.name not in models:
            try:
                models[plan.name] = resolve_model_config(plan.config, task)
            except ValueError as err:
                raise ValueError(f"method {plan.name!r}: {err}") from None
    return models
