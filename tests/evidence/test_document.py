"""The document on a fixture of results written here: every claim's rows with the paper's
figure, our mean, the interval and the verdict that the rules give."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from filterformer.evidence import load_claims, render_document, write_document

from .results_fixture import make_results, null_differences, shifted, write_results

SEEDS = [0, 1, 2, 3, 4]
#: compare's verdict and the claimed direction → the claim's verdict.
RULES = {
    ("better", "better"): "supports", ("worse", "better"): "contradicts",
    ("no significant difference", "better"): "inconclusive at this scale",
    ("too few seeds", "better"): "inconclusive at this scale",
}
LABELS = {"test_accuracy": "test accuracy",
          "last_layer_cosine_similarity": "last-layer cosine similarity"}

CLAIMS = [
    {"id": "CA", "title": "Every kind of verdict", "papers": "Paper A, Table 1",
     "claim": "GFSA improves accuracy (81.0 → 82.5).", "setup": "Our words about the setup.",
     "settings": [{"results": "ca", "label": "setting A"}],
     "tests": [
         {"method": "gfsa", "metric": "test_accuracy", "paper": "81.0 → 82.5",
          "expect": "better"},
         {"method": "neutreno", "metric": "test_accuracy", "paper": "72.17 → 73.01",
          "expect": "better"},
         {"method": "agf", "metric": "test_accuracy", "paper": "98.7 → 99.5",
          "expect": "better"},
         {"method": "fusion", "metric": "test_accuracy", "paper": "on par", "expect": "same",
          "margin": 0.2},
         {"method": "samsa_soft", "metric": "test_accuracy", "paper": "no loss",
          "expect": "same", "margin": 0.02},
         {"method": "gfsa", "metric": "last_layer_cosine_similarity", "paper": "lower",
          "expect": "better"},
     ],
     "figure": {"layers": {}}},
    {"id": "CB", "title": "Against depth", "papers": "Paper B, Fig. 1",
     "claim": "GFSA helps at every depth.", "tuning": "cb_lr", "pending": True,
     "settings": [{"results": "cb/depth4", "label": "depth 4"},
                  {"results": "cb/depth8", "label": "depth 8"},
                  {"results": "cb/depth16", "label": "depth 16"}],
     "tests": [{"method": "gfsa", "metric": "test_accuracy", "paper": "+1.3 (Fig. 1)",
                "expect": "better"}],
     "figure": {"trend": {"x": "budget.model.depth", "group": "budget.model.norm",
                          "metrics": ["test_accuracy", "last_layer_cosine_similarity"]}}},
    {"id": "CC", "title": "Not run at all", "papers": "Paper C", "claim": "Something holds.",
     "pending": True,
     "settings": [{"results": "cc"}],
     "tests": [{"method": "gfsa", "metric": "test_accuracy", "paper": "1 → 2",
                "expect": "worse"}],
     "figure": {"file": "figures/cost.png"}},
]


def _random(low: float, high: float, seeds=SEEDS) -> dict[int, float]:
    return dict(zip(seeds, torch.empty(len(seeds)).uniform_(low, high).tolist(), strict=True))


@pytest.fixture
def project(tmp_path: Path) -> dict:
    """A repository layout: experiments/claims.yaml, experiments/results/…, RESULTS.md."""
    root = tmp_path / "experiments" / "results"
    base, cosine = _random(0.6, 0.7), _random(0.4, 0.6)
    ca = {
        "softmax": {"test_accuracy": base, "last_layer_cosine_similarity": cosine},
        "gfsa": {"test_accuracy": shifted(base, 0.08),
                 "last_layer_cosine_similarity": shifted(cosine, -0.2)},
        "neutreno": {"test_accuracy": shifted(base, -0.08)},
        "agf": {"test_accuracy": shifted(base, null_differences(5), noise=0)},
        "fusion": {"test_accuracy": shifted(base, null_differences(5), noise=0)},
        "samsa_soft": {"test_accuracy": shifted(base, 0.08)},
    }
    results = {"ca": make_results(ca, provenance={"commit": "0123456789abcdef", "modified": True,
                                                  "command": "filterformer compare --config "
                                                             "experiments/ca.yaml"})}
    for depth, seeds in ((4, SEEDS), (8, [0, 1])):  # depth 8: too few seeds for a verdict
        base = _random(0.5, 0.7, seeds)
        results[f"cb/depth{depth}"] = make_results(
            {"softmax": {"test_accuracy": base},
             "gfsa": {"test_accuracy": shifted(base, 0.05)}}, depth=depth)
    lrs = {"softmax-lr1": 1e-3, "softmax-lr3": 3e-3, "softmax-lr10": 1e-2}
    results["cb_lr"] = make_results(
        {name: {"validation_accuracy": _random(0.3, 0.8)} for name in lrs},
        baseline="softmax-lr1",
        method_entries={n: {"name": n, "method": "softmax", "set": {"optimizer.lr": lr}}
                        for n, lr in lrs.items()})
    for name, content in results.items():
        write_results(root, name, content)
    claims = tmp_path / "experiments" / "claims.yaml"
    claims.write_text(yaml.safe_dump(CLAIMS, allow_unicode=True, sort_keys=False))
    return {"claims": claims, "root": root, "output": tmp_path / "RESULTS.md",
            "results": results, "tmp": tmp_path}


def _section(markdown: str, claim_id: str) -> str:
    start = markdown.index(f"\n## {claim_id}: ")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end > 0 else None]


def _test_row(markdown: str, claim_id: str, method: str, metric: str,
              setting: str | None = None) -> str:
    rows = _section(markdown, claim_id).split("### Test rows")[1].split("\n\n")[1]
    found = [line for line in rows.splitlines()
             if line.startswith(f"| {method} | {LABELS[metric]} |")
             and (setting is None or f"| {setting} |" in line)]
    assert len(found) == 1, (method, metric, setting, rows)
    return found[0]


def _expected(results: dict, method: str, metric: str, expect: str,
              margin: float | None = None) -> tuple[dict, str]:
    row = next(r for r in results["summary"] if r["method"] == method)
    difference = row["difference"][metric]
    if expect != "same":
        return difference, RULES[(difference["verdict"], expect)]
    low, high = difference["ci_low"], difference["ci_high"]  # equivalence within ±margin
    if -margin < low and high < margin:
        return difference, "supports"
    beyond = low > margin or high < -margin
    return difference, "contradicts" if beyond else "inconclusive at this scale"


def test_every_test_row_has_the_paper_ours_the_interval_and_the_rules_verdict(project):
    markdown = write_document(project["claims"], project["root"], project["output"],
                              draw_figures=False).markdown
    assert project["output"].read_text() == markdown
    ca = project["results"]["ca"]
    seen = set()
    for test in CLAIMS[0]["tests"]:
        method, metric = test["method"], test["metric"]
        line = _test_row(markdown, "CA", method, metric)
        difference, verdict = _expected(ca, method, metric, test["expect"], test.get("margin"))
        seen.add(verdict)
        assert f"| {test['paper']} |" in line
        assert f"**{verdict}**" in line
        row = next(r for r in ca["summary"] if r["method"] == method)
        if metric == "test_accuracy":
            percent = {k: 100 * difference[k] for k in ("mean", "ci_low", "ci_high")}
            assert f"{100 * row['test_accuracy_mean']:.2f} ± " in line
            assert (f"{percent['mean']:+.2f} [{percent['ci_low']:+.2f}, "
                    f"{percent['ci_high']:+.2f}] pp") in line
            if test["expect"] == "same":
                assert f"| same (within ±{100 * test['margin']:.2f} pp) |" in line
        else:  # cosine values in [0.1, 1): 4 decimals
            assert f"{row['last_layer_cosine_similarity_mean']:.4f} ± " in line
            assert f"{difference['mean']:+.4f} [{difference['ci_low']:+.4f}, " in line
    # The fixture makes every kind of verdict (the paired shifts are far beyond the noise).
    assert seen == {"supports", "contradicts", "inconclusive at this scale"}

    # CB: depth 4 is judged, depth 8 has two seeds (inconclusive), depth 16 is not run yet.
    depth4 = _test_row(markdown, "CB", "gfsa", "test_accuracy", "depth 4")
    difference, verdict = _expected(project["results"]["cb/depth4"], "gfsa", "test_accuracy",
                                    "better")
    assert verdict == "supports" and "**supports**" in depth4
    depth8 = _test_row(markdown, "CB", "gfsa", "test_accuracy", "depth 8")
    assert "**inconclusive at this scale**" in depth8 and "too few seeds" in depth8
    depth16 = _test_row(markdown, "CB", "gfsa", "test_accuracy", "depth 16")
    assert "+1.3 (Fig. 1)" in depth16 and "**not run yet**" in depth16
    assert "Not run yet (`experiments/results/cb/depth16`)" in _section(markdown, "CB")
    # CC: nothing ran; the claim stays in the document.
    cc = _test_row(markdown, "CC", "gfsa", "test_accuracy")
    assert "| 1 → 2 |" in cc and "**not run yet**" in cc
    assert "Not available yet" in _section(markdown, "CC")


def test_the_summary_lists_every_claim_and_its_verdicts(project):
    markdown = write_document(project["claims"], project["root"], project["output"],
                              draw_figures=False).markdown
    summary = markdown.split("## Summary")[1].split("\n## ")[0]
    for claim in CLAIMS:
        line = next(line for line in summary.splitlines() if line.startswith(f"| [{claim['id']}]"))
        assert claim["title"] in line
        assert line.count("<br>") == len(claim["tests"]) - 1
    cb = next(line for line in summary.splitlines() if line.startswith("| [CB]"))
    assert "**supports** (depth 4)" in cb and "**not run yet** (depth 16)" in cb


def test_setup_tuning_and_methods_come_from_the_results(project):
    markdown = write_document(project["claims"], project["root"], project["output"],
                              draw_figures=False).markdown
    ca = _section(markdown, "CA")
    assert "commit `0123456` + local changes" in ca
    assert "`filterformer compare --config experiments/ca.yaml`" in ca
    assert "lr 0.003" in ca and "3 epochs, batch size 32" in ca and "seeds 0, 1, 2, 3, 4" in ca
    assert "Our words about the setup." in ca and "(Paper A, Table 1)" in ca
    for method in project["results"]["ca"]["methods"]:
        assert f"\n| {method}" in ca
    cb = _section(markdown, "CB")
    assert "commit unknown, command unknown" in cb  # results without provenance
    # The tuning table marks the entry with the best validation mean, and only that one.
    tuning = project["results"]["cb_lr"]
    means = {m: np.mean([run["validation_accuracy"] for run in tuning["runs"]
                         if run["method"] == m]) for m in tuning["methods"]}
    best = max(means, key=means.get)
    chosen = [line for line in cb.splitlines() if "**chosen**" in line]
    assert len(chosen) == 1 and chosen[0].startswith(f"| {best} |")
    assert f"{100 * means[best]:.2f} ± " in chosen[0]


def test_the_document_is_deterministic_and_has_no_machine_in_it(project):
    claims = load_claims(project["claims"])
    first = render_document(claims, project["root"], project["output"], "filterformer evidence")
    drawn = write_document(project["claims"], project["root"], project["output"])
    assert drawn.markdown == first.markdown  # drawing the figures changes no byte
    assert project["output"].read_bytes() == write_document(
        project["claims"], project["root"], project["output"]).markdown.encode()
    assert str(project["tmp"]) not in first.markdown
    assert "\n# Results" not in first.markdown[1:] and first.markdown.endswith("\n")
    assert "`filterformer evidence`" in first.markdown  # the defaults, run in its directory


def test_the_claims_figures_are_drawn_and_linked_relative_to_the_document(project):
    evidence = write_document(project["claims"], project["root"], project["output"])
    layers = project["root"] / "ca" / "figures" / "CA_layers.png"
    trend = project["root"] / "cb" / "depth4" / "figures" / "CB_trend.png"
    assert sorted(evidence.figures) == sorted([layers, trend])
    for path in (layers, trend):
        assert path.read_bytes()[:4] == b"\x89PNG"
        link = path.relative_to(project["tmp"]).as_posix()
        assert f"]({link})" in evidence.markdown
    assert "budget.model.depth (4, 8)" in _section(evidence.markdown, "CB")


def test_a_row_naming_what_the_comparison_lacks_is_a_value_error(project):
    claims = load_claims(project["claims"])
    for field, value, fragments in (("method", "gfsa_typo", ["claim CA", "gfsa_typo",
                                                             "softmax, gfsa"]),
                                    ("method", "softmax", ["baseline"]),
                                    ("metric", "test_f1", ["test_f1", "test_accuracy"])):
        test = claims[0].tests[0].__class__(**{**vars(claims[0].tests[0]), field: value})
        claim = claims[0].__class__(**{**vars(claims[0]), "tests": (test,)})
        with pytest.raises(ValueError) as err:
            render_document([claim], project["root"], project["output"], "x")
        assert all(f in str(err.value) for f in fragments), str(err.value)


def _with(claim: dict, **changes) -> list[dict]:
    return [{**c, **changes} if c is claim else c for c in CLAIMS]


def _typo(name: str) -> str:
    """``name`` with one of its letters dropped."""
    letters = [i for i, ch in enumerate(name) if ch.isalpha()]
    i = letters[int(torch.randint(len(letters), ()))]
    return name[:i] + name[i + 1:]


def _render(project: dict, claims: list[dict]):
    project["claims"].write_text(yaml.safe_dump(claims, allow_unicode=True, sort_keys=False))
    return render_document(load_claims(project["claims"]), project["root"], project["output"],
                           "filterformer evidence")


def test_a_misspelt_results_directory_is_an_error_not_a_comparison_not_run_yet(project):
    typo = _typo("ca")
    claim = {**CLAIMS[0], "settings": [{"results": typo, "label": "setting A"}]}
    with pytest.raises(ValueError) as err:
        _render(project, [claim, *CLAIMS[1:]])
    message = str(err.value)
    for fragment in ("claim CA", f"setting {typo}", str(project["root"] / typo),
                     "does not exist", "pending: true"):
        assert fragment in message, (fragment, message)


def test_a_misspelt_tuning_directory_is_an_error_naming_the_near_name(project):
    typo = _typo("cb_lr")
    with pytest.raises(ValueError) as err:
        _render(project, _with(CLAIMS[1], tuning=typo, pending=False,
                               settings=CLAIMS[1]["settings"][:2]))
    message = str(err.value)
    for fragment in ("claim CB", f"tuning {typo}", str(project["root"] / typo),
                     "does not exist", "cb_lr"):
        assert fragment in message, (fragment, message)


def test_a_directory_without_results_json_is_an_error_unless_the_claim_is_pending(project):
    (project["root"] / "cb" / "depth16").mkdir(parents=True)
    with pytest.raises(ValueError) as err:
        _render(project, _with(CLAIMS[1], pending=False))
    message = str(err.value)
    for fragment in ("claim CB", "setting cb/depth16",
                     str(project["root"] / "cb" / "depth16" / "results.json"), "pending: true"):
        assert fragment in message, (fragment, message)
    pending = _render(project, CLAIMS)  # CB is pending: the setting has not run yet
    assert "Not run yet (`experiments/results/cb/depth16`)" in _section(pending.markdown, "CB")


def test_a_trend_metric_in_no_run_record_is_an_error_naming_the_claim(project):
    trend = {**CLAIMS[1]["figure"]["trend"], "metrics": ["test_acuracy"]}
    project["claims"].write_text(yaml.safe_dump(_with(CLAIMS[1], figure={"trend": trend}),
                                                allow_unicode=True, sort_keys=False))
    with pytest.raises(ValueError) as err:
        write_document(project["claims"], project["root"], project["output"])
    message = str(err.value)
    for fragment in ("claim CB", "test_acuracy", "test_accuracy"):
        assert fragment in message, (fragment, message)
    assert not project["output"].exists()


def test_a_misspelt_figure_file_is_an_error_unless_the_claim_is_pending(project):
    figures = project["root"] / "ca" / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    (figures / "cost.png").write_bytes(b"\x89PNG")
    typo = _typo("cost")
    with pytest.raises(ValueError) as err:
        _render(project, _with(CLAIMS[0], figure={"file": f"figures/{typo}.png"}))
    message = str(err.value)
    for fragment in ("claim CA", str(figures / f"{typo}.png"), "does not exist", "cost.png"):
        assert fragment in message, (fragment, message)
    pending = _render(project, _with(CLAIMS[0], figure={"file": f"figures/{typo}.png"},
                                     pending=True))
    assert f"Not available yet (`experiments/results/ca/figures/{typo}.png`)" in pending.markdown
    found = _render(project, _with(CLAIMS[0], figure={"file": "figures/cost.png"}))
    assert "](experiments/results/ca/figures/cost.png)" in _section(found.markdown, "CA")
