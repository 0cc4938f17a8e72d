"""``scripts/gpu_profile.py`` run on the CPU at the bench's tiny sizes (``--device cpu --quick``):
a section for each distinct side of the chosen GPU targets, with times and kernels that add up,
and a message with exit 2 for each bad argument."""

from __future__ import annotations

import re

import pytest
import torch

from filterformer.bench import GPU_TARGETS
from filterformer.bench.run import quick_target

from ..scripts import load_script


def test_every_side_of_the_chosen_targets_is_profiled_once(tmp_path, capsys):
    chosen = [t for t in GPU_TARGETS if "BERT" in t.name or "D=128" in t.name]
    expected = {(side.method, side.N, side.mode)
                for target in map(quick_target, chosen)
                for side in (target.numerator, target.denominator)}
    assert len(expected) == 6  # softmax, GFSA, SAMSA and AGF BERT steps; two modules at D=128
    report = tmp_path / "profile.md"
    assert load_script("gpu_profile").main([
        "--device", "cpu", "--quick", "--match", "BERT|D=128", "--top", "3", "--steps", "2",
        "--output", str(report)]) == 0
    text = report.read_text()
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in text.splitlines() if line] == [line for line in printed if line]
    headings = re.findall(r"^## (\S+), N=(\d+), (\w+):", text, flags=re.MULTILINE)
    assert sorted((m, int(n), mode) for m, n, mode in headings) == sorted(expected)
    for section in text.split("\n## ")[1:]:
        names = re.findall(r"^- side of: (.+)$", section, flags=re.MULTILINE)
        assert names and all(name in {t.name for t in chosen} for name in names)
        wall, profiled, ratio = map(float, re.search(
            r"wall ([\d.]+) ms a step; CPU \(operators' self time\) ([\d.]+) ms a step "
            r"\(wall / profiled ([\d.]+)\)", section).groups())
        assert wall > 0 and profiled > 0 and ratio == pytest.approx(wall / profiled, abs=0.01)
        rows = re.findall(r"^\| ([\d.]+) \| (\d+)% \| ([\d.]+) \| `", section, flags=re.MULTILINE)
        assert 1 <= len(rows) <= 3
        times = [float(ms) for ms, _, _ in rows]
        assert times == sorted(times, reverse=True) and sum(times) <= profiled * 1.001
        for ms, share in ((float(ms), int(share)) for ms, share, _ in rows):
            # Each printed to 3 decimals: the share of the unrounded times may differ by that.
            slack = 0.5 + 100 * 0.0005 * (1 / profiled + ms / profiled**2)
            assert abs(share - 100 * ms / profiled) <= slack + 1e-9


@pytest.mark.parametrize(("args", "message"), [
    (["--match", "("], "--match '\\(' is not a regular expression"),
    (["--match", "no target is called this"], "no GPU target matches"),
    (["--match", "BERT", "--skip", "BERT"], "no GPU target matches"),
    (["--top", "0"], "--top and --steps must be at least 1"),
])
def test_a_bad_argument_is_named_with_exit_2(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        load_script("gpu_profile").main(["--device", "cpu", "--quick", *args])
    assert exit_.value.code == 2
    assert re.search(message, capsys.readouterr().err)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message without CUDA")
def test_cuda_without_a_device_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        load_script("gpu_profile").main(["--match", "BERT"])
    assert exit_.value.code == 2
    assert "--device cuda: no CUDA device" in capsys.readouterr().err


def test_generation_is_left_out_unless_asked():
    script = load_script("gpu_profile")
    default = {case.method for case, _, _ in script.sides("", script.DEFAULT_SKIP, quick=True)}
    everything = {case.method for case, _, _ in script.sides("", "", quick=True)}
    assert not any(m.startswith("generate") for m in default)
    assert {m for m in everything - default} == {"generate-softmax", "generate-gfsa"}


def test_a_run_stopped_part_way_keeps_the_sides_it_measured(tmp_path, monkeypatch):
    script = load_script("gpu_profile")
    real, calls = script.profile_step, []

    def stopped_at_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # what a time limit's signal would end it with
        return real(*args, **kwargs)

    monkeypatch.setattr(script, "profile_step", stopped_at_the_second)
    report = tmp_path / "profile.md"
    with pytest.raises(KeyboardInterrupt):
        script.main(["--device", "cpu", "--quick", "--match", "BERT", "--steps", "1",
                     "--output", str(report)])
    text = report.read_text()
    assert text.startswith("# Where the GPU targets' steps spend their time")
    assert len(re.findall(r"^## ", text, flags=re.MULTILINE)) == 1
    assert re.search(r"wall [\d.]+ ms a step", text)
