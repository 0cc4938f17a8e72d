"""``benchmarks/report_files.py``: reports written whole, or refused by name."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from ..scripts import BENCHMARKS, load_script

report_files = load_script("report_files", BENCHMARKS)


def test_a_report_is_written_as_json_and_markdown(tmp_path, capsys):
    report = {"value": float(torch.rand(())), "rows": [1, 2]}
    report_files.write_report(argparse.ArgumentParser(), tmp_path / "out", "r", report, "# r\n")
    assert json.loads((tmp_path / "out" / "r.json").read_text()) == report
    assert (tmp_path / "out" / "r.md").read_text() == "# r\n"
    assert "# r" in capsys.readouterr().out


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
def test_a_number_that_is_not_finite_is_refused_and_nothing_written(tmp_path, capsys, number):
    report = {"rows": [{"ratio": float(torch.rand(()))}, {"ratio": number}]}
    with pytest.raises(SystemExit) as exit_:
        report_files.write_report(argparse.ArgumentParser(), tmp_path / "out", "r", report, "")
    assert exit_.value.code == 2
    assert f"--output {tmp_path / 'out'}: nothing written" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
