import itertools

import pytest
import torch

from filterformer.diagnostics import attention_map_similarity, token_cosine_similarity

from .helpers import insert_padding, random_hidden, row_stochastic


def reference_cosine(tokens: torch.Tensor) -> float:
    """Mean of cos(h_i, h_j) over ordered pairs i != j, by an explicit loop."""
    n = tokens.shape[0]
    total = sum(
        torch.nn.functional.cosine_similarity(tokens[i], tokens[j], dim=0)
        for i, j in itertools.permutations(range(n), 2)
    )
    return float(total) / (n * (n - 1))


def test_identical_tokens_have_cosine_one():
    token = torch.randn(1, 1, 8, dtype=torch.float64)
    hidden = token.expand(2, 5, 8) * torch.rand(2, 5, 1, dtype=torch.float64).add(0.5)
    torch.testing.assert_close(token_cosine_similarity(hidden), torch.ones(2, dtype=torch.float64))


def test_orthonormal_tokens_have_cosine_zero():
    basis, _ = torch.linalg.qr(torch.randn(10, 10, dtype=torch.float64))
    hidden = basis[:6][None]  # six orthonormal tokens in R^10
    torch.testing.assert_close(token_cosine_similarity(hidden), torch.zeros(1, dtype=torch.float64))


def test_matches_pairwise_loop_per_sample_and_per_layer():
    stack = torch.stack([random_hidden(), random_hidden()])
    got = token_cosine_similarity(stack)
    assert got.shape == (2, 3)
    for layer, sample in itertools.product(range(2), range(3)):
        assert got[layer, sample].item() == pytest.approx(reference_cosine(stack[layer, sample]))


def test_padding_changes_nothing():
    stack = torch.stack([random_hidden(), random_hidden()])
    padded, mask, _ = insert_padding(stack)
    expected = token_cosine_similarity(stack)
    torch.testing.assert_close(token_cosine_similarity(padded, mask), expected)


def test_fewer_than_two_real_tokens_is_nan():
    hidden = random_hidden(2, 4)
    mask = torch.tensor([[True, False, False, False], [True, True, False, False]])
    got = token_cosine_similarity(hidden, mask)
    assert got[0].isnan()
    assert got[1].item() == pytest.approx(reference_cosine(hidden[1, :2]))


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="hidden"):
        token_cosine_similarity(torch.randn(4, 5))
    with pytest.raises(ValueError, match="padding mask"):
        token_cosine_similarity(torch.randn(2, 4, 5), torch.ones(2, 3, dtype=torch.bool))


def test_attention_similarity_matches_flattened_cosine_per_head():
    first, second = row_stochastic(2, 3, 5, 5), row_stochastic(2, 3, 5, 5)
    expected = torch.nn.functional.cosine_similarity(
        first.flatten(2), second.flatten(2), dim=-1
    ).mean(dim=1)
    torch.testing.assert_close(attention_map_similarity(first, second), expected)
    torch.testing.assert_close(
        attention_map_similarity(first, first), torch.ones(2, dtype=torch.float64)
    )


def test_attention_similarity_ignores_padded_rows_and_columns():
    first, second = row_stochastic(2, 3, 5, 5), row_stochastic(2, 3, 5, 5)
    mask = torch.tensor([[True] * 5 + [False] * 2, [True, False, True, True, False, True, True]])
    padded = []
    for maps in (first, second):
        full = torch.rand(2, 3, 7, 7, dtype=torch.float64)
        for b in range(2):
            index = mask[b].nonzero().squeeze(-1)
            full[b][:, index[:, None], index[None, :]] = maps[b]
        padded.append(full)
    torch.testing.assert_close(
        attention_map_similarity(*padded, mask), attention_map_similarity(first, second)
    )
