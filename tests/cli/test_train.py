"""``filterformer train``: config files, overrides, resume, torchrun, progress, and its error
messages."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch._dynamo
import yaml
from torch._dynamo.utils import counters

from filterformer.cli import main
from filterformer.training import Trainer, load_checkpoint, load_config


def tiny_listops(tmp_path: Path, **extra) -> dict:
    """A ListOps run that trains in about a second (data cached under tmp_path)."""
    config = {
        "task": "listops",
        "task_options": {"preset": "tiny", "max_len": 40, "num_train": 64, "num_validation": 16,
                         "num_test": 16, "cache_dir": str(tmp_path / "cache")},
        # No q/k/v bias: the key bias has an exactly zero gradient, so AdamW turns its round-off
        # into full-size steps that differ between any two summation orders.
        "model": {"dim": 16, "depth": 2, "num_heads": 2, "mlp_ratio": 2.0, "qkv_bias": False},
        "batch_size": 8,
        "epochs": 1,
        "progress": False,
    }
    config.update(extra)
    return config


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(run_dir / "checkpoints" / "last.pt")["model"]


def test_train_from_a_config_with_overrides(tmp_path, capsys):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(out),
                 "--set", "method=gfsa", "model.attention_options.K=4", "optimizer.lr=2e-3"]) == 0
    printed = capsys.readouterr().out
    assert "run finished after 8 steps on 1 process(es)" in printed
    saved = load_config(out / "config.yaml")
    assert saved.method == "gfsa"
    assert saved.model["attention_options"] == {"K": 4}
    assert saved.optimizer.lr == 2e-3
    for name in ("metrics.jsonl", "metrics.csv", "summary.json", "checkpoints/best.pt"):
        assert (out / name).is_file(), name
    model_config = load_checkpoint(out / "checkpoints" / "best.pt")["model_config"]
    assert model_config["attention"] == "gfsa" and model_config["attention_options"] == {"K": 4}


def test_print_config_shows_the_resolved_config(tmp_path, capsys):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    assert main(["train", "--config", str(config), "--set", "epochs=7", "--print-config"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["epochs"] == 7
    assert printed["task_options"]["num_train"] == 64


def test_resume_continues_a_stopped_run_to_the_same_weights(tmp_path):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path, epochs=2))
    args = ["train", "--config", str(config)]
    assert main([*args, "--output-dir", str(tmp_path / "whole")]) == 0
    stopped = [*args, "--output-dir", str(tmp_path / "parts")]
    assert main([*stopped, "--set", "stop_after=5"]) == 0
    assert not (tmp_path / "parts" / "summary.json").exists()
    assert main([*stopped, "--resume"]) == 0
    whole, parts = weights(tmp_path / "whole"), weights(tmp_path / "parts")
    assert all(torch.equal(whole[k], parts[k]) for k in whole)


def test_resume_continues_the_run_as_saved_whatever_the_config_file_says(tmp_path, capsys):
    """The README's order: a run started with --set options, then resumed with the config file
    alone, continues with the saved options (and says where the file differs)."""
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path, epochs=2))
    changed = ["--set", "method=gfsa+neutreno", f"optimizer.lr={random.uniform(1e-3, 3e-3)}"]
    args = ["train", "--config", str(config)]
    assert main([*args, *changed, "--output-dir", str(tmp_path / "whole")]) == 0
    parts = ["--output-dir", str(tmp_path / "parts")]
    assert main([*args, *changed, *parts, "--set", "stop_after=5"]) == 0
    capsys.readouterr()
    assert main([*args, *parts, "--resume"]) == 0
    err = capsys.readouterr().err
    assert "resuming the run as saved in" in err
    assert "method: saved 'gfsa+neutreno', asked None" in err and "optimizer.lr: saved" in err
    whole, resumed = weights(tmp_path / "whole"), weights(tmp_path / "parts")
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    assert load_config(tmp_path / "parts" / "config.yaml").method == "gfsa+neutreno"


def test_resume_refuses_an_option_that_changes_the_run_naming_the_ways_out(tmp_path, capsys):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path, epochs=2))
    args = ["train", "--config", str(config), "--output-dir", str(tmp_path / "run")]
    assert main([*args, "--set", "method=gfsa", "stop_after=3"]) == 0
    saved = weights(tmp_path / "run")
    capsys.readouterr()
    assert main([*args, "--resume", "--set", "method=neutreno"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("filterformer train: error: ")
    assert "method: checkpoint 'gfsa', now 'neutreno'" in err
    assert "resume without the options" in err and "--output-dir DIR" in err
    after = weights(tmp_path / "run")
    assert all(torch.equal(saved[k], after[k]) for k in saved)
    # Session keys may change on resume: the run goes on.
    assert main([*args, "--resume", "--quiet"]) == 0
    assert (tmp_path / "run" / "summary.json").is_file()


#: What each of torchrun's 2 processes runs: every `filterformer train` given (JSON argument
#: lists) in one process group, joined once here (joining a second one in the same torchrun job
#: hangs), so that one torchrun start serves several runs.
TORCHRUN_SCRIPT = """
import json, sys
from filterformer.cli import main
from filterformer.training.distributed import setup_distributed
context = setup_distributed("cpu")
for argv in json.loads(sys.argv[1]):
    assert main(argv) == 0, argv
