"""Triton helpers shared by filterformer's kernels (imported with them, on first use)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def dot(a, b, DOT_KIND: tl.constexpr):
    """``a @ b`` accumulated in float32, its operands in the precision ``DOT_KIND`` names (see
    :func:`~filterformer.functional.triton_support.dot_kind`)."""
    if DOT_KIND == 1:
        out = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    elif DOT_KIND == 2:
        out = tl.dot(a.to(tl.float16), b.to(tl.float16))
    elif DOT_KIND == 3:
        out = tl.dot(a.to(tl.bfloat16).to(tl.float32), b.to(tl.bfloat16).to(tl.float32),
                     input_precision="ieee")
    elif DOT_KIND == 4:
        out = tl.dot(a.to(tl.float16).to(tl.float32), b.to(tl.float16).to(tl.float32),
                     input_precision="ieee")
    else:
        out = tl.dot(a, b, input_precision="ieee")
    return out


@triton.jit
def tile(base, rows, stride_n, offs, valid):
    """A ``(rows, width)`` tile in float32, 0 where not ``valid``."""
    ptrs = base + rows[:, None].to(tl.int64) * stride_n + offs[None, :]
    return tl.load(ptrs, mask=valid, other=0.0).to(tl.float32)


@triton.jit
def head_block(H, BLOCK: tl.constexpr):
    """A program over ``(B·h, blocks)``: its sample b and head hh (int64, for offsets) and its
    block of BLOCK rows."""
    bh = tl.program_id(0)
    rows = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    return (bh // H).to(tl.int64), (bh % H).to(tl.int64), rows
