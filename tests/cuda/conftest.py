"""The CUDA tier: every test here is marked ``cuda``, runs on :data:`~.device.DEVICE` and is
skipped, with its reason in the summary, on a machine without CUDA."""

from __future__ import annotations

import pytest
import torch

from .device import DEVICE, NO_DEVICE_REASON, device_available


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every test marked ``cuda`` where there is no CUDA device, saying so."""
    if device_available():
        return
    skip = pytest.mark.skip(reason=NO_DEVICE_REASON)
    for item in items:
        if item.get_closest_marker("cuda") is not None:
            item.add_marker(skip)


@pytest.fixture
def cuda_device() -> torch.device:
    """The device under test."""
    return DEVICE


@pytest.fixture(autouse=True)
def _no_tf32():
    """Full float32 matrix products and convolutions: TF32 keeps 10 mantissa bits, far from the
    1e-4 the comparisons with float64 allow. The flags are restored afterwards."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn
