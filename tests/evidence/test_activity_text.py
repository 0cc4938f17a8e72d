"""Each claim's filter activity in the document: per setting, every method's sentence exactly as
compare's report words it, or that the results predate the measurement."""

from __future__ import annotations

import torch
import yaml

from filterformer.evidence import write_document
from filterformer.training.compare.activity import activity_sentences

from .activity_fixture import random_activity
from .results_fixture import comparison, make_results, shifted, write_results

SEEDS = [0, 1, 2, 3, 4]
METHODS = ("softmax", "gfsa", "neutreno", "fusion", "agf")
NOT_RECORDED = "not recorded in these results (they predate its measurement)"


def _results(activity: dict | None) -> dict:
    base = dict(zip(SEEDS, torch.empty(len(SEEDS)).uniform_(0.5, 0.7).tolist(), strict=True))
    results = make_results({m: {"test_accuracy": base if m == "softmax" else shifted(base, 0.01)}
                            for m in METHODS})
    if activity is not None:
        results["method_activity"] = activity
    return results


def _claim(claim_id: str, settings: list[str], pending: bool = False) -> dict:
    return {"id": claim_id, "title": f"Claim {claim_id}", "papers": "Paper", "claim": "Holds.",
            "pending": pending, "settings": [{"results": s, "label": s} for s in settings],
            "tests": [{"method": "gfsa", "metric": "test_accuracy", "paper": "1 → 2",
                       "expect": "better"}]}


def _document(tmp_path, claims: list[dict], results: dict[str, dict]) -> str:
    root = tmp_path / "results"
    for name, content in results.items():
        write_results(root, name, content)
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(claims, allow_unicode=True, sort_keys=False))
    return write_document(path, root, tmp_path / "RESULTS.md", draw_figures=False).markdown


def _activity(markdown: str, claim_id: str) -> list[str]:
    """The lines of a claim's "Filter activity" subsection."""
    section = markdown[markdown.index(f"\n## {claim_id}: "):]
    block = section.split("### Filter activity\n\n", 1)[1].split("\n\n### ", 1)[0]
    return block.strip("\n").splitlines()


def test_a_claim_shows_each_methods_activity_as_compare_words_it(tmp_path):
    activity = random_activity(len(SEEDS))
    results = _results(activity)
    lines = _activity(_document(tmp_path, [_claim("CA", ["ca"])], {"ca": results}), "CA")
    gfsa = activity["gfsa"]["parameters"]["gfsa"]
    fusion = activity["fusion"]["parameters"]["fusion"]
    written_out = [
        f"- gfsa: GFSA coefficients (w0, w1, wK) moved at most {gfsa['max_abs_change']:.2g} "
        f"from their start (largest over 5 runs); the learned filter response at most "
        f"{gfsa['response_max_abs_change']:.2g}.",
        "- neutreno: no parameters of its own that training moves (5 runs measured).",
        f"- fusion: layer-fusion weights moved at most {fusion['max_abs_change']:.2g} from their "
        "start (largest over 4 runs).",
        "- fusion: how far its parameters moved is unknown for 1 run, resumed from checkpoints "
        "that did not record their start.",
        "- agf: no run finished without diverging, so how far its parameters moved is not "
        "measured.",
    ]
    assert lines == written_out
    assert lines == [f"- {s}" for s in activity_sentences(comparison(results))]


def test_results_without_activity_say_so_and_show_no_number(tmp_path):
    markdown = _document(tmp_path, [_claim("CB", ["cb"])], {"cb": _results(None)})
    assert _activity(markdown, "CB") == [NOT_RECORDED[0].upper() + NOT_RECORDED[1:] + "."]
    assert "moved at most" not in markdown


def test_each_setting_of_a_claim_has_its_own_activity_or_why_not(tmp_path):
    activity = random_activity(len(SEEDS))
    results = _results(activity)
    markdown = _document(tmp_path, [_claim("CC", ["old", "new", "later"], pending=True)],
                         {"old": _results(None), "new": results})
    sentences = activity_sentences(comparison(results))
    assert _activity(markdown, "CC") == [f"- old: {NOT_RECORDED}.", "- new:",
                                         *(f"  - {s}" for s in sentences),
                                         "- later: not run yet."]


def test_activity_of_a_comparison_of_the_baseline_alone_says_nothing_moves(tmp_path):
    base = dict(zip(SEEDS, torch.rand(len(SEEDS)).tolist(), strict=True))
    only = make_results({"softmax": {"test_accuracy": base},
                         "gfsa": {"test_accuracy": shifted(base, 0.01)}})
    only["method_activity"] = {
        "softmax": {"runs_measured": len(SEEDS), "runs_unmeasured": 0, "parameters": {}}}
    markdown = _document(tmp_path, [_claim("CD", ["cd"])], {"cd": only})
    assert _activity(markdown, "CD") == ["No compared method adds parameters of its own."]
