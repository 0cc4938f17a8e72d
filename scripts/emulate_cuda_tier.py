"""Run the CUDA tier (``tests/cuda``) on a machine without a GPU, CUDA's path emulated: the tier's
device is the CPU, and every method takes its Triton kernels as it would on CUDA, run in
Triton's interpreter.

    python scripts/emulate_cuda_tier.py [PYTEST_ARGS ...]

pytest runs with ``PYTEST_ARGS`` and ``-m cuda`` (the tier's tests only), on ``tests/cuda`` where
no argument names a file or folder (``tests/cuda/test_triton_cuda.py -k samsa``, say).

Run from the repository root (the tier's paths are relative to it; the script puts the root on the
path for ``tests``, and ``PYTHONPATH=src`` serves where the package is not installed). It runs in
this one process: pytest-xdist's workers would not inherit the emulation. The exit status is
pytest's.

What it checks: the kernel paths the GPU takes and the tier's own code, against the tier's float64
references, where there is no GPU. What it cannot: anything of the GPU itself (the kernels
compiled, cuDNN's attention, half-precision products on tensor cores, timings). Three tests
cannot hold here and fail:

- ``test_samsa_float32_supports_equal_supports_cast_before_the_call`` asserts bit equality of
  float32 support rows rounded inside the kernel with rows cast by torch beforehand, and the
  interpreter rounds float32 to bfloat16 otherwise than torch does;
- ``test_generation_never_asks_cudnn_for_attention`` (two cases) checks the SDPA backends that
  decoding chooses by its tensors' device type, which stays the CPU's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # read when Triton is first imported
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tier's package, ``tests``

import pytest
import torch
from tests.cuda import conftest as tier_conftest
from tests.cuda import device as tier_device

from filterformer.functional import triton_support

#: The tier's folder, run where no argument names a path.
TIER = "tests/cuda"


def emulate() -> None:
    """Make the tier's device the CPU, available, and the CPU's tensors take the kernels."""
    cpu = torch.device("cpu")
    for module in (tier_device, tier_conftest):
        module.DEVICE = cpu
        module.device_available = lambda: True
    triton_support.on_kernel_device = lambda x: True


def pytest_args(argv: list[str]) -> list[str]:
    """``argv`` with ``-m cuda``, and the tier's folder where no argument names a path."""
    names_a_path = any(os.path.exists(arg.split("::")[0]) for arg in argv
                       if not arg.startswith("-"))
    return [*argv, "-m", "cuda", *(() if names_a_path else (TIER,))]


def main(argv: list[str]) -> int:
    emulate()
    return int(pytest.main(pytest_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
