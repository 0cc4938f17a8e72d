"""The Triton kernels of :mod:`filterformer.functional.agf_triton` (imported on first use, so
that ``TRITON_INTERPRET`` is read when they are).

Every kernel runs on a grid ``(B·h, splits)``: program ``(p, s)`` handles sample ``p // h``, head
``p % h`` and the tokens ``[s·CHUNK, (s+1)·CHUNK)`` in blocks of ``BLOCK_N``. Tensors of shape
``(B, h, N, ·)`` are read and written through their strides (unit stride along the last axis);
per-program partial results are contiguous ``(B·h, splits, …)`` float32 buffers.
``DOT_KIND`` chooses the products' precision (see
:func:`~filterformer.functional.triton_support.dot_kind`).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._triton_primitives import dot as _dot
from ._triton_primitives import tile as _tile

#: Stands for a padded key's logit: far below any real one, and finite in float32 arithmetic.
NEG = tl.constexpr(-1.0e30)


@triton.jit
def _real_rows(MASK, b, rows, inside, smb, HAS_MASK: tl.constexpr):
    """Rows inside this program's chunk that are real tokens (True everywhere without a mask)."""
    real = inside
    if HAS_MASK:
        real = real & (tl.load(MASK + b * smb + rows, mask=inside, other=0) != 0)
    return real


@triton.jit
def _row_softmax(x, dmask):
    """Softmax over each row's first D features (the padding of BLOCK_D gets 0)."""
    x = tl.where(dmask[None, :], x, -float("inf"))
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    e = tl.where(dmask[None, :], e, 0.0)
    return e / tl.sum(e, axis=1)[:, None]


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _filter(x, THETA, REC, K: tl.constexpr):
    """``G = Σ_k θ_k P_k(x)`` along the recursion ``P_k = (α_k x + β_k) P_{k−1} − γ_k P_{k−2}``."""
    previous = tl.zeros_like(x)
    current = previous + 1.0
    g = current * tl.load(THETA)
    for j in tl.static_range(1, K + 1):
        alpha = tl.load(REC + 3 * j)
        beta = tl.load(REC + 3 * j + 1)
        gamma = tl.load(REC + 3 * j + 2)
        following = (alpha * x + beta) * current - gamma * previous
        previous = current
        current = following
        g = g + tl.load(THETA + j) * following
    return g


