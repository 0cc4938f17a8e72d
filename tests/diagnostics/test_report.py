import json
import math

import pytest
import torch

from filterformer.diagnostics import DiagnosticsReport, diagnose, load_reports, save_reports
from filterformer.models import Transformer, TransformerConfig


def small_report() -> DiagnosticsReport:
    config = TransformerConfig(dim=8, depth=2, num_heads=2, vocab_size=20, attention="gfsa")
    ids = torch.randint(1, 20, (3, 5))
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[0, 1:] = False  # one real token: its cosine similarity is undefined (NaN)
    return diagnose(Transformer(config), [{"input_ids": ids, "padding_mask": mask}])


def test_json_round_trip(tmp_path):
    report = small_report()
    path = report.save(tmp_path / "nested" / "report.json")

    def reject(constant):
        raise AssertionError(f"{constant} is not strict JSON")

    json.loads(path.read_text(), parse_constant=reject)
    loaded = DiagnosticsReport.load(path)
    assert loaded.to_dict() == report.to_dict()
    assert loaded.gfsa_filters[1].name == report.gfsa_filters[1].name


def test_undefined_values_become_null_and_read_back_as_nan():
    report = small_report()
    report.token_cosine_similarity[0] = float("nan")
    data = report.to_dict()
    assert data["token_cosine_similarity"][0] is None
    assert math.isnan(DiagnosticsReport.from_dict(data).token_cosine_similarity[0])
    data["frequency_response"] = None  # an unmeasured field stays None
    assert DiagnosticsReport.from_dict(data).frequency_response is None


def test_unknown_fields_are_rejected():
    data = small_report().to_dict()
    data["colour"] = "blue"
    with pytest.raises(ValueError, match="colour"):
        DiagnosticsReport.from_dict(data)


def test_several_reports_round_trip_in_one_file(tmp_path):
    reports = [small_report(), small_report()]
    path = save_reports(reports, tmp_path / "out" / "diagnostics.json")
    loaded = load_reports(path)
    assert [r.to_dict() for r in loaded] == [r.to_dict() for r in reports]


def test_a_file_without_reports_is_refused(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_reports(tmp_path / "missing.json")
    single = small_report().save(tmp_path / "single.json")  # one report, not a list of them
    with pytest.raises(ValueError, match=r"is not a diagnostics\.json"):
        load_reports(single)
