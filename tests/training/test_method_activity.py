"""How far each method's own parameters moved: measured from the run's true start, written to
``summary.json`` and ``results.json``, said in the comparison's report; and
``optimizer.coefficient_lr``, which trains them at a rate of their own."""

from __future__ import annotations

import json

import pytest
import torch

from filterformer import patched_parameters
from filterformer.cli import main
from filterformer.functional import gfsa_response
from filterformer.method_parameters import method_parameters
from filterformer.training import (
    OptimizerConfig,
    TrainConfig,
    Trainer,
    load_checkpoint,
    save_checkpoint,
)
from filterformer.training.coefficient_lr import resolve_coefficient_lr
from filterformer.training.compare import compare, load_compare_config
from filterformer.training.method_activity import LISTED_VALUES
from filterformer.training.model_building import load_task_data

from .helpers import majority_task, tiny_config

#: Each method with parameters of its own (a learnable λ; the gate's fusion).
METHODS = {
    "gfsa+neutreno": {"method": "gfsa+neutreno", "model": {"dim": 16, "depth": 2, "num_heads": 2,
                                                           "neutreno_learnable": True}},
    "agf": {"method": "agf"},
    "samsa": {"method": "samsa_soft", "model": {"dim": 16, "depth": 2, "num_heads": 2,
                                                "attention_options": {"num_samples": 4}}},
    "fusion": {"method": "fusion", "model": {"dim": 16, "depth": 2, "num_heads": 2,
                                             "fusion": "gate"}},
}


def _summary(run_dir) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _moved_by_hand(trainer: Trainer) -> dict[str, torch.Tensor]:
    """Move every method parameter by a fresh random amount; the amounts, by name."""
    written = {}
    with torch.no_grad():
        for entry in method_parameters(trainer.model):
            before = entry.parameter.detach().clone()
            entry.parameter.add_(torch.randn_like(before) * torch.rand(()) * 0.3)
            written[entry.name] = entry.parameter.detach().double() - before.double()
    return written


@pytest.mark.parametrize("fields", METHODS.values(), ids=METHODS.keys())
def test_coefficients_moved_by_hand_are_reported_at_the_distances_written(tmp_path, fields):
    # lr 0: training moves nothing, so the distances are the hand-written ones alone.
    config = tiny_config(tmp_path, max_steps=2, optimizer={"lr": 0.0}, **fields)
    trainer = Trainer(config, task=majority_task())
    written = _moved_by_hand(trainer)
    assert written
    result = trainer.fit()
    activity = _summary(tmp_path)["method_activity"]
    assert activity == json.loads(json.dumps(result.method_activity))
    reported = {name: record for method in activity.values()
                for name, record in method["parameters"].items()}
    assert reported.keys() == written.keys()
    for name, change in written.items():
        assert reported[name]["max_abs_change"] == pytest.approx(change.abs().max().item(),
                                                                 rel=1e-12, abs=1e-12)
        if change.numel() <= LISTED_VALUES:
            assert torch.tensor(reported[name]["change"], dtype=torch.float64).allclose(
                change, rtol=1e-12, atol=1e-12)
        else:
            assert "change" not in reported[name]
    for method, record in activity.items():
        assert record["max_abs_change"] == max(
            reported[name]["max_abs_change"] for name in record["parameters"])
        assert method in {entry.method for entry in method_parameters(trainer.model)}


def test_gfsa_filter_response_change_is_that_of_the_coefficients_written(tmp_path):
    config = tiny_config(tmp_path, max_steps=1, optimizer={"lr": 0.0}, method="gfsa")
    trainer = Trainer(config, task=majority_task())
    start = {e.name: e.parameter.detach().clone().double()
             for e in method_parameters(trainer.model)}
    written = _moved_by_hand(trainer)
    trainer.fit()
    layers = _summary(tmp_path)["method_activity"]["gfsa"]["response"]["layers"]
    sigma = torch.linspace(0, 1, 101, dtype=torch.float64)
    gfsa_layers = {e.name.rsplit(".", 1)[0] for e in method_parameters(trainer.model)}
    assert set(layers) == gfsa_layers and len(layers) == 2
    for layer, moved in layers.items():
        before = [start[f"{layer}.{w}"] for w in ("w0", "w1", "wK")]
        after = [b + written[f"{layer}.{w}"] for b, w in zip(before, ("w0", "w1", "wK"),
                                                             strict=True)]
        expected = (gfsa_response(sigma, *after, K=3) - gfsa_response(sigma, *before, K=3))
        assert moved == pytest.approx(expected.abs().max().item(), rel=1e-6, abs=1e-9)


def test_a_run_at_lr_0_reports_that_nothing_moved(tmp_path):
    config = tiny_config(tmp_path, max_steps=3, optimizer={"lr": 0.0}, method="gfsa+fusion",
                         model={"dim": 16, "depth": 2, "num_heads": 2, "fusion": "gate"})
    Trainer(config, task=majority_task()).fit()
    activity = _summary(tmp_path)["method_activity"]
    assert set(activity) == {"gfsa", "fusion"}
    assert activity["gfsa"]["max_abs_change"] == activity["fusion"]["max_abs_change"] == 0.0
    assert activity["gfsa"]["response"]["max_abs_change"] == 0.0
    assert all(r["max_abs_change"] == 0.0 for m in activity.values()
               for r in m["parameters"].values())


