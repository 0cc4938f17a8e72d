"""Running filterformer's Triton kernels on the CPU, in Triton's interpreter.

Tests that import this skip where Triton is missing (a CPU build of PyTorch without the
``triton`` package: ``scripts/setup.sh --dev`` installs it) and where CUDA is present (there the
kernels are compiled once for the GPU, and the CUDA tier tests them).
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import _disable_current_modes

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


def record_launches(monkeypatch, *modules) -> list[str]:
    """Every launch of the kernel ``modules`` (each with its ``launch``), by kernel name, in
    order; each runs outside any dispatch mode (the interpreter's own operations are not a
    GPU's)."""
    launches: list[str] = []
    for module in modules:

        def recorded(kernel, *args, original=module.launch, **kwargs):
            launches.append(getattr(kernel, "__name__", str(kernel)))
            with _disable_current_modes():
                return original(kernel, *args, **kwargs)

        monkeypatch.setattr(module, "launch", recorded)
    return launches


def falls_back(switch, compute):
    """``compute()``, which must warn that ``switch``'s kernels failed and leave them off for
    the rest of the process; its result."""
    with pytest.warns(RuntimeWarning, match=f"{switch.method}'s Triton kernels failed"):
        result = compute()
    assert switch.failed
    return result


def fail_to_launch(*args, **kwargs):
    """A kernel (or a kernels' loader) that fails as Triton does when it cannot compile."""
    raise FakeTritonError("out of resources")
