"""A row written or changed after its results is post hoc: checked on a git repository built
here, whose claims file changes after the results of its comparison were committed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from filterformer.evidence import write_document
from filterformer.evidence.claims import parse_claims
from filterformer.evidence.history import FIXED, POST_HOC, UNKNOWN, claim_row_key, row_keys

from .results_fixture import make_results, shifted, write_results

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

SEEDS = range(5)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _commit(root: Path, message: str) -> str:
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return _git(root, "rev-parse", "HEAD")


def _claims(tests: list[dict]) -> list[dict]:
    return [{"id": "C", "title": "t", "papers": "p", "claim": "c",
             "settings": [{"results": "a"}], "tests": tests}]


def _write_claims(path: Path, tests: list[dict]) -> None:
    path.write_text(yaml.safe_dump(_claims(tests), sort_keys=False))


GFSA = {"method": "gfsa", "metric": "test_accuracy", "paper": "81 → 82", "expect": "better"}
NEUTRENO = {"method": "neutreno", "metric": "test_accuracy", "paper": "72 → 73",
            "expect": "same", "margin": 0.01}
AGF = {"method": "agf", "metric": "test_accuracy", "paper": "98.7 → 99.5", "expect": "better"}


def _results(recorded: str) -> dict:
    import random

    base = {s: random.uniform(0.5, 0.7) for s in SEEDS}
    return make_results({"softmax": {"test_accuracy": base},
                         "gfsa": {"test_accuracy": shifted(base, 0.05)},
                         "neutreno": {"test_accuracy": shifted(base, 0.002)},
                         "agf": {"test_accuracy": shifted(base, 0.0)}},
                        provenance={"commit": recorded, "modified": False, "command": "x"})


@pytest.fixture
def repository(tmp_path: Path) -> dict:
    root = tmp_path / "repo"
    (root / "experiments" / "results").mkdir(parents=True)
    _git(root, "init", "-q")
    claims = root / "experiments" / "claims.yaml"
    _write_claims(claims, [GFSA, NEUTRENO])
    fixed = _commit(root, "the claims")
    return {"root": root, "claims": claims, "results": root / "experiments" / "results",
            "fixed": fixed}


def _statuses(repository: dict) -> dict[str, str]:
    evidence = write_document(repository["claims"], repository["results"],
                              repository["root"] / "RESULTS.md", draw_figures=False)
    return {row.test.method: row.fixed for row in evidence.rows["C"]}


def test_a_row_changed_after_its_results_is_post_hoc(repository):
    write_results(repository["results"], "a", _results(repository["fixed"]))
    _commit(repository["root"], "the results")
    # After the results: one row's expectation and margin change, one row is added, and one
    # row's quote of the paper is corrected (not a decision: it stays fixed before).
    changed = {**NEUTRENO, "expect": "not worse", "margin": 0.02}
    _write_claims(repository["claims"], [{**GFSA, "paper": "81.0 → 82.0"}, changed, AGF])
    _commit(repository["root"], "the claims after the results")
    assert _statuses(repository) == {"gfsa": FIXED, "neutreno": POST_HOC, "agf": POST_HOC}
    markdown = (repository["root"] / "RESULTS.md").read_text()
    agf = next(line for line in markdown.splitlines()
               if line.startswith("| agf | test accuracy |"))
    assert agf.endswith("| *post hoc* |") and agf.split(" | ")[8].endswith("*post hoc*")


def test_a_row_changed_in_the_commit_that_adds_its_results_is_post_hoc(repository):
    # Results that record no commit: the commit that first added them is the moment.
    results = _results(repository["fixed"])
    del results["provenance"]
    write_results(repository["results"], "a", results)
    _write_claims(repository["claims"], [GFSA, {**NEUTRENO, "margin": 0.03}])
    _commit(repository["root"], "the results, and a wider margin")
    assert _statuses(repository) == {"gfsa": FIXED, "neutreno": POST_HOC}


def test_an_earlier_run_at_the_same_path_counts(repository):
    # A first run's results are committed, the row is then added, and the comparison is rerun
    # from a commit that has the row: its results were seen before the row was written.
    write_results(repository["results"], "a", _results(repository["fixed"]))
    _commit(repository["root"], "a first run")
    _write_claims(repository["claims"], [GFSA, NEUTRENO, AGF])
    with_agf = _commit(repository["root"], "agf's row")
    write_results(repository["results"], "a", _results(with_agf))
    _commit(repository["root"], "the rerun")
    assert _statuses(repository) == {"gfsa": FIXED, "neutreno": FIXED, "agf": POST_HOC}


def test_uncommitted_results_use_the_recorded_commit_and_no_history_is_unknown(repository,
                                                                              tmp_path):
    write_results(repository["results"], "a", _results(repository["fixed"]))
    _write_claims(repository["claims"], [GFSA, NEUTRENO, AGF])  # neither is committed
    assert _statuses(repository) == {"gfsa": FIXED, "neutreno": FIXED, "agf": POST_HOC}
    # Outside any repository nothing can be told.
    copy = tmp_path / "copy"
    shutil.copytree(repository["root"] / "experiments", copy / "experiments")
    statuses = _statuses({"root": copy, "claims": copy / "experiments" / "claims.yaml",
                          "results": copy / "experiments" / "results"})
    assert set(statuses.values()) == {UNKNOWN}


def _two_settings(tests: list[dict]) -> list[dict]:
    return [{"id": "C", "title": "t", "papers": "p", "claim": "c",
             "settings": [{"results": "a"}, {"results": "b"}], "tests": tests}]


VERSUS = {"method": "gfsa", "metric": "test_accuracy", "paper": "gains most deep",
          "expect": "better", "settings": ["a"], "versus": "b"}


def test_a_row_with_and_without_interaction_are_different_decisions():
    plain, interaction = _two_settings([VERSUS]), _two_settings([{**VERSUS,
                                                                  "interaction": True}])
    assert row_keys(plain) != row_keys(interaction)
    # An explicit false is the key's absence (an older file has no key).
    assert row_keys(_two_settings([{**VERSUS, "interaction": False}])) == row_keys(plain)
    for data in (plain, interaction):
        claim = parse_claims(data)[0]
        assert row_keys(data) == {claim_row_key("C", claim.tests[0], "a")}


def test_a_row_made_an_interaction_after_its_results_is_post_hoc(tmp_path):
    import random

    root = tmp_path / "repo"
    results = root / "experiments" / "results"
    results.mkdir(parents=True)
    _git(root, "init", "-q")
    claims = root / "experiments" / "claims.yaml"
    rows = [VERSUS, {**VERSUS, "method": "agf", "interaction": True}]
    claims.write_text(yaml.safe_dump(_two_settings(rows), sort_keys=False))
    fixed = _commit(root, "the claims")
    for name, gain in (("a", 0.05), ("b", 0.0)):
        base = {s: random.uniform(0.5, 0.7) for s in SEEDS}
        write_results(results, name, make_results(
            {"softmax": {"test_accuracy": base}, "gfsa": {"test_accuracy": shifted(base, gain)},
             "agf": {"test_accuracy": shifted(base, gain)}},
            provenance={"commit": fixed, "modified": False, "command": "x"}))
    _commit(root, "the results")

    def statuses() -> list[tuple[str, bool, str]]:
        evidence = write_document(claims, results, root / "RESULTS.md", draw_figures=False)
        return [(row.test.method, row.test.interaction, row.fixed)
                for row in evidence.rows["C"]]

    assert statuses() == [("gfsa", False, FIXED), ("agf", True, FIXED)]
    # After the results, gfsa's row becomes an interaction and agf's stops being one.
    rows = [{**VERSUS, "interaction": True}, {**VERSUS, "method": "agf"}]
    claims.write_text(yaml.safe_dump(_two_settings(rows), sort_keys=False))
    _commit(root, "the rows changed after the results")
    assert statuses() == [("gfsa", True, POST_HOC), ("agf", False, POST_HOC)]
