"""GFSA's combination of terms as Triton kernels: one launch forward, one backward.

Around its two attention passes, GFSA's filter is ``w0·V + (w1 + (2−K)·wK)·ĀV + (K−1)·wK·Ā²V``
(or ``w0·V + w1·ĀV + wK·Ā^K V`` with the exact power). In eager operations that is four launches
forward (the weights, then three elementwise passes), and its backward, through autograd, about
fifteen more: each term's gradient and each coefficient's, reduced over the tokens one operation at
a time (plus casts of the coefficients under autocast). Where a GFSA step waits on its host (short
sequences on a GPU) every launch counts. Here the forward is one pass over the three terms and the
backward one pass that writes the three terms' gradients and each block's share of the
coefficients' gradients, summed by one reduction after it.

Arithmetic is float32 inside the kernels (half-precision terms are read, combined and rounded once,
where the eager path rounds after each operation); results take the eager path's dtypes: the terms'
promotion for the output, each input's own for its gradient. The kernels run on CUDA, and on the
CPU under ``TRITON_INTERPRET=1`` (the tests); see :func:`gfsa_triton_applies`. A ``create_graph``
backward goes through the eager combination, whose gradients have a graph.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from .triton_support import (
    KERNEL_DTYPES,
    KernelSwitch,
    block_width,
    eager_gradients,
    launch,
    leading_strides,
    unit_last_stride,
)

__all__ = ["GFSA_TRITON_MAX_HEAD_DIM", "SWITCH", "gfsa_triton_applies", "gfsa_triton_combine"]

#: The widest head the kernels take (a block of tokens holds every feature of its rows).
GFSA_TRITON_MAX_HEAD_DIM = 256
#: Elements a program's block holds: rows of tokens times the head's (padded) width.
_BLOCK_ELEMENTS = 4096
SWITCH = KernelSwitch("GFSA")


@functools.cache
def _kernels():
    from ._gfsa_triton_kernels import gfsa_combine_backward, gfsa_combine_forward

    return gfsa_combine_forward, gfsa_combine_backward


def gfsa_triton_applies(values: Tensor, first: Tensor, last: Tensor, *coefficients: Tensor
                        ) -> bool:
    """Whether :func:`~filterformer.functional.gfsa_combine` runs :func:`gfsa_triton_combine`:
    where the kernels' switch allows each term
    (:meth:`~filterformer.functional.triton_support.KernelSwitch.allows`: CUDA, float32 or half
    precision), the three terms are of one ``(B, h, N, d)`` shape with heads at most
    :data:`GFSA_TRITON_MAX_HEAD_DIM` wide, and the ``coefficients`` are floating tensors on
    their device."""
    return (
        SWITCH.allows(values)
        and values.dim() == 4
        and values.shape == first.shape == last.shape
        and values.shape[-1] <= GFSA_TRITON_MAX_HEAD_DIM
        and all(t.device == values.device and t.dtype in KERNEL_DTYPES for t in (first, last))
        and all(w.device == values.device and w.is_floating_point() for w in coefficients)
    )


def _layout(x: Tensor) -> tuple[int, int, tuple[int, int]]:
    """``(heads, tokens, grid)`` of a ``(B, h, N, d)`` term, and the kernels' block sizes."""
    batch, heads, length, dim = x.shape
    block_d = block_width(dim)
    block_n = max(1, _BLOCK_ELEMENTS // block_d)
    return block_n, block_d, (batch * heads, -(-length // block_n))


class _Combination(torch.autograd.Function):
    @staticmethod
    def forward(ctx, values, first, last, w0, w1, wK, first_factor, last_factor, dtype):
        forward_kernel, _ = _kernels()
        ctx.save_for_backward(values, first, last, w0, w1, wK)
        ctx.factors = (first_factor, last_factor)
        values, first, last = (unit_last_stride(t) for t in (values, first, last))
        w0, w1, wK = (w.detach().contiguous() for w in (w0, w1, wK))
        batch, heads, length, dim = values.shape
        # (B, N, h, d) memory seen as (B, h, N, d): merging the heads afterwards is a view.
        out = torch.empty(batch, length, heads, dim, dtype=dtype,
                          device=values.device).transpose(1, 2)
        block_n, block_d, grid = _layout(values)
        if values.numel():
            launch(
                forward_kernel, grid,
                values, first, last, w0, w1, wK, out,
                heads, length, dim, first_factor, last_factor,
                *(stride for t in (values, first, last, out) for stride in leading_strides(t)),
                BLOCK_N=block_n, BLOCK_D=block_d,
            )
        return out

    @staticmethod
    def backward(ctx, grad_out):
        return SWITCH.run_backward(lambda: _kernel_backward(ctx, grad_out),
                                   lambda: _eager_backward(ctx, grad_out))


def _kernel_backward(ctx, grad_out):
    _, backward_kernel = _kernels()
    saved = ctx.saved_tensors
    values, first, last = (unit_last_stride(t) for t in saved[:3])
    w0, w1, wK = (w.detach().contiguous() for w in saved[3:])
    first_factor, last_factor = ctx.factors
    grad_out = unit_last_stride(grad_out)
    batch, heads, length, dim = values.shape
    block_n, block_d, grid = _layout(values)
    blocks = grid[1]
    grads = [torch.empty_like(t) for t in (values, first, last)]
    partial = torch.empty(3, batch, heads, blocks, dtype=torch.float32, device=values.device)
    if values.numel():
        launch(
            backward_kernel, grid,
            values, first, last, w0, w1, wK, grad_out, *grads, partial,
            heads, length, dim, first_factor, last_factor, blocks, partial.stride(0),
            *(stride for t in (values, first, last, grad_out, *grads)
              for stride in leading_strides(t)),
            BLOCK_N=block_n, BLOCK_D=block_d,
        )
    coefficients = partial.sum(dim=(1, 3))
    grad_weights = [g.to(w.dtype) for g, w in zip(coefficients, saved[3:], strict=True)]
    return *grads, *grad_weights, None, None, None


def _eager_backward(ctx, grad_out):
    """The gradients through the eager combination (``create_graph``, a kernel failure)."""
    from .gfsa import mix_terms_eagerly

    def combine(*inputs):
        return mix_terms_eagerly(*inputs, *ctx.factors, grad_out.dtype)

    return *eager_gradients(ctx.saved_tensors, combine, grad_out), None, None, None


def gfsa_triton_combine(
    values: Tensor, first: Tensor, last: Tensor, w0: Tensor, w1: Tensor, wK: Tensor,
    first_factor: float, last_factor: float, dtype: torch.dtype,
) -> Tensor:
    """``w0·V + (w1 + first_factor·wK)·first + last_factor·wK·last`` per head, by the kernels.

    Args:
        values, first, last: ``(B, h, N, d)`` V, ``ĀV`` and the last power, each with its own
            strides (a unit last stride is made where missing).
        w0, w1, wK: ``(h,)`` coefficients, any floating dtype (read in float32).
        first_factor, last_factor: ``2 − K`` and ``K − 1`` for the Taylor form, 0 and 1 for the
            exact power.
        dtype: the output's dtype (the terms' promotion).

    Returns:
        ``(B, h, N, d)`` in ``dtype``, its memory laid out ``(B, N, h, d)``.
    """
    return _Combination.apply(values, first, last, w0, w1, wK, float(first_factor),
                              float(last_factor), dtype)
