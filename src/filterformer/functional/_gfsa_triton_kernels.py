"""The Triton kernels of :mod:`filterformer.functional.gfsa_triton` (imported on first use)."""

from __future__ import annotations

import triton
import triton.language as tl

from ._triton_primitives import head_block, tile


@triton.jit
def _weights(W0, W1, WK, hh, first_factor, last_factor):
    """A head's weights of V, ĀV and the last power: ``w0``, ``w1 + first_factor·wK`` and
    ``last_factor·wK``, in float32."""
    w0 = tl.load(W0 + hh).to(tl.float32)
    wk = tl.load(WK + hh).to(tl.float32)
    return w0, tl.load(W1 + hh).to(tl.float32) + first_factor * wk, last_factor * wk


@triton.jit
def _store(BASE, rows, stride_n, offs, value, valid):
    tl.store(BASE + rows[:, None].to(tl.int64) * stride_n + offs[None, :],
             value.to(BASE.dtype.element_ty), mask=valid)


@triton.jit
def gfsa_combine_forward(
    V, Y1, Y2, W0, W1, WK, OUT,
    H, N, D, first_factor, last_factor,
    svb, svh, svn, s1b, s1h, s1n, s2b, s2h, s2n, sob, soh, son,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """Per (sample, head) and block of tokens: ``w0·V + a·Y1 + c·Y2`` in float32, stored in
    OUT's dtype."""
    b, hh, rows = head_block(H, BLOCK_N)
    offs = tl.arange(0, BLOCK_D)
    valid = (rows < N)[:, None] & (offs < D)[None, :]
    w0, a, c = _weights(W0, W1, WK, hh, first_factor, last_factor)
    out = (w0 * tile(V + b * svb + hh * svh, rows, svn, offs, valid)
           + a * tile(Y1 + b * s1b + hh * s1h, rows, s1n, offs, valid)
           + c * tile(Y2 + b * s2b + hh * s2h, rows, s2n, offs, valid))
    _store(OUT + b * sob + hh * soh, rows, son, offs, out, valid)


@triton.jit
def gfsa_combine_backward(
    V, Y1, Y2, W0, W1, WK, G, DV, DY1, DY2, PARTIAL,
    H, N, D, first_factor, last_factor, blocks, partial_stride,
    svb, svh, svn, s1b, s1h, s1n, s2b, s2h, s2n, sgb, sgh, sgn,
    sdvb, sdvh, sdvn, sd1b, sd1h, sd1n, sd2b, sd2h, sd2n,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    """Per (sample, head) and block of tokens: the terms' gradients ``w0·G``, ``a·G`` and
    ``c·G``, and the block's share of the coefficients' gradients (``Σ G⊙V``, ``Σ G⊙Y1`` and
    ``first_factor·Σ G⊙Y1 + last_factor·Σ G⊙Y2``), stored at PARTIAL's three planes."""
    b, hh, rows = head_block(H, BLOCK_N)
    block = tl.program_id(1)
    offs = tl.arange(0, BLOCK_D)
    valid = (rows < N)[:, None] & (offs < D)[None, :]
    w0, a, c = _weights(W0, W1, WK, hh, first_factor, last_factor)
    g = tile(G + b * sgb + hh * sgh, rows, sgn, offs, valid)
    _store(DV + b * sdvb + hh * sdvh, rows, sdvn, offs, w0 * g, valid)
    _store(DY1 + b * sd1b + hh * sd1h, rows, sd1n, offs, a * g, valid)
    _store(DY2 + b * sd2b + hh * sd2h, rows, sd2n, offs, c * g, valid)
    to_v = tl.sum(tl.sum(g * tile(V + b * svb + hh * svh, rows, svn, offs, valid), axis=1), axis=0)
    to_first = tl.sum(tl.sum(g * tile(Y1 + b * s1b + hh * s1h, rows, s1n, offs, valid), axis=1),
                      axis=0)
    to_last = tl.sum(tl.sum(g * tile(Y2 + b * s2b + hh * s2h, rows, s2n, offs, valid), axis=1),
                     axis=0)
    at = PARTIAL + (b * H + hh) * blocks + block
    tl.store(at, to_v)
    tl.store(at + partial_stride, to_first)
    tl.store(at + 2 * partial_stride, first_factor * to_first + last_factor * to_last)