context.close()
"""


def torchrun_train(tmp_path: Path, runs: list[list[str]]) -> str:
    """Run ``filterformer train`` with each argument list in 2 CPU processes (gloo); stdout."""
    script = tmp_path / "torchrun_train.py"
    script.write_text(TORCHRUN_SCRIPT)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=2", str(script), json.dumps(runs)]
    done = subprocess.run(command, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def max_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[name] - b[name]).abs().max().item() for name in a)


def test_two_process_torchrun_matches_one_process(tmp_path):
    """DDP over 2 CPU processes (gloo) with the same global batch and no dropout ends with one
    process's weights up to round-off (docs/training.md), run exactly as the README says."""
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path, max_steps=4, device="cpu"))
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "one")]) == 0
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # The README's form: torchrun --nproc_per_node=2 --no-python filterformer train ...
    entry_point = Path(sys.executable).parent / "filterformer"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=2", "--no-python", str(entry_point), "train", "--config",
               str(config), "--output-dir", str(tmp_path / "two")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on 2 process(es)" in done.stdout
    # The same updates, summed in another order (measured: 3e-8).
    assert max_difference(weights(tmp_path / "one"), weights(tmp_path / "two")) < 1e-5
    # Only rank 0 wrote the logs: one set of records, not two.
    lines = (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len((tmp_path / "one" / "metrics.jsonl").read_text().splitlines())


def test_two_torchrun_processes_with_dropout_differ_from_one_yet_repeat_exactly(tmp_path):
    """With dropout each process draws its own masks (seed + rank), so 2 processes end away
    from one process's weights; the same 2-process run is still reproducible bit for bit, and
    rank 0 removes the temporary file of a checkpoint write that was killed."""
    config = tiny_listops(tmp_path, max_steps=4, device="cpu")
    config["model"].update(dropout=0.1, attn_dropout=0.1)
    path = write_yaml(tmp_path / "dropout.yaml", config)
    assert main(["train", "--config", str(path), "--output-dir", str(tmp_path / "one")]) == 0
    leftover = tmp_path / "two" / "checkpoints" / f".last.pt.{os.urandom(4).hex()}.tmp"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(os.urandom(32))
    runs = ["two", "two-again"]
    printed = torchrun_train(tmp_path, [["train", "--config", str(path), "--output-dir",
                                         str(tmp_path / name)] for name in runs])
    assert printed.count("run finished after 4 steps on 2 process(es)") == len(runs)
    assert not leftover.exists()
    # Other masks, so more than round-off apart (measured: 5e-3) ...
    assert max_difference(weights(tmp_path / "one"), weights(tmp_path / "two")) > 1e-4
    # ... yet the same 2-process run gives the same weights again, bit for bit.
    again = weights(tmp_path / "two-again")
    assert all(torch.equal(w, again[name]) for name, w in weights(tmp_path / "two").items())


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["task=lisops"], "unknown task 'lisops'; valid tasks: listops, pathfinder, "),
        (["method=gsfa"], "unknown method 'gsfa'; valid methods: softmax, gfsa, neutreno, agf, "),
        (["task_options.depth=3"], "unknown option(s) ['depth'] for task 'listops'; valid "),
        (["method=gfsa", "model.attention_options.Q=2"],
         "unknown option(s) 'Q' for attention 'gfsa'; valid options: "),
        (["model.attention=flash"], "unknown attention 'flash'; valid choices: agf, gfsa, "),
        (["schedule.decay=exp"], "schedule.decay must be one of cosine, linear, constant"),
        (["optimizer.lr=-1"], "optimizer.lr must be >= 0 (0 freezes the weights); got -1.0"),
        (["epochs=two"], "epochs must be an integer; got 'two'"),
        (["precision=fp16", "device=cpu"], "needs a GPU; valid on CPU: auto, fp32"),
        (["optimizer.eps=.inf"], "optimizer.eps must be a finite number; got inf"),
        (["optimizer.weight_decay=.nan"], "optimizer.weight_decay must be a finite number"),
        (["optimizer.lr=inf"], "optimizer.lr must be a finite number; got inf"),
        (["method=agf", "model.attention_options.a=nan"],
         "model.attention_options.a must be a finite number; got nan"),
        (["method=agf", "model.attention_options.orthogonality_weight=inf"],
         "model.attention_options.orthogonality_weight must be a finite number; got inf"),
        (["seed=1e20"], "seed must be an integer from -2**63 to 2**63 - 1"),
    ],
)
def test_errors_name_the_valid_choices(tmp_path, capsys, overrides, message):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    code = main(["train", "--config", str(config), "--output-dir", str(tmp_path / "out"),
                 "--set", *overrides])
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_diverging_run_exits_2_naming_the_step(tmp_path, capsys):
    lr = 10.0 ** random.uniform(9, 12)
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    out = tmp_path / "out"
    code = main(["train", "--config", str(config), "--output-dir", str(out), "--set",
                 f"optimizer.lr={lr}", "schedule.warmup_steps=0"])
    captured = capsys.readouterr()
    assert code == 2
    found = re.search(r"filterformer train: error: training diverged at step (\d+): loss is nan; "
                      rf"the run in {re.escape(str(out))} stopped", captured.err)
    assert found and "Traceback" not in captured.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["diverged"] == {"step": int(found[1]), "reason": "loss is nan"}
    assert summary["test"] is None and "accuracy" not in captured.out


