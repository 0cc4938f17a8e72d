import pytest
import torch

from filterformer.functional import efficient_attention

from .reference import efficient_maps, relative_error


@pytest.mark.parametrize("padded", [False, True])
def test_efficient_attention_matches_explicit_product(padded):
    q, k, v = (torch.randn(2, 3, 8, 4, dtype=torch.float64) for _ in range(3))
    padding = None
    if padded:
        padding = torch.ones(2, 8, dtype=torch.bool)
        padding[0, 5:] = False
    rho_q, rho_k = efficient_maps(q, k, padding)
    expected = (rho_q @ rho_k.transpose(-1, -2)) @ v
    assert relative_error(efficient_attention(q, k, v, padding), expected) < 1e-12
    # Each row of the implied Ā is a probability distribution over real keys.
    rows = (rho_q @ rho_k.transpose(-1, -2)).sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))


def test_efficient_attention_ignores_padded_keys_and_survives_empty_samples():
    q, k, v = (torch.randn(2, 2, 6, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
    padding = torch.ones(2, 6, dtype=torch.bool)
    padding[0, 4:] = False
    padding[1] = False
    out = efficient_attention(q, k, v, padding)
    assert out[1].abs().max() == 0
    k2 = k.detach().clone()
    v2 = v.detach().clone()
    k2[0, :, 4:] = torch.randn(2, 2, 4)
    v2[0, :, 4:] = torch.randn(2, 2, 4)
    torch.testing.assert_close(efficient_attention(q, k2, v2, padding)[0], out[0])
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def test_efficient_attention_gradcheck():
    q, k, v = (torch.randn(1, 2, 5, 3, dtype=torch.float64, requires_grad=True) for _ in range(3))
    padding = torch.tensor([[True, True, True, True, False]])
    assert torch.autograd.gradcheck(lambda *t: efficient_attention(*t, padding), (q, k, v))


def test_efficient_attention_bfloat16():
    q, k, v = (torch.randn(2, 2, 16, 8) for _ in range(3))
    ref = efficient_attention(q, k, v)
    low = efficient_attention(q.bfloat16(), k.bfloat16(), v.bfloat16())
    assert relative_error(low.double(), ref.double()) < 2e-2
