"""``scripts/gpu_check.sh``: refused, creating nothing, without CUDA; with a stand-in for Python
that answers each step, its summary holds the machine, every step's exit status, the CUDA tier's
result, the GPU targets' report (that of a run its time limit stopped) and the quick bench's."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.sh"

#: A stand-in for Python on a GPU machine: CUDA is there, the tier fails one test, the GPU
#: targets' run is stopped by its time limit (exit 124) after writing part of its report.
FAKE_PYTHON = r"""#!/usr/bin/env bash
last=${@: -1}
case "$*" in
    "-c "*) exit 0 ;;
    "-") cat > /dev/null; echo "- GPU: GPU_NAME, 80 GiB, 132 SMs"; exit 0 ;;
    "-m pytest -m cuda tests/cuda/test_triton_cuda.py tests/cuda/"*" -v "*)  # the kernels first
        for i in $(seq TIER_PASSED); do
            echo "tests/cuda/test_triton_cuda.py::test_kernel[$i] PASSED [  1%]"
        done
        echo "tests/cuda/test_triton_cuda.py::test_kernel[x-1] FAILED             [ 50%]"
        echo "tests/cuda/test_models_cuda.py::test_model SKIPPED (no reason) [ 60%]"
        if [ "$TIER" = ended ]; then echo "=== 1 failed, TIER_PASSED passed, 1 skipped in 9.50s ==="
            exit 1; fi
        printf 'tests/cuda/test_patching_cuda.py::test_slow[bert] '  # running when stopped
        exit 124 ;;  # stopped by its limit: no count of pytest's
    *" bench --device cuda --quick --output "*)
        mkdir -p "$last"
        printf '# filterformer bench — GPU_NAME\n\n## Targets — GPU_NAME\n\n| quick row |\n' \
            > "$last/bench.md"
        exit 0 ;;
    *" bench --device cuda --gpu-targets --output "*)
        mkdir -p "$last"
        printf '# filterformer bench — GPU_NAME\n\n**Unfinished: 3 of 19 targets.**\n\n' \
            > "$last/bench.md"
        printf '## Targets — GPU_NAME\n\n| gpu row |\n' >> "$last/bench.md"
        exit 124 ;;
    "-m filterformer.cli train "*|"-m filterformer.cli compare "*) exit 0 ;;
esac
echo "unexpected: $*" >&2
exit 99
"""


def _run(out: Path, python: str, tier: str = "ended") -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), str(out)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHON": python, "TIER": tier})


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the check would run")
def test_without_cuda_it_exits_2_saying_so_and_creates_nothing(tmp_path):
    out = tmp_path / "gpu-check"
    done = _run(out, sys.executable)  # this machine's torch: no CUDA device
    assert done.returncode == 2
    assert "no CUDA device (torch.cuda.is_available() is False)" in done.stderr
    assert not out.exists()


@pytest.mark.parametrize("tier", ["ended", "stopped"])
def test_its_summary_holds_the_machine_each_step_and_both_reports(tmp_path, tier):
    gpu, passed = f"Test GPU {random.randint(100, 999)}", random.randint(10, 200)
    python = tmp_path / "python"
    python.write_text(FAKE_PYTHON.replace("GPU_NAME", gpu).replace("TIER_PASSED", str(passed)))
    python.chmod(0o755)
    out = tmp_path / "gpu-check"
    done = _run(out, str(python), tier)
    assert done.returncode == 1, done.stdout + done.stderr  # a step failed
    summary = (out / "summary.md").read_text()
    assert f"- GPU: {gpu}, 80 GiB, 132 SMs" in summary
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1] for line in summary.splitlines()
            if line.startswith("| ") and line.endswith(" s |")}
    assert rows == {"cuda-tier": "1" if tier == "ended" else "124 (time limit)",
                    "bench-quick": "0", "train": "0", "compare": "0",
                    "bench-gpu-targets": "124 (time limit)"}
    # Counted test by test, so a tier its limit stopped still says what it ran.
    assert f"    {passed} PASSED, 1 FAILED, 0 ERROR, 1 SKIPPED (test by test, as logged)\n" in (
        summary)
    assert ("1 failed" in summary) is (tier == "ended")  # pytest's own count, where it ended
    assert "    tests/cuda/test_triton_cuda.py::test_kernel[x-1] FAILED\n" in summary
    stopped = "    stopped by the limit during tests/cuda/test_patching_cuda.py::test_slow[bert]\n"
    assert (stopped in summary) is (tier == "stopped")
    targets = summary.split("## GPU targets")[1].split("## Quick bench")[0]
    assert f"\n### filterformer bench — {gpu}" in targets and "**Unfinished: 3 of 19" in targets
    assert f"\n#### Targets — {gpu}" in targets and "| gpu row |" in targets
    quick = summary.split("## Quick bench")[1]
    assert f"\n#### Targets — {gpu}" in quick and "| quick row |" in quick
    assert sorted(p.name for p in out.iterdir() if p.suffix == ".row") == []
