import pytest
import torch

from filterformer.nn import SequencePooling


@pytest.mark.parametrize("mode", ["mean", "first", "attention"])
def test_pooling_ignores_padding(mode):
    pool = SequencePooling(mode, 6)
    x = torch.randn(2, 5, 6)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    out = pool(x, mask)
    x2 = x.clone()
    x2[1, 2:] = torch.randn(3, 6) * 100
    torch.testing.assert_close(pool(x2, mask), out)
    if mode == "mean":
        torch.testing.assert_close(out[1], x[1, :2].mean(0))


def test_pooling_rejects_unknown_mode():
    with pytest.raises(ValueError, match=r"pooling must be one of \('mean', 'first', 'attent"):
        SequencePooling("max", 4)


@pytest.mark.parametrize("mode", ["mean", "attention"])
def test_a_sample_without_real_tokens_pools_to_zero_whatever_its_padding(mode):
    pool = SequencePooling(mode, 6)
    x = torch.randn(2, 5, 6)
    mask = torch.tensor([[True] * 5, [False] * 5])
    out = pool(x, mask)
    assert (out[1] == 0).all()
    x2 = x.clone()
    x2[1] = torch.randn(5, 6) * 100
    assert torch.equal(pool(x2, mask), out)
