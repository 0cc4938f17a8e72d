import numpy as np
import torch

from filterformer.diagnostics import smallest_token_std

from .helpers import insert_padding, random_hidden


def test_smallest_token_std_matches_numpy():
    inputs = random_hidden(3, 5, 8) * torch.rand(3, 5, 1, dtype=torch.float64)
    expected = np.std(inputs.numpy(), axis=-1).min(axis=-1)
    np.testing.assert_allclose(smallest_token_std(inputs).numpy(), expected)


def test_padding_changes_nothing():
    stack = torch.stack([random_hidden(), random_hidden()])
    padded, mask, _ = insert_padding(stack)
    torch.testing.assert_close(smallest_token_std(padded, mask), smallest_token_std(stack))

