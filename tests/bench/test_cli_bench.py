import argparse
import json

import pytest

from filterformer.bench import GPU_TARGETS, TARGETS, run
from filterformer.cli import bench, main
from filterformer.provenance import source_revision


def _run(argv):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return bench.run(parser.parse_args(argv))


def _args(*argv):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return bench.settings_from_args(parser.parse_args(list(argv)))


def test_quick_run_writes_json_with_the_machine_report_and_plot(tmp_path, capsys, monkeypatch):
    # Two targets keep the test short; the command measures every CPU target the same way.
    monkeypatch.setattr(run, "TARGETS", (TARGETS[0], TARGETS[3]))
    monkeypatch.setattr(run, "GPU_TARGETS", GPU_TARGETS[:1])
    out = tmp_path / "results"
    argv = ["--quick", "--methods", "sdpa", "gfsa", "--lengths", "16", "32",
            "--modes", "inference", "--output", str(out)]
    assert _run(argv) == 0
    data = json.loads((out / "bench.json").read_text())
    assert data["machine"]["device"] == "cpu" and data["machine"]["torch_threads"] >= 1
    assert data["machine"]["source"] == source_revision()  # the code measured
    assert [(r["method"], r["N"]) for r in data["records"]] == [
        ("sdpa", 16), ("sdpa", 32), ("gfsa", 16), ("gfsa", 32)]
    assert all(r["mode"] == "inference" and r["median_ms"] > 0 for r in data["records"])
    time, memory, gpu = data["targets"]
    # --quick measures each target at N/64 (at least 16), at tiny sizes.
    assert time["numerator"] == ["gfsa", 4096, "train"] and time["value"] > 0
    assert [side["N"] for side in time["sides"]] == [64, 64]
    assert memory["quantity"] == "memory" and memory["numerator"] == ["gfsa-explicit", 4096,
                                                                      "inference"]
    assert all(t["note"] == "tiny sizes (--quick): no verdict" and t["passed"] is None
               for t in (time, memory))
    assert all(side["median_ms"] > 0 for side in time["sides"])
    assert gpu["note"] == "not run (GPU targets: --gpu-targets)" and gpu["value"] is None
    report = (out / "bench.md").read_text()
    assert "filterformer bench --quick --methods sdpa gfsa --lengths 16 32" in report
    assert f"| {TARGETS[0].name} | train | " in report and data["machine"]["cpu"] in report
    assert (out / "bench.png").read_bytes()[:4] == b"\x89PNG"
    assert not (out / "machine.json").exists() and not (out / "targets.json").exists()
    assert "| gfsa | kernel | sdpa |" in capsys.readouterr().out


def test_unknown_method_exits_2_naming_it_and_the_choices(tmp_path, capsys):
    assert main(["bench", "--quick", "--methods", "flash", "--output", str(tmp_path)]) == 2
    assert "unknown benchmark method 'flash'; valid choices: sdpa" in capsys.readouterr().err


def test_bad_option_values_exit_2_naming_the_argument(capsys):
    for argv, named in ((["--modes", "eval"], "argument --modes"),
                        (["--device", "tpu"], "argument --device"),
                        (["--lengths", "x"], "argument --lengths")):
        with pytest.raises(SystemExit) as exit_info:
            main(["bench", *argv])
        assert exit_info.value.code == 2 and named in capsys.readouterr().err


def test_list_prints_every_method(capsys):
    from filterformer.bench import BENCH_METHODS

    assert _run(["--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(BENCH_METHODS)


def test_quick_and_full_shapes_lengths_and_targets():
    quick = _args("--quick")
    assert (quick.shape.batch, quick.shape.heads, quick.shape.head_dim) == (1, 2, 8)
    assert quick.lengths == (32, 64) and quick.repeats == 2
    assert (quick.quick, quick.targets, quick.compile) == (True, "cpu", False)
    assert _args("--quick", "--compile").compile and _args("--no-targets").targets == "none"
    full = _args()
    assert (full.shape.batch, full.shape.heads, full.shape.head_dim) == (2, 4, 64)
    assert 4096 in full.lengths and 16384 in full.lengths and full.compile
    gpu = _args("--gpu-targets", "--quick")
    assert gpu.methods == () and gpu.targets == "gpu"


def test_a_run_in_which_everything_fails_exits_2_and_says_why(tmp_path, monkeypatch, capsys):
    from filterformer.bench import BenchShape

    # Shapes no tensor can take: every configuration raises.
    monkeypatch.setattr(BenchShape, "quick", classmethod(lambda cls: cls(head_dim=-1)))
    out = tmp_path / "results"
    argv = ["bench", "--quick", "--methods", "efficient", "sdpa", "--lengths", "16",
            "--modes", "inference", "--no-targets", "--output", str(out)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "no configuration was measured (2 of 2 failed; the first: efficient, N=16" in (
        captured.err) and str(out / "bench.md") in captured.err
    report = (out / "bench.md").read_text()
    assert "**Failed: 2 of 2 configurations**" in report and "## Failed" in report
    assert "- sdpa, N=16, inference: RuntimeError" in report
    assert "**Failed: 2 of 2 configurations**" in captured.out  # the printed report says so too
    records = json.loads((out / "bench.json").read_text())["records"]
    assert [r["failed"] for r in records] == [True, True]


def test_gpu_targets_need_cuda_unless_quick(tmp_path, capsys):
    if bench.resolve_device("auto") == "cpu":
        assert main(["bench", "--gpu-targets", "--output", str(tmp_path)]) == 2
        assert "--gpu-targets measures GPU shapes" in capsys.readouterr().err
    assert main(["bench", "--gpu-targets", "--no-targets", "--quick"]) == 2
    assert "--gpu-targets and --no-targets exclude each other" in capsys.readouterr().err
