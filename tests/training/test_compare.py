"""The comparison's configuration, its statistics over seeds, and tasks of every kind."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
import statistics
from pathlib import Path

import numpy as np
import pytest
import torch

from filterformer.data.datasets import SequenceDataset, collate_sequences
from filterformer.data.task import TaskData
from filterformer.diagnostics import DiagnosticsReport, diagnose
from filterformer.graphs import Graph, collate_graphs
from filterformer.models import SequenceClassifier, TransformerConfig
from filterformer.training import Trainer, load_checkpoint
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.compare.comparison_results import ComparisonResults
from filterformer.training.compare.figures import comparison_figures
from filterformer.training.compare.html_report import render_report, verdict_summary
from filterformer.training.compare.statistics import mean_report, mean_std, median, summarize

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
        ([], {"methods": ["softmax", "gfsa"], "baseline": "agf"},
         r"compare.baseline 'agf' is not among the compared methods; choose one of: softmax, "
         r"gfsa"),
        ([], {"methods": [{"name": "a", "method": "gfsa", "lr": 0}]},
         r"unknown key\(s\) lr in compare.methods\[0\]; valid keys: name, method, set"),
        ([], {"methods": [{"name": "a"}]}, r"compare.methods\[0\] needs a 'method'"),
        ([], {"methods": [{"method": "gfsa", "name": "../up"}]},
         r"compare.methods\[0\].name must be usable as a directory name"),
        ([], {"methods": ["gfsa", {"name": "gfsa", "method": "gfsa+neutreno"}]},
         r"methods names \['gfsa'\] more than once"),
        ([], {"methods": [{"method": "gfsa", "set": {"task": "digits"}}]},
         r"compare.methods\[0\].set may not set task: every run of a comparison shares"),
        ([], {"methods": [{"method": "gfsa", "set": {"compile": True}}]},
         r"compare.methods\[0\].set may not set compile: every run of a comparison shares"),
        ([], {"methods": [{"method": "gfsa", "set": {"optimiser.lr": 0}}]},
         r"method 'gfsa' \(its set\): unknown config key 'optimiser'; valid keys of the config"),
        ([], {"methods": [{"method": "gfsa", "set": {"optimizer.lr": -1}}]},
         r"method 'gfsa' \(its set\): optimizer.lr must be >= 0"),
        ([], {"methods": [{"method": "gfsa", "set": {"model.attention_layers": [9]}}]},
         r"method 'gfsa' \(its set\): .*attention_layers"),
        ([], {"methods": ["gfsa"], "method_entries": {}}, r"'method_entries' is not a compare"),
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
    assert config.plan("agf", 8).config.output_dir.endswith("runs/agf/seed-8")
    assert config.plan("agf", 8).config.method == "agf"


def test_a_changed_budget_is_not_mixed_with_finished_runs(tmp_path):
    task = majority_task(num_train=48, num_eval=16)
    options = {"methods": ["softmax"], "seeds": [0], "diagnostics_batches": 1}
    compare(load_compare_config(None, [*TINY, f"output_dir={tmp_path}"], **options), task=task,
            echo=lambda line: None)
    changed = load_compare_config(None, [*TINY, "max_steps=4", f"output_dir={tmp_path}"],
                                  **options)
    with pytest.raises(ValueError, match=r"summary.json was saved with another configuration: "
                                         r"max_steps: checkpoint 3, now 4; .*needs a directory "
                                         r"of its own: give it one with --output-dir DIR"):
        compare(changed, task=task, echo=lambda line: None)


def test_a_stopped_run_with_another_budget_is_refused_before_anything_trains(tmp_path):
    """A comparison whose stopped run was saved with another budget fails before any run
    trains, naming the checkpoint and --output-dir (not half-way, from the trainer)."""
    task = majority_task(num_train=48, num_eval=16)
    options = {"methods": ["gfsa", "softmax"], "seeds": [0], "diagnostics_batches": 1}
    stopped = load_compare_config(None, [*TINY, "max_steps=6", f"output_dir={tmp_path}"],
                                  **options)
    Trainer(dataclasses.replace(stopped.plan("softmax", 0).config, stop_after=2), task=task).fit()
    changed = load_compare_config(None, [*TINY, "max_steps=5", f"output_dir={tmp_path}"],
                                  **options)
    with pytest.raises(ValueError, match=r"softmax/seed-0/checkpoints/last.pt was saved with "
                                         r"another configuration: max_steps: checkpoint 6, now "
                                         r"5; .*--output-dir DIR"):
        compare(changed, task=task, echo=lambda line: None)
    assert not Path(changed.plan("gfsa", 0).config.output_dir).exists()


def test_an_interrupted_comparison_resumes_its_stopped_run(tmp_path):
    task = majority_task(num_train=48, num_eval=16)
    settings = [*TINY, "max_steps=6", f"output_dir={tmp_path}"]
    options = {"methods": ["gfsa"], "seeds": [0], "diagnostics_batches": 1}
    config = load_compare_config(None, settings, **options)
    # A run stopped half-way (as a killed comparison leaves it) ...
    Trainer(dataclasses.replace(config.plan("gfsa", 0).config, stop_after=3), task=task).fit()
    lines = []
    results = compare(config, task=task, echo=lines.append)
    assert "(resumed)" in lines[0]
    # ... ends as if it had never stopped.
    fresh = load_compare_config(None, [*TINY, "max_steps=6", f"output_dir={tmp_path / 'b'}"],
                                **options)
    expected = compare(fresh, task=task, echo=lambda line: None)
    assert results.runs[0]["test"] == expected.runs[0]["test"]
    resumed, whole = (load_checkpoint(Path(c.plan("gfsa", 0).config.output_dir) / "checkpoints" /
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
    for run in results.runs:
        # embeddings + 2 layers, measured on node and edge tokens
        assert len(run["cosine_similarity_per_layer"]) == 3
        saved = DiagnosticsReport.load(tmp_path / "runs" / run["method"] / "seed-0" /
                                       "diagnostics.json")
        assert saved.num_samples == 8
    assert json.loads((tmp_path / "results.json").read_text())["task"]["kind"] == \
        "graph_classification"


def test_method_entries_set_their_own_runs_only(tmp_path):
    path = tmp_path / "budget.yaml"
    path.write_text(
        "task: majority\nmodel: {dim: 16, depth: 6, num_heads: 2}\noptimizer: {lr: 0.003}\n"
        "compare:\n  methods:\n    - softmax\n"
        "    - {name: gfsa-even, method: gfsa, set: {model.attention_layers: [1, 3, 5]}}\n"
        "    - {name: softmax-lr0, method: softmax, set: {optimizer.lr: 0}}\n"
        "    - {name: gfsa.k5, method: gfsa, set: {model.attention_options: {K: 5}}}\n"
    )
    config = load_compare_config(path)
    assert config.methods == ("softmax", "gfsa-even", "softmax-lr0", "gfsa.k5")
    model = config.plan("gfsa.k5", 0).config.transformer_config(vocab_size=12)
    assert (model.attention, model.attention_options["K"]) == ("gfsa", 5)
    assert config.baseline == "softmax"
    even = config.plan("gfsa-even", 2).config
    assert (even.method, even.seed, even.model["attention_layers"]) == ("gfsa", 2, (1, 3, 5))
    assert even.output_dir.endswith("runs/gfsa-even/seed-2")
    assert even.optimizer.lr == 0.003
    frozen = config.plan("softmax-lr0", 1).config
    assert frozen.optimizer.lr == 0.0 and frozen.method == "softmax"
    assert "attention_layers" not in frozen.model
    plain = config.plan("softmax", 1).config
    assert plain.optimizer.lr == 0.003 and plain.model == config.base.model
    with pytest.raises(ValueError, match=r"unknown method 'agf'; compared methods: softmax, "):
        config.plan("agf", 0)
    with pytest.raises(ValueError, match=r"seed 3 is not compared; seeds: 0, 1, 2"):
        config.plan("softmax", 3)
    # dataclasses.replace keeps each method's overrides (and the baseline, which must stay).
    fewer = dataclasses.replace(config, methods=("softmax-lr0", "gfsa-even"),
                                baseline="softmax-lr0")
    assert fewer.method_entries == {m: config.method_entries[m] for m in fewer.methods}
    assert fewer.plan("softmax-lr0", 0).config.optimizer.lr == 0.0
    with pytest.raises(ValueError, match=r"compare.baseline 'softmax' is not among the compared"):
        dataclasses.replace(config, methods=("gfsa-even",))
    # Names given as options pick the file's entries of those names.
    picked = load_compare_config(path, methods=["gfsa-even", "neutreno"], baseline="neutreno")
    assert picked.methods == ("gfsa-even", "neutreno") and picked.baseline == "neutreno"
    assert picked.plan("gfsa-even", 0).config.model["attention_layers"] == (1, 3, 5)


def _cluster_split(num_items: int, generator: torch.Generator) -> SequenceDataset:
    """Class c's sequences hold only the tokens 3c + 1 … 3c + 3: learnt in a few steps."""
    labels = torch.randint(4, (num_items,), generator=generator)
    sequences = [torch.randint(1, 4, (int(torch.randint(6, 13, (), generator=generator)),),
                               generator=generator) + 3 * int(label) for label in labels]
    return SequenceDataset(sequences, labels.tolist())


