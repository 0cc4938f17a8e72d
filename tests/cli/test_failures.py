"""Every failure the command line meets ends in one line naming the file or argument, and exit
status 2; ``--debug`` shows the traceback instead."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from filterformer.cli import main
from filterformer.cli import train as train_command
from filterformer.training import load_config
from filterformer.training.compare.execution import finished_summary

from .test_train import tiny_listops, write_yaml


def failure(capsys, argv: list[str]) -> str:
    """Run ``argv``; it must end with exit status 2 and one error message, which is returned."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"filterformer {argv[0]}: error: " in err and "Traceback" not in err
    return err


def _empty_dir(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


@pytest.mark.parametrize(("task", "option"), [
    ("text_lm", "path"), ("b3db", "path"), ("sentiment", "path"), ("uea", "root"),
    ("fashion_mnist", "root"),
])
@pytest.mark.parametrize("where", ["missing", "empty"])
def test_missing_data_paths_are_named(tmp_path, capsys, task, option, where):
    path = tmp_path / "absent" if where == "missing" else _empty_dir(tmp_path)
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    err = failure(capsys, ["train", "--config", str(config), "--output-dir", str(tmp_path / "out"),
                           "--set", f"task={task}", f"task_options.{option}={path}"])
    assert str(path) in err


def test_the_diagnose_task_path_is_named(tmp_path, capsys):
    model = write_yaml(tmp_path / "model.yaml", {"dim": 8, "depth": 1, "num_heads": 2})
    root = tmp_path / "no-archive"
    err = failure(capsys, ["diagnose", "--config", str(model), "--task", "uea",
                           "--task-option", f"root={root}", "--out", str(tmp_path / "d")])
    assert str(root) in err


def test_a_table_without_smiles_is_named(tmp_path, capsys):
    table = tmp_path / "molecules.tsv"
    table.write_text("NO.\tsmi\tBBB+/BBB-\n0\tCCO\tBBB+\n1\tCCN\tBBB-\n")
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    err = failure(capsys, ["train", "--config", str(config), "--output-dir", str(tmp_path / "o"),
                           "--set", "task=b3db",
                           f"task_options.path={table}"])
    assert f"{table} has no 'SMILES' column" in err


@pytest.mark.parametrize("entry", ["config", "model_config", "model", "step", "rng", "best"])
def test_a_checkpoint_missing_an_entry_is_named(tmp_path, capsys, entry):
    out = tmp_path / "run"
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path, stop_after=2))
    assert main(["train", "--config", str(config), "--output-dir", str(out)]) == 0
    last = out / "checkpoints" / "last.pt"
    state = torch.load(last, weights_only=True)
    del state[entry]
    torch.save(state, last)
    err = failure(capsys, ["train", "--config", str(config), "--output-dir", str(out),
                           "--resume"])
    assert f"checkpoint {last} lacks '{entry}'" in err


@pytest.mark.parametrize("content", [[], [1, 2], "text", {"test": {}}])
def test_a_summary_that_is_no_object_is_named(tmp_path, content):
    config = load_config(None, [f"output_dir={tmp_path}"])
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))} is corrupt"):
        finished_summary(config)


def test_a_damaged_data_cache_is_created_again(tmp_path, capsys):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path, max_steps=1))
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "a")]) == 0
    (cached,) = (tmp_path / "cache").rglob("*.npz")
    data = cached.read_bytes()
    cached.write_bytes(data[: int(torch.randint(1, len(data), ()))])
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert f"filterformer train: warning: the cached data {cached} is damaged" in err
    first, second = (json.loads((tmp_path / run / "summary.json").read_text())["test"]
                     for run in "ab")
    assert first == second


@pytest.mark.parametrize(("override", "named"), [
    ("model.dim=1000000000", "model.dim=1000000000"),
    ("model.max_len=1000000000", "model.max_len=1000000000"),
    ("model.depth=100000", "model.depth may be at most 10000"),
])
def test_model_sizes_that_cannot_be_trained_are_refused_before_allocating(tmp_path, capsys,
                                                                          override, named):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    err = failure(capsys, ["train", "--config", str(config), "--output-dir", str(tmp_path / "o"),
                           "--set", override])
    assert named in err and "GiB" in err and "parameters" in err


def test_an_unexpected_error_is_one_line_and_debug_shows_it(tmp_path, capsys, monkeypatch):
    def broken(args):
        raise TypeError("unsupported operand type(s)\nsecond line")

    monkeypatch.setattr(train_command, "run", broken)
    err = failure(capsys, ["train"])
    assert err.strip() == ("filterformer train: error: TypeError: unsupported operand type(s) "
                           "(run with --debug for the traceback)")
    with pytest.raises(TypeError, match="unsupported operand"):
        main(["--debug", "train"])


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit])
def test_interrupts_and_exits_pass_through(monkeypatch, raised):
    def interrupted(args):
        raise raised()

    monkeypatch.setattr(train_command, "run", interrupted)
    with pytest.raises(raised):
        main(["train"])


def test_the_command_prints_no_traceback_unless_debug(tmp_path):
    missing = tmp_path / "corpus"
    command = [sys.executable, "-m", "filterformer.cli", "train", "--set", "task=text_lm",
               f"task_options.path={missing}", f"output_dir={tmp_path / 'out'}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    quiet = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert quiet.returncode == 2
    assert quiet.stderr.startswith("filterformer train: error: ") and str(missing) in quiet.stderr
    assert "Traceback" not in quiet.stderr
    debug = subprocess.run([*command[:3], "--debug", *command[3:]], capture_output=True,
                           text=True, env=env, timeout=300)
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
