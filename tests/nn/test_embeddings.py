import pytest
import torch

from filterformer.nn import InputEmbedding, sinusoidal_positions


def test_sinusoidal_table_closed_form():
    table = sinusoidal_positions(7, 6)
    for pos in range(7):
        for i in range(3):
            angle = torch.tensor(pos / 10000 ** (2 * i / 6))
            torch.testing.assert_close(table[pos, 2 * i], torch.sin(angle))
            torch.testing.assert_close(table[pos, 2 * i + 1], torch.cos(angle))


def test_offset_continues_positions():
    embed = InputEmbedding(8, vocab_size=11, max_len=10)
    ids = torch.randint(0, 11, (2, 6))
    full = embed(ids)
    torch.testing.assert_close(embed(ids[:, 4:], offset=4), full[:, 4:])


def test_embedding_rejects_bad_input():
    embed = InputEmbedding(8, vocab_size=11, max_len=4)
    with pytest.raises(ValueError, match="exactly one of"):
        embed()
    with pytest.raises(ValueError, match="input_dim"):
        embed(inputs=torch.randn(1, 3, 2))
    with pytest.raises(ValueError, match="max_len=4"):
        embed(torch.zeros(1, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"position must be one of"):
        InputEmbedding(8, position="rotary")
