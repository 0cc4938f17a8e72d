"""Float64 references written from METHODS.md, for any mask pattern (explicit matrices)."""

from __future__ import annotations

import torch
from scipy.special import eval_jacobi
from torch import Tensor

from filterformer.functional.polynomials import NAMED_JACOBI_PARAMETERS


def softmax_rows(scores: Tensor, allowed: Tensor) -> Tensor:
    """Row softmax over allowed entries; a row with none is 0."""
    if not scores.shape[-1]:
        return torch.zeros_like(scores)
    scores = scores.masked_fill(~allowed, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(top.isfinite(), top, torch.zeros_like(top))
    weights = (scores - top).exp()
    total = weights.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, weights / total.clamp_min(1e-300), torch.zeros_like(weights))


def attention(q: Tensor, k: Tensor, allowed: Tensor, bias: Tensor, scale: float | None) -> Tensor:
    """``Ā = softmax(QKᵀ·scale + bias)`` over allowed keys, ``(B, h, L, S)``."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return softmax_rows(q.double() @ k.double().transpose(-1, -2) * scale + bias, allowed)


def logits(
    q: Tensor, k: Tensor, allowed: Tensor, bias: Tensor, scale: float | None = None
) -> float:
    """The largest |score| at an allowed entry: how much rounding a score can move Ā."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (q.double() @ k.double().transpose(-1, -2)) * scale + bias
    scores = scores.abs().masked_fill(~allowed, 0.0)
    return scores.max().item() if scores.numel() else 0.0


def efficient_maps(q: Tensor, k: Tensor, real: Tensor | None) -> tuple[Tensor, Tensor]:
    """ρq (softmax over features) and ρk (softmax over real tokens per feature, 0 elsewhere)."""
    q, k = q.double(), k.double()
    rho_q = (q - q.amax(-1, keepdim=True)).exp()
    rho_q = rho_q / rho_q.sum(-1, keepdim=True)
    if real is None:
        real = torch.ones(k.shape[0], k.shape[-2], dtype=torch.bool)
    allowed = real[:, None, :, None].expand(k.shape)
    rho_k = softmax_rows(k.transpose(-1, -2), allowed.transpose(-1, -2)).transpose(-1, -2)
    return rho_q, rho_k


def graph_filter(attn: Tensor, w0: Tensor, w1: Tensor, wK: Tensor, K: int, exact: bool) -> Tensor:
    """``H̃ = w0·I + w1·Ā + wK·(Ā + (K−1)(Ā² − Ā))`` (or ``wK·Ā^K``), per head."""
    w0, w1, wK = (w.double().view(1, -1, 1, 1) for w in (w0, w1, wK))
    eye = torch.eye(attn.shape[-1], dtype=torch.float64)
    if exact:
        high = eye.expand(attn.shape).clone()
        for _ in range(K):
            high = high @ attn
    else:
        high = attn + (K - 1) * (attn @ attn - attn)
    return w0 * eye + w1 * attn + wK * high


def polynomial(x: Tensor, coefficients: Tensor, basis: str, a: float, b: float) -> Tensor:
    """``Σ_k c_k P_k(x)`` with scipy's Jacobi polynomials (or monomials)."""
    points = x.double().numpy()
    total = torch.zeros(x.shape, dtype=torch.float64)
    a, b = NAMED_JACOBI_PARAMETERS.get(basis, (a, b))
    for order, c in enumerate(coefficients.double().tolist()):
        if basis == "monomial":
            term = x.double() ** order
        else:
            term = torch.from_numpy(eval_jacobi(order, a, b, points))
        total = total + c * term
    return total


def sampled(scores: Tensor, candidates: Tensor, k: int, mode: str, temperature: float) -> Tensor:
    """SAMSA's sample (METHODS.md §4) by sorting: the top k, mixed with the next k when soft."""
    order = scores.double().argsort(dim=-1, descending=True, stable=True)
    top, bot = order[..., :k], order[..., k : 2 * k]
    z = scores.double()
    x = candidates.double()

    def rows(index: Tensor) -> Tensor:
        return x.gather(-2, index.unsqueeze(-1).expand(*index.shape, x.shape[-1]))

    x_top, x_bot = rows(top), rows(bot)
    if mode == "hard":
        return x_top
    diff = (z.gather(-1, top).unsqueeze(-1) - z.gather(-1, bot).unsqueeze(-2)) / temperature
    prob = 1 / (1 + (-diff).exp())
    return prob.mean(-1, keepdim=True) * x_top + ((1 - prob) / k) @ x_bot