@triton.jit
def _program(H, D, DV, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    """This program's (sample, head) ``bh`` and its sample ``b`` and head ``hh`` (int64), the
    feature offsets and their masks."""
    bh = tl.program_id(0)
    offs_d = tl.arange(0, BLOCK_D)
    offs_v = tl.arange(0, BLOCK_DV)
    return (bh, (bh // H).to(tl.int64), (bh % H).to(tl.int64), offs_d, offs_v, offs_d < D,
            offs_v < DV)


@triton.jit
def _per_head(PTR, bh, ROWS, COLS, offs_r, offs_c, rmask, cmask):
    """The ``(ROWS, COLS)`` float32 matrix of (sample, head) ``bh`` in a contiguous
    ``(B·h, ROWS, COLS)`` buffer (0 in the blocks' padding)."""
    ptrs = PTR + bh.to(tl.int64) * ROWS * COLS + offs_r[:, None] * COLS + offs_c[None, :]
    return tl.load(ptrs, mask=rmask[:, None] & cmask[None, :], other=0.0)


@triton.jit
def _store_part(PTR, part, ROWS, COLS, value, offs_r, offs_c, rmask, cmask):
    """Store a program's ``(ROWS, COLS)`` partial result at index ``part`` of a contiguous
    ``(B·h·splits, ROWS, COLS)`` buffer."""
    ptrs = PTR + part * ROWS * COLS + offs_r[:, None] * COLS + offs_c[None, :]
    tl.store(ptrs, value, mask=rmask[:, None] & cmask[None, :])


@triton.jit
def agf_keys_forward(
    K_, V_, MASK, M_OUT, S_OUT, C_OUT, G_OUT,
    H, N, D, DV, CHUNK,
    skb, skh, skn, svb, svh, svn, smb,
    HAS_MASK: tl.constexpr, GRAM: tl.constexpr, DOT_KIND: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    """Per chunk: the running column maximum m and sum of ``exp(K − m)``, ``exp(K − m)ᵀ V`` and
    (``GRAM``) ``exp(K − m)ᵀ exp(K − m)``, padded keys left out."""
    bh, b, hh, offs_d, offs_v, dmask, vmask = _program(H, D, DV, BLOCK_D, BLOCK_DV)
    split = tl.program_id(1)
    splits = tl.num_programs(1)
    k_base = K_ + b * skb + hh * skh
    v_base = V_ + b * svb + hh * svh
    m = tl.full([BLOCK_D], NEG, tl.float32)
    s = tl.zeros([BLOCK_D], dtype=tl.float32)
    acc = tl.zeros([BLOCK_D, BLOCK_DV], dtype=tl.float32)
    gram = tl.zeros([BLOCK_D, BLOCK_D], dtype=tl.float32)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, N)
    for row in range(start, end, BLOCK_N):
        rows = row + tl.arange(0, BLOCK_N)
        inside = rows < end
        real = _real_rows(MASK, b, rows, inside, smb, HAS_MASK)
        kb = _tile(k_base, rows, skn, offs_d, real[:, None] & dmask[None, :])
        kb = tl.where(real[:, None], kb, NEG)
        m_new = tl.maximum(m, tl.max(kb, axis=0))
        alpha = tl.exp(m - m_new)
        p = tl.where(real[:, None], tl.exp(kb - m_new[None, :]), 0.0)
        s = s * alpha + tl.sum(p, axis=0)
        vb = _tile(v_base, rows, svn, offs_v, real[:, None] & vmask[None, :])
        pt = tl.trans(p)
        acc = acc * alpha[:, None] + _dot(pt, vb, DOT_KIND)
        if GRAM:
            gram = gram * (alpha[:, None] * alpha[None, :]) + _dot(pt, p, DOT_KIND)
        m = m_new
    part = (bh * splits + split).to(tl.int64)
    tl.store(M_OUT + part * D + offs_d, m, mask=dmask)
    tl.store(S_OUT + part * D + offs_d, s, mask=dmask)
    _store_part(C_OUT, part, D, DV, acc, offs_d, offs_v, dmask, vmask)
    if GRAM:
        _store_part(G_OUT, part, D, D, gram, offs_d, offs_d, dmask, dmask)


@triton.jit
def agf_queries_forward(
    Q, L, C, THETA, REC, OUT, G_OUT, MASK,
    H, N, D, DV, CHUNK,
    sqb, sqh, sqn, slb, slh, sln, sob, soh, son, smb,
    K: tl.constexpr, HAS_MASK: tl.constexpr, GRAM: tl.constexpr, DOT_KIND: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    """Per block of tokens: ``(ρq(Q) ⊙ G(sigmoid(L))) C``, and (``GRAM``) the chunk's
    ``ρq(Q)ᵀ ρq(Q)`` over real tokens."""
    bh, b, hh, offs_d, offs_v, dmask, vmask = _program(H, D, DV, BLOCK_D, BLOCK_DV)
    split = tl.program_id(1)
    splits = tl.num_programs(1)
    c = _per_head(C, bh, D, DV, offs_d, offs_v, dmask, vmask)
    q_base = Q + b * sqb + hh * sqh
    l_base = L + b * slb + hh * slh
    o_base = OUT + b * sob + hh * soh
    gram = tl.zeros([BLOCK_D, BLOCK_D], dtype=tl.float32)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, N)
    for row in range(start, end, BLOCK_N):
        rows = row + tl.arange(0, BLOCK_N)
        inside = rows < end
        valid = inside[:, None] & dmask[None, :]
        rq = _row_softmax(_tile(q_base, rows, sqn, offs_d, valid), dmask)
        g = _filter(_sigmoid(_tile(l_base, rows, sln, offs_d, valid)), THETA, REC, K)
        out = _dot(rq * g, c, DOT_KIND)
        tl.store(o_base + rows[:, None].to(tl.int64) * son + offs_v[None, :],
                 out.to(OUT.dtype.element_ty), mask=inside[:, None] & vmask[None, :])
        if GRAM:
            real = _real_rows(MASK, b, rows, inside, smb, HAS_MASK)
            kept = tl.where(real[:, None], rq, 0.0)
            gram = gram + _dot(tl.trans(kept), kept, DOT_KIND)
    if GRAM:
        part = (bh * splits + split).to(tl.int64)
        _store_part(G_OUT, part, D, D, gram, offs_d, offs_d, dmask, dmask)


@triton.jit
def agf_queries_backward(
    Q, L, C, THETA, REC, DO, W, MASK, DQ, DL, DC_OUT, DTHETA_OUT,
    H, N, D, DV, CHUNK,
    sqb, sqh, sqn, slb, slh, sln, sgb, sgh, sgn, sdqb, sdqh, sdqn, sdlb, sdlh, sdln, smb,
    K: tl.constexpr, BLOCK_K: tl.constexpr, HAS_MASK: tl.constexpr, GRAM: tl.constexpr,
    DOT_KIND: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    """Per block of tokens: ``dQ`` and ``dL`` (stored), the chunk's ``dC = (U ⊙ G)ᵀ dOut`` and
    ``dθ_k = Σ dG ⊙ P_k`` (partial sums). ``W`` is the regulariser's ``w + wᵀ`` (``GRAM``)."""
    bh, b, hh, offs_d, offs_v, dmask, vmask = _program(H, D, DV, BLOCK_D, BLOCK_DV)
    split = tl.program_id(1)
    splits = tl.num_programs(1)
    offs_k = tl.arange(0, BLOCK_K)
    c = _per_head(C, bh, D, DV, offs_d, offs_v, dmask, vmask)
    ct = tl.trans(c)
    if GRAM:
        w = _per_head(W, bh, D, D, offs_d, offs_d, dmask, dmask)
    q_base = Q + b * sqb + hh * sqh
    l_base = L + b * slb + hh * slh
    g_base = DO + b * sgb + hh * sgh
    dq_base = DQ + b * sdqb + hh * sdqh
    dl_base = DL + b * sdlb + hh * sdlh
    dc = tl.zeros([BLOCK_D, BLOCK_DV], dtype=tl.float32)
    dtheta = tl.zeros([BLOCK_K], dtype=tl.float32)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, N)
    for row in range(start, end, BLOCK_N):
        rows = row + tl.arange(0, BLOCK_N)
        inside = rows < end
        valid = inside[:, None] & dmask[None, :]
        rq = _row_softmax(_tile(q_base, rows, sqn, offs_d, valid), dmask)
        x = _sigmoid(_tile(l_base, rows, sln, offs_d, valid))
        grad_out = _tile(g_base, rows, sgn, offs_v, inside[:, None] & vmask[None, :])
        du = _dot(grad_out, ct, DOT_KIND)
        dg = du * rq
        # G and its derivative dG/dx along the recursion (P_0 = 1, P_0' = 0).
        previous = tl.zeros_like(x)
        current = previous + 1.0
        d_previous = tl.zeros_like(x)
        d_current = tl.zeros_like(x)
        g = current * tl.load(THETA)
        g_slope = tl.zeros_like(x)
        dtheta += tl.where(offs_k == 0, tl.sum(tl.sum(dg, axis=1), axis=0), 0.0)
        for j in tl.static_range(1, K + 1):
            alpha = tl.load(REC + 3 * j)
            beta = tl.load(REC + 3 * j + 1)
            gamma = tl.load(REC + 3 * j + 2)
            linear = alpha * x + beta
            following = linear * current - gamma * previous
            d_following = alpha * current + linear * d_current - gamma * d_previous
            previous = current
            current = following
            d_previous = d_current
            d_current = d_following
            theta = tl.load(THETA + j)
            g = g + theta * following
            g_slope = g_slope + theta * d_following
            dtheta += tl.where(offs_k == j, tl.sum(tl.sum(dg * following, axis=1), axis=0), 0.0)
        drq = du * g
        if GRAM:
            real = _real_rows(MASK, b, rows, inside, smb, HAS_MASK)
            kept = tl.where(real[:, None], rq, 0.0)
            drq += tl.where(real[:, None], _dot(kept, w, DOT_KIND), 0.0)
        drq = tl.where(valid, drq, 0.0)
        dq = rq * (drq - tl.sum(drq * rq, axis=1)[:, None])
        dl = dg * g_slope * x * (1.0 - x)
        offsets = rows[:, None].to(tl.int64)
        tl.store(dq_base + offsets * sdqn + offs_d[None, :], dq.to(DQ.dtype.element_ty),
                 mask=valid)
        tl.store(dl_base + offsets * sdln + offs_d[None, :], dl.to(DL.dtype.element_ty),
                 mask=valid)
        dc = dc + _dot(tl.trans(rq * g), grad_out, DOT_KIND)
    part = (bh * splits + split).to(tl.int64)
    _store_part(DC_OUT, part, D, DV, dc, offs_d, offs_v, dmask, vmask)
    tl.store(DTHETA_OUT + part * BLOCK_K + offs_k, dtheta)


@triton.jit
def agf_keys_backward(
    K_, V_, MASK, M, INV, DC, CORR, W, DK, DV_,
    H, N, D, DV, CHUNK,
    skb, skh, skn, svb, svh, svn, sdkb, sdkh, sdkn, sdvb, sdvh, sdvn, smb,
    HAS_MASK: tl.constexpr, GRAM: tl.constexpr, DOT_KIND: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    """Per block of tokens: ``dVs = V dCᵀ (+ Vs W)``, ``dK = Vs ⊙ (dVs − CORR)`` and
    ``dV = Vs dC``, with ``Vs = exp(K − M) / S`` recomputed (0 at padded keys)."""
    bh, b, hh, offs_d, offs_v, dmask, vmask = _program(H, D, DV, BLOCK_D, BLOCK_DV)
    stats = bh.to(tl.int64) * D + offs_d
    m = tl.load(M + stats, mask=dmask, other=0.0)
    inv = tl.load(INV + stats, mask=dmask, other=0.0)
    corr = tl.load(CORR + stats, mask=dmask, other=0.0)
    dc = _per_head(DC, bh, D, DV, offs_d, offs_v, dmask, vmask)
    dct = tl.trans(dc)
    if GRAM:
        w = _per_head(W, bh, D, D, offs_d, offs_d, dmask, dmask)
    k_base = K_ + b * skb + hh * skh
    v_base = V_ + b * svb + hh * svh
    dk_base = DK + b * sdkb + hh * sdkh
    dv_base = DV_ + b * sdvb + hh * sdvh
    start = tl.program_id(1) * CHUNK
    end = tl.minimum(start + CHUNK, N)
    for row in range(start, end, BLOCK_N):
        rows = row + tl.arange(0, BLOCK_N)
        inside = rows < end
        real = _real_rows(MASK, b, rows, inside, smb, HAS_MASK)
        valid = inside[:, None] & dmask[None, :]
        kept = real[:, None] & dmask[None, :]
        kb = _tile(k_base, rows, skn, offs_d, kept)
        rk = tl.where(kept, tl.exp(tl.minimum(kb - m[None, :], 0.0)) * inv[None, :], 0.0)
        vb = _tile(v_base, rows, svn, offs_v, inside[:, None] & vmask[None, :])
        drk = _dot(vb, dct, DOT_KIND)
        if GRAM:
            drk += _dot(rk, w, DOT_KIND)
        dk = rk * (drk - corr[None, :])
        dv = _dot(rk, dc, DOT_KIND)
        offsets = rows[:, None].to(tl.int64)
        tl.store(dk_base + offsets * sdkn + offs_d[None, :], dk.to(DK.dtype.element_ty),
                 mask=valid)
        tl.store(dv_base + offsets * sdvn + offs_v[None, :], dv.to(DV_.dtype.element_ty),
                 mask=inside[:, None] & vmask[None, :])


@triton.jit
def agf_merge_keys(
    MAXIMA, SUMS, CONTEXT, GRAM, TOP, INVERSE, MERGED, MERGED_GRAM,
    T, D, DV, tiny,
    HAS_GRAM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    """Per (sample, head) p: the key pass's T chunks merged, as the column softmax over every
    token gives them. Chunk t holds its running maxima ``m_t``, sums ``s_t``, ``C_t =
    exp(K − m_t)ᵀ V`` and ``G_t = exp(K − m_t)ᵀ exp(K − m_t)`` (contiguous ``(P, T, …)``); with
    ``M = max_t m_t`` and ``c_t = exp(m_t − M)``: ``TOP = M``, ``INVERSE = 1 / Σ_t c_t s_t``
    (0 where that sum is 0), ``MERGED = INVERSE ⊙ Σ_t c_t C_t`` (scaling rows) and
    ``MERGED_GRAM = INVERSE_i INVERSE_j Σ_t c_t,i c_t,j G_t``."""
    p = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, BLOCK_D)
    row_valid = rows < D
    cols = tl.arange(0, BLOCK_DV)
    col_valid = cols < DV
    top = tl.full([BLOCK_D], -float("inf"), tl.float32)
    for t in range(0, T):
        maxima = tl.load(MAXIMA + (p * T + t) * D + rows, mask=row_valid, other=-float("inf"))
        top = tl.maximum(top, maxima)
    top = tl.where(row_valid, top, 0.0)
    total = tl.zeros([BLOCK_D], dtype=tl.float32)
    context = tl.zeros([BLOCK_D, BLOCK_DV], dtype=tl.float32)
    gram = tl.zeros([BLOCK_D, BLOCK_D], dtype=tl.float32)
    for t in range(0, T):
        chunk = p * T + t
        maxima = tl.load(MAXIMA + chunk * D + rows, mask=row_valid, other=0.0)
        scale = tl.where(row_valid, tl.exp(maxima - top), 0.0)
        total += scale * tl.load(SUMS + chunk * D + rows, mask=row_valid, other=0.0)
        block = tl.load(CONTEXT + chunk * D * DV + rows[:, None] * DV + cols[None, :],
                        mask=row_valid[:, None] & col_valid[None, :], other=0.0)
        context += scale[:, None] * block
        if HAS_GRAM:
            block = tl.load(GRAM + chunk * D * D + rows[:, None] * D + rows[None, :],
                            mask=row_valid[:, None] & row_valid[None, :], other=0.0)
            gram += scale[:, None] * scale[None, :] * block
    inverse = tl.where(total > 0, 1.0 / tl.maximum(total, tiny), 0.0)
    tl.store(TOP + p * D + rows, top, mask=row_valid)
    tl.store(INVERSE + p * D + rows, inverse, mask=row_valid)
    tl.store(MERGED + p * D * DV + rows[:, None] * DV + cols[None, :],
             context * inverse[:, None], mask=row_valid[:, None] & col_valid[None, :])
    if HAS_GRAM:
        tl.store(MERGED_GRAM + p * D * D + rows[:, None] * D + rows[None, :],
                 gram * inverse[:, None] * inverse[None, :],
                 mask=row_valid[:, None] & row_valid[None, :])


@triton.jit
def _gram_tile(D, BLOCK_D: tl.constexpr):
    """A program's ``(D, D)`` tile: offsets, validity and the identity."""
    rows = tl.arange(0, BLOCK_D)
    valid = (rows < D)[:, None] & (rows < D)[None, :]
    eye = tl.where(rows[:, None] == rows[None, :], 1.0, 0.0)
    return rows[:, None] * D + rows[None, :], valid, eye


@triton.jit
def agf_orthogonality(
    GRAM_U_PARTS, GRAM_K, GRAM_U, LOSS, T, D, scale, BLOCK_D: tl.constexpr,
):
    """Per (sample, head) p: ``Gu``, the sum of the query pass's T chunks of ``UᵀU``, and the
    regulariser's share ``scale · (Σ|Gu − I| + Σ|Gk − I|)`` (``scale = 1 / (P·D²)``, so the
    shares sum to ``mean|Gu − I| + mean|Gk − I|``)."""
    p = tl.program_id(0).to(tl.int64)
    offs, valid, eye = _gram_tile(D, BLOCK_D)
    gram_u = tl.zeros([BLOCK_D, BLOCK_D], dtype=tl.float32)
    for t in range(0, T):
        gram_u += tl.load(GRAM_U_PARTS + (p * T + t) * D * D + offs, mask=valid, other=0.0)
    tl.store(GRAM_U + p * D * D + offs, gram_u, mask=valid)
    gram_k = tl.load(GRAM_K + p * D * D + offs, mask=valid, other=0.0)
    deviation = tl.where(valid, tl.abs(gram_u - eye) + tl.abs(gram_k - eye), 0.0)
    tl.store(LOSS + p, tl.sum(tl.sum(deviation, axis=1), axis=0) * scale)


@triton.jit
def _sign(x):
    return tl.where(x > 0, 1.0, tl.where(x < 0, -1.0, 0.0))


@triton.jit
def agf_orthogonality_weights(
    GRAM_U, GRAM_K, GRAD, WEIGHTS_U, WEIGHTS_K, D, scale, BLOCK_D: tl.constexpr,
):
    """Per (sample, head) p, for both Gram matrices: ``w + wᵀ`` with ``w = sign(G − I) · grad ·
    scale`` (``scale = 1 / (P·D²)``, the mean's): the regulariser's gradient with respect to a
    feature map F is ``F (w + wᵀ)``."""
    p = tl.program_id(0).to(tl.int64)
    offs, valid, eye = _gram_tile(D, BLOCK_D)
    factor = tl.load(GRAD).to(tl.float32) * scale
    w = _sign(tl.load(GRAM_U + p * D * D + offs, mask=valid, other=0.0) - eye) * factor
    tl.store(WEIGHTS_U + p * D * D + offs, w + tl.trans(w), mask=valid)
    w = _sign(tl.load(GRAM_K + p * D * D + offs, mask=valid, other=0.0) - eye) * factor
    tl.store(WEIGHTS_K + p * D * D + offs, w + tl.trans(w), mask=valid)