@pytest.mark.parametrize("case", ["a path under a regular file", "an existing regular file"])
@pytest.mark.parametrize("resume", [False, True])
def test_an_unusable_output_dir_is_refused_before_anything_trains(tmp_path, capsys, case, resume):
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path))
    blocker = tmp_path / f"file-{os.urandom(4).hex()}"
    content = os.urandom(16)
    blocker.write_bytes(content)
    out = blocker / "run" if case.startswith("a path") else blocker
    code = main(["train", "--config", str(config), "--output-dir", str(out),
                 *(["--resume"] if resume else [])])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"filterformer train: error: output_dir {out} ")
    assert "not a directory" in err and "Traceback" not in err
    assert blocker.read_bytes() == content
    assert not (tmp_path / "cache").exists()  # refused before the task was even generated


#: A progress line of a run off a terminal (see filterformer.training.progress).
PROGRESS_LINE = re.compile(
    r"gfsa seed 0: step (\d+)/16 \(\d+%\), epoch (\d)/2, loss \d+\.\d{4}(, validation accuracy "
    r"\d\.\d{4})?, [\d.]+ steps/s, (about \d+ s left|done in \d+ s)"
)
#: The line as a validation starts.
EVALUATING_LINE = re.compile(
    r"gfsa seed 0: step (\d+)/16 \(\d+%\), evaluating on the validation split \(16 items\)"
)


def test_train_prints_progress_lines_when_not_on_a_terminal(tmp_path, capsys):
    config = tiny_listops(tmp_path, epochs=2)
    del config["progress"]  # the default: progress shown
    path = write_yaml(tmp_path / "run.yaml", config)
    assert main(["train", "--config", str(path), "--output-dir", str(tmp_path / "run"),
                 "--set", "method=gfsa"]) == 0
    printed = capsys.readouterr()
    lines = printed.err.splitlines()
    assert lines[0] == "gfsa seed 0: 16 steps, 2 epoch(s)"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # The final test: a line as it starts and one with its metric as it ends.
    assert lines[-2] == (f"gfsa seed 0: testing the best checkpoint (step {summary['best_step']})"
                         " on the test split (16 items)")
    assert re.fullmatch(rf"gfsa seed 0: test accuracy {summary['test']['accuracy']:.4f} "
                        r"\(evaluated in \d+ s\)", lines[-1])
    training = lines[1:-2]
    evaluating = [EVALUATING_LINE.fullmatch(line) for line in training]
    matches = [PROGRESS_LINE.fullmatch(line)
               for line, started in zip(training, evaluating, strict=True) if not started]
    assert all(matches), lines
    # At least the line after each validation (end of each epoch), with its metric, each
    # validation announced as it starts.
    validated = [(m[1], m[2]) for m in matches if m[3]]
    assert validated[-2:] == [("8", "1"), ("16", "2")]
    assert [m[1] for m in evaluating if m] == ["8", "16"]
    after = [training[i + 1] for i, m in enumerate(evaluating) if m]
    assert all("validation accuracy" in line for line in after)
    assert "\r" not in printed.err  # lines, not a bar
    assert printed.out.startswith("run finished after 16 steps")
    assert "step " not in printed.out  # progress goes to stderr, the summary to stdout


