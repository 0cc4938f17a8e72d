"""Frequency response of an N×N token filter (METHODS.md §6; Wang et al., ICLR 2022).

Tokens in order are read as a signal on a line graph, whose graph Fourier transform is the DFT
``F`` (``F_kj = e^{−2πi·kj/N}``). A filter ``H`` (``Ā``, GFSA's ``H̃``, AGF's ``(U⊙G)Vsᵀ``) maps
frequency ``k`` to itself with gain ``Λ_kk`` where ``Λ = F H Fᴴ / N``. Since
``Λ_kk = (1/N) Σ_d c_d e^{−2πi·kd/N}`` with ``c_d`` the sum of ``H`` over the wrapped diagonal
``i − j ≡ d (mod N)``, the diagonal of ``Λ`` is one FFT of those sums: ``O(N²)``, not ``O(N³)``.
A row-stochastic ``H`` has gain exactly 1 at frequency 0 and at most 1 elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..checks import check_integer
from ..functional import check_key_padding_mask

__all__ = ["FrequencyResponse", "filter_frequency_response", "frequency_grid"]


@dataclass
class FrequencyResponse:
    """A filter's normalised gain per frequency.

    Attributes:
        frequencies: ``(M,)`` in cycles per token, ascending from −1/2 (``fftshift`` order;
            0 is the mean token, ±1/2 the fastest alternation).
        magnitude: ``(M,)`` averaged over samples and heads, or ``(B, h, M)`` unreduced.
    """

    frequencies: Tensor
    magnitude: Tensor


def frequency_grid(num_frequencies: int, dtype: torch.dtype = torch.float64) -> Tensor:
    """The DFT frequencies of ``num_frequencies`` tokens in ``fftshift`` order, ``(M,)``."""
    return torch.fft.fftshift(torch.fft.fftfreq(num_frequencies, dtype=dtype))


def _diagonal_gains(filters: Tensor) -> Tensor:
    """``|diag(F H Fᴴ)| / n`` of ``(..., n, n)`` filters, in DFT order, ``(..., n)``."""
    n = filters.shape[-1]
    # In [H H] (n × 2n), row i's entries i … i+n sit at flat offsets i·(2n+1) + k: a strided view
    # whose column k holds H[i, (i + k) mod n], so its column sums are the wrapped diagonal sums
    # without a gathered copy of H; c_d (i − j ≡ d) is the sum at k = n − d.
    doubled = torch.cat([filters, filters], dim=-1)
    strides = (*doubled.stride()[:-2], 2 * n + 1, 1)
    sums = doubled.as_strided((*filters.shape[:-1], n + 1), strides).sum(dim=-2)
    return torch.fft.fft(sums[..., 1:].flip(-1)).abs() / n


def _resample(gains: Tensor, num_frequencies: int) -> Tensor:
    """Periodic linear interpolation of DFT-ordered gains ``(..., n)`` onto the shifted grid.

    Grid frequency ``k/M`` sits at position ``k·n/M`` of the length-``n`` spectrum; integer
    arithmetic keeps the positions exact, so ``M = n`` returns the gains themselves.
    """
    n = gains.shape[-1]
    steps = torch.arange(num_frequencies, device=gains.device) - num_frequencies // 2
    scaled = (steps * n) % (n * num_frequencies)
    lower = scaled // num_frequencies
    weight = ((scaled % num_frequencies).to(gains.dtype) / num_frequencies)
    upper = (lower + 1) % n
    return gains[..., lower] * (1 - weight) + gains[..., upper] * weight


def filter_frequency_response(
    filters: Tensor,
    mask: Tensor | None = None,
    *,
    num_frequencies: int | None = None,
    reduce: bool = True,
) -> FrequencyResponse:
    """Normalised frequency response ``|diag(F H Fᴴ)|/N`` of N×N token filters.

    Each sample's filter is restricted to its ``n`` real tokens (rows and columns, in order) and
    analysed with the ``n``-point DFT; the gains are ``fftshift``-ed and divided by their
    maximum per sample and head, then averaged. Samples whose real lengths differ from
    ``num_frequencies`` are linearly interpolated (periodically) onto its grid, so padding never
    enters the response.

    Args:
        filters: ``(B, h, N, N)`` per-head filters, or ``(B, N, N)``.
        mask: ``(B, N)`` bool, True at real tokens.
        num_frequencies: grid size M; the longest real length when None.
        reduce: average over samples and heads; otherwise keep ``(B, h, M)``.

    Returns:
        :class:`FrequencyResponse`. A sample or head whose gains are all 0 gives zeros.

    Raises:
        ValueError: on filters that are not square ``(B, [h,] N, N)`` or a bad mask.
    """
    if filters.dim() == 3:
        filters = filters[:, None]
    if filters.dim() != 4 or filters.shape[-1] != filters.shape[-2]:
        raise ValueError(
            f"filters must have shape (B, h, N, N) or (B, N, N); got {tuple(filters.shape)}"
        )
    if not filters.is_floating_point():
        raise ValueError(f"filters must be a floating-point tensor; got {filters.dtype}")
    batch, heads, length, _ = filters.shape
    if mask is None:
        mask = torch.ones(batch, length, dtype=torch.bool, device=filters.device)
    mask = check_key_padding_mask(mask, batch, length).to(filters.device)
    lengths = mask.sum(dim=-1)
    size = int(lengths.max()) if num_frequencies is None else num_frequencies
    check_integer("num_frequencies", size)
    if not bool(mask.all()):
        # Move each sample's real tokens to the front, in order, so its filter is the top-left
        # block (not needed, and a copy of every filter, when no token is padding).
        order = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)
        index = order[:, None, :, None].expand(batch, heads, length, length)
        filters = torch.take_along_dim(filters, index, dim=-2)
        filters = torch.take_along_dim(filters, index.transpose(-1, -2), dim=-1)
    magnitude = filters.new_zeros(batch, heads, size)
    for n in lengths.unique().tolist():
        if n == 0:
            continue
        same = lengths == n
        block = filters[:, :, :n, :n] if bool(same.all()) else filters[same, :, :n, :n]
        rows = same.nonzero().squeeze(-1)
        gains = _diagonal_gains(block)
        peak = gains.amax(dim=-1, keepdim=True)
        gains = torch.where(peak > 0, gains / peak.clamp_min(torch.finfo(gains.dtype).tiny), 0.0)
        magnitude[rows] = _resample(gains, size)
    if reduce:
        real = lengths > 0
        magnitude = magnitude[real].mean(dim=(0, 1))
    return FrequencyResponse(frequency_grid(size, filters.dtype).to(filters.device), magnitude)
