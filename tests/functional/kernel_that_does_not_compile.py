"""Triton kernels that Triton's compiler refuses, for ``scripts/compile_kernels.py`` to report:
one the interpreter refuses too, and one it runs (the case the script exists to catch)."""

from __future__ import annotations

import triton
import triton.language as tl

#: A plain global: the interpreter reads it, the compiler does not (only constexpr globals).
LOWEST = -1.0e30


@triton.jit
def exp_of_bfloat16(X, OUT, N, BLOCK: tl.constexpr):
    """``tl.exp`` of a bfloat16 tensor (the compiler takes float32 and float64 only)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < N
    tl.store(OUT + offs, tl.exp(tl.load(X + offs, mask=inside)), mask=inside)


@triton.jit
def reads_a_global(X, OUT, N, BLOCK: tl.constexpr):
    """Reads :data:`LOWEST`, as AGF's kernels once did: their tests passed in the interpreter and
    the kernels failed to compile on the first GPU run."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < N
    tl.store(OUT + offs, tl.maximum(tl.load(X + offs, mask=inside), LOWEST), mask=inside)
