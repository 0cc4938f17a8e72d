"""AGF's layer as Triton kernels: :func:`~filterformer.functional.agf_layer` in four passes over
memory, forward and backward.

The eager (and compiled) layer forms ``U = ρq(Q)``, ``Vs = ρk(K)``, ``S = sigmoid(X W_Σ)`` and
``G = Σ_k θ_k P_k(S)`` as whole ``(B, h, N, d)`` tensors, each a trip through GPU memory. Here
each pass reads its inputs once and keeps every per-token intermediate in registers:

- **keys** (forward): per (sample, head) and chunk of tokens, the column softmax of K over tokens
  by a running maximum (as FlashAttention's rows), accumulating ``exp(K − m)ᵀ V`` and, for the
  regulariser, ``exp(K − m)ᵀ exp(K − m)``; the chunks are merged by one more launch.
- **queries** (forward): per block of tokens, the row softmax of Q, the sigmoid and the
  polynomial recursion, ``(U ⊙ G) C`` with the ``d×d`` context ``C = Vsᵀ V``, and ``UᵀU``.
- **queries** (backward): ``dQ``, ``dX W_Σ``, ``dθ`` and ``dC = (U ⊙ G)ᵀ dOut``, recomputing
  U, S and G (and G's derivative, carried along the recursion).
- **keys** (backward): ``dK`` and ``dV`` from ``dC``; the column softmax's correction
  ``Σ_n Vs ⊙ dVs`` is ``rowsum(C ⊙ dC)`` plus the regulariser's part, known before the pass.

Precision follows the layer: the feature maps and the filter in float32, the products over tokens
in ``products_dtype`` (half precision under autocast) with float32 accumulation, else full float32.
The kernels run on CUDA, and on the CPU under ``TRITON_INTERPRET=1`` (the tests); see
:func:`agf_triton_applies` for when the attention module uses them.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from .masks import check_key_padding_mask
from .polynomials import (
    NAMED_JACOBI_PARAMETERS,
    POLYNOMIAL_BASES,
    check_jacobi_parameters,
    jacobi_step,
)
from .triton_support import (
    KernelSwitch,
    block_width,
    dot_kind,
    eager_gradients,
    launch,
    leading_strides,
    unit_last_stride,
)

__all__ = [
    "AGF_TRITON_MAX_HEAD_DIM",
    "FLOAT32_LAUNCH",
    "LAUNCH",
    "SWITCH",
    "agf_layer_for",
    "agf_triton_applies",
    "agf_triton_layer",
    "polynomial_recursion",
]

#: The widest head (d and d_v) the kernels take: the widths compiled and checked on a GPU (wider
#: heads hold 128×128 tiles per program, untried; they take the compiled or eager layer).
AGF_TRITON_MAX_HEAD_DIM = 64
#: Programs a pass aims for: chunks of tokens are split across programs until there are this many.
_TARGET_PROGRAMS = 528


def polynomial_recursion(K: int, basis: str = "jacobi", a: float = 1.0, b: float = 1.0) -> Tensor:
    """The three-term recursion of a basis as one table, ``(K+1, 3)`` float64.

    Row k ≥ 1 holds ``(α_k, β_k, γ_k)`` with ``P_k = (α_k x + β_k) P_{k−1} − γ_k P_{k−2}``,
    ``P_0 = 1`` and ``P_{−1} = 0`` (row 0 is unused): the coefficients of
    :func:`~filterformer.functional.polynomials.jacobi_basis` (and of its named families), or
    ``(1, 0, 0)`` for monomials.
    """
    if basis not in POLYNOMIAL_BASES:
        raise ValueError(f"basis must be one of {POLYNOMIAL_BASES}; got {basis!r}")
    table = torch.zeros(K + 1, 3, dtype=torch.float64)
    if basis == "monomial":
        table[1:, 0] = 1.0
        return table
    a, b = NAMED_JACOBI_PARAMETERS.get(basis, (a, b))
    K, a, b = check_jacobi_parameters(K, a, b)
    for k in range(1, K + 1):
        table[k] = torch.tensor(jacobi_step(k, a, b), dtype=torch.float64)
    return table


SWITCH = KernelSwitch("AGF")


def agf_triton_applies(q: Tensor, k: Tensor, v: Tensor) -> bool:
    """Whether :func:`agf_layer_for` runs :func:`agf_triton_layer`: where the kernels' switch
    allows (:meth:`~filterformer.functional.triton_support.KernelSwitch.allows`), heads at most
    :data:`AGF_TRITON_MAX_HEAD_DIM` wide and keys as many as queries."""
    return (
        q.shape[-1] <= AGF_TRITON_MAX_HEAD_DIM
        and v.shape[-1] <= AGF_TRITON_MAX_HEAD_DIM
        and k.shape[-2] == q.shape[-2]
        and SWITCH.allows(q)
    )


@functools.lru_cache(maxsize=64)
def _device_recursion(K: int, basis: str, a: float, b: float, device: torch.device) -> Tensor:
    """:func:`polynomial_recursion` in float32 on ``device``, made once: a copy from the host
    every call would make the host wait for the GPU to reach it. Made outside inference mode,
    so that a training step may save it for its backward after an evaluation under
    ``torch.inference_mode()`` made it."""
    with torch.inference_mode(False):
        return polynomial_recursion(K, basis, a, b).to(device=device, dtype=torch.float32)


@functools.cache
def _kernels():
    """The four kernels, jitted on first use (so ``TRITON_INTERPRET`` is read then)."""
    from ._agf_triton_kernels import (
        agf_keys_backward,
        agf_keys_forward,
        agf_queries_backward,
        agf_queries_forward,
    )

    return agf_keys_forward, agf_queries_forward, agf_queries_backward, agf_keys_backward


@functools.cache
def _small_kernels():
    """The kernels over ``d×d`` blocks: the key chunks' merge, the regulariser and its
    weights."""
    from ._agf_triton_kernels import agf_merge_keys, agf_orthogonality, agf_orthogonality_weights

    return agf_merge_keys, agf_orthogonality, agf_orthogonality_weights


def _chunks(length: int, block: int, programs: int) -> tuple[int, int]:
    """``(chunk, splits)``: tokens per program (a multiple of ``block``) and how many programs
    share one (sample, head), enough for about :data:`_TARGET_PROGRAMS` in all."""
    blocks = max(1, math.ceil(length / block))
    splits = min(blocks, max(1, math.ceil(_TARGET_PROGRAMS / max(programs, 1))))
    per = math.ceil(blocks / splits)
    return per * block, math.ceil(blocks / per)


def _mask_argument(mask: Tensor | None, like: Tensor) -> Tensor:
    """The padding mask as int8 for the kernels (a placeholder without one)."""
    if mask is None:
        return like.new_empty(1, dtype=torch.int8)
    return mask.to(torch.int8).contiguous()


def _heads_last_empty(like: Tensor, width: int, dtype: torch.dtype) -> Tensor:
    """An empty ``(B, h, N, width)`` whose memory is ``(B, N, h, width)``: merging the heads
    afterwards (``transpose(1, 2).reshape``) is a view."""
    batch, heads, length, _ = like.shape
    return torch.empty(batch, length, heads, width, dtype=dtype, device=like.device).transpose(1, 2)


def _strides_of_heads_last(x: Tensor) -> tuple[int, int, int]:
    """The ``(B, h, N)`` strides of a ``(B, N, h, ·)`` tensor."""
    return x.stride(0), x.stride(2), x.stride(1)


#: Each pass's launch: ``(rows per block, warps per program)``. The passes share one split of the
#: tokens into chunks, each a multiple of the largest block (no partial block inside a sequence).
#: The backward passes hold the most per token (the recursion's terms and their derivatives);
#: at (64, 4) heads of 64 spill registers to local memory on sm_90 (queries' pass: about 2 KB
#: a thread in bfloat16, 10 KB in float32), at these settings under 100 B and 0 B in bfloat16
#: (``scripts/compile_kernels.py`` reports each launch's registers and spills).
#: ``scripts/gpu_tune_agf.py`` times alternatives on a GPU. These serve half-precision
#: products (tensor cores); float32 products take :data:`FLOAT32_LAUNCH`.
LAUNCH: dict[str, tuple[int, int]] = {
    "keys_forward": (64, 4),
    "queries_forward": (64, 4),
    "queries_backward": (32, 8),
    "keys_backward": (64, 8),
}
#: The launches where the products are float32: these run on the FMA units and hold more a
#: thread; at :data:`LAUNCH`'s settings the forward passes spill up to 1.1 KB a thread on sm_90,
#: at these none (the backward passes under 1 KB, from 10 KB and 8 KB at (64, 4)).
FLOAT32_LAUNCH: dict[str, tuple[int, int]] = {
    "keys_forward": (32, 8),
    "queries_forward": (32, 8),
    "queries_backward": (32, 8),
    "keys_backward": (64, 8),
}


class _Geometry:
    """Shapes, block sizes and splits of one call."""

    def __init__(self, q: Tensor, v: Tensor, half_products: bool) -> None:
        self.batch, self.heads, self.length, self.dim = q.shape
        self.dim_v = v.shape[-1]
        self.block_d, self.block_v = block_width(self.dim), block_width(self.dim_v)
        self.launch = dict(LAUNCH if half_products else FLOAT32_LAUNCH)
        self.programs = self.batch * self.heads
        largest = max(rows for rows, _ in self.launch.values())
        self.chunk, self.splits = _chunks(self.length, largest, self.programs)

    def grid(self) -> tuple[int, int]:
        return self.programs, self.splits

    def meta(self, kernel: str) -> dict[str, int]:
        """The block sizes and warps of the pass named ``kernel`` (a key of :data:`LAUNCH`)."""
        rows, warps = self.launch[kernel]
        return {"BLOCK_N": rows, "BLOCK_D": self.block_d, "BLOCK_DV": self.block_v,
                "num_warps": warps}


def _merge_keys(
    maxima: Tensor, sums: Tensor, context: Tensor, gram: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Merge the key pass's chunks: ``(M, 1/S, C, Gk)`` from each chunk's running maximum,
    sum, ``exp(K − m)ᵀ V`` and ``exp(K − m)ᵀ exp(K − m)`` (``(P, splits, …)`` each, contiguous
    float32), in one launch (the kernel ``agf_merge_keys``, where eager operations took 19)."""
    programs, splits, dim = maxima.shape
    dim_v = context.shape[-1]
    top, inverse = (torch.empty(programs, dim, dtype=maxima.dtype, device=maxima.device)
                    for _ in range(2))
    merged = torch.empty(programs, dim, dim_v, dtype=maxima.dtype, device=maxima.device)
    merged_gram = None if gram is None else torch.empty(programs, dim, dim, dtype=maxima.dtype,
                                                        device=maxima.device)
    launch(
        _small_kernels()[0], (programs,),
        maxima, sums, context, maxima if gram is None else gram, top, inverse, merged,
        top if merged_gram is None else merged_gram,
        splits, dim, dim_v, torch.finfo(torch.float32).tiny,
        HAS_GRAM=gram is not None, BLOCK_D=block_width(dim), BLOCK_DV=block_width(dim_v),
    )
    return top, inverse, merged, merged_gram


