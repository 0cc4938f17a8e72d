"""The README's shell commands, run in the README's order, each as written, at a tiny budget.

Every ``bash`` block of README.md is read line by line (commands joined by ``&&`` one by one) and
run with bash in a scratch directory holding the repository's ``configs/`` and ``experiments/``,
so later commands see what earlier ones wrote, as they would for a reader. ``filterformer`` on
the ``PATH`` is this checkout's command, with the train and compare commands' budgets cut down by
``--set`` (two steps, small splits): the commands, their options, their output directories and
their order are the README's. A command that fails fails the test, naming its README line.

Commands that cannot run here are skipped, each with its reason (:func:`why_skipped`): the set-up
(it installs from the network), the test suite (this test is part of it), GPU commands, a
comparison that fine-tunes pretrained weights, and the benchmarks (minutes of timing at their
sizes; ``tests/bench`` runs the benchmark code at small sizes). The Python blocks that read a
run these commands trained (``load_run``) run afterwards, in the same directory.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from filterformer.training import read_config_file

from ..readme_blocks import README, code_blocks

ROOT = README.parent

#: What every train and compare command adds to its own options: two steps a run.
BUDGET = ["max_steps=2", "batch_size=8"]
#: Smaller splits of the tasks the README's commands train on (the loaders' own options).
SIZES = {
    "listops": ["task_options.num_train=64", "task_options.num_validation=16",
                "task_options.num_test=16"],
    "digits": ["task_options.num_train=64"],
}

SHIM = '''#!{python}
"""`filterformer` as the README's commands call it, with a tiny budget added to train and
compare (the tests' tests/cli/test_readme_commands.py)."""
import sys

from filterformer.cli import build_parser, main


def budgeted(argv):
    if argv[:1] not in (["train"], ["compare"]):
        return argv
    args, _ = build_parser().parse_known_args(argv)
    if argv[0] == "train":
        from filterformer.training import load_config
        task = load_config(args.config, args.overrides).task
    else:
        from filterformer.training.compare import load_compare_config
        task = load_compare_config(args.config, args.overrides).base.task
    return [*argv, "--set", *{budget!r}, *{sizes!r}.get(task, [])]


if __name__ == "__main__":  # compare's worker processes import this file (spawn)
    sys.exit(main(budgeted(sys.argv[1:])))
'''


#: What marks a Python block of the README that reads a run its commands train.
RUN_READER = "load_run("


def readme_commands() -> list[tuple[int, str]]:
    """Every command of the README's bash blocks, in order, with its README line: comments
    dropped, continued lines joined, ``a && b`` as two commands."""
    commands = []
    for block in code_blocks("bash"):
        lines = block.text.replace("\\\n", " ").splitlines()
        for offset, line in enumerate(lines):
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            commands += [(block.line + offset, part.strip()) for part in line.split("&&")
                         if part.strip()]
    return commands


def why_skipped(command: str, directory: Path) -> str | None:
    """Why ``command`` cannot run in this test, or None when it runs."""
    words = command.split()
    if words[0] == "scripts/setup.sh":
        return "installs packages from the network"
    if words[:2] == ["source", ".venv/bin/activate"]:
        return "the environment scripts/setup.sh makes; this checkout's filterformer is on PATH"
    if words[0] == "scripts/test.sh":
        return "the whole test suite, of which this test is part"
    if "cuda" in words or any(word.startswith("scripts/gpu_") for word in words[:3]):
        # --device cuda, -m cuda tests, the GPU scripts (tests/bench runs gpu_profile on the CPU)
        return "needs a GPU"
    if "bench" in words:
        return ("a benchmark: minutes of timing at its sizes (tests/bench runs its code at small "
                "sizes)")
    if "--config" in words:
        config = directory / words[words.index("--config") + 1]
        if config.suffix in (".yaml", ".yml", ".toml") and config.is_file() \
                and read_config_file(config).get("pretrained"):
            return "fine-tunes pretrained weights"
    return None


def test_the_readme_commands_are_found():
    commands = [command for _, command in readme_commands()]
    assert "filterformer compare" in commands
    assert any(c.startswith("filterformer train") and "--resume" in c for c in commands)


@pytest.mark.slow
def test_the_readme_commands_run_in_the_readmes_order(tmp_path):
    directory = tmp_path / "repository"
    # A clone sharing the repository's history, nothing checked out: `filterformer evidence`
    # reads whether each claim was fixed before its results from the claims file's history.
    history = shutil.which("git") is not None and (ROOT / ".git").exists()
    if history:
        subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(ROOT),
                        str(directory)], check=True)
    for name in ("configs", "experiments"):
        shutil.copytree(ROOT / name, directory / name)
    for name in ("RESULTS.md", "README.md"):  # README.md: a text file the text_lm run reads
        shutil.copy(ROOT / name, directory / name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "filterformer"
    shim.write_text(SHIM.format(python=sys.executable, budget=BUDGET, sizes=SIZES))
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                 os.environ.get("PATH", "")]),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
        "FILTERFORMER_CACHE": str(tmp_path / "cache"),
        "OMP_NUM_THREADS": "1",
    }
    ran, skipped = [], []
    for line, command in readme_commands():
        reason = why_skipped(command, directory)
        if reason:
            skipped.append(f"README.md:{line} {command!r}: {reason}")
            continue
        done = subprocess.run(["bash", "-c", command], cwd=directory, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (
            f"README.md line {line}, {command!r}, exits {done.returncode} after "
            f"{len(ran)} commands ran:\n{done.stderr[-3000:]}"
        )
        ran.append(command)
    print("skipped:\n" + "\n".join(skipped))
    assert any(c.startswith("filterformer compare") for c in ran)
    assert (directory / "runs" / "compare" / "report.html").is_file()
    # The README says the evidence command rewrites RESULTS.md byte for byte (where the
    # claims file's history is there to read).
    if history:
        assert (directory / "RESULTS.md").read_bytes() == (ROOT / "RESULTS.md").read_bytes()
    # The Python blocks that read a run the commands trained, where a reader runs them.
    for block in code_blocks("python"):
        if RUN_READER in block.text:
            done = subprocess.run([sys.executable, "-c", block.text], cwd=directory, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, (
                f"the Python block at README.md line {block.line} fails:\n{done.stderr[-3000:]}"
            )
