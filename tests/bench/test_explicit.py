import pytest
import torch

from filterformer.bench.method_table import explicit_gfsa
from filterformer.functional import gfsa

B, H, N, D = 2, 3, 11, 5


def _inputs(requires_grad=False):
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64) for _ in range(3))
    coefficients = [torch.randn(H, dtype=torch.float64) for _ in range(3)]
    return [t.requires_grad_(requires_grad) for t in (q, k, v, *coefficients)]


def _authors_formula(q, k, v, w0, w1, wK, K):
    """The released code's computation, written out with nothing from the library."""
    attn = torch.softmax(q @ k.transpose(-1, -2) / D**0.5, dim=-1)
    eye = torch.eye(N, dtype=attn.dtype)
    w0, w1, wK = (w.view(1, H, 1, 1) for w in (w0, w1, wK))
    filt = w0 * eye + w1 * attn + wK * (attn + (K - 1) * (attn @ attn - attn))
    return filt @ v


@pytest.mark.parametrize("K", [2, 3, 6])
def test_explicit_gfsa_is_the_authors_formula(K):
    inputs = _inputs()
    out = explicit_gfsa(*inputs, K=K)
    torch.testing.assert_close(out, _authors_formula(*inputs, K), rtol=1e-12, atol=1e-12)


def test_explicit_gfsa_matches_the_two_pass_kernel_with_gradients():
    # The baseline and the library kernel compute one function: the benchmark compares costs only.
    inputs = _inputs(requires_grad=True)
    grad = torch.randn(B, H, N, D, dtype=torch.float64)
    explicit = torch.autograd.grad(explicit_gfsa(*inputs, K=3), inputs, grad)
    two_pass = torch.autograd.grad(gfsa(*inputs, K=3), inputs, grad)
    for a, b in zip(explicit, two_pass, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