def _orthogonality(gram_u_chunks: Tensor, gram_k: Tensor) -> tuple[Tensor, Tensor]:
    """``(Gu, mean|Gu − I| + mean|Gk − I|)``, Gu the sum of the query pass's chunks of ``UᵀU``
    ``(P, splits, d, d)`` and Gk ``(P, d, d)``: one launch and a sum of its shares."""
    programs, splits, dim, _ = gram_u_chunks.shape
    gram_u = torch.empty(programs, dim, dim, dtype=torch.float32, device=gram_k.device)
    shares = torch.empty(programs, dtype=torch.float32, device=gram_k.device)
    launch(
        _small_kernels()[1], (programs,),
        gram_u_chunks, gram_k, gram_u, shares, splits, dim, 1.0 / gram_k.numel(),
        BLOCK_D=block_width(dim),
    )
    return gram_u, shares.sum()


def _orthogonality_weights(gram_u: Tensor, gram_k: Tensor, grad: Tensor) -> tuple[Tensor, Tensor]:
    """For Gu and Gk ``(P, d, d)``: ``w + wᵀ`` with ``w = ∂ mean|Gram − I| / ∂ Gram`` times
    ``grad`` (a 0-dim tensor): the regulariser's gradient with respect to a feature map F is
    ``F (w + wᵀ)``. One launch."""
    programs, dim, _ = gram_u.shape
    weights = torch.empty(2, programs, dim, dim, dtype=torch.float32, device=gram_u.device)
    launch(
        _small_kernels()[2], (programs,),
        gram_u, gram_k, grad, weights[0], weights[1], dim, 1.0 / gram_u.numel(),
        BLOCK_D=block_width(dim),
    )
    return weights[0], weights[1]


