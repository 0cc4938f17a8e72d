import argparse
import json

import pytest
import torch

from filterformer.bench import GPU_TARGETS, TARGETS, run
from filterformer.cli import bench, main
from filterformer.provenance import source_revision


def _run(argv):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return bench.run(parser.parse_args(argv))


def _stopped(*args, **kwargs):
    """A measurement stopped as a time limit or Ctrl-C stops a run."""
    raise KeyboardInterrupt


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
    assert data["complete"] is True and "Unfinished" not in report
    assert not any(t["note"] == run.NOT_REACHED for t in data["targets"])
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary files
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


def test_a_run_stopped_part_way_keeps_what_it_measured_and_says_it_had_not_ended(
        tmp_path, monkeypatch):
    monkeypatch.setattr(run, "TARGETS", (TARGETS[0], TARGETS[3]))
    monkeypatch.setattr(run, "GPU_TARGETS", GPU_TARGETS[:1])
    measure, calls = run.measure_cases, []

    def stopped_at_the_second_target(*args, **kwargs):  # calls: the table's row, two targets
        calls.append(args[0])
        if len(calls) == 3:
            raise KeyboardInterrupt  # as a time limit or Ctrl-C stops a run
        return measure(*args, **kwargs)

    monkeypatch.setattr(run, "measure_cases", stopped_at_the_second_target)
    out = tmp_path / "results"
    out.mkdir()
    (out / "bench.json").write_text(json.dumps({"complete": True}))  # an earlier run's files
    (out / "bench.png").write_bytes(b"\x89PNG")
    with pytest.raises(KeyboardInterrupt):
        _run(["--quick", "--methods", "sdpa", "--lengths", "16", "--modes", "inference",
              "--output", str(out)])
    data = json.loads((out / "bench.json").read_text())
    assert data["complete"] is False
    assert [(r["method"], r["N"], r["median_ms"] > 0) for r in data["records"]] == [
        ("sdpa", 16, True)]
    first, second, gpu = data["targets"]
    assert first["name"] == TARGETS[0].name and first["value"] > 0
    assert [side["median_ms"] > 0 for side in first["sides"]] == [True, True]
    assert (second["name"], second["value"], second["note"]) == (TARGETS[3].name, None,
                                                                 run.NOT_REACHED)
    # A target this run does not measure says why, as in a finished run's files.
    assert (gpu["name"], gpu["note"]) == (GPU_TARGETS[0].name,
                                          "not run (GPU targets: --gpu-targets)")
    report = (out / "bench.md").read_text()
    assert ("**Unfinished: it holds 1 of the table's 1 configurations and 1 of the 2 targets this "
            "run measures; the run had not ended when it was written.**") in report
    assert not (out / "bench.png").exists()  # the earlier run's plot is gone; none is drawn yet
    assert f"| {TARGETS[3].name} | inference | — | >= 10 | {run.NOT_REACHED} |" in report
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary files


def test_an_output_that_cannot_be_a_directory_exits_2_naming_it_before_measuring(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "measure_cases", lambda *args, **kwargs: pytest.fail("measured"))
    in_the_way = tmp_path / f"file-{torch.randint(1000, ()).item()}"
    in_the_way.write_text("")
    for output in (in_the_way, in_the_way / "results"):
        assert main(["bench", "--quick", "--no-targets", "--output", str(output)]) == 2
        err = capsys.readouterr().err
        assert f"--output {output}" in err and "not a directory" in err
    assert in_the_way.read_text() == ""


def test_a_run_measures_in_this_process_starting_no_worker(tmp_path, monkeypatch):
    """CUDA initialises in the process that measures (a forked worker could not use it): no
    process is forked and no multiprocessing worker started, on the CPU as on CUDA, which take
    the same path."""
    import multiprocessing.process
    import os

    def refused(*args, **kwargs):
        raise AssertionError("bench started a process")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refused)
    monkeypatch.setattr(os, "fork", refused)
    monkeypatch.setattr(run, "TARGETS", TARGETS[:1])
    monkeypatch.setattr(run, "GPU_TARGETS", ())
    measured_in, measure = [], run.measure_cases
    monkeypatch.setattr(run, "measure_cases", lambda *a, **k: measured_in.append(os.getpid())
                        or measure(*a, **k))
    out = tmp_path / "results"
    assert _run(["--quick", "--methods", "efficient", "--lengths", "16", "--modes", "train",
                 "--output", str(out)]) == 0
    assert measured_in == [os.getpid()] * 2  # the table's row and the target's pair
    data = json.loads((out / "bench.json").read_text())
    assert data["records"][0]["median_ms"] > 0 and data["targets"][0]["value"] > 0


def test_files_written_before_the_first_measurement_replace_an_earlier_runs(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr(run, "TARGETS", TARGETS[:1])
    monkeypatch.setattr(run, "GPU_TARGETS", ())
    out = tmp_path / "results"
    out.mkdir()
    for name in run.OUTPUT_FILES:
        (out / name).write_text("an earlier run's")

    monkeypatch.setattr(run, "measure_cases", _stopped)
    with pytest.raises(KeyboardInterrupt):
        _run(["--quick", "--methods", "sdpa", "gfsa", "--lengths", "16", "32", "--output",
              str(out)])
    data = json.loads((out / "bench.json").read_text())
    assert data["complete"] is False and data["records"] == []
    assert [t["note"] for t in data["targets"]] == [run.NOT_REACHED]
    assert ("it holds 0 of the table's 8 configurations and 0 of the 1 targets this run "
            "measures") in (out / "bench.md").read_text()
    assert not (out / "bench.png").exists()


def test_a_run_of_targets_alone_stopped_counts_only_its_targets(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "TARGETS", TARGETS[:1])
    monkeypatch.setattr(run, "GPU_TARGETS", GPU_TARGETS[:2])

    monkeypatch.setattr(run, "measure_cases", _stopped)
    out = tmp_path / "results"
    with pytest.raises(KeyboardInterrupt):
        _run(["--quick", "--gpu-targets", "--output", str(out)])
    report = (out / "bench.md").read_text()
    assert ("**Unfinished: it holds 0 of the 2 targets this run measures; the run had not ended "
            "when it was written.**") in report
    notes = [t["note"] for t in json.loads((out / "bench.json").read_text())["targets"]]
    assert notes == ["not run (CPU targets)", run.NOT_REACHED, run.NOT_REACHED]
