import pytest
import torch

from filterformer.diagnostics import high_low_frequency_ratio, identical_token_distance

from .helpers import insert_padding, random_hidden


def projections(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The low-pass 11ᵀ/n and high-pass I − 11ᵀ/n projections of the complete graph."""
    low = torch.full((n, n), 1.0 / n, dtype=torch.float64)
    return low, torch.eye(n, dtype=torch.float64) - low


def test_identical_tokens_are_at_distance_zero():
    hidden = torch.randn(2, 1, 6, dtype=torch.float64).expand(2, 5, 6)
    zeros = torch.zeros(2, dtype=torch.float64)
    torch.testing.assert_close(identical_token_distance(hidden), zeros)
    torch.testing.assert_close(high_low_frequency_ratio(hidden), zeros)


def test_distance_and_ratio_match_projections():
    hidden = random_hidden(3, 6, 4)
    low, high = projections(6)
    expected_distance = (high @ hidden).norm(dim=(-1, -2))
    torch.testing.assert_close(identical_token_distance(hidden), expected_distance)
    relative = identical_token_distance(hidden, relative=True)
    torch.testing.assert_close(relative, expected_distance / hidden.norm(dim=(-1, -2)))
    torch.testing.assert_close(
        high_low_frequency_ratio(hidden), expected_distance / (low @ hidden).norm(dim=(-1, -2))
    )


def test_distance_is_the_nearest_identical_token_matrix():
    # d_M is a minimum over all matrices 1·cᵀ: the mean is optimal, any other c is farther.
    hidden = random_hidden(1, 5, 3)[0]
    best = identical_token_distance(hidden[None])[0]
    for _ in range(20):
        other = hidden.mean(dim=0) + 0.1 * torch.randn(3, dtype=torch.float64)
        assert (hidden - other).norm() > best


def test_tokens_averaging_to_zero_have_relative_distance_one_and_infinite_ratio():
    # Integer coordinates keep every partial sum exact, so the mean is exactly 0.
    half = torch.randint(-9, 10, (2, 3, 4)).double()
    hidden = torch.cat([half, -half], dim=1)
    torch.testing.assert_close(
        identical_token_distance(hidden, relative=True), torch.ones(2, dtype=torch.float64)
    )
    assert torch.isinf(high_low_frequency_ratio(hidden)).all()


@pytest.mark.parametrize("relative", [False, True])
def test_padding_changes_nothing(relative):
    stack = torch.stack([random_hidden(), random_hidden()])
    padded, mask, _ = insert_padding(stack)
    torch.testing.assert_close(
        identical_token_distance(padded, mask, relative=relative),
        identical_token_distance(stack, relative=relative),
    )
    expected = high_low_frequency_ratio(stack)
    torch.testing.assert_close(high_low_frequency_ratio(padded, mask), expected)


def test_sample_without_real_tokens_is_nan():
    mask = torch.tensor([[False, False, False], [True, True, False]])
    got = identical_token_distance(random_hidden(2, 3), mask)
    assert got[0].isnan() and not got[1].isnan()
