"""``filterformer compare``: a short comparison writes its results, and its report renders.

The report is opened in headless Chromium (installed by ``scripts/setup.sh --dev``): every
``<img>`` must load, and the screenshot must show each figure where the page lays it out.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch._dynamo
import yaml
from PIL import Image, ImageFilter
from torch._dynamo.testing import CompileCounterWithBackend

from filterformer.cli import main
from filterformer.training import DEFAULT_METHODS, compilation

SEEDS = ("0", "1")
WIDTH = 1280

#: Appended to a copy of the report: once everything has loaded, write what the browser made
#: of each image and of the table into the page, where --dump-dom shows it.
PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images].map((img) => {
    const box = img.getBoundingClientRect();
    return {src: img.getAttribute("src"), complete: img.complete, width: img.naturalWidth,
            height: img.naturalHeight, left: box.left + scrollX, top: box.top + scrollY,
            boxWidth: box.width, boxHeight: box.height};
  });
  const rows = [...document.querySelectorAll("table tbody tr")].map(
    (tr) => [...tr.cells].map((td) => td.textContent));
  const summary = document.getElementById("summary");
  const best = [...document.querySelectorAll("tr.best")].map((tr) => tr.cells[0].textContent);
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({images, rows, best,
    summary: summary ? summary.innerText : null,
    summaryTop: summary ? summary.getBoundingClientRect().top + scrollY : null,
    tableTop: document.querySelector("table").getBoundingClientRect().top + scrollY,
    height: document.documentElement.scrollHeight});
  document.body.appendChild(probe);
});
</script>"""


def _blurred(image: Image.Image) -> np.ndarray:
    return np.asarray(image.filter(ImageFilter.GaussianBlur(2)), dtype=float)


def tiny_budget(tmp_path: Path) -> Path:
    config = {
        "task": "listops",
        "task_options": {"preset": "tiny", "max_len": 40, "num_train": 48, "num_validation": 16,
                         "num_test": 16, "cache_dir": str(tmp_path / "cache")},
        "model": {"dim": 16, "depth": 2, "num_heads": 2, "mlp_ratio": 2.0},
        "batch_size": 16,
        "max_steps": 3,
        "compare": {"diagnostics_batches": 1},
    }
    path = tmp_path / "budget.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_compare(budget: Path, out: Path) -> int:
    return main(["compare", "--config", str(budget), "--seeds", *SEEDS, "--output-dir", str(out),
                 "--no-progress"])


@pytest.fixture(scope="module")
def comparison(tmp_path_factory) -> Path:
    """Every default method × 2 seeds, 3 steps each, on a tiny ListOps."""
    tmp_path = tmp_path_factory.mktemp("compare")
    assert run_compare(tiny_budget(tmp_path), tmp_path / "out") == 0
    return tmp_path / "out"


