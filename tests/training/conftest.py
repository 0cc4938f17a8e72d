"""Training tests run torch on one thread: the machines they run on are small and shared, and
an oversubscribed intra-op thread pool slows tiny models down a hundredfold."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="package")
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
