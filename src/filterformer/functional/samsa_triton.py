"""SAMSA's evaluation in the hard mode as one Triton kernel: attention to the sampled tokens,
gathered where they live.

In evaluation the hard mode attends every query to the k highest-scored candidates (METHODS.md
§4): tokens, or the layer's support tokens. The eager path gathers the chosen keys and values
into a ``(B, h, k, 2d)`` tensor (three gathers, a concatenation and a selection) before one SDPA
call. The kernel reads each chosen row straight from the tokens' keys and values or from the
support tokens, inside a FlashAttention-style loop over the k candidates: one launch after the
top-k. It computes no gradient; the module uses it in evaluation only (see
:func:`samsa_triton_applies`).
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from .triton_support import KernelSwitch, block_width, dot_kind, launch

__all__ = ["SAMSA_TRITON_MAX_HEAD_DIM", "SWITCH", "samsa_sampled_attention",
           "samsa_triton_applies"]

#: The widest head (d and d_v) the kernel takes: the widths compiled and checked on a GPU.
SAMSA_TRITON_MAX_HEAD_DIM = 64
SWITCH = KernelSwitch("SAMSA")


@functools.cache
def _kernel():
    from ._samsa_triton_kernels import samsa_sampled_attention as kernel

    return kernel


def samsa_triton_applies(q: Tensor, *tensors: Tensor) -> bool:
    """Whether the module's evaluation runs :func:`samsa_sampled_attention`: where the kernels'
    switch allows, no gradient is wanted (``q`` and ``tensors`` need none, or grad mode is
    off) and heads are at most :data:`SAMSA_TRITON_MAX_HEAD_DIM` wide."""
    wants_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (q, *tensors))
    return (
        not wants_grad
        and max(q.shape[-1], *(t.shape[-1] for t in tensors if t.dim() == 4)) <=
        SAMSA_TRITON_MAX_HEAD_DIM
        and SWITCH.allows(q)
    )


def samsa_sampled_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    support_keys: Tensor,
    support_values: Tensor,
    index: Tensor,
    scale: float,
) -> Tensor:
    """Softmax attention from every query to the candidates at ``index``.

    Candidate ``i < N`` is token i (its row of ``k`` and ``v``), candidate ``N + j`` is support
    token j. Equals ``softmax(q Kᵀ·scale) V`` with K and V those rows gathered.

    Args:
        q: ``(B, h, N, d)`` queries.
        k: ``(B, h, N, d)`` the tokens' keys.
        v: ``(B, h, N, d_v)`` the tokens' values.
        support_keys: ``(h, M, d)`` support keys, in any floating dtype: read in float32 and
            rounded to the products' precision inside the kernel, as the tokens' rows are, so
            float32 parameters need no cast before the call.
        support_values: ``(h, M, d_v)`` support values, likewise.
        index: ``(B, h, S)`` integer candidates in ``[0, N + M)``, S ≥ 1 (not checked: that
            would wait for the GPU; the module passes a top-k's indices).
        scale: the logits' scale.

    Returns:
        ``(B, h, N, d_v)`` in q's dtype (its memory laid out ``(B, N, h, d_v)``).
    """
    batch, heads, length, dim = q.shape
    dim_v = v.shape[-1]
    if k.shape != q.shape or v.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"k must have q's shape {tuple(q.shape)} and v its (B, h, N); got "
                         f"{tuple(k.shape)} and {tuple(v.shape)}")
    if index.dim() != 3 or index.shape[:2] != (batch, heads) or index.shape[-1] < 1:
        raise ValueError(f"index must have shape (B, h, S) = ({batch}, {heads}, S) with S >= 1; "
                         f"got {tuple(index.shape)}")
    if (support_keys.dim() != 3 or support_values.dim() != 3
            or support_keys.shape[0] != heads or support_values.shape[0] != heads
            or support_keys.shape[-1] != dim or support_values.shape[-1] != dim_v
            or support_keys.shape[1] != support_values.shape[1]):
        raise ValueError(
            f"support_keys and support_values must have shapes (h, M, d) = ({heads}, M, {dim}) "
            f"and (h, M, d_v) = ({heads}, M, {dim_v}); got {tuple(support_keys.shape)} and "
            f"{tuple(support_values.shape)}"
        )
    if max(dim, dim_v) > SAMSA_TRITON_MAX_HEAD_DIM:
        raise ValueError(f"head widths above {SAMSA_TRITON_MAX_HEAD_DIM} are not supported; got "
                         f"d={dim}, d_v={dim_v}")
    q, k, v, support_keys, support_values, index = (
        x if x.stride(-1) == 1 else x.contiguous()
        for x in (q, k, v, support_keys, support_values, index)
    )
    out = torch.empty(batch, length, heads, dim_v, dtype=q.dtype, device=q.device).transpose(1, 2)
    if length == 0:
        return out
    block_d, block_v = block_width(dim), block_width(dim_v)
    block_m = 64 if max(block_d, block_v) <= 64 else 32
    grid = (batch * heads, -(-length // block_m))
    products = q.dtype if q.dtype in (torch.bfloat16, torch.float16) else None
    launch(
        _kernel(), grid,
        q, k, v, support_keys, support_values, index, out,
        heads, length, index.shape[-1], dim, dim_v, float(scale),
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), support_keys.stride(0), support_keys.stride(1),
        support_values.stride(0), support_values.stride(1), index.stride(0), index.stride(1),
        out.stride(0), out.stride(1), out.stride(2),
        DOT_KIND=dot_kind(products), BLOCK_M=block_m, BLOCK_S=64, BLOCK_D=block_d,
        BLOCK_DV=block_v,
    )
    return out