def test_results_json_and_csv_hold_every_method(comparison):
    results = json.loads((comparison / "results.json").read_text())
    assert results["methods"] == list(DEFAULT_METHODS)
    assert results["metric"] == "accuracy"
    runs = results["runs"]
    assert sorted((r["method"], r["seed"]) for r in runs) == sorted(
        (m, int(s)) for m in DEFAULT_METHODS for s in SEEDS)
    for row in results["summary"]:
        mine = [r for r in runs if r["method"] == row["method"]]
        accuracies = np.array([r["test_accuracy"] for r in mine])
        assert row["runs"] == len(SEEDS)
        assert row["test_accuracy_mean"] == pytest.approx(accuracies.mean())
        assert row["test_accuracy_std"] == pytest.approx(accuracies.std(ddof=1))
        assert row["step_time_s_median"] == pytest.approx(np.median([r["step_time_s"]
                                                                      for r in mine]))
        cosines = [r["cosine_similarity_per_layer"] for r in mine]
        assert all(len(c) == 3 for c in cosines)  # embeddings + 2 layers
        assert row["last_layer_cosine_similarity_mean"] == pytest.approx(
            np.mean([c[-1] for c in cosines]))
        assert row["num_parameters"] > 0
        assert all(r["steps"] == 3 for r in mine)  # the same budget for every run
    # Two seeds: every difference from softmax is measured, none is judged.
    assert results["baseline"] == "softmax"
    for row in results["summary"][1:]:
        for difference in row["difference"].values():
            assert (difference["verdict"], difference["seeds"]) in (
                ("too few seeds", 2), ("too few seeds", 0))  # 0: no time measured
    assert results["summary"][0]["difference"] is None
    with open(comparison / "results.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [row["method"] for row in table] == list(DEFAULT_METHODS)
    assert table[1]["test_accuracy_difference_verdict"] == "too few seeds"
    assert float(table[0]["test_accuracy_mean"]) == pytest.approx(
        results["summary"][0]["test_accuracy_mean"])


def test_results_record_the_command_that_reproduces_them(comparison):
    from filterformer.cli import build_parser

    results = json.loads((comparison / "results.json").read_text())
    command = results["provenance"]["command"]
    words = command.split()
    assert words[:2] == ["filterformer", "compare"]
    parsed = build_parser().parse_args(words[1:])
    assert parsed.seeds == [int(s) for s in SEEDS]
    assert parsed.output_dir == str(comparison) and parsed.no_progress
    assert results["provenance"]["commit"] is None or len(results["provenance"]["commit"]) == 40


def test_every_figure_is_written(comparison):
    results = json.loads((comparison / "results.json").read_text())
    names = {f["name"] for f in results["figures"]}
    assert {"cost", "cosine_similarity", "frequency_response", "frequency_response_last",
            "gfsa_filters_gfsa", "agf_filters_agf"} <= names
    for figure in results["figures"]:
        with Image.open(comparison / figure["path"]) as image:
            assert image.format == "PNG" and min(image.size) > 100


def test_rerun_reuses_finished_runs(comparison, capsys):
    before = json.loads((comparison / "results.json").read_text())
    assert run_compare(comparison.parent / "budget.yaml", comparison) == 0
    printed = capsys.readouterr().out
    assert printed.count("(reused)") == len(DEFAULT_METHODS) * len(SEEDS)
    after = json.loads((comparison / "results.json").read_text())
    assert after["summary"] == before["summary"]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    pytest.fail("headless Chromium is needed to check the report: run scripts/setup.sh --dev "
                "(as root it installs Debian's chromium) or install one yourself")


def run_chromium(page: Path, profile: Path, height: int, *extra: str) -> str:
    command = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
        f"--user-data-dir={profile}", f"--window-size={WIDTH},{height}",
        "--virtual-time-budget=10000", *extra, page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_report_renders_the_table_and_every_figure(comparison, tmp_path):
    results = json.loads((comparison / "results.json").read_text())
    report = comparison / "report.html"
    probed = comparison / "report_probe.html"
    probed.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    dom = run_chromium(probed, tmp_path / "profile", 1000, "--dump-dom")
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the page never finished loading"
    probe = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))

    # The table: one row per method, with the numbers of results.json.
    assert [row[0] for row in probe["rows"]] == list(DEFAULT_METHODS)
    for row, summary in zip(probe["rows"], results["summary"], strict=True):
        mean, std = summary["test_accuracy_mean"], summary["test_accuracy_std"]
        assert row[1] == f"{mean:.4f} ± {std:.4f}"

    # The page opens with its answer: with two seeds, no verdict and no row marked best.
    assert probe["summaryTop"] < probe["tableTop"]
    assert "too few to tell whether any method differs from softmax" in probe["summary"]
    assert probe["best"] == []

    # Every figure of results.json is an image that loaded: no broken images.
    images = probe["images"]
    assert sorted(i["src"] for i in images) == sorted(f["path"] for f in results["figures"])
    broken = [image["src"] for image in images if not (image["complete"] and image["width"])]
    assert not broken, f"images that did not load: {broken}"
    for image in images:
        with Image.open(comparison / image["src"]) as source:
            assert (image["width"], image["height"]) == source.size

    # The screenshot shows each figure where the page put it.
    shot_path = tmp_path / "report.png"
    run_chromium(report, tmp_path / "profile", probe["height"], f"--screenshot={shot_path}")
    with Image.open(shot_path) as shot:
        shot_image = shot.convert("L")
    screenshot = np.asarray(shot_image, dtype=float)
    assert screenshot.shape == (probe["height"], WIDTH)
    assert screenshot.std() > 10  # not a blank page
    for image in images:
        left, top = round(image["left"]), round(image["top"])
        width, height = round(image["boxWidth"]), round(image["boxHeight"])
        with Image.open(comparison / image["src"]) as source:
            expected = _blurred(source.convert("L").resize((width, height)))
        # A box at a fractional position is drawn up to a pixel away from its rounded corner, and
        # the browser scales thin lines with another filter than PIL: blurred, a figure of thin
        # lines matches where it was drawn, and nowhere else.
        correlation = max(
            np.corrcoef(_blurred(shot_image.crop((x, y, x + width, y + height))).ravel(),
                        expected.ravel())[0, 1]
            for y in (top - 1, top, top + 1) for x in (left - 1, left, left + 1))
        assert correlation > 0.9, (image["src"], correlation)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--methods", "softmax", "gfssa"], "unknown method 'gfssa'; valid methods: softmax, "),
        (["--set", "task=listopz"], "unknown task 'listopz'; valid tasks: listops, "),
        (["--set", "task_options.size=3"], "unknown option(s) ['size'] for task 'digits'"),
        (["--set", "model.attention=gfsa"], "base config sets model.attention, which the method"),
        (["--set", "epochs=0"], "epochs must be positive; got 0"),
        (["--seeds", "1", "1"], "seeds must be distinct integers"),
        (["--threads", "-1"], "--threads must be 0 (torch's choice) or more; got -1"),
        (["--methods", "softmax", "gfsa", "--baseline", "agf"],
         "compare.baseline 'agf' is not among the compared methods; choose one of: softmax, "
         "gfsa"),
    ],
)
def test_errors_name_the_valid_choices(tmp_path, capsys, argv, message):
    code = main(["compare", "--output-dir", str(tmp_path), *argv])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("dry_run", [False, True])
