"""A comparison's results are one versioned dataclass: it round-trips through ``results.json``,
files written before the version read as version 1, and a version not known is refused."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
import torch

from filterformer.cli import main
from filterformer.evidence.comparisons import load_comparison
from filterformer.training.compare.comparison_results import (
    RESULTS_SCHEMA_VERSION,
    ComparisonResults,
)
from filterformer.training.run_files import write_json

from .results_fixture import make_results, shifted, write_results

ROOT = Path(__file__).resolve().parents[2]


def _random_results() -> dict:
    seeds = random.sample(range(100), 3)
    base = dict(zip(seeds, torch.rand(3).tolist(), strict=True))
    return make_results({"softmax": {"test_accuracy": base},
                         "gfsa": {"test_accuracy": shifted(base, random.uniform(-0.1, 0.1))}},
                        provenance={"commit": f"{random.getrandbits(160):040x}",
                                    "modified": False, "command": "filterformer compare"})


def test_the_results_round_trip_through_results_json(tmp_path):
    results = ComparisonResults.from_dict(_random_results())
    assert results.schema_version == RESULTS_SCHEMA_VERSION
    path = tmp_path / "c" / "results.json"
    path.parent.mkdir()
    write_json(path, results.to_dict())
    written = json.loads(path.read_text())
    assert written["schema_version"] == RESULTS_SCHEMA_VERSION
    assert next(iter(written)) == "schema_version"
    again = load_comparison(tmp_path, "c")
    assert again == results and again.to_dict() == written


def test_a_file_without_a_version_reads_as_version_1_with_every_value_kept():
    # The committed results written before the version are read as they are.
    listed = subprocess.run(["git", "ls-files", "*results.json"], cwd=ROOT, capture_output=True,
                            text=True).stdout.split()
    unversioned = [name for name in listed
                   if "schema_version" not in json.loads((ROOT / name).read_text())]
    if not unversioned:
        pytest.skip("needs the repository's committed results written before the version")
    for name in random.sample(unversioned, min(4, len(unversioned))):
        data = json.loads((ROOT / name).read_text())
        results = ComparisonResults.from_dict(data, ROOT / name)
        assert results.schema_version == 1
        plain = results.to_dict()
        assert {key: plain[key] for key in data} == data, name


@pytest.mark.parametrize("version", [RESULTS_SCHEMA_VERSION + 1, 0, "1", None, 1.0])
def test_evidence_refuses_a_schema_version_it_does_not_know(tmp_path, monkeypatch, capsys,
                                                            version):
    results = _random_results()
    path = write_results(tmp_path / "experiments" / "results", "c5",
                         {"schema_version": version, **results})
    with pytest.raises(ValueError, match=rf"{path}: schema_version {version!r} is not one"):
        load_comparison(tmp_path / "experiments" / "results", "c5")
    claims = [{"id": "C5", "title": "t", "papers": "p", "claim": "c",
               "settings": [{"results": "c5"}],
               "tests": [{"method": "gfsa", "metric": "test_accuracy", "paper": "x",
                          "expect": "better"}]}]
    (tmp_path / "experiments" / "claims.yaml").write_text(json.dumps(claims))
    monkeypatch.chdir(tmp_path)
    assert main(["evidence", "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert "filterformer evidence: error:" in err and "Traceback" not in err
    assert str(Path("experiments") / "results" / "c5" / "results.json") in err
    assert "schema_version" in err
    assert not (tmp_path / "RESULTS.md").exists()


def test_a_key_the_version_does_not_have_is_refused_naming_the_file(tmp_path):
    results = {**_random_results(), "extra_numbers": [random.random()]}
    path = write_results(tmp_path, "c", results)
    with pytest.raises(ValueError, match=rf"{path} holds key\(s\) extra_numbers"):
        load_comparison(tmp_path, "c")