class _AGFLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, logits, theta, mask, recursion, orthogonality, products_dtype,
                basis, a, b):
        keys_fwd, queries_fwd, _, _ = _kernels()
        device = q.device
        f32 = torch.float32
        low = products_dtype if products_dtype is not None else f32
        kind = dot_kind(low)
        geo = _Geometry(q, v, half_products=low != f32)
        has_mask = mask is not None
        mask_arg = _mask_argument(mask, q)
        P, T = geo.programs, geo.splits
        maxima = torch.empty(P, T, geo.dim, dtype=f32, device=device)
        sums = torch.empty(P, T, geo.dim, dtype=f32, device=device)
        context = torch.empty(P, T, geo.dim, geo.dim_v, dtype=f32, device=device)
        gram_k = (torch.empty(P, T, geo.dim, geo.dim, dtype=f32, device=device)
                  if orthogonality else maxima)
        launch(
            keys_fwd, geo.grid(),
            k, v, mask_arg, maxima, sums, context, gram_k,
            geo.heads, geo.length, geo.dim, geo.dim_v, geo.chunk,
            *leading_strides(k), *leading_strides(v), mask_arg.stride(0) if has_mask else 0,
            HAS_MASK=has_mask, GRAM=orthogonality, DOT_KIND=kind, **geo.meta("keys_forward"),
        )
        top, inverse, merged, gram_k = _merge_keys(
            maxima, sums, context, gram_k if orthogonality else None
        )
        theta32 = theta.detach().to(device=device, dtype=f32).contiguous()
        rec32 = recursion
        # (B, N, h, d_v): the Function's own tensor (a view of it could not be changed in
        # place by a caller); seen as (B, h, N, d_v) by the caller.
        out = torch.empty(geo.batch, geo.length, geo.heads, geo.dim_v, dtype=low, device=device)
        gram_u = (torch.empty(P, T, geo.dim, geo.dim, dtype=f32, device=device)
                  if orthogonality else merged)
        launch(
            queries_fwd, geo.grid(),
            q, logits, merged, theta32, rec32, out, gram_u, mask_arg,
            geo.heads, geo.length, geo.dim, geo.dim_v, geo.chunk,
            *leading_strides(q), *leading_strides(logits), *_strides_of_heads_last(out),
            mask_arg.stride(0) if has_mask else 0,
            K=theta.numel() - 1, HAS_MASK=has_mask, GRAM=orthogonality, DOT_KIND=kind,
            **geo.meta("queries_forward"),
        )
        if orthogonality:
            gram_u, reg = _orthogonality(gram_u, gram_k)
        else:
            gram_u = None
            reg = torch.zeros((), dtype=f32, device=device)
        ctx.save_for_backward(q, k, v, logits, mask, top, inverse, merged, theta, rec32,
                              gram_u, gram_k)
        ctx.geo, ctx.dot_kind, ctx.orthogonality = geo, kind, orthogonality
        ctx.theta_dtype = theta.dtype
        ctx.layer = {"basis": basis, "a": a, "b": b, "orthogonality": orthogonality,
                     "products_dtype": products_dtype}
        if not orthogonality:
            ctx.mark_non_differentiable(reg)
        return out, reg

    @staticmethod
    def backward(ctx, grad_out, grad_reg):
        grad_out = grad_out.transpose(1, 2)  # the caller's (B, h, N, d_v) view of it
        return SWITCH.run_backward(lambda: _AGFLayer._backward(ctx, grad_out, grad_reg),
                                   lambda: _eager_backward(ctx, grad_out, grad_reg))

    @staticmethod
    def _backward(ctx, grad_out, grad_reg):
        (q, k, v, logits, mask, top, inverse, merged, theta, rec32,
         gram_u, gram_k) = ctx.saved_tensors
        theta32 = theta.detach().to(torch.float32).contiguous()
        _, _, queries_bwd, keys_bwd = _kernels()
        geo: _Geometry = ctx.geo
        f32 = torch.float32
        device = q.device
        P, T = geo.programs, geo.splits
        has_mask = mask is not None
        mask_arg = _mask_argument(mask, q)
        grad_out = unit_last_stride(grad_out)
        ortho = ctx.orthogonality and grad_reg is not None
        if ortho:
            weights_u, weights_k = _orthogonality_weights(gram_u, gram_k, grad_reg)
        else:
            weights_u = weights_k = merged
        grad_q = _heads_last_empty(q, geo.dim, q.dtype)
        grad_logits = _heads_last_empty(q, geo.dim, logits.dtype)
        grad_context = torch.empty(P, T, geo.dim, geo.dim_v, dtype=f32, device=device)
        K = theta32.numel() - 1
        block_k = block_width(K + 1)
        grad_theta = torch.empty(P, T, block_k, dtype=f32, device=device)
        launch(
            queries_bwd, geo.grid(),
            q, logits, merged, theta32, rec32, grad_out, weights_u, mask_arg,
            grad_q, grad_logits, grad_context, grad_theta,
            geo.heads, geo.length, geo.dim, geo.dim_v, geo.chunk,
            *leading_strides(q), *leading_strides(logits), *leading_strides(grad_out),
            *leading_strides(grad_q),
            *leading_strides(grad_logits), mask_arg.stride(0) if has_mask else 0,
            K=K, BLOCK_K=block_k, HAS_MASK=has_mask, GRAM=ortho, DOT_KIND=ctx.dot_kind,
            **geo.meta("queries_backward"),
        )
        grad_context = grad_context.sum(dim=1)
        # Σ_n Vs ⊙ dVs per feature: Σ_j C ⊙ dC (as C = Vsᵀ V) plus the regulariser's Gk ⊙ W.
        correction = (merged * grad_context).sum(dim=-1)
        if ortho:
            correction = correction + (gram_k * weights_k).sum(dim=-1)
        grad_k = _heads_last_empty(q, geo.dim, k.dtype)
        grad_v = _heads_last_empty(q, geo.dim_v, v.dtype)
        launch(
            keys_bwd, geo.grid(),
            k, v, mask_arg, top, inverse, grad_context, correction.contiguous(), weights_k,
            grad_k, grad_v,
            geo.heads, geo.length, geo.dim, geo.dim_v, geo.chunk,
            *leading_strides(k), *leading_strides(v), *leading_strides(grad_k),
            *leading_strides(grad_v),
            mask_arg.stride(0) if has_mask else 0,
            HAS_MASK=has_mask, GRAM=ortho, DOT_KIND=ctx.dot_kind,
            **geo.meta("keys_backward"),
        )
        grad_theta = grad_theta.sum(dim=(0, 1))[: K + 1].to(ctx.theta_dtype)
        return grad_q, grad_k, grad_v, grad_logits, grad_theta, *[None] * 7


