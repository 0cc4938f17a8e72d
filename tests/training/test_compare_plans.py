"""A comparison's runs are planned once, when it is loaded, and the runs record their plans."""

from __future__ import annotations

import json
import random

import pytest

from filterformer.method_spec import CONFIG_FIELDS, MethodSpec
from filterformer.training import config_files, trainer
from filterformer.training.compare import (
    ComparisonResults,
    compare,
    comparison_config,
    load_compare_config,
    run_plans,
)

from .helpers import majority_task

TINY = ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2", "batch_size=16",
        "max_steps=3", "progress=false"]


def _counting(monkeypatch, module, name, calls):
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)


def test_run_plans_are_made_once_and_equal_what_the_runs_record(tmp_path, monkeypatch):
    seeds = random.sample(range(1000), 2)
    lr = round(random.uniform(1e-3, 1e-2), 6)
    layers = [random.randrange(2)]
    methods = ["softmax", {"name": "gfsa-some", "method": "gfsa",
                           "set": {"model.attention_layers": layers, "optimizer.lr": lr}}]
    calls: list[str] = []
    _counting(monkeypatch, comparison_config, "plan_runs", calls)
    _counting(monkeypatch, run_plans, "method_config", calls)
    _counting(monkeypatch, run_plans, "set_values", calls)
    _counting(monkeypatch, run_plans, "resolve_model_config", calls)
    _counting(monkeypatch, trainer, "resolve_model_config", calls)
    _counting(monkeypatch, config_files, "parse_text", calls)
    config = load_compare_config(None, [*TINY, f"output_dir={tmp_path}"], methods=methods,
                                 seeds=seeds, cost_rounds=1, cost_warmup_steps=1,
                                 diagnostics_batches=1)
    # Loading plans every run once: one config per method, the overrides set as values.
    assert calls.count("plan_runs") == 1 and calls.count("method_config") == 2
    assert calls.count("set_values") == 1
    plans = config.plans
    assert [(p.name, p.seed) for p in plans] == [(m, s) for m in ("softmax", "gfsa-some")
                                                 for s in seeds]
    calls.clear()
    results = compare(config, task=majority_task(num_train=48, num_eval=16),
                      echo=lambda line: None)
    # Training, the cost measurement and the diagnostics plan nothing again, parse no override
    # text, and resolve each method's model once.
    assert calls.count("plan_runs") == calls.count("method_config") == 0
    assert calls.count("set_values") == 0 and "parse_text" not in calls
    assert calls.count("resolve_model_config") == 2
    assert config.plans is plans
    # The results returned are those results.json holds.
    assert ComparisonResults.from_dict(json.loads((tmp_path / "results.json").read_text())) \
        == results
    models = {}
    for plan, run in zip(plans, results.runs, strict=True):
        summary = json.loads((plan.run_dir / "summary.json").read_text())
        assert summary["config"] == plan.config.to_dict()
        assert (run["method"], run["seed"], run["run_dir"]) == (plan.name, plan.seed,
                                                                 str(plan.run_dir))
        models.setdefault(plan.name, summary["model_config"])
        # The plan's method is the one the run's model was built with.
        built = {k: v for k, v in summary["model_config"].items() if k in CONFIG_FIELDS}
        assert plan.spec == MethodSpec.from_config(built)
        assert summary["model_config"] == models[plan.name]  # one model per method
    some = config.plan("gfsa-some", seeds[1]).config
    assert some.optimizer.lr == lr and some.model["attention_layers"] == tuple(layers)
    assert models["gfsa-some"]["attention_layers"] == layers
    assert config.plan("gfsa-some", seeds[0]).spec == MethodSpec.parse("gfsa", layers=layers)
    assert config.plan("softmax", seeds[0]).config.optimizer.lr == config.base.optimizer.lr


def test_overrides_are_set_as_values_typed_as_the_command_line_types_text():
    lr = random.uniform(1e-4, 1e-2)
    data = config_files.set_values({"optimizer": {"lr": 1.0}},
                                   {"optimizer.lr": f"{lr:e}", "model.attention_layers": [1, 3]})
    assert data["optimizer"]["lr"] == pytest.approx(lr) and isinstance(data["optimizer"]["lr"],
                                                                       float)
    assert data["model"]["attention_layers"] == [1, 3]
    with pytest.raises(ValueError, match=r"unknown config key 'optimiser'"):
        config_files.set_values({}, {"optimiser.lr": 0})
