"""What a comparison is: the budget every run shares, the methods, the seeds, the baseline.

:class:`CompareConfig` is read from a training config file with an optional ``compare:`` section
(:func:`load_compare_config`), or is the built-in comparison (:data:`DEFAULT_COMPARE_CONFIG`).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config_files import apply_overrides, read_config_file
from ..config_values import check_fields, dataclass_from_dict
from ..methods import DEFAULT_METHODS, method_changes
from ..run_config import TrainConfig

__all__ = [
    "DEFAULT_COMPARE_CONFIG",
    "METHOD_FIELDS",
    "CompareConfig",
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
        check_fields(self, "compare.")
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
