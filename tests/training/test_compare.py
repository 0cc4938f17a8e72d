"""The comparison's configuration, its statistics over seeds, and tasks of every kind."""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

import numpy as np
import pytest
import torch

from filterformer.data.task import TaskData
from filterformer.diagnostics import DiagnosticsReport, diagnose
from filterformer.graphs import Graph, collate_graphs
from filterformer.models import SequenceClassifier, TransformerConfig
from filterformer.training import Trainer, load_checkpoint
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.compare.statistics import mean_report, mean_std, median

from .helpers import majority_task

TINY = ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2", "batch_size=16",
        "max_steps=3", "progress=false"]


def test_mean_std_and_median_skip_missing_values():
    values = [0.25, None, 0.5, float("nan"), 1.0]
    mean, std = mean_std(values)
    assert mean == pytest.approx(np.mean([0.25, 0.5, 1.0]))
    assert std == pytest.approx(np.std([0.25, 0.5, 1.0], ddof=1))
    assert mean_std([0.3]) == (0.3, 0.0)
    assert mean_std([None]) == (None, None)
    assert median([3.0, None, 1.0, 2.0]) == statistics.median([1.0, 2.0, 3.0])


def test_mean_report_averages_every_curve():
    model = SequenceClassifier(TransformerConfig(dim=16, depth=2, num_heads=2, vocab_size=9,
                                                 attention="gfsa"), 3)
    batches = [{"input_ids": torch.randint(1, 9, (4, 7))} for _ in range(2)]
    first = diagnose(model, batches[:1], label="a")
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("wK"):
                parameter.add_(0.5)
    second = diagnose(model, batches[1:], label="b")
    mean = mean_report([first, second], "both")
    assert mean.label == "both" and mean.num_samples == 8
    expected = (np.array(first.token_cosine_similarity) + second.token_cosine_similarity) / 2
    assert mean.token_cosine_similarity == pytest.approx(expected.tolist())
    expected = (np.array(first.frequency_response) + np.array(second.frequency_response)) / 2
    assert np.array(mean.frequency_response) == pytest.approx(expected)
    curves = [np.array(r.gfsa_filters[1].response) for r in (first, second)]
    assert np.array(mean.gfsa_filters[1].response) == pytest.approx((curves[0] + curves[1]) / 2)


@pytest.mark.parametrize(
    ("overrides", "options", "message"),
    [
        (["method=gfsa"], {}, r"the base config sets method='gfsa', but compare sets the method"),
        (["model.attention=gfsa"], {}, r"base config sets model.attention, which the method"),
        (["model.neutreno_lambda=0.4"], {}, r"sets model.neutreno_lambda"),
        ([], {"methods": ["softmax", "gfsa", "softmax"]}, r"methods names \['softmax'\] more"),
        ([], {"methods": ["soft"]}, r"unknown method 'soft'; valid methods: softmax, gfsa, "),
        ([], {"methods": []}, r"methods must name at least one method"),
        ([], {"seeds": [1, 1]}, r"seeds must be distinct integers"),
        ([], {"seeds": ["a"]}, r"compare.seeds\[0\] must be an integer; got 'a'"),
        ([], {"diagnostics_batches": 0}, r"diagnostics_batches must be a positive integer"),
        ([], {"repeats": 2}, r"unknown config key\(s\) compare.repeats; valid keys: base, "),
    ],
)
def test_bad_comparisons_are_explained(overrides, options, message):
    with pytest.raises(ValueError, match=message):
        load_compare_config(None, overrides, **options)


def test_compare_section_of_a_file_and_options(tmp_path):
    path = tmp_path / "budget.toml"
    path.write_text('task = "majority"\nepochs = 2\n[compare]\nmethods = ["gfsa", "agf"]\n'
                    "seeds = [4]\n")
    config = load_compare_config(path)
    assert (config.methods, config.seeds, config.base.epochs) == (("gfsa", "agf"), (4,), 2)
    config = load_compare_config(path, ["epochs=5"], seeds=[7, 8])
    assert (config.methods, config.seeds, config.base.epochs) == (("gfsa", "agf"), (7, 8), 5)
    assert config.run_config("agf", 8).output_dir.endswith("runs/agf/seed-8")
    assert config.run_config("agf", 8).method == "agf"