def _cluster_task() -> TaskData:
    generator = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 30)))
    return TaskData(name="clusters", kind="classification",
                    train=_cluster_split(128, generator), validation=_cluster_split(32, generator),
                    test=_cluster_split(64, generator), collate=collate_sequences, num_classes=4,
                    vocab_size=13, input_dim=None, max_len=12)


@pytest.fixture(scope="module")
def frozen_comparison(tmp_path_factory) -> ComparisonResults:
    """softmax, softmax with learning rate 0 (its own set), and softmax again, 4 seeds."""
    out = tmp_path_factory.mktemp("frozen")
    config = load_compare_config(
        None, ["task=clusters", "model.dim=16", "model.depth=2", "model.num_heads=2",
               "batch_size=16", "max_steps=16", "optimizer.lr=1e-2", "progress=false",
               f"output_dir={out}"],
        methods=["softmax", {"name": "softmax-lr0", "method": "softmax",
                             "set": {"optimizer.lr": 0}},
                 {"name": "softmax-again", "method": "softmax"}],
        seeds=[0, 1, 2, 3], diagnostics_batches=1)
    return compare(config, task=_cluster_task(), echo=lambda line: None)


def test_a_method_made_worse_on_purpose_is_worse(frozen_comparison):
    results = frozen_comparison
    assert results.baseline == "softmax"
    rows = {row["method"]: row for row in results.summary}
    assert rows["softmax"]["difference"] is None
    assert rows["softmax"]["test_accuracy_mean"] > 0.9  # the task is learnt ...
    frozen = rows["softmax-lr0"]["difference"]["test_accuracy"]
    assert frozen["verdict"] == "worse" and frozen["seeds"] == 4  # ... and not without updates
    assert frozen["ci_high"] < 0
    for key in ("test_accuracy", "last_layer_cosine_similarity"):
        same = rows["softmax-again"]["difference"][key]
        assert same["verdict"] == "no significant difference", key
        assert same["mean"] == pytest.approx(0.0, abs=1e-6)
    assert results.method_entries["softmax-lr0"] == {
        "name": "softmax-lr0", "method": "softmax", "set": {"optimizer.lr": 0}}