def test_a_softmax_run_has_no_method_parameters(tmp_path):
    Trainer(tiny_config(tmp_path, max_steps=1), task=majority_task()).fit()
    assert _summary(tmp_path)["method_activity"] == {}


def test_coefficient_lr_0_holds_the_coefficients_alone_while_the_rest_trains(tmp_path):
    config = tiny_config(tmp_path, max_steps=3, method="gfsa",
                         optimizer={"lr": 1e-2, "coefficient_lr": 0.0})
    trainer = Trainer(config, task=majority_task())
    start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.fit()
    assert _summary(tmp_path)["method_activity"]["gfsa"]["max_abs_change"] == 0.0
    now = trainer.model.state_dict()
    moved = {k for k in start if not torch.equal(start[k], now[k])}
    assert moved and not any(k.rsplit(".", 1)[-1] in ("w0", "w1", "wK") for k in moved)


def test_a_multiple_of_lr_moves_the_coefficients_further(tmp_path):
    def gfsa_moved(directory, coefficient_lr):
        config = tiny_config(directory, max_steps=6, method="gfsa",
                             optimizer={"lr": 1e-3, "coefficient_lr": coefficient_lr})
        trainer = Trainer(config, task=majority_task())
        lrs = {g["lr"] for g in trainer.optimizer.param_groups}
        trainer.fit()
        return _summary(directory)["method_activity"]["gfsa"]["max_abs_change"], lrs

    shared, shared_lrs = gfsa_moved(tmp_path / "shared", None)
    faster, faster_lrs = gfsa_moved(tmp_path / "faster", "50x")
    assert sorted(faster_lrs) == pytest.approx([1e-3, 5e-2], rel=1e-12)
    assert shared_lrs == {1e-3}
    assert 0 < shared < 0.02 < faster


def test_a_resumed_run_measures_from_the_start_its_checkpoint_recorded(tmp_path):
    fields = {"method": "gfsa", "max_steps": 6}
    Trainer(tiny_config(tmp_path / "whole", **fields), task=majority_task()).fit()
    whole = _summary(tmp_path / "whole")["method_activity"]

    stopped = tmp_path / "stopped"
    Trainer(tiny_config(stopped, stop_after=3, **fields), task=majority_task()).fit()
    last = stopped / "checkpoints" / "last.pt"
    recorded = load_checkpoint(last)["method_start"]["parameters"]
    assert all(torch.equal(v, torch.full_like(v, {"w0": 0.0, "w1": 1.0, "wK": 0.0}[
        k.rsplit(".", 1)[-1]])) for k, v in recorded.items())
    Trainer(tiny_config(stopped, **fields), task=majority_task(), resume=True).fit()
    assert _summary(stopped)["method_activity"] == whole

    # The start is the checkpoint's, not the rebuilt model's: a start recorded elsewhere is
    # measured from.
    shifted = tmp_path / "shifted"
    Trainer(tiny_config(shifted, stop_after=3, **fields), task=majority_task()).fit()
    state = load_checkpoint(shifted / "checkpoints" / "last.pt")
    name = next(iter(state["method_start"]["parameters"]))
    offset = float(torch.rand(())) + 0.5
    state["method_start"]["parameters"][name] = state["method_start"]["parameters"][name] - offset
    save_checkpoint(shifted / "checkpoints" / "last.pt", state)
    Trainer(tiny_config(shifted, **fields), task=majority_task(), resume=True).fit()
    gfsa = _summary(shifted)["method_activity"]["gfsa"]
    change = torch.tensor(gfsa["parameters"][name]["change"], dtype=torch.float64)
    expected = torch.tensor(whole["gfsa"]["parameters"][name]["change"], dtype=torch.float64)
    assert change.allclose(expected + offset, rtol=0, atol=1e-6)
    assert gfsa["max_abs_change"] >= offset


def test_a_checkpoint_without_a_recorded_start_reports_the_activity_unknown(tmp_path):
    fields = {"method": "gfsa", "max_steps": 4}
    Trainer(tiny_config(tmp_path, stop_after=2, **fields), task=majority_task()).fit()
    state = load_checkpoint(tmp_path / "checkpoints" / "last.pt")
    del state["method_start"]
    save_checkpoint(tmp_path / "checkpoints" / "last.pt", state)
    result = Trainer(tiny_config(tmp_path, **fields), task=majority_task(), resume=True).fit()
    assert result.method_activity is None
    assert _summary(tmp_path)["method_activity"] is None