def test_a_changed_budget_is_not_mixed_with_finished_runs(tmp_path):
    task = majority_task(num_train=48, num_eval=16)
    options = {"methods": ["softmax"], "seeds": [0], "diagnostics_batches": 1}
    compare(load_compare_config(None, [*TINY, f"output_dir={tmp_path}"], **options), task=task,
            echo=lambda line: None)
    changed = load_compare_config(None, [*TINY, "max_steps=4", f"output_dir={tmp_path}"],
                                  **options)
    with pytest.raises(ValueError, match=r"summary.json was saved with another configuration: "
                                         r"max_steps: checkpoint 3, now 4"):
        compare(changed, task=task, echo=lambda line: None)


def test_an_interrupted_comparison_resumes_its_stopped_run(tmp_path):
    task = majority_task(num_train=48, num_eval=16)
    settings = [*TINY, "max_steps=6", f"output_dir={tmp_path}"]
    options = {"methods": ["gfsa"], "seeds": [0], "diagnostics_batches": 1}
    config = load_compare_config(None, settings, **options)
    # A run stopped half-way (as a killed comparison leaves it) ...
    Trainer(dataclasses.replace(config.run_config("gfsa", 0), stop_after=3), task=task).fit()
    lines = []
    results = compare(config, task=task, echo=lines.append)
    assert "(resumed)" in lines[0]
    # ... ends as if it had never stopped.
    fresh = load_compare_config(None, [*TINY, "max_steps=6", f"output_dir={tmp_path / 'b'}"],
                                **options)
    expected = compare(fresh, task=task, echo=lambda line: None)
    assert results["runs"][0]["test"] == expected["runs"][0]["test"]
    resumed, whole = (load_checkpoint(Path(c.run_config("gfsa", 0).output_dir) / "checkpoints" /
                                      "last.pt")["model"] for c in (config, fresh))
    assert all(torch.equal(resumed[k], whole[k]) for k in whole)


def _graph_task() -> TaskData:
    generator = torch.Generator().manual_seed(0)

    def graph(label: int) -> Graph:
        n = int(torch.randint(3, 6, (), generator=generator))
        path = [[i, i + 1] for i in range(n - 1)]
        edges = torch.tensor(path + [[j, i] for i, j in path])  # both directions
        features = torch.randn(n, 4, generator=generator) + label
        return Graph(features, edges.t(), torch.randn(len(edges), 2, generator=generator), label)

    graphs = [graph(i % 2) for i in range(48)]
    return TaskData(name="graphs", kind="graph_classification", train=graphs[:32],
                    validation=graphs[32:40], test=graphs[40:], collate=collate_graphs,
                    num_classes=2, vocab_size=None, input_dim=None, max_len=13)


def test_graph_tasks_are_compared_through_their_tokens(tmp_path):
    config = load_compare_config(
        None, ["task=graphs", "model.dim=16", "model.depth=2", "model.num_heads=2",
               "batch_size=8", "max_steps=2", "progress=false", f"output_dir={tmp_path}"],
        methods=["softmax", "samsa_hard"], seeds=[0], diagnostics_batches=1)
    results = compare(config, task=_graph_task(), echo=lambda line: None)
    for run in results["runs"]:
        # embeddings + 2 layers, measured on node and edge tokens
        assert len(run["cosine_similarity_per_layer"]) == 3
        saved = DiagnosticsReport.load(tmp_path / "runs" / run["method"] / "seed-0" /
                                       "diagnostics.json")
        assert saved.num_samples == 8
    assert json.loads((tmp_path / "results.json").read_text())["task"]["kind"] == \
        "graph_classification"