def test_results_csv_flattens_the_differences(frozen_comparison, tmp_path):
    results = frozen_comparison
    out = Path(results.runs[0]["run_dir"]).parents[2]
    with open(out / "results.csv", newline="") as f:
        table = {row["method"]: row for row in csv.DictReader(f)}
    for key in ("test_accuracy", "last_layer_cosine_similarity", "step_time_s"):
        for part in ("mean", "ci_low", "ci_high", "verdict", "seeds"):
            assert table["softmax"][f"{key}_difference_{part}"] == ""
    frozen = next(r for r in results.summary if r["method"] == "softmax-lr0")
    row = table["softmax-lr0"]
    assert row["test_accuracy_difference_verdict"] == "worse"
    assert float(row["test_accuracy_difference_ci_high"]) == pytest.approx(
        frozen["difference"]["test_accuracy"]["ci_high"])
    assert int(row["test_accuracy_difference_seeds"]) == 4
    assert "difference" not in row


def test_the_report_marks_only_significantly_better_rows(frozen_comparison, tmp_path):
    results = frozen_comparison
    sentences = verdict_summary(results)
    assert any(re.fullmatch(r"On test accuracy, softmax-lr0 \(-0\.\d{4}, 95 % CI -[\d.]+ to "
                            r"-0\.\d{4}\) is significantly worse than softmax; the other methods "
                            r"do not differ significantly\.", s) for s in sentences), sentences
    # Against the frozen model as the baseline, both trained ones are better: marked best.
    swapped = dataclasses.replace(results, baseline="softmax-lr0", summary=tuple(
        summarize(list(results.runs), results.methods, "accuracy", "softmax-lr0")))
    page = render_report(swapped, [], tmp_path / "report.html").read_text()
    marks = re.findall(r'<tr class="(\w+)"><td[^>]*><div>([\w+-]+)</div></td>', page)
    assert sorted(marks) == [("baseline", "softmax-lr0"), ("best", "softmax"),
                             ("best", "softmax-again")]
    assert re.search(r"On test accuracy, softmax \(\+0\.\d{4}, 95 % CI \+0\.\d{4} to "
                     r"\+[\d.]+\) and softmax-again \(.*\) are significantly better than "
                     r"softmax-lr0\.", " ".join(verdict_summary(swapped)))
    # With the real baseline, nothing beats softmax: no row is marked best.
    page = render_report(results, [], tmp_path / "report.html").read_text()
    assert 'class="best"' not in page