def test_quiet_prints_only_the_summary(tmp_path, capsys):
    config = tiny_listops(tmp_path)
    del config["progress"]
    path = write_yaml(tmp_path / "run.yaml", config)
    assert main(["train", "--config", str(path), "--output-dir", str(tmp_path / "run"),
                 "--quiet"]) == 0
    printed = capsys.readouterr()
    assert printed.err == ""
    lines = printed.out.splitlines()
    assert lines[0] == "run finished after 8 steps on 1 process(es)"
    summary = json.loads("\n".join(lines[1:-1]))
    assert set(summary) == {"best_validation", "test"}
    assert lines[-1] == f"metrics and checkpoints: {tmp_path / 'run'}"
    assert load_config(tmp_path / "run" / "config.yaml").progress is False


def test_train_compile_with_inductor_resumes_eagerly_to_the_eager_weights(tmp_path, capsys):
    """--compile with the default backend, inductor, on the built-in task: one compiled graph
    for the compiled steps, no graph break, a config that records compile, checkpoints that an
    eager run resumes (compile is no part of a run's identity), and the weights an eager run
    ends with, up to round-off."""
    torch._dynamo.reset()
    counters.clear()
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(
        tmp_path, max_steps=3, model={"dim": 16, "depth": 1, "num_heads": 2, "qkv_bias": False}))
    args = ["train", "--config", str(config), "--set", "method=gfsa"]
    compiled = tmp_path / "compiled"
    assert main([*args, "--output-dir", str(compiled), "--compile", "--set", "stop_after=2"]) == 0
    assert "run stopped (continue with --resume) after 2 steps" in capsys.readouterr().out
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    assert any(counters["inductor"].values())  # inductor compiled it
    assert load_config(compiled / "config.yaml").compile is True
    assert main([*args, "--output-dir", str(compiled), "--resume"]) == 0
    assert load_config(compiled / "config.yaml").compile is False
    assert main([*args, "--output-dir", str(tmp_path / "eager")]) == 0
    assert "run finished after 3 steps" in capsys.readouterr().out
    eager = weights(tmp_path / "eager")
    resumed = weights(compiled)
    assert resumed.keys() == eager.keys()
    for name, weight in eager.items():
        torch.testing.assert_close(resumed[name], weight, rtol=0, atol=1e-5, msg=name)
    torch._dynamo.reset()


def test_patience_from_the_config_or_set_ends_the_run_early(tmp_path, capsys, monkeypatch):
    evaluate = Trainer._evaluate
    # Fresh validation accuracies: the first validation is the best, every later one worse.
    accuracies = sorted((random.uniform(0.1, 0.9) for _ in range(4)), reverse=True)

    def scripted(self, split):
        if split != "validation":
            return evaluate(self, split)
        return {"loss": 1.0, "accuracy": accuracies[self.step // 2 - 1]}

    monkeypatch.setattr(Trainer, "_evaluate", scripted)
    config = write_yaml(tmp_path / "run.yaml", tiny_listops(tmp_path, eval_every=2, patience=3))
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(out),
                 "--set", "patience=2"]) == 0
    printed = capsys.readouterr().out
    # Validations at steps 2 (the best), 4 and 6 (two without improvement) of 8.
    assert printed.startswith("run finished early (no improvement in the last 2 validations) "
                              "after 6 steps on 1 process(es)")
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["stopped_early"], summary["steps"], summary["best_step"]) == (True, 6, 2)
    assert load_config(out / "config.yaml").patience == 2
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "bad"),
                 "--set", "patience=0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("filterformer train: error: patience must be a positive integer")
