"""What a comparison is: the budget every run shares, the methods, the seeds, the baseline.

:class:`CompareConfig` is read from a training config file with an optional ``compare:`` section
(:func:`load_compare_config`), or is the built-in comparison (:data:`DEFAULT_COMPARE_CONFIG`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...checks import check_integer
from ...method_spec import CONFIG_FIELDS
from ...methods import DEFAULT_METHODS
from ..config_files import apply_overrides, read_config_file
from ..config_values import check_fields, dataclass_from_dict
from ..run_config import TrainConfig, check_seed
from .method_entry import MethodEntry
from .pretrained_defaults import drop_default_architecture, patchable_default_methods
from .run_plans import RunPlan, plan_runs

__all__ = [
    "DEFAULT_COMPARE_CONFIG",
    "METHOD_FIELDS",
    "CompareConfig",
    "MethodEntry",
    "RunPlan",
    "load_compare_config",
]

#: The built-in comparison: scikit-learn's 8×8 digits as 16 patches (10 classes) and a 4-layer,
#: width-64 model: it learns them far above chance, its tokens grow alike from layer to layer, and
#: the 7 default methods × 3 seeds train on a 2-core CPU in a few minutes.
DEFAULT_COMPARE_CONFIG: dict[str, Any] = {
    "task": "digits",
    "task_options": {},
    "model": {"dim": 64, "depth": 4, "num_heads": 4, "mlp_ratio": 2.0},
    "optimizer": {"lr": 3e-3, "weight_decay": 0.05},
    "schedule": {"warmup_ratio": 0.1, "decay": "cosine"},
    "epochs": 6,
    "batch_size": 32,
    "output_dir": "runs/compare",
}

#: Model fields the method presets set: a comparison's base config must leave them alone.
METHOD_FIELDS = tuple(CONFIG_FIELDS)
@dataclass
class CompareConfig:
    """A comparison.

    Attributes:
        base: the budget every run shares; its ``output_dir`` is the comparison directory.
        methods: on input, entries: method names (presets of
            :mod:`filterformer.methods`, or combinations such as ``gfsa+neutreno``)
            or mappings ``{name, method, set}`` (:meth:`MethodEntry.parse`); after
            construction, the methods' names.
        seeds: one run per method and seed.
        baseline: the method every other is compared with; None picks ``softmax`` when it is
            compared, else the first method. After construction, the name.
        diagnostics_batches: validation batches the over-smoothing diagnostics average over.
        cost_rounds: timed rounds of the paired time-per-step measurement after training
            (:mod:`~filterformer.training.compare.cost`); 0 skips it, and the time per step
            is then each run's in-training median.
        cost_warmup_steps: untimed warm-up steps of each method before those rounds.
        method_entries: each name's :class:`MethodEntry`, filled from ``methods`` (a plain name
            that already has an entry here keeps it, so :func:`dataclasses.replace` keeps each
            method's overrides); not a config key.

    Construction plans every run once (:attr:`plans`, :func:`~.run_plans.plan_runs`): what
    trains, is measured and is checked afterwards are these plans.
    """

    base: TrainConfig = field(default_factory=lambda: TrainConfig.from_dict(DEFAULT_COMPARE_CONFIG))
    methods: tuple[str | dict[str, Any], ...] = DEFAULT_METHODS
    seeds: tuple[int, ...] = (0, 1, 2)
    baseline: str | None = None
    diagnostics_batches: int = 2
    cost_rounds: int = 6
    cost_warmup_steps: int = 2
    method_entries: dict[str, MethodEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self, "compare.")
        if not self.methods:
            raise ValueError("methods must name at least one method")
        if not all(isinstance(e, MethodEntry) for e in self.method_entries.values()):
            raise ValueError("compare.method_entries is filled from compare.methods; list the "
                             "methods there (names or {name, method, set} mappings)")
        entries = [
            self.method_entries[entry] if isinstance(entry, str) and entry in self.method_entries
            else MethodEntry.parse(entry, f"compare.methods[{i}]")
            for i, entry in enumerate(self.methods)
        ]
        names = [entry.name for entry in entries]
        duplicated = sorted({m for m in names if names.count(m) > 1})
        if duplicated:
            raise ValueError(f"methods names {duplicated} more than once")
        self.methods = tuple(names)
        self.method_entries = {entry.name: entry for entry in entries}
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct integers, at least one; got {self.seeds}")
        for i, seed in enumerate(self.seeds):
            check_seed(f"compare.seeds[{i}]", seed)
        if self.baseline is None:
            self.baseline = "softmax" if "softmax" in names else names[0]
        elif self.baseline not in names:
            raise ValueError(f"compare.baseline {self.baseline!r} is not among the compared "
                             f"methods; choose one of: {', '.join(names)}")
        if self.cost_rounds < 0 or self.cost_warmup_steps < 1:
            raise ValueError(
                f"cost_rounds must be >= 0 (0: no paired measurement) and cost_warmup_steps "
                f">= 1; got {self.cost_rounds} and {self.cost_warmup_steps}"
            )
        check_integer("diagnostics_batches", self.diagnostics_batches)
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
        # Every run's config, made once here: a method's own overrides fail now, not after
        # other runs trained.
        self._plans = plan_runs(self.base, entries, self.seeds)

    @property
    def output_dir(self) -> Path:
        return Path(self.base.output_dir)

    @property
    def plans(self) -> tuple[RunPlan, ...]:
        """Every run, methods first, then seeds (:func:`~.run_plans.plan_runs`)."""
        return self._plans

    def plan(self, name: str, seed: int) -> RunPlan:
        """The run of method ``name`` with ``seed``."""
        for plan in self._plans:
            if plan.name == name and plan.seed == seed:
                return plan
        if name not in self.method_entries:
            raise ValueError(f"unknown method {name!r}; compared methods: "
                             f"{', '.join(self.methods)}")
        raise ValueError(f"seed {seed!r} is not compared; seeds: "
                         f"{', '.join(map(str, self.seeds))}")


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
        options: :class:`CompareConfig` fields (``methods``, ``seeds``, ``baseline``, …) that
            win over the file's ``compare:`` section; a name in ``methods`` that names a mapping
            entry of the file's ``compare.methods`` picks that entry.

    With ``pretrained``, defaults the user did not set give way, with a warning naming them:
    the built-in comparison's model fields, and the default methods no patch expresses
    (:mod:`~filterformer.training.compare.pretrained_defaults`).
    """
    if path is None:
        data, section = copy.deepcopy(DEFAULT_COMPARE_CONFIG), {}
        # The built-in architecture gives way to a pretrained model's, unless the user set it.
        data = drop_default_architecture(apply_overrides(data, overrides), DEFAULT_COMPARE_CONFIG,
                                         apply_overrides({}, overrides))
        overrides = ()
    else:
        data = read_config_file(path)
        section = data.pop("compare", None) or {}
    if not isinstance(section, dict):
        raise ValueError(f"the compare section of {path} must be a mapping; got {section!r}")
    if "base" in section or "base" in options:
        raise ValueError("the budget is the config itself; 'base' is not a compare option")
    if "method_entries" in section or "method_entries" in options:
        raise ValueError("'method_entries' is not a compare option; give methods as "
                         "{name, method, set} mappings in compare.methods")
    if options.get("methods") is not None:
        # Names given here pick the file's own entries of those names, overrides and all.
        named = {e["name"]: e for e in section.get("methods") or ()
                 if isinstance(e, dict) and "name" in e}
        options["methods"] = [named.get(m, m) if isinstance(m, str) else m
                              for m in options["methods"]]
    base = TrainConfig.from_dict(apply_overrides(data, overrides))
    if base.pretrained is not None and options.get("methods") is None and (
        "methods" not in section
    ):
        options["methods"] = patchable_default_methods(base.pretrained, base.model)
    return dataclass_from_dict(CompareConfig, {**section, **options, "base": base},
                               prefix="compare.")
