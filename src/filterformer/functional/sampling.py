"""Differentiable sampling of k tokens without replacement (SAMSA; METHODS.md §4).

Scores ``z`` rank M candidate vectors (per batch and head). The top 2k split into "top" (first k)
and "bot" (next k); ``P[m, v] = sigmoid((z_top[m] − z_bot[v]) / τ)`` compares each chosen token with
each runner-up (a local search step of the top-k choice, relaxed by a Gumbel sigmoid).

- soft: ``sampled[m] = mean_v P[m,v]·X_top[m] + (1/k)·Σ_v (1 − P[m,v])·X_bot[v]``.
- hard: forward ``X_top`` exactly; backward ``dX_top = grad``, ``dX_bot = 0`` and the scores get
  the soft path's gradient (straight-through).
- :func:`topk_gather` is the gradient-free hard path: one top-k and a gather, no k×k matrix.

Candidates are a tensor ``(..., M, C)`` or a function from indices ``(..., m)`` to the rows
``(..., m, C)`` they name (:data:`CandidateRows`): SAMSA's candidates are the tokens' keys and
values followed by learned support tokens, and gathering from each where they are avoids copying
all N tokens into one concatenated tensor per call when only 2k rows are read.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..checks import check_integer
from .coefficient_dtype import as_terms_dtype, terms_dtype
from .fused import fused
from .samsa_triton import SWITCH as SAMSA_KERNELS
from .samsa_triton import sample_kernels_apply, soft_sample, straight_through_score_gradient
from .triton_support import transformed

__all__ = [
    "SAMPLING_MODES",
    "CandidateRows",
    "add_rms_normed",
    "differentiable_topk",
    "gather_rows",
    "gumbel_noise",
    "sampling_mixture",
    "topk_gather",
    "topk_split",
]

#: How sampled vectors are formed while gradients flow.
SAMPLING_MODES = ("soft", "hard")

#: Candidates given by a function: indices ``(..., m)`` -> their rows ``(..., m, C)``.
CandidateRows = Callable[[Tensor], Tensor]


@fused
def add_rms_normed(
    x: Tensor, hidden: Tensor, weight: Tensor, eps: float | None,
    out_dtype: torch.dtype | None = None,
) -> Tensor:
    """``x + RMSNorm(hidden)`` with the norm in the wider of hidden's and the weight's dtype: the
    last step of SAMSA's importance score (under autocast, the half-precision MLP output is
    normalised in the float32 weight's dtype).

    Args:
        x: ``(B, N, D)`` the residual stream.
        hidden: ``(B, N, D)`` the score MLP's output.
        weight: ``(D,)`` the norm's scale.
        eps: the norm's epsilon (None: the dtype's machine epsilon, as :class:`torch.nn.RMSNorm`).
        out_dtype: the result's dtype (under autocast, the half precision the next projection
            reads it in: the cast is part of the fused region).

    Returns:
        ``(B, N, D)`` in ``out_dtype``, else the wider of x's dtype and that of the norm.
    """
    wide = terms_dtype(hidden, weight)
    eps = torch.finfo(wide).eps if eps is None else eps
    # torch's RMS norm: one operation for the host (``hidden · rsqrt(mean(hidden²) + eps) · w``).
    normed = F.rms_norm(as_terms_dtype(hidden, wide), hidden.shape[-1:],
                        as_terms_dtype(weight, wide), eps)
    out = x + normed
    return out if out_dtype is None else as_terms_dtype(out, out_dtype)


def gumbel_noise(
    like: Tensor, generator: torch.Generator | None = None, dtype: torch.dtype | None = None
) -> Tensor:
    """Gumbel(0, 1) noise of ``like``'s shape and device, in ``dtype`` (``like``'s when None):
    ``−log(E)`` with E ~ Exp(1)."""
    exp = torch.empty_like(like, dtype=dtype).exponential_(generator=generator)
    return -exp.clamp_min(torch.finfo(exp.dtype).tiny).log()


def _check_k(k: int, available: int, needed: int) -> int:
    check_integer("k (the number of sampled tokens)", k)
    if available < needed:
        raise ValueError(
            f"sampling k={k} needs at least {needed} candidates; got {available} "
            "(SAMSA's 2k support tokens guarantee enough)"
        )
    return k


def _check_temperature(temperature: float) -> None:
    if not temperature > 0:  # NaN included
        raise ValueError(f"temperature must be > 0; got {temperature}")


def _candidate_rows(scores: Tensor, candidates: Tensor | CandidateRows) -> CandidateRows:
    """``candidates`` as a function of indices, after checking a tensor's shape."""
    if callable(candidates) and not isinstance(candidates, Tensor):
        return candidates
    if candidates.dim() != scores.dim() + 1 or candidates.shape[:-1] != scores.shape:
        raise ValueError(
            f"candidates must have shape (*scores.shape, C) = ({', '.join(map(str, scores.shape))}"
            f", C); got {tuple(candidates.shape)}"
        )
    return lambda index: gather_rows(candidates, index)


def gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """Rows of ``x`` ``(..., M, C)`` at ``index`` ``(..., k)``: ``(..., k, C)``."""
    return x.gather(-2, index.unsqueeze(-1).expand(*index.shape, x.shape[-1]))


def topk_gather(scores: Tensor, candidates: Tensor | CandidateRows, k: int) -> Tensor:
    """The k highest-scored candidates: one top-k and one gather.

    Args:
        scores: ``(..., M)``.
        candidates: ``(..., M, C)``, or a function of indices (:data:`CandidateRows`).
        k: how many to take (``k ≤ M``).

    Returns:
        ``(..., k, C)``, ordered by decreasing score.
    """
    rows = _candidate_rows(scores, candidates)
    _check_k(k, scores.shape[-1], k)
    return rows(scores.topk(k, dim=-1).indices)


def topk_split(scores: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Indices of the top k ("top") and of the next k ("bot") scores.

    Args:
        scores: ``(..., M)`` with ``M ≥ 2k``.

    Returns:
        ``(top, bot)``, each ``(..., k)`` long, ordered by decreasing score.
    """
    _check_k(k, scores.shape[-1], 2 * k)
    index = scores.topk(2 * k, dim=-1).indices
    return index[..., :k], index[..., k:]


def sampling_mixture(
    z_top: Tensor, z_bot: Tensor, temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """The soft sample's weights: ``sampled = keep ⊙ X_top + mix @ X_bot``.

    ``P[m, v] = sigmoid((z_top[m] − z_bot[v]) / τ)``, ``keep[m] = mean_v P[m, v]`` and
    ``mix[m, v] = (1 − P[m, v]) / k``.

    Args:
        z_top: ``(..., k)`` scores of the chosen tokens.
        z_bot: ``(..., k)`` scores of the runners-up.
        temperature: τ > 0.

    Returns:
        ``(keep, mix)``: ``(..., k)`` and ``(..., k, k)``.
    """
    _check_temperature(temperature)
    prob = _pair_probabilities(z_top, z_bot, temperature)
    return prob.mean(dim=-1), (1 - prob) / z_bot.shape[-1]


def _pair_probabilities(z_top: Tensor, z_bot: Tensor, temperature: float) -> Tensor:
    """``P[m, v] = sigmoid((z_top[m] − z_bot[v]) / τ)``: ``(..., k)`` twice -> ``(..., k, k)``."""
    return torch.sigmoid((z_top.unsqueeze(-1) - z_bot.unsqueeze(-2)) / temperature)


def differentiable_topk(
    scores: Tensor,
    candidates: Tensor | CandidateRows,
    k: int,
    *,
    mode: str = "soft",
    temperature: float = 1.0,
) -> Tensor:
    """Sample k of M candidates without replacement, with gradients to scores and candidates.

    Gumbel noise, if any, is already in ``scores`` (add :func:`gumbel_noise` while training).
    The mixture's weights and the mixture are computed in float32 at least (float64 stays
    float64) and returned in the candidates' dtype, so half-precision candidates do not overflow
    the weights' gradient.

    Args:
        scores: ``(..., M)`` importance scores, ``M ≥ 2k``; excluded candidates (padding) carry
            the dtype's minimum.
        candidates: ``(..., M, C)`` vectors (SAMSA: keys and values side by side), or a function
            of indices giving them (:data:`CandidateRows`).
        k: how many to sample.
        mode: ``"soft"`` (the mixture) or ``"hard"`` (exact top k forward, straight-through).
        temperature: τ of the Gumbel sigmoid.

    Returns:
        ``(..., k, C)``.
    """
    if mode not in SAMPLING_MODES:
        raise ValueError(f"mode must be one of {SAMPLING_MODES}; got {mode!r}")
    rows = _candidate_rows(scores, candidates)
    _check_k(k, scores.shape[-1], 2 * k)
    _check_temperature(temperature)
    index = scores.topk(2 * k, dim=-1).indices  # top k, then the runners-up (topk_split)
    chosen = rows(index)  # one gather for both blocks
    # The soft sample's rows are split: their two gradients join in one concatenation, where
    # each slice's backward would fill a zero tensor of chosen's size, and the two be added. The
    # hard sample passes no gradient to the runners-up: one slice's backward is the cheaper.
    x_top, x_bot = (chosen.split(k, dim=-2) if mode == "soft"
                    else (chosen[..., :k, :], chosen[..., k:, :]))
    # The mixture's backward multiplies the incoming gradient by the candidates (the weights'
    # gradient is Σ_c grad·X): in half precision that product overflows while the gradient it
    # gives the scores is small. Weights and mixture are formed in float32 at least.
    wide = torch.promote_types(torch.promote_types(scores.dtype, chosen.dtype), torch.float32)
    z = scores.gather(-1, index).to(wide)
    if mode == "hard":  # exactly x_top; the mixture exists only in the backward
        sample = _TransformableSample if transformed() else _StraightThroughSample
        return sample.apply(x_top, x_bot, z, float(temperature))

    def eager(top: Tensor, bot: Tensor, scores: Tensor) -> Tensor:
        keep, mix = sampling_mixture(scores[..., :k], scores[..., k:], temperature)
        return (keep.unsqueeze(-1) * top.to(wide) + mix @ bot.to(wide)).to(chosen.dtype)

    if sample_kernels_apply(x_top, x_bot, z):  # CUDA: one launch, one more backward
        return SAMSA_KERNELS.run(
            lambda: soft_sample(x_top, x_bot, z, temperature, chosen.dtype, eager),
            lambda: eager(x_top, x_bot, z),
        )
    return eager(x_top, x_bot, z)


class _StraightThroughSample(torch.autograd.Function):
    """The hard sample: forward ``X_top`` ``(..., k, C)`` itself; backward ``X_top``'s gradient
    unchanged, none to ``X_bot``, and to the scores ``z`` ``(..., 2k)`` (top k, then the
    runners-up, at least float32) the gradient that the soft sample ``keep ⊙ X_top + mix @ X_bot``
    of these vectors held constant gives them (:func:`sampling_mixture`), written out: with
    ``P[m, v] = sigmoid((z_top[m] − z_bot[v]) / τ)`` and ``G`` the gradient,
    ``dP[m, v] = (G[m]·X_top[m] − G[m]·X_bot[v]) / k`` and ``dS = dP ⊙ P(1 − P) / τ``, then
    ``dz_top[m] = Σ_v dS[m, v]`` and ``dz_bot[v] = −Σ_m dS[m, v]``. The forward pass forms no
    ``(k, k)`` mixture, which a value equal to ``X_top`` never reads.

    Under :mod:`torch.func` transforms :class:`_TransformableSample` serves instead: a Function
    written for them (a ``setup_context``) costs its host more a call, as torch binds its
    arguments to the forward's signature each time."""

    @staticmethod
    def forward(ctx, x_top: Tensor, x_bot: Tensor, z: Tensor, temperature: float) -> Tensor:
        _keep_for_backward(ctx, x_top, x_bot, z, temperature)
        return x_top.view_as(x_top)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, Tensor, None]:
        x_top, x_bot, z = ctx.saved_tensors
        tau = ctx.temperature
        if sample_kernels_apply(x_top, x_bot, z):  # CUDA: one launch
            scores_grad = SAMSA_KERNELS.run_backward(
                lambda: straight_through_score_gradient(grad, x_top, x_bot, z, tau),
                lambda: _straight_through_scores(grad, x_top, x_bot, z, tau),
                atomic=True,  # the runners-up's gradients: sums over blocks of chosen rows
            )
        else:
            scores_grad = _straight_through_scores(grad, x_top, x_bot, z, tau)
        return grad, None, scores_grad, None