def test_compare_writes_each_runs_activity_and_says_it_per_method(tmp_path):
    overrides = ["task=majority", "model.dim=16", "model.depth=2", "model.num_heads=2",
                 "batch_size=16", "max_steps=3", "progress=false", f"output_dir={tmp_path}",
                 "optimizer.coefficient_lr=20x"]
    config = load_compare_config(None, overrides, methods=["softmax", "gfsa", "neutreno"],
                                 seeds=[0, 1], diagnostics_batches=1)
    results = compare(config, task=majority_task(num_train=48, num_eval=16),
                      echo=lambda line: None)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["method_activity"] == results.method_activity
    for run in on_disk["runs"]:
        summary = json.loads((tmp_path / "runs" / run["method"] / f"seed-{run['seed']}"
                              / "summary.json").read_text())
        assert run["method_activity"] == summary["method_activity"]
    gfsa_runs = [r["method_activity"]["gfsa"] for r in on_disk["runs"] if r["method"] == "gfsa"]
    gfsa = on_disk["method_activity"]["gfsa"]
    assert gfsa["runs_measured"] == 2 and gfsa["runs_unmeasured"] == 0
    assert gfsa["parameters"]["gfsa"]["max_abs_change"] == max(
        r["max_abs_change"] for r in gfsa_runs) > 0
    assert gfsa["parameters"]["gfsa"]["response_max_abs_change"] == max(
        r["response"]["max_abs_change"] for r in gfsa_runs)
    # The preset's λ is fixed: neutreno adds nothing that moves; softmax has nothing.
    assert on_disk["method_activity"]["softmax"]["parameters"] == {}
    assert on_disk["method_activity"]["neutreno"]["parameters"] == {}
    page = (tmp_path / "report.html").read_text()
    moved = gfsa["parameters"]["gfsa"]["max_abs_change"]
    assert (f"gfsa: GFSA coefficients (w0, w1, wK) moved at most {moved:.2g} from their start "
            "(largest over 2 runs)") in page
    assert page.count("moved at most") == 1


@pytest.mark.parametrize("command", ["train", "compare"])
@pytest.mark.parametrize("value", ["-0.1", "nan", "inf", "fastx", "-3x", "infx"])
def test_a_bad_coefficient_lr_in_a_config_exits_2_naming_it(tmp_path, capsys, command, value):
    path = tmp_path / "run.yaml"
    path.write_text(f"task: majority\noptimizer:\n  coefficient_lr: {value}\n")
    code = main([command, "--config", str(path), "--output-dir", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "optimizer.coefficient_lr must be" in err
    finite = "a finite number" in err
    assert finite == (value in ("nan", "inf", "infx")), err
    assert not (tmp_path / "out").exists()


def test_coefficient_lr_spellings_read_as_one_setting():
    lr = float(torch.rand(())) * 1e-2 + 1e-4
    multiple = float(torch.randint(2, 100, ()))
    spellings = [f"{multiple}x", f" {multiple:.1f}X", f"{int(multiple)}x"]
    configs = [OptimizerConfig(lr=lr, coefficient_lr=text) for text in spellings]
    assert {c.coefficient_lr for c in configs} == {f"{int(multiple)}x"}
    assert all(resolve_coefficient_lr(c.coefficient_lr, c.lr) == multiple * lr for c in configs)
    rate = float(torch.rand(()))
    assert OptimizerConfig(coefficient_lr=repr(rate)).coefficient_lr == rate
    assert resolve_coefficient_lr(OptimizerConfig(coefficient_lr=rate).coefficient_lr, lr) == rate
    assert resolve_coefficient_lr(OptimizerConfig().coefficient_lr, lr) is None


def test_a_pretrained_run_measures_and_speeds_up_exactly_the_patch(tmp_path):
    task = load_task_data("sentiment", {"num_train": 16, "validation_fraction": 0.003,
                                        "test_fraction": 0.003})
    config = TrainConfig.from_dict({
        "task": "sentiment", "task_options": {"num_train": 16, "validation_fraction": 0.003,
                                              "test_fraction": 0.003},
        "pretrained": "all-MiniLM-L6-v2", "method": "gfsa+fusion", "model": {"fusion": "gate"},
        "batch_size": 8, "max_steps": 2, "progress": False, "output_dir": str(tmp_path),
        "optimizer": {"lr": 1e-4, "coefficient_lr": "30x"},
    })
    trainer = Trainer(config, task=task)
    patched = patched_parameters(trainer.model.backbone)
    rates = {id(p): g["lr"] for g in trainer.optimizer.param_groups for p in g["params"]}
    assert {i for i, rate in rates.items() if rate == pytest.approx(3e-3)} == {
        id(p) for _, p in patched}
    assert all(rate == 1e-4 for i, rate in rates.items() if i not in {id(p) for _, p in patched})
    trainer.fit()
    activity = _summary(tmp_path)["method_activity"]
    reported = {name for method in activity.values() for name in method["parameters"]}
    assert reported == {f"backbone.{name}" for name, _ in patched}
    assert set(activity) == {"gfsa", "fusion"} and activity["gfsa"]["max_abs_change"] > 0