@pytest.mark.filterwarnings("ignore:No artists with labels")  # no summary rows: empty legend
def test_every_method_gets_its_own_filter_figure(tmp_path):
    model = SequenceClassifier(TransformerConfig(dim=16, depth=2, num_heads=2, vocab_size=9,
                                                 attention="gfsa"), 3)
    report = diagnose(model, [{"input_ids": torch.randint(1, 9, (4, 7))}], label="gfsa")
    names = ["gfsa.k5", "gfsa+k5", "gfsa-k5"]  # one file stem, three methods
    figures = comparison_figures(dict.fromkeys(names, report), [], "accuracy", tmp_path)
    filters = [f for f in figures if f.name.startswith("gfsa_filters_")]
    assert [f.title for f in filters] == [f"Learned filters of {name}" for name in names]
    assert len({f.path for f in filters}) == 3
    assert all((tmp_path / f.path).is_file() and f.path.endswith(".png") for f in filters)


def test_the_summary_names_each_significant_difference():
    rng = np.random.default_rng()
    base = rng.uniform(0.3, 0.6, 4)
    accuracy = {"softmax": base, "up": base + 0.1 + rng.uniform(0, 0.01, 4),
                "down": base - 0.2 + rng.uniform(0, 0.01, 4), "same": base.copy()}
    runs = [{"method": m, "seed": seed, "test_accuracy": float(a[seed]),
             "validation_accuracy": 0.5, "last_layer_cosine_similarity": 0.5,
             "step_time_s": None, "peak_memory_bytes": None, "num_parameters": 1,
             "train_time_s": 1.0} for m, a in accuracy.items() for seed in range(4)]
    results = ComparisonResults(
        baseline="softmax", metric="accuracy", methods=tuple(accuracy), runs=tuple(runs),
        summary=tuple(summarize(runs, list(accuracy), "accuracy", "softmax")))
    sentences = verdict_summary(results)
    assert re.fullmatch(r"On test accuracy, up \(\+0\.10\d\d, 95 % CI \+0\.\d{4} to \+0\.\d{4}\) "
                        r"is significantly better than softmax; down \(-0\.19\d\d, 95 % CI "
                        r"-0\.\d{4} to -0\.\d{4}\) is significantly worse than softmax; the "
                        r"other methods do not differ significantly\.", sentences[0])
    assert sentences[1] == ("No method differs significantly from softmax on last-layer token "
                            "cosine similarity.")
    assert sentences[2] == "Too few seeds are shared with softmax to compare time per step."
    two_seeds = [r for r in runs if r["seed"] < 2]
    results = dataclasses.replace(
        results, summary=tuple(summarize(two_seeds, list(accuracy), "accuracy", "softmax")))
    assert verdict_summary(results) == [
        "Each method is compared with softmax seed by seed, but at most 2 seeds are shared with "
        "it: too few to tell whether any method differs from softmax (at least 3 are needed). "
        "No row is marked best."]
