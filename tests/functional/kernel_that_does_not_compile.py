"""A Triton kernel that Triton's interpreter runs but its compiler refuses (``tl.exp`` of a
bfloat16 tensor): the case ``scripts/compile_kernels.py`` exists to catch."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def exp_of_bfloat16(X, OUT, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = offs < N
    tl.store(OUT + offs, tl.exp(tl.load(X + offs, mask=inside)), mask=inside)