@pytest.mark.parametrize("case", ["a path under a regular file", "an existing regular file"])
def test_an_unusable_output_dir_is_refused_before_any_run(tmp_path, capsys, case, dry_run):
    budget = tiny_budget(tmp_path)
    blocker = tmp_path / f"file-{np.random.default_rng().integers(10**9)}"
    blocker.write_text("not a directory")
    out = blocker / "compare" if case.startswith("a path") else blocker
    code = main(["compare", "--config", str(budget), "--methods", "softmax", "--seeds", "0",
                 "--output-dir", str(out), "--jobs", "1", *(["--dry-run"] if dry_run else [])])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith(f"filterformer compare: error: output_dir {out} ")
    assert "not a directory" in captured.err and "Traceback" not in captured.err
    assert captured.out == ""  # no run (nor dry-run step) started
    assert blocker.read_text() == "not a directory"
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("dry_run", [False, True])
def test_jobs_below_one_are_refused_by_the_dry_run_as_by_the_comparison(tmp_path, capsys,
                                                                        dry_run):
    jobs = int(np.random.default_rng().integers(-5, 1))
    out = tmp_path / "out"
    code = main(["compare", "--config", str(tiny_budget(tmp_path)), "--methods", "softmax",
                 "--seeds", "0", "--output-dir", str(out), "--jobs", str(jobs),
                 *(["--dry-run"] if dry_run else [])])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == (f"filterformer compare: error: --jobs must be a positive integer "
                            f"(runs trained at once; omit it for as many as fit the cores); "
                            f"got {jobs}\n")
    assert captured.out == ""
    assert not out.exists() and not (tmp_path / "cache").exists()  # refused before any work