def _eager_backward(ctx, grad_out, grad_reg):
    """The gradients through the eager layer (``create_graph``, a kernel failure)."""
    from .agf import agf_layer

    saved = ctx.saved_tensors
    inputs, mask = [*saved[:4], saved[8]], saved[4]
    with_reg = grad_reg is not None and ctx.orthogonality

    def layer(*leaves):
        out, reg = agf_layer.eager(*leaves, mask, **ctx.layer)
        return [out, reg] if with_reg else [out]

    grads = [grad_out, grad_reg] if with_reg else [grad_out]
    return *eager_gradients(inputs, layer, grads), *[None] * 7


def agf_triton_layer(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    singular_logits: Tensor,
    theta: Tensor,
    key_padding_mask: Tensor | None = None,
    *,
    basis: str = "jacobi",
    a: float = 1.0,
    b: float = 1.0,
    orthogonality: bool = True,
    products_dtype: torch.dtype | None = None,
) -> tuple[Tensor, Tensor | None]:
    """:func:`~filterformer.functional.agf_layer` through Triton kernels (same arguments, same
    results up to rounding).

    Args:
        q, k: ``(B, h, N, d)`` the U and Vs projections (any strides with unit stride along d).
        v: ``(B, h, N, d_v)`` values.
        singular_logits: ``(B, h, N, d)`` ``X W_Σ`` before the sigmoid.
        theta: ``(K+1,)`` filter coefficients.
        key_padding_mask: ``(B, N)`` bool, True at real tokens.
        basis, a, b: the polynomial basis.
        orthogonality: whether to compute the regulariser.
        products_dtype: the dtype of the products over tokens and of ``out``; float32 when None.

    Returns:
        ``(out, reg)``: ``(B, h, N, d_v)`` (its memory laid out ``(B, N, h, d_v)``) and the
        regulariser (a float32 scalar) or None.
    """
    if q.dim() != 4 or k.shape != q.shape or singular_logits.shape != q.shape:
        raise ValueError(
            f"q, k and singular_logits must share one shape (B, h, N, d); got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(singular_logits.shape)}"
        )
    if v.dim() != 4 or v.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"v must have shape (B, h, N, d_v) with q's (B, h, N) "
                         f"{tuple(q.shape[:-1])}; got {tuple(v.shape)}")
    if max(q.shape[-1], v.shape[-1]) > AGF_TRITON_MAX_HEAD_DIM:
        raise ValueError(f"head widths above {AGF_TRITON_MAX_HEAD_DIM} are not supported; got "
                         f"d={q.shape[-1]}, d_v={v.shape[-1]}")
    if theta.dim() != 1 or theta.numel() < 1:
        raise ValueError(f"theta must have shape (K+1,) with K >= 0; got {tuple(theta.shape)}")
    if theta.device != q.device:
        raise ValueError(f"theta must be on q's device {q.device}; got {theta.device}")
    dtypes = {x.dtype for x in (q, k, v, singular_logits)}
    if not dtypes <= {torch.float32, torch.bfloat16, torch.float16}:
        raise ValueError(f"q, k, v and singular_logits must be float32, bfloat16 or float16 (the "
                         f"kernels compute in float32; use agf_layer for float64); got "
                         f"{sorted(map(str, dtypes))}")
    mask = check_key_padding_mask(key_padding_mask, q.shape[0], q.shape[-2])
    recursion = _device_recursion(theta.numel() - 1, basis, float(a), float(b), q.device)
    q, k, v, singular_logits = (unit_last_stride(x) for x in (q, k, v, singular_logits))
    out, reg = _AGFLayer.apply(
        q, k, v, singular_logits, theta, mask, recursion, bool(orthogonality), products_dtype,
        basis, a, b,
    )
    return out.transpose(1, 2), (reg if orthogonality else None)


def agf_layer_for(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    singular_logits: Tensor,
    theta: Tensor,
    key_padding_mask: Tensor | None = None,
    **options,
) -> tuple[Tensor, Tensor | None]:
    """AGF's layer by the fastest path for these tensors: :func:`agf_triton_layer` where
    :func:`agf_triton_applies`, else :func:`~filterformer.functional.agf_layer` (a compiled
    region on CUDA, eager elsewhere). A Triton failure is reported once with a warning and the
    other path is taken from then on. Arguments and results as :func:`agf_triton_layer`'s."""
    from .agf import agf_layer

    args = (q, k, v, singular_logits, theta, key_padding_mask)
    if agf_triton_applies(q, k, v):
        return SWITCH.run(lambda: agf_triton_layer(*args, **options),
                          lambda: agf_layer(*args, **options))
    return agf_layer(*args, **options)
