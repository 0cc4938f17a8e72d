"""Shared test set-up: every test draws fresh random inputs from its own fixed seed; without
CUDA, Triton's kernels run in its interpreter."""

from __future__ import annotations

import os
import zlib

import pytest
import torch

if not torch.cuda.is_available():
    # Read when Triton is first imported (its own library's kernels are jitted then), so set
    # before any test imports it: the kernels' tests run on the CPU through the interpreter.
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    """One intra-op thread: the tests' small tensors gain nothing from more, and parallel test
    workers (``pytest -n``) would otherwise oversubscribe the cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _seed_per_test(request: pytest.FixtureRequest) -> None:
    """Seed torch from the test's id: reproducible, and different inputs for every test."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def compile_counter(monkeypatch):
    """Counts the graphs ``compile_model`` compiles (on ``aot_eager``), from a clean TorchDynamo
    cache."""
    from torch._dynamo.testing import CompileCounterWithBackend

    from filterformer.training import compilation

    torch._dynamo.reset()
    backend = CompileCounterWithBackend("aot_eager")
    monkeypatch.setattr(compilation, "BACKEND", backend)
    yield backend
    torch._dynamo.reset()
