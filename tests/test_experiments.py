"""Every comparison in ``experiments/`` loads, validates and takes a training step per method.

``filterformer compare --dry-run`` on each config: the task loads, every method's model is built
on it and trained one step with a finite loss, and the comparison writes into
``experiments/results/<its name>/`` as the README and ``claims.yaml`` expect.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from filterformer.training.compare import dry_run, load_compare_config

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"
CONFIGS = sorted(EXPERIMENTS.glob("*.yaml"))
COMPARISONS = [path for path in CONFIGS if path.name != "claims.yaml"]


def test_there_is_a_comparison_per_claim():
    """Claims C1…C8, then second runs of some (``C2v2``: configs ``c2_v2_*``), each with a
    config of its own."""
    claims = yaml.safe_load((EXPERIMENTS / "claims.yaml").read_text())
    ids = [claim["id"] for claim in claims]
    assert ids[:8] == [f"C{i}" for i in range(1, 9)]
    assert all(re.fullmatch(r"C[1-8]v[2-9]", i) for i in ids[8:]), ids[8:]
    stems = {path.stem for path in COMPARISONS}
    for claim_id in ids:
        prefix = claim_id.lower().replace("v", "_v") + "_"
        assert any(stem.startswith(prefix) for stem in stems), claim_id


@pytest.mark.slow
@pytest.mark.parametrize("path", COMPARISONS, ids=[p.stem for p in COMPARISONS])
def test_comparison_builds_and_steps_every_method(path, monkeypatch):
    monkeypatch.chdir(EXPERIMENTS.parent)
    config = load_compare_config(str(path.relative_to(EXPERIMENTS.parent)), [])
    assert config.output_dir.parent == Path("experiments/results")
    losses = dry_run(config, echo=lambda line: None)
    assert list(losses) == list(config.methods)
    assert all(math.isfinite(loss) and loss > 0 for loss in losses.values())


def test_the_readme_time_table_is_the_one_the_results_give():
    """experiments/README.md's measured times are scripts/experiment_times.py's output."""
    import runpy

    script = runpy.run_path(str(EXPERIMENTS.parent / "scripts" / "experiment_times.py"))
    assert script["time_table"]() in (EXPERIMENTS / "README.md").read_text()
