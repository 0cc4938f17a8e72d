"""One intra-op thread for these tests: their tensors are tiny, and on a machine whose cores are
shared, several threads per process slow them down many times over."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
