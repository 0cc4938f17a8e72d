"""Running filterformer's Triton kernels on the CPU, in Triton's interpreter.

Tests that import this skip where Triton is missing (a CPU build of PyTorch without the
``triton`` package: ``scripts/setup.sh --dev`` installs it) and where CUDA is present (there the
kernels are compiled once for the GPU, and the CUDA tier tests them).
"""

from __future__ import annotations

import pytest
import torch

from filterformer.functional.triton_support import interpreted, triton_available

#: Marks a test module as one for Triton's interpreter (``tests/conftest.py`` sets
#: ``TRITON_INTERPRET=1`` where there is no CUDA, before Triton is imported).
interpreter_only = [
    pytest.mark.skipif(not triton_available(), reason="Triton is not installed"),
    pytest.mark.skipif(torch.cuda.is_available(), reason="the CUDA tier tests the kernels here"),
    pytest.mark.skipif(not interpreted(), reason="TRITON_INTERPRET is not 1"),
]


class FakeTritonError(RuntimeError):
    """An error as Triton's compiler raises them (its module is Triton's)."""


FakeTritonError.__module__ = "triton.compiler.errors"


def allow_kernels(monkeypatch, switch):
    """Let ``switch``'s kernels run on the CPU's tensors (in the interpreter) until they fail,
    from a clean failure record; returns ``switch``."""
    monkeypatch.setattr(switch, "failed", False)
    monkeypatch.setattr(type(switch), "allows", lambda self, x: not self.failed)
    return switch


def fail_to_launch(*args, **kwargs):
    """A kernel (or a kernels' loader) that fails as Triton does when it cannot compile."""
    raise FakeTritonError("out of resources")
