"""How the CPU heap treats freed tensors while steps are timed.

glibc's ``malloc`` hands every allocation of 32 MiB or more (one ``(2, 4, 16384, 64)`` float32
tensor is exactly that) to a fresh ``mmap`` and unmaps it on free, so each such tensor pays a
page fault per 4 KiB page on first touch, every step. For methods that make many large
temporaries this dominates at long N (AGF's training step at N=16384: about 800k page faults,
over half its time) and hides how the algorithm scales. PyTorch's CUDA allocator caches freed
blocks; on the CPU a caching ``malloc`` (jemalloc, tcmalloc) or these glibc settings do the same.

- ``reuse`` (default): after the memory step, glibc serves every allocation from its heap and
  never trims it (``mallopt(M_MMAP_MAX, 0)``, ``mallopt(M_TRIM_THRESHOLD, 2 GiB − 1)``), so
  timed steps reuse freed memory. The same effect for your own runs:
  ``MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=2147483647``.
- ``system``: glibc's defaults throughout.

The memory step always runs under the defaults: its peak is not inflated by a heap that never
shrinks.
"""

from __future__ import annotations

import ctypes

__all__ = ["ALLOCATORS", "reuse_freed_memory"]

#: Timed steps' heap policy on the CPU.
ALLOCATORS = ("reuse", "system")

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_INT_MAX = 2**31 - 1


def reuse_freed_memory() -> bool:
    """Make glibc keep freed memory for reuse in this process; False where it cannot (not glibc)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(_M_MMAP_MAX, 0) == 1 and mallopt(_M_TRIM_THRESHOLD, _INT_MAX) == 1
