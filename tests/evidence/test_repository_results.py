"""RESULTS.md is exactly what ``filterformer evidence`` writes from the repository's claims file,
its git history and the committed results: a results file changed without regenerating it fails
here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from filterformer.cli import main
from filterformer.evidence import evidence_command, load_claims, render_document

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = ROOT / "experiments" / "claims.yaml"
RESULTS = ROOT / "experiments" / "results"
DOCUMENT = ROOT / "RESULTS.md"
HOW = "run `filterformer evidence` at the repository root and commit RESULTS.md"


def _committed() -> str:
    assert CLAIMS.is_file(), f"{CLAIMS} is missing"
    assert DOCUMENT.is_file(), f"{DOCUMENT} is missing: {HOW}"
    return DOCUMENT.read_text()


def test_results_md_is_generated_from_the_committed_results():
    committed = _committed()
    # Rendered in place without drawing: nothing in the repository is written.
    evidence = render_document(load_claims(CLAIMS), RESULTS, DOCUMENT,
                               evidence_command(CLAIMS, RESULTS, DOCUMENT), claims_path=CLAIMS)
    assert evidence.markdown == committed, f"RESULTS.md is out of date: {HOW}"


@pytest.mark.slow
def test_the_command_on_a_copy_redraws_the_figures_and_writes_the_same_document(tmp_path):
    committed = _committed()
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the repository's history (whether rows were fixed before "
                    "their results)")
    # The copy shares the repository's history (no files checked out): the document reads the
    # claims file's history there.
    copy = tmp_path / "repository"
    subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(ROOT),
                    str(copy)], check=True)
    experiments = copy / "experiments"
    experiments.mkdir()
    shutil.copy(CLAIMS, experiments / "claims.yaml")
    if RESULTS.is_dir():  # the results, without the runs' own directories and checkpoints
        shutil.copytree(RESULTS, experiments / "results",
                        ignore=shutil.ignore_patterns("runs", "*.pt"))
    output = copy / "RESULTS.md"
    assert main(["evidence", "--claims", str(experiments / "claims.yaml"),
                 "--results", str(experiments / "results"), "--output", str(output)]) == 0
    assert output.read_text() == committed, f"RESULTS.md is out of date: {HOW}"
