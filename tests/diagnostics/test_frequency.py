import pytest
import torch

from filterformer.diagnostics import filter_frequency_response
from filterformer.functional import gfsa_filter

from .helpers import pad_filters, row_stochastic


def dft_gains(filters: torch.Tensor) -> torch.Tensor:
    """|diag(F H Fᴴ)|/n with the explicit DFT matrix, fftshift-ed: ``(..., n)``."""
    n = filters.shape[-1]
    k = torch.arange(n, dtype=torch.float64)
    dft = torch.exp(-2j * torch.pi * torch.outer(k, k) / n)
    spectrum = dft @ filters.to(torch.complex128) @ dft.conj().T / n
    return torch.fft.fftshift(torch.diagonal(spectrum, dim1=-2, dim2=-1).abs(), dim=-1)


def normalised_reference(filters: torch.Tensor) -> torch.Tensor:
    gains = dft_gains(filters)
    return (gains / gains.amax(dim=-1, keepdim=True)).mean(dim=(0, 1))


def zero_frequency(n: int) -> int:
    return n // 2  # position of frequency 0 after fftshift


@pytest.mark.parametrize("n", [5, 8])
def test_uniform_attention_passes_only_frequency_zero(n):
    uniform = torch.full((1, 1, n, n), 1.0 / n, dtype=torch.float64)
    response = filter_frequency_response(uniform)
    expected = torch.zeros(n, dtype=torch.float64)
    expected[zero_frequency(n)] = 1.0
    torch.testing.assert_close(response.magnitude, expected)
    assert response.frequencies[zero_frequency(n)] == 0


@pytest.mark.parametrize("n", [5, 8])
def test_identity_has_a_flat_response(n):
    response = filter_frequency_response(torch.eye(n, dtype=torch.float64)[None])
    torch.testing.assert_close(response.magnitude, torch.ones(n, dtype=torch.float64))


def test_row_stochastic_matrices_have_gain_exactly_one_at_frequency_zero():
    attn = row_stochastic(4, 3, 7, 7)
    raw = dft_gains(attn)
    torch.testing.assert_close(raw[..., zero_frequency(7)], torch.ones(4, 3, dtype=torch.float64))
    assert (raw <= 1 + 1e-12).all()
    response = filter_frequency_response(attn, reduce=False)
    torch.testing.assert_close(
        response.magnitude[..., zero_frequency(7)], torch.ones(4, 3, dtype=torch.float64)
    )


def test_matches_the_explicit_dft_on_any_filter():
    # GFSA's H̃ has negative entries and rows that do not sum to 1.
    attn = row_stochastic(3, 2, 6, 6)
    filters = gfsa_filter(
        attn, torch.randn(2).double(), torch.randn(2).double(), torch.randn(2).double(), K=3
    )
    response = filter_frequency_response(filters)
    torch.testing.assert_close(response.magnitude, normalised_reference(filters))
    expected_frequencies = torch.tensor([-3, -2, -1, 0, 1, 2], dtype=torch.float64) / 6
    torch.testing.assert_close(response.frequencies, expected_frequencies)


def test_padding_changes_nothing():
    attn = row_stochastic(3, 2, 6, 6)
    positions = torch.stack([torch.randperm(9)[:6].sort().values for _ in range(3)])
    mask = torch.zeros(3, 9, dtype=torch.bool)
    for b in range(3):
        mask[b, positions[b]] = True
    padded = filter_frequency_response(pad_filters(attn, positions, 9), mask)
    plain = filter_frequency_response(attn)
    torch.testing.assert_close(padded.magnitude, plain.magnitude)
    torch.testing.assert_close(padded.frequencies, plain.frequencies)


def test_mixed_lengths_share_a_grid_that_keeps_each_samples_own_frequencies():
    long, short = row_stochastic(1, 2, 8, 8), row_stochastic(1, 2, 4, 4)
    filters = torch.zeros(2, 2, 8, 8, dtype=torch.float64)
    filters[0], filters[1, :, :4, :4] = long[0], short[0]
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1, 4:] = False
    response = filter_frequency_response(filters, mask, reduce=False)
    assert response.magnitude.shape == (2, 2, 8)
    long_gains = dft_gains(long)[0]
    torch.testing.assert_close(response.magnitude[0], long_gains / long_gains.amax(-1, True))
    # The 8-point grid holds every frequency k/4 of the 4-token sample at its even positions.
    short_gains = dft_gains(short)[0]
    torch.testing.assert_close(
        response.magnitude[1, :, ::2], short_gains / short_gains.amax(-1, True)
    )


def test_bad_filters_raise():
    with pytest.raises(ValueError, match="filters"):
        filter_frequency_response(torch.rand(2, 3, 4, 5))
    with pytest.raises(ValueError, match="padding mask"):
        filter_frequency_response(torch.rand(2, 4, 4), torch.ones(2, 5, dtype=torch.bool))