def test_report_says_when_no_method_differs(tmp_path):
    """Two identical methods (softmax under two names; the second one's own entry) × 3 seeds:
    equal accuracies seed by seed, so the report says nothing differs and marks no row."""
    budget = tiny_budget(tmp_path)
    config = yaml.safe_load(budget.read_text())
    config["compare"]["methods"] = ["softmax", {"name": "softmax-again", "method": "softmax"}]
    budget.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    assert main(["compare", "--config", str(budget), "--seeds", "0", "1", "2", "--baseline",
                 "softmax", "--output-dir", str(out), "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text())
    same = results["summary"][1]["difference"]["test_accuracy"]
    assert (same["mean"], same["verdict"], same["seeds"]) == (0.0, "no significant difference", 3)
    probed = out / "report_probe.html"
    probed.write_text((out / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    dom = run_chromium(probed, tmp_path / "profile", 1000, "--dump-dom")
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the page never finished loading"
    probe = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert "No method differs significantly from softmax on test accuracy." in probe["summary"]
    assert probe["summaryTop"] < probe["tableTop"]
    assert [row[0] for row in probe["rows"]] == ["softmax", "softmax-again"]
    assert probe["best"] == []
    assert probe["rows"][1][2].startswith("+0.0000 [+0.0000, +0.0000]")
    assert probe["rows"][1][2].endswith("no significant difference")


def test_quiet_prints_only_the_summary(comparison, capsys):
    argv = ["compare", "--config", str(comparison.parent / "budget.yaml"), "--seeds", *SEEDS,
            "--output-dir", str(comparison), "--quiet"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith(f"compared {len(DEFAULT_METHODS)} methods × {len(SEEDS)} seeds")
    assert [line.split(":")[0] for line in lines[1:]] == ["report", "table", "results"]
    assert captured.err == ""


def test_a_failed_run_is_named_without_a_traceback(tmp_path, capsys):
    budget = tiny_budget(tmp_path)
    out = tmp_path / "out"
    # A run that stopped with a damaged checkpoint: resuming it fails inside the run.
    broken = out / "runs" / "gfsa" / "seed-0" / "checkpoints" / "last.pt"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(bytes(np.random.default_rng().integers(0, 256, 64, dtype=np.uint8)))
    argv = ["compare", "--config", str(budget), "--methods", "softmax", "gfsa", "--seeds", "0",
            "--output-dir", str(out), "--jobs", "1", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "run gfsa seed 0 failed" in err or "run gfsa" in err
    assert str(broken.parent.parent) in err and "corrupt" in err
    assert "Traceback" not in err


def test_compare_compile_compiles_every_run_and_the_timed_steps(tmp_path, capsys, monkeypatch):
    """--compile applies to every run and to the paired step timing: one graph per method, for
    every batch length, in training and in the timing that reuses it (backend: aot_eager behind
    TorchDynamo's compile counter; inductor compiles a run in tests/cli/test_train.py)."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    monkeypatch.setattr(compilation, "BACKEND", counter)
    budget = tiny_budget(tmp_path)
    config = yaml.safe_load(budget.read_text())
    config.update(max_steps=2)
    config["compare"].update(cost_rounds=2, cost_warmup_steps=1)
    budget.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    argv = ["compare", "--config", str(budget), "--methods", "softmax", "samsa_hard",
            "--seeds", "0", "--output-dir", str(out), "--jobs", "1", "--compile", "--quiet"]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["budget"]["compile"] is True
    assert results["cost"]["compile"] is True
    assert all(step > 0 for seed in results["cost"]["seeds"].values()
               for step in seed["step_time_s"].values())
    assert [run["method"] for run in results["runs"]] == ["softmax", "samsa_hard"]
    assert all(run["test_accuracy"] >= 0 for run in results["runs"])
    assert "--compile" in results["provenance"]["command"]
    for method in ("softmax", "samsa_hard"):
        run_config = yaml.safe_load((out / "runs" / method / "seed-0" / "config.yaml").read_text())
        assert run_config["compile"] is True
    assert counter.frame_count == 2
    torch._dynamo.reset()
