"""Record the largest tensor storage any operator allocates, forward and backward."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LargestAllocation(TorchDispatchMode):
    """Inside the mode, ``largest`` is the most elements any operator's output storage holds.

    Storage, not ``numel``: a broadcast view (``expand``) allocates nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0
        self.op = None
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.calls += 1
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor):
                elements = value.untyped_storage().nbytes() // value.element_size()
                if elements > self.largest:
                    self.largest, self.op = elements, func
        return out


def assert_no_quadratic_allocation(module: torch.nn.Module, dim: int) -> None:
    """One training step of ``module`` at N = 4096 and 8192: no operator allocates N×N elements,
    and the largest allocation at most doubles when N does."""
    largest = {}
    for length in (4096, 8192):
        x = torch.randn(1, length, dim, requires_grad=True)
        with LargestAllocation() as recorder:
            module(x).square().mean().backward()
        assert recorder.largest < length * length, recorder.op
        largest[length] = recorder.largest
    assert largest[8192] <= 2 * largest[4096]