def _keep_for_backward(ctx, x_top: Tensor, x_bot: Tensor, z: Tensor, temperature: float) -> None:
    ctx.save_for_backward(x_top, x_bot, z)
    ctx.temperature = temperature


class _TransformableSample(_StraightThroughSample):
    """:class:`_StraightThroughSample` written for :mod:`torch.func` (``grad``, ``vmap``,
    ``jacrev``): the forward takes no ``ctx`` and the batching rule is generated; under a
    transform the backward takes its torch operations
    (:func:`~filterformer.functional.triton_support.transformed`)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x_top: Tensor, x_bot: Tensor, z: Tensor, temperature: float) -> Tensor:
        return x_top.view_as(x_top)

    @staticmethod
    def setup_context(ctx, inputs: tuple, output: Tensor) -> None:
        _keep_for_backward(ctx, *inputs)


def _straight_through_scores(grad: Tensor, x_top: Tensor, x_bot: Tensor, z: Tensor,
                             tau: float) -> Tensor:
    """:class:`_StraightThroughSample`'s gradient to the scores by torch operations (with a
    graph under ``create_graph``)."""
    k, wide = x_top.shape[-2], z.dtype
    g = grad.to(wide)  # G·X in float32 at least: half-precision products overflow
    along_top = (g * x_top.to(wide)).sum(-1, keepdim=True)  # (..., k, 1): G[m]·X_top[m]
    along_bot = g @ x_bot.to(wide).transpose(-1, -2)  # (..., k, k): G[m]·X_bot[v]
    prob = _pair_probabilities(z[..., :k], z[..., k:], tau)
    d_logit = (along_top - along_bot) * prob * (1 - prob) / (k * tau)
    return torch.cat([d_logit.sum(-1), -d_logit.sum(-2)], dim=-1)
