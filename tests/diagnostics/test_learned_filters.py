import pytest
import torch
from scipy.special import eval_jacobi

from filterformer.attention import AttentiveGraphFilterAttention, GraphFilterAttention
from filterformer.diagnostics import (
    agf_filter_responses,
    agf_polynomial_responses,
    frequency_points,
    gfsa_filter_responses,
)
from filterformer.functional import gfsa_filter


def symmetric_with_eigenvalues(values: torch.Tensor) -> torch.Tensor:
    basis, _ = torch.linalg.qr(torch.randn(len(values), len(values), dtype=torch.float64))
    return basis @ torch.diag(values) @ basis.T


@pytest.mark.parametrize("exact_power", [False, True])
def test_gfsa_curve_is_the_filters_spectrum(exact_power):
    # H̃ is a polynomial of Ā, so for a diagonalisable Ā its eigenvalues are g(λ).
    layer = GraphFilterAttention(8, num_heads=2, K=4, exact_power=exact_power)
    with torch.no_grad():
        for name in ("w0", "w1", "wK"):
            getattr(layer, name).copy_(torch.randn(2))
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), layer)
    (curve,) = gfsa_filter_responses(model, num_points=11)
    assert curve.name == "1" and curve.response.shape == (2, 11)
    picks = torch.tensor([0, 3, 5, 8, 10])
    attn = symmetric_with_eigenvalues(curve.sigma[picks])[None, None].expand(1, 2, 5, 5)
    filt = gfsa_filter(
        attn, layer.w0.double(), layer.w1.double(), layer.wK.double(), K=4,
        exact_power=exact_power,
    )
    for head in range(2):
        eigenvalues = torch.linalg.eigvalsh(filt[0, head])
        expected = curve.response[head, picks].sort().values
        torch.testing.assert_close(eigenvalues, expected)


def test_gfsa_at_init_is_plain_attention():
    (curve,) = gfsa_filter_responses(GraphFilterAttention(8, num_heads=2))
    torch.testing.assert_close(curve.response, curve.sigma.expand(2, -1))


def test_no_gfsa_layer_gives_no_curve():
    assert gfsa_filter_responses(torch.nn.Linear(3, 3)) == []


@pytest.mark.parametrize(("basis", "a", "b"), [("jacobi", 1.0, 1.0), ("jacobi", 0.5, -0.3),
                                                ("legendre", 0.0, 0.0), ("chebyshev", -0.5, -0.5)])
def test_agf_polynomial_matches_scipy_jacobi(basis, a, b):
    theta = torch.randn(2, 5, dtype=torch.float64)
    sigma, response = agf_polynomial_responses(theta, basis, a, b, num_points=21)
    for row, got in zip(theta, response, strict=True):
        expected = sum(t * eval_jacobi(k, a, b, sigma.numpy()) for k, t in enumerate(row.tolist()))
        torch.testing.assert_close(got, torch.as_tensor(expected))


def test_agf_monomial_basis():
    theta = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    sigma, response = agf_polynomial_responses(theta, "monomial")
    torch.testing.assert_close(response[0], 1 - 2 * sigma + 0.5 * sigma**2)


def test_agf_layers_are_found_with_their_coefficients():
    layer = AttentiveGraphFilterAttention(8, num_heads=2, K=3, basis="legendre")
    with torch.no_grad():
        layer.p.copy_(torch.randn(3))
    (curve,) = agf_filter_responses(torch.nn.ModuleList([layer]), num_points=9)
    theta = torch.cat([torch.ones(1), torch.tanh(layer.p.detach())]).double()
    sigma = frequency_points(9).numpy()
    expected = sum(t * eval_jacobi(k, 0.0, 0.0, sigma) for k, t in enumerate(theta.tolist()))
    torch.testing.assert_close(curve.response[0], torch.as_tensor(expected))


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="num_points"):
        frequency_points(1)
    with pytest.raises(ValueError, match="theta"):
        agf_polynomial_responses(torch.zeros(2, 2, 2))
    with pytest.raises(ValueError, match="basis"):
        agf_polynomial_responses(torch.zeros(3), "fourier")
