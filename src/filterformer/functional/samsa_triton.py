"""SAMSA's evaluation as Triton kernels: the candidates' scores in one launch, and in the hard
mode attention to the sampled tokens, gathered where they live.

In evaluation the hard mode attends every query to the k highest-scored candidates (METHODS.md
§4): tokens, or the layer's support tokens. The eager path gathers the chosen keys and values
into a ``(B, h, k, 2d)`` tensor (three gathers, a concatenation and a selection) before one SDPA
call. The kernel reads each chosen row straight from the tokens' keys and values or from the
support tokens, inside a FlashAttention-style loop over the k candidates: one launch after the
top-k. It computes no gradient; the module uses it in evaluation only (see
:func:`samsa_triton_applies`).

Before the top-k, the scores of every candidate: each token's ``Linear_{D→h}(x + RMSNorm(h))``
from its residual stream x and score MLP's output (plus training's Gumbel noise), padded tokens
at the lowest float32, then the support tokens' learned scores. Eagerly that is the norm (a
compiled region on CUDA), the head's projection, casts of its weight, bias and output, the
noise's sum, the padding fill and a concatenation with the support scores, and as many
operations again for their gradients; :func:`samsa_candidate_scores` is one launch, in float32
throughout, and its backward one more and two sums.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import Tensor

from .coefficient_dtype import terms_dtype
from .triton_support import (
    KERNEL_DTYPES,
    KernelSwitch,
    block_width,
    dot_kind,
    eager_gradients,
    launch,
    leading_strides,
    unit_last_stride,
)

__all__ = [
    "SAMSA_TRITON_MAX_HEADS",
    "SAMSA_TRITON_MAX_HEAD_DIM",
    "SWITCH",
    "samsa_candidate_scores",
    "samsa_sampled_attention",
    "samsa_scores_triton_applies",
    "samsa_triton_applies",
]

#: The widest head (d and d_v) the kernel takes: the widths compiled and checked on a GPU.
SAMSA_TRITON_MAX_HEAD_DIM = 64
#: The most heads :func:`samsa_candidate_scores` takes (a block holds every head's score).
SAMSA_TRITON_MAX_HEADS = 64
SWITCH = KernelSwitch("SAMSA")


@functools.cache
def _kernel():
    from ._samsa_triton_kernels import samsa_sampled_attention as kernel

    return kernel


@functools.cache
def _gather_kernels():
    from ._samsa_triton_kernels import samsa_gather_candidates, samsa_scatter_candidates

    return samsa_gather_candidates, samsa_scatter_candidates


@functools.cache
def _sample_kernels():
    from ._samsa_triton_kernels import samsa_sample_backward, samsa_soft_sample

    return samsa_soft_sample, samsa_sample_backward


@functools.cache
def _scores_kernels():
    from ._samsa_triton_kernels import samsa_candidate_scores, samsa_candidate_scores_backward

    return samsa_candidate_scores, samsa_candidate_scores_backward


def _wants_grad(*tensors: Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def samsa_triton_applies(q: Tensor, *tensors: Tensor) -> bool:
    """Whether the module's evaluation runs :func:`samsa_sampled_attention`: where the kernels'
    switch allows, no gradient is wanted (``q`` and ``tensors`` need none, or grad mode is
    off) and heads are at most :data:`SAMSA_TRITON_MAX_HEAD_DIM` wide."""
    return (
        not _wants_grad(q, *tensors)
        and max(q.shape[-1], *(t.shape[-1] for t in tensors if t.dim() == 4)) <=
        SAMSA_TRITON_MAX_HEAD_DIM
        and SWITCH.allows(q)
    )


def samsa_scores_triton_applies(x: Tensor, support_scores: Tensor, *tensors: Tensor | None,
                                padding_mask: Tensor | None = None) -> bool:
    """Whether the module's scores come from :func:`samsa_candidate_scores`: where the kernels'
    switch allows ``x``, ``tensors`` (the MLP's output, the norm's and the head's parameters;
    None for an absent one) are in the kernels' dtypes on its device, as is ``padding_mask``,
    and h (``support_scores`` ``(h, S)``) is at most :data:`SAMSA_TRITON_MAX_HEADS`; with or
    without gradients."""
    return (
        support_scores.shape[0] <= SAMSA_TRITON_MAX_HEADS
        and all(t.dtype in KERNEL_DTYPES and t.device == x.device
                for t in (support_scores, *tensors) if t is not None)
        and (padding_mask is None or padding_mask.device == x.device)
        and SWITCH.allows(x)
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
        unit_last_stride(x) for x in (q, k, v, support_keys, support_values, index)
    )
    out = torch.empty(batch, length, heads, dim_v, dtype=q.dtype, device=q.device).transpose(1, 2)
    if length == 0:
        return out
    block_d, block_v = block_width(dim), block_width(dim_v)
    products = q.dtype if q.dtype in (torch.bfloat16, torch.float16) else None
    if products is None:
        # Float32 products run on the FMA units, not tensor cores, and hold more a thread: at
        # 64 queries and candidates a block they spill about 7 KB a thread on sm_90 (360 B at
        # 32).
        block_m = block_s = 32
    else:
        block_m, block_s = (64 if max(block_d, block_v) <= 64 else 32), 64
    grid = (batch * heads, -(-length // block_m))
    launch(
        _kernel(), grid,
        q, k, v, support_keys, support_values, index, out,
        heads, length, index.shape[-1], dim, dim_v, float(scale),
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), support_keys.stride(0), support_keys.stride(1),
        support_values.stride(0), support_values.stride(1), index.stride(0), index.stride(1),
        out.stride(0), out.stride(1), out.stride(2),
        DOT_KIND=dot_kind(products), BLOCK_M=block_m, BLOCK_S=block_s, BLOCK_D=block_d,
        BLOCK_DV=block_v,
    )
    return out


#: ``eager(x, hidden, norm_weight, head_weight, head_bias, support_scores)``: the candidates'
#: scores by torch operations, with a graph (padding and noise bound).
EagerScores = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor | None, Tensor], Tensor]
#: The score kernels' launches by their block of heads (``block_width(h)``): (tokens a block,
#: warps) forward, then backward; the backward holds a block's gradient for every head. Compiled
#: for sm_90 with the module's steps at h = 2, 12, 32 and 64 (scripts/compile_kernels.py's
#: recording, the last two with its widths changed): no spill but the backward's 16 bytes a
#: thread for 33 to 64 heads (where 64 tokens and 4 warps spilled 2.5 KB).
_SCORES_LAUNCH = {16: ((64, 4), (64, 4)), 32: ((64, 4), (64, 8)), 64: ((64, 8), (32, 8))}


def samsa_candidate_scores(
    x: Tensor,
    hidden: Tensor,
    norm_weight: Tensor,
    eps: float | None,
    head_weight: Tensor,
    head_bias: Tensor | None,
    support_scores: Tensor,
    padding_mask: Tensor | None = None,
    *,
    noise: Tensor | None = None,
    eager: EagerScores | None = None,
) -> Tensor:
    """The scores of the N tokens then the S support tokens, as SAMSA's sampling reads them.

    Token n's score for head j is ``(x_n + RMSNorm(hidden_n))·W_j + b_j`` with the norm
    ``hidden · rsqrt(mean(hidden²) + eps) · norm_weight``, plus ``noise`` (training's Gumbel
    noise), in float32 (eagerly, under autocast, the sum and the scores are rounded to half
    precision); a padded token's is float32's lowest. One launch; with gradients, the backward
    is one more launch (the gradients of x, hidden and, by each block's share, of the norm's
    and the head's parameters) and two sums, where torch's norm, projection, casts, padding
    fill and concatenation each had their own.

    Args:
        x: ``(B, N, D)`` the residual stream, as the score MLP read it.
        hidden: ``(B, N, D)`` the score MLP's output.
        norm_weight: ``(D,)`` the norm's scale.
        eps: the norm's epsilon (None: the machine epsilon of the wider of hidden's and
            norm_weight's dtypes, as :class:`torch.nn.RMSNorm` and the eager path take it).
        head_weight: ``(h, D)``; head_bias: ``(h,)`` or None.
        support_scores: ``(h, S)`` the support tokens' scores.
        padding_mask: ``(B, N)`` bool, True at real tokens, or None.
        noise: ``(B, h, N)`` float32 added to the tokens' scores (it takes no gradient), or
            None.
        eager: the same scores by torch operations (:data:`EagerScores`): the backward pass's
            path under ``create_graph`` and after a kernel failure (without it, those raise).

    Returns:
        ``(B, h, N + S)`` float32.
    """
    batch, length, dim = x.shape
    heads, _ = support_scores.shape
    if hidden.shape != x.shape or norm_weight.shape != (dim,) or head_weight.shape != (heads, dim):
        raise ValueError(
            f"hidden must have x's shape {tuple(x.shape)}, norm_weight ({dim},) and head_weight "
            f"(h, D) = ({heads}, {dim}); got {tuple(hidden.shape)}, {tuple(norm_weight.shape)} "
            f"and {tuple(head_weight.shape)}"
        )
    if head_bias is not None and head_bias.shape != (heads,):
        raise ValueError(f"head_bias must have shape ({heads},); got {tuple(head_bias.shape)}")
    if padding_mask is not None and padding_mask.shape != (batch, length):
        raise ValueError(f"padding_mask must have shape ({batch}, {length}); got "
                         f"{tuple(padding_mask.shape)}")
    if noise is not None and (noise.shape != (batch, heads, length)
                              or noise.dtype != torch.float32):
        raise ValueError(f"noise must be float32 of shape ({batch}, {heads}, {length}); got "
                         f"{noise.dtype} {tuple(noise.shape)}")
    if heads > SAMSA_TRITON_MAX_HEADS:
        raise ValueError(f"at most {SAMSA_TRITON_MAX_HEADS} heads are supported; got {heads}")
    eps = torch.finfo(terms_dtype(hidden, norm_weight)).eps if eps is None else float(eps)
    return _CandidateScores.apply(x, hidden, norm_weight, head_weight, head_bias, support_scores,
                                  padding_mask, noise, eps, eager)


class _CandidateScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, hidden, norm_weight, head_weight, head_bias, support_scores,
                padding_mask, noise, eps, eager):
        ctx.save_for_backward(x, hidden, norm_weight, head_weight, head_bias, support_scores)
        # The mask as the kernels read it, for the backward too (the eager path binds its own).
        mask = None if padding_mask is None else padding_mask.to(torch.int8).contiguous()
        ctx.eps, ctx.eager, ctx.mask = eps, eager, mask
        batch, length, dim = x.shape
        heads, supports = support_scores.shape
        x, hidden, norm_weight, head_weight, support_scores = (
            unit_last_stride(t) for t in (x, hidden, norm_weight, head_weight, support_scores)
        )
        out = torch.empty(batch, heads, length + supports, dtype=torch.float32, device=x.device)
        if batch == 0:
            return out
        head_bias = None if head_bias is None else head_bias.contiguous()
        (block_n, warps), _ = _SCORES_LAUNCH[block_width(heads)]
        launch(
            _scores_kernels()[0], (batch, -(-length // block_n) + 1),
            x, hidden, norm_weight, head_weight, head_weight if head_bias is None else head_bias,
            support_scores, out if mask is None else mask, out if noise is None else noise, out,
            length, dim, heads, supports, eps, torch.finfo(torch.float32).min,
            x.stride(0), x.stride(1), hidden.stride(0), hidden.stride(1), head_weight.stride(0),
            support_scores.stride(0), 0 if mask is None else mask.stride(0),
            *((0, 0, 0) if noise is None else noise.stride()),  # any layout
            out.stride(0), out.stride(1),
            HAS_BIAS=head_bias is not None, HAS_MASK=mask is not None,
            HAS_NOISE=noise is not None, BLOCK_N=block_n, BLOCK_D=64,
            BLOCK_H=block_width(heads), BLOCK_S=128, num_warps=warps,
        )
        return out

    @staticmethod
    def backward(ctx, grad):
        grads = SWITCH.run_backward(lambda: _scores_backward(ctx, grad),
                                    lambda: _eager_scores_backward(ctx, grad))
        wanted = ctx.needs_input_grad[: len(grads)]
        return *(g if w else None for g, w in zip(grads, wanted, strict=True)), *[None] * 4


def _scores_backward(ctx, grad: Tensor) -> list[Tensor | None]:
    """:class:`_CandidateScores`'s gradients to its six tensors by one launch and two sums."""
    x, hidden, norm_weight, head_weight, head_bias, support_scores = ctx.saved_tensors
    batch, length, dim = x.shape
    heads = head_weight.shape[0]
    x, hidden, norm_weight, head_weight, grad = (
        unit_last_stride(t) for t in (x, hidden, norm_weight, head_weight, grad))
    mask = ctx.mask
    grad_x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    grad_hidden = torch.empty(hidden.shape, dtype=hidden.dtype, device=x.device)
    _, (block_n, warps) = _SCORES_LAUNCH[block_width(heads)]
    blocks = -(-length // block_n)
    partial = torch.empty(batch * blocks, dim + heads * dim + heads, dtype=torch.float32,
                          device=x.device)
    if partial.numel():
        launch(
            _scores_kernels()[1], (batch, blocks),
            x, hidden, norm_weight, head_weight, grad, grad if mask is None else mask, grad_x,
            grad_hidden, partial, length, dim, heads, ctx.eps,
            x.stride(0), x.stride(1), hidden.stride(0), hidden.stride(1), head_weight.stride(0),
            grad.stride(0), grad.stride(1), 0 if mask is None else mask.stride(0),
            grad_x.stride(0), grad_x.stride(1), grad_hidden.stride(0), grad_hidden.stride(1),
            partial.stride(0),
            HAS_MASK=mask is not None, BLOCK_N=block_n, BLOCK_D=32,
            BLOCK_H=block_width(heads), num_warps=warps,
        )
    sums = partial.sum(0)
    grad_head = sums[dim : dim + heads * dim].view(heads, dim)
    grad_bias = None if head_bias is None else sums[dim + heads * dim :].to(head_bias.dtype)
    return [grad_x, grad_hidden, sums[:dim].to(norm_weight.dtype), grad_head.to(head_weight.dtype),
            grad_bias, grad[..., length:].sum(0).to(support_scores.dtype)]


def _eager_scores_backward(ctx, grad: Tensor) -> list[Tensor | None]:
    """The gradients through the eager scores (``create_graph``, a kernel failure)."""
    if ctx.eager is None:
        raise RuntimeError("samsa_candidate_scores: its backward under create_graph or after a "
                           "kernel failure needs its eager argument")
    return eager_gradients(ctx.saved_tensors, ctx.eager, grad)


#: ``eager(k, v, support_rows, index)``: the candidates' rows by torch operations, with a graph.
EagerCandidates = Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]


class _GatheredCandidates(torch.autograd.Function):
    @staticmethod
    def forward(ctx, k, v, support_rows, index, dtype, eager):
        gather, _ = _gather_kernels()
        ctx.save_for_backward(k, v, support_rows, index)
        ctx.eager = eager
        k, v, support_rows, index = (unit_last_stride(t) for t in (k, v, support_rows, index))
        batch, heads, length, dim = k.shape
        dim_v, count = v.shape[-1], index.shape[-1]
        out = torch.empty(batch, heads, count, dim + dim_v, dtype=dtype, device=k.device)
        if out.numel():
            launch(
                gather, _gather_grid(batch, heads, count),
                k, v, support_rows, index, out, heads, length, count, dim, dim_v,
                *leading_strides(k), *leading_strides(v), support_rows.stride(0),
                support_rows.stride(1),
                index.stride(0), index.stride(1), *leading_strides(out),
                BLOCK_M=_GATHER_BLOCK, BLOCK_D=block_width(dim), BLOCK_DV=block_width(dim_v),
            )
        return out

    @staticmethod
    def backward(ctx, grad):
        # The supports' gradients are atomic sums over the samples.
        return SWITCH.run_backward(lambda: _kernel_gather_backward(ctx, grad),
                                   lambda: _eager_gather_backward(ctx, grad), atomic=True)


_GATHER_BLOCK = 32


def _gather_grid(batch: int, heads: int, count: int) -> tuple[int, int]:
    return batch * heads, -(-count // _GATHER_BLOCK)


def _zeros_laid_out_like(x: Tensor) -> Tensor:
    """Zeros of ``x``'s shape and dtype with its axes in its memory order (the tokens' keys and
    values are views of the ``(B, N, 3D)`` projection, heads inside tokens), so that their
    gradient reaches the projection without a copy; contiguous where that order would not give
    a unit last stride, which the kernels assume."""
    zeros = torch.zeros_like(x, memory_format=torch.preserve_format)
    return zeros if zeros.stride(-1) == 1 else torch.zeros(x.shape, dtype=x.dtype, device=x.device)


def _kernel_gather_backward(ctx, grad):
    _, scatter = _gather_kernels()
    k, v, support_rows, index = ctx.saved_tensors
    grad, index = unit_last_stride(grad), unit_last_stride(index)
    batch, heads, length, dim = k.shape
    dim_v, count = v.shape[-1], index.shape[-1]
    grad_k, grad_v = _zeros_laid_out_like(k), _zeros_laid_out_like(v)
    grad_support = torch.zeros(support_rows.shape, dtype=torch.float32, device=k.device)
    if grad.numel():
        launch(
            scatter, _gather_grid(batch, heads, count),
            grad, index, grad_k, grad_v, grad_support, heads, length, count, dim, dim_v,
            *leading_strides(grad), index.stride(0), index.stride(1), *leading_strides(grad_k),
            *leading_strides(grad_v), grad_support.stride(0), grad_support.stride(1),
            BLOCK_M=_GATHER_BLOCK, BLOCK_D=block_width(dim), BLOCK_DV=block_width(dim_v),
        )
    return grad_k, grad_v, grad_support.to(support_rows.dtype), None, None, None


def _eager_gather_backward(ctx, grad):
    """The gradients through the eager gather (``create_graph``, a kernel failure)."""
    k, v, support_rows, index = ctx.saved_tensors
    grads = eager_gradients((k, v, support_rows), lambda *x: ctx.eager(*x, index), grad)
    return *grads, None, None, None


def samsa_gathered_candidates(
    k: Tensor, v: Tensor, support_rows: Tensor, index: Tensor, dtype: torch.dtype,
    eager: EagerCandidates,
) -> Tensor:
    """The candidates at ``index``, keys and values side by side, gathered by one launch, with a
    gradient scattered back by one more (SAMSA's training).

    Candidate ``i < N`` is token i (its rows of ``k`` and ``v``), candidate ``N + j`` support
    token j (row j of ``support_rows``: its key, then its value).

    Args:
        k: ``(B, h, N, d)``; v: ``(B, h, N, d_v)``: the tokens' keys and values.
        support_rows: ``(h, M, d + d_v)``.
        index: ``(B, h, m)`` integer candidates in ``[0, N + M)``, distinct within each
            (sample, head) (a top-k's indices): a token's gradient is stored, not added.
        dtype: the rows' dtype.
        eager: the same rows by torch operations, ``eager(k, v, support_rows, index)``: the
            backward pass's path for ``create_graph`` and after a kernel failure.

    Returns:
        ``(B, h, m, d + d_v)`` in ``dtype``.
    """
    return _GatheredCandidates.apply(k, v, support_rows, index, dtype, eager)


#: The widest rows (a key and a value side by side) the sampling kernels take.
SAMPLE_MAX_WIDTH = 256
#: Rows of a sampling kernel's block, and of the block it loops over.
_SAMPLE_BLOCK = 32
#: ``eager(x_top, x_bot, z)``: the soft sample by torch operations, with a graph.
EagerSample = Callable[[Tensor, Tensor, Tensor], Tensor]


def sample_kernels_apply(x_top: Tensor, x_bot: Tensor, z: Tensor) -> bool:
    """Whether :func:`soft_sample` and :func:`straight_through_score_gradient` take these:
    where the kernels' switch allows ``x_top`` (CUDA), ``(B, h, k, C)`` rows no wider than
    :data:`SAMPLE_MAX_WIDTH` in the kernels' dtypes, and float32 scores ``(B, h, 2k)`` (float64
    stays eager)."""
    return (
        SWITCH.allows(x_top)
        and x_top.dim() == 4 and x_top.shape == x_bot.shape
        and x_top.shape[-1] <= SAMPLE_MAX_WIDTH and x_bot.dtype in KERNEL_DTYPES
        and z.dtype == torch.float32 and z.shape == (*x_top.shape[:2], 2 * x_top.shape[2])
        and z.device == x_top.device and x_bot.device == x_top.device
    )


def _sample_backward(grad: Tensor, x_top: Tensor, x_bot: Tensor, z: Tensor, temperature: float,
                     soft: bool) -> tuple[Tensor, Tensor | None, Tensor | None]:
    """The scores' gradient ``(B, h, 2k)`` float32 and, for the soft sample, the rows'
    (``x_top``'s and ``x_bot``'s dtypes), by one launch after zero fills."""
    grad, x_top, x_bot, z = (unit_last_stride(t) for t in (grad, x_top, x_bot, z))
    batch, heads, count, width = grad.shape
    scores_grad = torch.zeros(batch, heads, 2 * count, dtype=torch.float32, device=grad.device)
    top_grad = torch.empty_like(x_top) if soft else scores_grad
    bot_grad = torch.zeros(x_bot.shape, dtype=torch.float32, device=grad.device) if soft else (
        scores_grad)
    if scores_grad.numel():
        launch(
            _sample_kernels()[1], (batch * heads, -(-count // _SAMPLE_BLOCK)),
            grad, x_top, x_bot, z, scores_grad, top_grad, bot_grad, heads, count, width,
            1.0 / (count * temperature), 1.0 / temperature, 1.0 / count,
            *leading_strides(grad), *leading_strides(x_top), *leading_strides(x_bot),
            z.stride(0), z.stride(1), scores_grad.stride(0), scores_grad.stride(1),
            *(leading_strides(top_grad) if soft else (0, 0, 0)),
            *(leading_strides(bot_grad) if soft else (0, 0, 0)),
            SOFT=soft, DOT_KIND=dot_kind(grad.dtype if grad.dtype == x_bot.dtype else None),
            BLOCK_M=_SAMPLE_BLOCK, BLOCK_V=_SAMPLE_BLOCK, BLOCK_C=block_width(width),
        )
    if not soft:
        return scores_grad, None, None
    return scores_grad, top_grad, bot_grad.to(x_bot.dtype)


def straight_through_score_gradient(
    grad: Tensor, x_top: Tensor, x_bot: Tensor, z: Tensor, temperature: float
) -> Tensor:
    """The hard sample's gradient to its scores (see
    :func:`~filterformer.functional.sampling.differentiable_topk`'s hard mode) in one launch
    after a zero fill, never forming the ``(k, k)`` matrices.

    Args:
        grad: ``(B, h, k, C)`` the sample's gradient.
        x_top: ``(B, h, k, C)`` the chosen rows; x_bot: ``(B, h, k, C)`` the runners-up.
        z: ``(B, h, 2k)`` float32 scores, the chosen then the runners-up.
        temperature: τ.

    Returns:
        ``(B, h, 2k)`` float32: ``Σ_v dS[m, v]`` for the chosen, ``−Σ_m dS[m, v]`` for the
        runners-up.
    """
    return _sample_backward(grad, x_top, x_bot, z, temperature, soft=False)[0]


class _SoftSample(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_top, x_bot, z, temperature, dtype, eager):
        ctx.save_for_backward(x_top, x_bot, z)
        ctx.temperature, ctx.eager = temperature, eager
        x_top, x_bot, z = (unit_last_stride(t) for t in (x_top, x_bot, z))
        batch, heads, count, width = x_top.shape
        out = torch.empty(batch, heads, count, width, dtype=dtype, device=x_top.device)
        if out.numel():
            launch(
                _sample_kernels()[0], (batch * heads, -(-count // _SAMPLE_BLOCK)),
                x_top, x_bot, z, out, heads, count, width, 1.0 / count, 1.0 / temperature,
                *leading_strides(x_top), *leading_strides(x_bot), z.stride(0), z.stride(1),
                *leading_strides(out),
                BLOCK_M=_SAMPLE_BLOCK, BLOCK_V=_SAMPLE_BLOCK, BLOCK_C=block_width(width),
            )
        return out

    @staticmethod
    def backward(ctx, grad):
        x_top, x_bot, z = ctx.saved_tensors

        def kernels():
            scores_grad, top_grad, bot_grad = _sample_backward(grad, x_top, x_bot, z,
                                                               ctx.temperature, soft=True)
            return top_grad, bot_grad, scores_grad.to(z.dtype)

        def eager():
            return eager_gradients((x_top, x_bot, z), ctx.eager, grad)

        # The runners-up's gradients are atomic sums over the blocks of chosen rows.
        return *SWITCH.run_backward(kernels, eager, atomic=True), None, None, None


def soft_sample(x_top: Tensor, x_bot: Tensor, z: Tensor, temperature: float, dtype: torch.dtype,
                eager: EagerSample) -> Tensor:
    """The soft sample ``keep ⊙ X_top + mix @ X_bot`` (see
    :func:`~filterformer.functional.sampling.sampling_mixture`) by one launch, and its gradient
    (to the rows and the scores) by one more, never forming the ``(k, k)`` matrices.

    Args:
        x_top: ``(B, h, k, C)`` the chosen rows; x_bot: ``(B, h, k, C)`` the runners-up.
        z: ``(B, h, 2k)`` float32 scores, the chosen then the runners-up.
        temperature: τ.
        dtype: the sample's dtype.
        eager: the same sample by torch operations, ``eager(x_top, x_bot, z)``: the backward
            pass's path for ``create_graph`` and after a kernel failure.

    Returns:
        ``(B, h, k, C)`` in ``dtype``, computed in float32.
    """
    return _SoftSample.apply(x_top, x_bot, z, float(temperature), dtype, eager)
