"""The Triton kernel of :mod:`filterformer.functional.samsa_triton` (imported on first use)."""

from __future__ import annotations

import triton
import triton.language as tl

from ._triton_primitives import dot, head_block, tile


@triton.jit
def _rows(TOKENS, SUPPORT, index, valid, N, stride_n, support_stride_n, offs, dmask):
    """The candidates at ``index``: a token's row below N, a support row (index − N) above."""
    is_token = index < N
    token_rows = tl.where(is_token, index, 0)
    support_rows = tl.where(is_token, 0, index - N)
    from_tokens = tile(TOKENS, token_rows, stride_n, offs,
                       (valid & is_token)[:, None] & dmask[None, :])
    from_support = tile(SUPPORT, support_rows, support_stride_n, offs,
                        (valid & ~is_token)[:, None] & dmask[None, :])
    return from_tokens + from_support


@triton.jit
def samsa_sampled_attention(
    Q, K_, V_, SK, SV, INDEX, OUT,
    H, N, S, D, DV, scale,
    sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sskh, sskn, ssvh, ssvn, sib, sih,
    sob, soh, son,
    DOT_KIND: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_DV: tl.constexpr,
):
    """Per (sample, head) and block of queries: softmax attention to the S candidates at INDEX,
    each gathered from the tokens' keys and values or the support tokens', by a running
    maximum over blocks of candidates."""
    b, hh, rows = head_block(H, BLOCK_M)
    inside = rows < N
    offs_d = tl.arange(0, BLOCK_D)
    offs_v = tl.arange(0, BLOCK_DV)
    dmask = offs_d < D
    vmask = offs_v < DV
    q = tile(Q + b * sqb + hh * sqh, rows, sqn, offs_d, inside[:, None] & dmask[None, :])
    m = tl.full([BLOCK_M], -float("inf"), tl.float32)
    total = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    k_base = K_ + b * skb + hh * skh
    v_base = V_ + b * svb + hh * svh
    for start in range(0, S, BLOCK_S):
        cols = start + tl.arange(0, BLOCK_S)
        valid = cols < S
        index = tl.load(INDEX + b * sib + hh * sih + cols, mask=valid, other=0)
        keys = _rows(k_base, SK + hh * sskh, index, valid, N, skn, sskn, offs_d, dmask)
        values = _rows(v_base, SV + hh * ssvh, index, valid, N, svn, ssvn, offs_v, vmask)
        logits = dot(q, tl.trans(keys), DOT_KIND) * scale
        logits = tl.where(valid[None, :], logits, -float("inf"))
        m_new = tl.maximum(m, tl.max(logits, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(logits - m_new[:, None])
        total = total * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + dot(p, values, DOT_KIND)
        m = m_new
    out = acc / total[:, None]
    tl.store(OUT + b * sob + hh * soh + rows[:, None].to(tl.int64) * son + offs_v[None, :],
             out.to(OUT.dtype.element_ty), mask=inside[:, None] & vmask[None, :])


@triton.jit
def samsa_candidate_scores(
    X, HIDDEN, NORM_W, HEAD_W, HEAD_B, SUPPORT, MASK, NOISE, OUT,
    N, D, H, S, eps, lowest,
    sxb, sxn, shb, shn, shead, ssupport, smask, snb, snh, snn, sob, soh,
    HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr, HAS_NOISE: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_S: tl.constexpr,
):
    """Per sample and block of tokens: each head's score ``(x + RMSNorm(hidden))·W_h + b_h``,
    plus its ``NOISE`` ``(B, h, N)`` where ``HAS_NOISE``, padded tokens at ``lowest``, in
    float32; the program after the last block writes the S support scores after the N
    tokens'."""
    b = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    heads = tl.arange(0, BLOCK_H)
    head_valid = heads < H
    out_base = OUT + b * sob
    if block * BLOCK_N >= N:
        for start in range(0, S, BLOCK_S):
            cols = start + tl.arange(0, BLOCK_S)
            valid = head_valid[:, None] & (cols < S)[None, :]
            support = tl.load(SUPPORT + heads[:, None] * ssupport + cols[None, :], mask=valid,
                              other=0.0)
            tl.store(out_base + heads[:, None] * soh + (N + cols)[None, :],
                     support.to(tl.float32), mask=valid)
    else:
        rows = block * BLOCK_N + tl.arange(0, BLOCK_N)
        inside = rows < N
        x_base = X + b * sxb
        hidden_base = HIDDEN + b * shb
        squares = tl.zeros([BLOCK_N], dtype=tl.float32)
        for start in range(0, D, BLOCK_D):
            offs = start + tl.arange(0, BLOCK_D)
            hidden = tile(hidden_base, rows, shn, offs, inside[:, None] & (offs < D)[None, :])
            squares += tl.sum(hidden * hidden, axis=1)
        inverse_rms = 1.0 / tl.sqrt(tl.where(inside, squares / D + eps, 1.0))  # eps may be 0
        scores = tl.zeros([BLOCK_N, BLOCK_H], dtype=tl.float32)
        for start in range(0, D, BLOCK_D):
            offs = start + tl.arange(0, BLOCK_D)
            features = offs < D
            valid = inside[:, None] & features[None, :]
            gain = tl.load(NORM_W + offs, mask=features, other=0.0).to(tl.float32)
            residual = (tile(x_base, rows, sxn, offs, valid)
                        + tile(hidden_base, rows, shn, offs, valid)
                        * inverse_rms[:, None] * gain[None, :])
            weights = tl.load(HEAD_W + heads[None, :] * shead + offs[:, None],
                              mask=features[:, None] & head_valid[None, :], other=0.0)
            scores += dot(residual, weights.to(tl.float32), 0)
        if HAS_BIAS:
            scores += tl.load(HEAD_B + heads, mask=head_valid, other=0.0).to(tl.float32)[None, :]
        if HAS_NOISE:
            scores += tl.load(NOISE + b * snb + heads[None, :].to(tl.int64) * snh
                              + rows[:, None].to(tl.int64) * snn,
                              mask=inside[:, None] & head_valid[None, :], other=0.0)
        if HAS_MASK:
            real = tl.load(MASK + b * smask + rows, mask=inside, other=0) != 0
            scores = tl.where(real[:, None], scores, lowest)
        tl.store(out_base + heads[None, :] * soh + rows[:, None], scores,
                 mask=inside[:, None] & head_valid[None, :])


@triton.jit
def samsa_candidate_scores_backward(
    X, HIDDEN, NORM_W, HEAD_W, GRAD, MASK, DX, DHIDDEN, PARTIAL,
    N, D, H, eps,
    sxb, sxn, shb, shn, shead, sgb, sgh, smask, sdxb, sdxn, sdhb, sdhn, spart,
    HAS_MASK: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """The gradients of :func:`samsa_candidate_scores`'s token scores ``GRAD`` ``(B, h, N)``
    (float32; a padded token's score, a constant, passes none): per sample and block of tokens,
    with ``r = rsqrt(mean(hidden²) + eps)``, ``d = GRAD·W`` (the sum's gradient),
    ``DX = d`` and ``DHIDDEN = r·gain·d − hidden·r³·mean(d·gain·hidden)``; the block's shares of
    the gain's, the head's weight's and its bias's gradients go to its row of ``PARTIAL``
    (``[D | h·D | h]``), summed over blocks after the launch."""
    b = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    rows = block * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = rows < N
    heads = tl.arange(0, BLOCK_H)
    head_valid = heads < H
    grad = tl.load(GRAD + b * sgb + heads[None, :].to(tl.int64) * sgh + rows[:, None],
                   mask=inside[:, None] & head_valid[None, :], other=0.0)
    if HAS_MASK:
        real = tl.load(MASK + b * smask + rows, mask=inside, other=0) != 0
        grad = tl.where(real[:, None], grad, 0.0)
    x_base = X + b * sxb
    hidden_base = HIDDEN + b * shb
    squares = tl.zeros([BLOCK_N], dtype=tl.float32)
    along = tl.zeros([BLOCK_N], dtype=tl.float32)  # Σ_j d_j·gain_j·hidden_j
    for start in range(0, D, BLOCK_D):
        offs = start + tl.arange(0, BLOCK_D)
        features = offs < D
        hidden = tile(hidden_base, rows, shn, offs, inside[:, None] & features[None, :])
        weights = tl.load(HEAD_W + heads[:, None] * shead + offs[None, :],
                          mask=head_valid[:, None] & features[None, :], other=0.0)
        gain = tl.load(NORM_W + offs, mask=features, other=0.0).to(tl.float32)
        d = dot(grad, weights.to(tl.float32), 0)
        squares += tl.sum(hidden * hidden, axis=1)
        along += tl.sum(d * gain[None, :] * hidden, axis=1)
    # 1 past the last token, where hidden is 0: with eps = 0, 1/sqrt(0) = inf there would put
    # inf·0 = NaN into the blocks' sums.
    inverse_rms = 1.0 / tl.sqrt(tl.where(inside, squares / D + eps, 1.0))
    correction = inverse_rms * inverse_rms * inverse_rms * along / D
    part = PARTIAL + (b * tl.num_programs(1) + block) * spart
    for start in range(0, D, BLOCK_D):
        offs = start + tl.arange(0, BLOCK_D)
        features = offs < D
        valid = inside[:, None] & features[None, :]
        hidden = tile(hidden_base, rows, shn, offs, valid)
        weights = tl.load(HEAD_W + heads[:, None] * shead + offs[None, :],
                          mask=head_valid[:, None] & features[None, :], other=0.0)
        gain = tl.load(NORM_W + offs, mask=features, other=0.0).to(tl.float32)
        d = dot(grad, weights.to(tl.float32), 0)
        unit = hidden * inverse_rms[:, None]
        residual = tile(x_base, rows, sxn, offs, valid) + unit * gain[None, :]
        tl.store(DX + b * sdxb + rows[:, None].to(tl.int64) * sdxn + offs[None, :],
                 d.to(DX.dtype.element_ty), mask=valid)
        d_hidden = inverse_rms[:, None] * gain[None, :] * d - hidden * correction[:, None]
        tl.store(DHIDDEN + b * sdhb + rows[:, None].to(tl.int64) * sdhn + offs[None, :],
                 d_hidden.to(DHIDDEN.dtype.element_ty), mask=valid)
        tl.store(part + offs, tl.sum(d * unit, axis=0), mask=features)
        head_share = dot(tl.trans(grad), residual, 0)  # (h, BLOCK_D)
        tl.store(part + D + heads[:, None] * D + offs[None, :], head_share,
                 mask=head_valid[:, None] & features[None, :])
    tl.store(part + D + H * D + heads, tl.sum(grad, axis=0), mask=head_valid)


@triton.jit
def _candidate_block(INDEX, H, M, D, DV, sib, sih, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr,
                     BLOCK_DV: tl.constexpr):
    """A gather program's sample b and head hh, its block of M candidate rows (and which are
    valid), the feature offsets of keys and values (and which are inside D and DV), and the
    rows' indices."""
    b, hh, rows = head_block(H, BLOCK_M)
    valid = rows < M
    offs_d = tl.arange(0, BLOCK_D)
    offs_v = tl.arange(0, BLOCK_DV)
    index = tl.load(INDEX + b * sib + hh * sih + rows, mask=valid, other=0)
    return b, hh, rows, valid, offs_d, offs_v, offs_d < D, offs_v < DV, index


@triton.jit
def samsa_gather_candidates(
    K_, V_, SUPPORT, INDEX, OUT,
    H, N, M, D, DV,
    skb, skh, skn, svb, svh, svn, ssh, ssn, sib, sih, sob, soh, son,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    """Per (sample, head) and block of M indices: the candidates' keys then values side by side,
    each row a token's (index below N) or a support token's (index − N; SUPPORT's rows hold a
    key then a value), in OUT's dtype."""
    b, hh, rows, valid, offs_d, offs_v, dmask, vmask, index = _candidate_block(
        INDEX, H, M, D, DV, sib, sih, BLOCK_M, BLOCK_D, BLOCK_DV)
    support = SUPPORT + hh * ssh
    keys = _rows(K_ + b * skb + hh * skh, support, index, valid, N, skn, ssn, offs_d, dmask)
    values = _rows(V_ + b * svb + hh * svh, support + D, index, valid, N, svn, ssn, offs_v,
                   vmask)
    out = OUT + b * sob + hh * soh + rows[:, None].to(tl.int64) * son
    tl.store(out + offs_d[None, :], keys.to(OUT.dtype.element_ty),
             mask=valid[:, None] & dmask[None, :])
    tl.store(out + D + offs_v[None, :], values.to(OUT.dtype.element_ty),
             mask=valid[:, None] & vmask[None, :])


@triton.jit
def samsa_scatter_candidates(
    GRAD, INDEX, DK, DV_, DSUPPORT,
    H, N, M, D, DV,
    sgb, sgh, sgn, sib, sih, sdkb, sdkh, sdkn, sdvb, sdvh, sdvn, sdsh, sdsn,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    """The gather's gradient: each candidate row's gradient stored at its token's row of DK
    and DV (the indices of one (sample, head) are distinct) or added to its support token's
    row of DSUPPORT (float32; the samples share the supports)."""
    b, hh, rows, valid, offs_d, offs_v, dmask, vmask, index = _candidate_block(
        INDEX, H, M, D, DV, sib, sih, BLOCK_M, BLOCK_D, BLOCK_DV)
    is_token = index < N
    token = tl.where(is_token, index, 0).to(tl.int64)
    support = tl.where(is_token, 0, index - N).to(tl.int64)
    grad = GRAD + b * sgb + hh * sgh + rows[:, None].to(tl.int64) * sgn
    key_mask = valid[:, None] & dmask[None, :]
    value_mask = valid[:, None] & vmask[None, :]
    grad_keys = tl.load(grad + offs_d[None, :], mask=key_mask, other=0.0).to(tl.float32)
    grad_values = tl.load(grad + D + offs_v[None, :], mask=value_mask, other=0.0).to(tl.float32)
    tl.store(DK + b * sdkb + hh * sdkh + token[:, None] * sdkn + offs_d[None, :],
             grad_keys.to(DK.dtype.element_ty), mask=key_mask & is_token[:, None])
    tl.store(DV_ + b * sdvb + hh * sdvh + token[:, None] * sdvn + offs_v[None, :],
             grad_values.to(DV_.dtype.element_ty), mask=value_mask & is_token[:, None])
    support_rows = DSUPPORT + hh * sdsh + support[:, None] * sdsn
    tl.atomic_add(support_rows + offs_d[None, :], grad_keys, mask=key_mask & ~is_token[:, None])
    tl.atomic_add(support_rows + D + offs_v[None, :], grad_values,
                  mask=value_mask & ~is_token[:, None])


@triton.jit
def _bounded(z):
    """Scores within ±1e30: their differences stay finite (padding's are float32's lowest)."""
    return tl.minimum(tl.maximum(z, -1.0e30), 1.0e30)


@triton.jit
def _pair_probability(z_top, z_bot, inverse_temperature):
    """``P[m, v] = sigmoid((z_top[m] − z_bot[v]) / τ)``, the logit bounded at ±80 (beyond, the
    sigmoid is 0 or 1 to float32's precision; exp and the difference stay finite)."""
    logit = tl.minimum(tl.maximum((z_top[:, None] - z_bot[None, :]) * inverse_temperature,
                                  -80.0), 80.0)
    return 1.0 / (1.0 + tl.exp(-logit))


@triton.jit
def samsa_sample_backward(
    G, XT, XB, Z, DZ, DXT, DXB,
    H, K, C, scale, inverse_temperature, inverse_k,
    sgb, sgh, sgn, stb, sth, stn, sbb, sbh, sbn, szb, szh, sdb, sdh,
    sdtb, sdth, sdtn, sdbb, sdbh, sdbn,
    SOFT: tl.constexpr, DOT_KIND: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """Per (sample, head) and block of chosen rows m, the sample's gradient to its scores
    (both modes): ``dS[m, v] = (G[m]·X_top[m] − G[m]·X_bot[v]) · P(1 − P) · scale`` with
    ``P = sigmoid((z_top[m] − z_bot[v]) / τ)``, ``Σ_v dS`` stored at DZ[m] and ``−Σ_m dS`` added
    to DZ[K + v] (zeros before the launch; the row blocks share them). With SOFT, also the soft
    sample's gradient to its rows: ``mean_v P[m, v] · G[m]`` stored at DXT[m] and
    ``Σ_m (1 − P[m, v]) / k · G[m]`` added to DXB[v] (float32 zeros before the launch).
    ``DOT_KIND`` is the precision of ``G·X_bot``: G's and X_bot's own where they share a half
    precision (their products are then exact, accumulated in float32), float32 otherwise."""
    b, hh, rows = head_block(H, BLOCK_M)
    row_valid = rows < K
    offs = tl.arange(0, BLOCK_C)
    features = offs < C
    g = tile(G + b * sgb + hh * sgh, rows, sgn, offs, row_valid[:, None] & features[None, :])
    x_top = tile(XT + b * stb + hh * sth, rows, stn, offs, row_valid[:, None] & features[None, :])
    along_top = tl.sum(g * x_top, axis=1)
    z_base = Z + b * szb + hh * szh
    z_top = _bounded(tl.load(z_base + rows, mask=row_valid, other=0.0).to(tl.float32))
    out = DZ + b * sdb + hh * sdh
    total = tl.zeros([BLOCK_M], dtype=tl.float32)
    keep = tl.zeros([BLOCK_M], dtype=tl.float32)
    for start in range(0, K, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        col_valid = cols < K
        pair_valid = row_valid[:, None] & col_valid[None, :]
        x_bot = tile(XB + b * sbb + hh * sbh, cols, sbn, offs,
                     col_valid[:, None] & features[None, :])
        along_bot = dot(g, tl.trans(x_bot), DOT_KIND)
        z_bot = _bounded(tl.load(z_base + K + cols, mask=col_valid, other=0.0).to(tl.float32))
        prob = _pair_probability(z_top, z_bot, inverse_temperature)
        d_logit = (along_top[:, None] - along_bot) * prob * (1.0 - prob) * scale
        d_logit = tl.where(pair_valid, d_logit, 0.0)
        total += tl.sum(d_logit, axis=1)
        tl.atomic_add(out + K + cols, -tl.sum(d_logit, axis=0), mask=col_valid)
        if SOFT:
            keep += tl.sum(tl.where(pair_valid, prob, 0.0), axis=1)
            share = dot(tl.trans(tl.where(pair_valid, 1.0 - prob, 0.0)), g, 0) * inverse_k
            tl.atomic_add(DXB + b * sdbb + hh * sdbh + cols[:, None].to(tl.int64) * sdbn
                          + offs[None, :], share, mask=col_valid[:, None] & features[None, :])
    tl.store(out + rows, total, mask=row_valid)
    if SOFT:
        tl.store(DXT + b * sdtb + hh * sdth + rows[:, None].to(tl.int64) * sdtn + offs[None, :],
                 (keep * inverse_k)[:, None] * g, mask=row_valid[:, None] & features[None, :])


@triton.jit
def samsa_soft_sample(
    XT, XB, Z, OUT,
    H, K, C, inverse_k, inverse_temperature,
    stb, sth, stn, sbb, sbh, sbn, szb, szh, sob, soh, son,
    BLOCK_M: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """Per (sample, head) and block of chosen rows m: the soft sample
    ``mean_v P[m, v] · X_top[m] + Σ_v (1 − P[m, v]) / k · X_bot[v]``, in float32, stored in
    OUT's dtype."""
    b, hh, rows = head_block(H, BLOCK_M)
    row_valid = rows < K
    offs = tl.arange(0, BLOCK_C)
    features = offs < C
    z_base = Z + b * szb + hh * szh
    z_top = _bounded(tl.load(z_base + rows, mask=row_valid, other=0.0).to(tl.float32))
    keep = tl.zeros([BLOCK_M], dtype=tl.float32)
    mixed = tl.zeros([BLOCK_M, BLOCK_C], dtype=tl.float32)
    for start in range(0, K, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        col_valid = cols < K
        z_bot = _bounded(tl.load(z_base + K + cols, mask=col_valid, other=0.0).to(tl.float32))
        prob = _pair_probability(z_top, z_bot, inverse_temperature)
        keep += tl.sum(tl.where(col_valid[None, :], prob, 0.0), axis=1)
        x_bot = tile(XB + b * sbb + hh * sbh, cols, sbn, offs,
                     col_valid[:, None] & features[None, :])
        mixed += dot(tl.where(col_valid[None, :], 1.0 - prob, 0.0), x_bot, 0)
    valid = row_valid[:, None] & features[None, :]
    x_top = tile(XT + b * stb + hh * sth, rows, stn, offs, valid)
    out = (keep[:, None] * x_top + mixed) * inverse_k
    tl.store(OUT + b * sob + hh * soh + rows[:, None].to(tl.int64) * son + offs[None, :],
             out.to(OUT.dtype.element_ty), mask=valid)
