import math

import numpy as np
import pytest
import torch

from filterformer.diagnostics import (
    effective_rank,
    effective_rank_from_singular_values,
    gram_singular_values,
    singular_value_spectrum,
    singular_values,
)

from .helpers import insert_padding, random_hidden


def test_effective_rank_of_the_identity_is_n():
    for n in (1, 4, 9):
        identity = torch.eye(n, dtype=torch.float64)[None]
        assert effective_rank(identity).item() == pytest.approx(n)


def test_effective_rank_of_a_rank_one_matrix_is_one():
    hidden = torch.randn(2, 5, 1, dtype=torch.float64) * torch.randn(2, 1, 7, dtype=torch.float64)
    torch.testing.assert_close(effective_rank(hidden), torch.ones(2, dtype=torch.float64))


def test_effective_rank_is_exp_entropy_of_numpy_singular_values():
    hidden = random_hidden(3, 6, 4)
    for sample, got in zip(hidden, effective_rank(hidden), strict=True):
        s = np.linalg.svd(sample.numpy(), compute_uv=False)
        p = s / s.sum()
        assert got.item() == pytest.approx(math.exp(-(p * np.log(p)).sum()))


def test_spectrum_is_sorted_and_normalised_numpy_singular_values():
    hidden = random_hidden(3, 6, 4)
    spectrum = singular_value_spectrum(hidden)
    assert spectrum.shape == (3, 4)
    for sample, got in zip(hidden, spectrum, strict=True):
        s = np.linalg.svd(sample.numpy(), compute_uv=False)
        np.testing.assert_allclose(got.numpy(), s / s[0])


def test_padding_changes_no_singular_value():
    stack = torch.stack([random_hidden(3, 4, 6), random_hidden(3, 4, 6)])  # N < D
    padded, mask, _ = insert_padding(stack, extra=2)
    got = singular_value_spectrum(padded, mask)
    expected = singular_value_spectrum(stack)
    # The list grows from min(4, 6) to min(6, 6) entries; the extra ones are zeros.
    torch.testing.assert_close(got[..., :4], expected)
    torch.testing.assert_close(got[..., 4:], torch.zeros_like(got[..., 4:]))
    torch.testing.assert_close(effective_rank(padded, mask), effective_rank(stack))


def test_gram_spectrum_equals_the_spectrum_of_stacked_tokens():
    hidden = random_hidden(4, 5, 6)
    tokens = hidden.flatten(0, 1)
    torch.testing.assert_close(
        gram_singular_values(tokens.T @ tokens), torch.linalg.svdvals(tokens)
    )


def test_effective_rank_from_values_ignores_zeros():
    values = torch.tensor([2.0, 2.0, 0.0, 0.0], dtype=torch.float64)
    assert effective_rank_from_singular_values(values).item() == pytest.approx(2.0)


def test_all_zero_tokens_give_zero_spectrum_and_nan_rank():
    zeros = torch.zeros(1, 3, 4, dtype=torch.float64)
    assert (singular_value_spectrum(zeros) == 0).all()
    assert effective_rank(zeros).isnan().all()
    with pytest.raises(ValueError, match="gram"):
        gram_singular_values(torch.zeros(3, 4))
    assert singular_values(zeros).shape == (1, 3)
