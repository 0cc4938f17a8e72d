import pytest
import torch
from scipy.special import eval_jacobi

from filterformer.functional import (
    agf,
    agf_coefficients,
    agf_filter,
    agf_layer,
    agf_orthogonality,
    agf_response,
    efficient_attention,
    efficient_feature_maps,
)

from .reference import efficient_maps

B, H, N, D = 2, 3, 9, 4


def _inputs():
    q, k, v = (torch.randn(B, H, N, D, dtype=torch.float64) for _ in range(3))
    s = torch.rand(B, H, N, D, dtype=torch.float64)
    return q, k, v, s


def _scipy_filter(s, theta, a, b):
    """G = Σ θ_k P_k^(a,b)(s) with scipy's Jacobi polynomials."""
    terms = [theta[k].item() * eval_jacobi(k, a, b, s.numpy()) for k in range(len(theta))]
    return torch.from_numpy(sum(terms))


def test_agf_coefficients_fix_theta0_and_squash_the_rest():
    p = torch.randn(5, dtype=torch.float64)
    theta = agf_coefficients(p)
    assert theta[0].item() == 1.0
    torch.testing.assert_close(theta[1:], torch.tanh(p))
    assert agf_coefficients(torch.zeros(3)).tolist() == [1.0, 0.0, 0.0, 0.0]


def test_agf_equals_the_explicit_filter_written_out():
    q, k, v, s = _inputs()
    padding = torch.tensor([[True] * N, [True] * 5 + [False] * (N - 5)])
    theta = agf_coefficients(torch.randn(4, dtype=torch.float64))
    out = agf(q, k, v, s, theta, basis="jacobi", a=0.5, b=1.5, key_padding_mask=padding)
    rho_q, rho_k = efficient_maps(q, k, padding)
    g = _scipy_filter(s, theta, 0.5, 1.5)
    expected = torch.empty_like(out)
    for b in range(B):
        for h in range(H):
            operator = torch.zeros(N, N, dtype=torch.float64)
            for i in range(N):
                for j in range(N):
                    operator[i, j] = (rho_q[b, h, i] * g[b, h, i] * rho_k[b, h, j]).sum()
            expected[b, h] = operator @ v[b, h]
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-12)


def test_agf_with_only_theta0_is_efficient_attention():
    q, k, v, s = _inputs()
    theta = agf_coefficients(torch.zeros(5, dtype=torch.float64))
    torch.testing.assert_close(agf(q, k, v, s, theta), efficient_attention(q, k, v))


def test_agf_filter_is_the_operator_applied_to_values():
    q, k, v, s = _inputs()
    theta = agf_coefficients(torch.randn(3, dtype=torch.float64))
    rho_q, rho_k = efficient_feature_maps(q, k)
    g = agf_response(s, theta, basis="legendre")
    expected = agf(q, k, v, s, theta, basis="legendre")
    torch.testing.assert_close(agf_filter(rho_q, rho_k, g) @ v, expected)


def test_agf_response_is_the_polynomial_series():
    sigma = torch.linspace(0, 1, 33, dtype=torch.float64)
    theta = torch.randn(5, dtype=torch.float64)
    torch.testing.assert_close(agf_response(sigma, theta), _scipy_filter(sigma, theta, 1.0, 1.0))
    monomial = agf_response(sigma, theta, basis="monomial")
    torch.testing.assert_close(monomial, sum(theta[k] * sigma**k for k in range(5)))


def test_orthogonality_equals_a_hand_written_reference():
    q, k, _, _ = _inputs()
    padding = torch.tensor([[True] * N, [True] * 6 + [False] * (N - 6)])
    rho_q, rho_k = efficient_maps(q, k, padding)
    total_u = total_v = 0.0
    for b in range(B):
        real = padding[b]
        for h in range(H):
            u, vs = rho_q[b, h][real], rho_k[b, h]
            for i in range(D):
                for j in range(D):
                    target = 1.0 if i == j else 0.0
                    total_u += abs(sum(u[t, i] * u[t, j] for t in range(len(u))) - target)
                    total_v += abs(sum(vs[t, i] * vs[t, j] for t in range(N)) - target)
    expected = (total_u + total_v) / (B * H * D * D)
    actual = agf_orthogonality(*efficient_feature_maps(q, k, padding), padding)
    torch.testing.assert_close(actual, torch.as_tensor(expected, dtype=torch.float64))


def test_agf_and_orthogonality_ignore_padded_tokens():
    q, k, v, s = _inputs()
    padding = torch.tensor([[True] * 4 + [False] * (N - 4), [True] * N])
    theta = agf_coefficients(torch.randn(5, dtype=torch.float64))
    q2, k2, v2, s2 = (t.clone() for t in (q, k, v, s))
    pad = ~padding[:, None, :, None].expand_as(q)
    for changed in (q2, k2, v2):
        changed[pad] = torch.randn(int(pad.sum()), dtype=torch.float64) * 10
    s2[pad] = torch.rand(int(pad.sum()), dtype=torch.float64)
    first = agf(q, k, v, s, theta, key_padding_mask=padding)
    second = agf(q2, k2, v2, s2, theta, key_padding_mask=padding)
    real = padding[:, None, :, None].expand_as(first)
    torch.testing.assert_close(first[real], second[real])
    assert not torch.allclose(first[~real], second[~real])
    reg = agf_orthogonality(*efficient_feature_maps(q, k, padding), padding)
    reg2 = agf_orthogonality(*efficient_feature_maps(q2, k2, padding), padding)
    torch.testing.assert_close(reg, reg2)


def test_agf_rejects_bad_shapes():
    q, k, v, s = _inputs()
    with pytest.raises(ValueError, match="s must have the shape of q"):
        agf(q, k, v, s[..., :2], agf_coefficients(torch.zeros(2)))
    with pytest.raises(ValueError, match="theta"):
        agf_response(s, torch.zeros(2, 2))


def test_agf_layer_with_half_precision_products_stays_near_the_float64_layer():
    """The products over tokens in bfloat16 (autocast's choice): the output comes back in that
    dtype within its rounding of the float64 layer's, the regulariser in float32."""
    q, k, v, s = _inputs()
    logits = torch.logit(s)
    padding = torch.rand(B, N) > 0.3
    padding[:, 0] = True
    theta = agf_coefficients(torch.randn(3, dtype=torch.float64))
    want, want_reg = agf_layer(q, k, v, logits, theta, padding)
    got, reg = agf_layer(q.float(), k.float(), v.float(), logits.float(), theta.float(), padding,
                         products_dtype=torch.bfloat16)
    assert got.dtype == torch.bfloat16 and reg.dtype == torch.float32
    scale = want.abs().max()
    assert (got.double() - want).abs().max() <= 2e-2 * scale
    assert abs(reg.item() - want_reg.item()) <= 1e-2 * want_reg.item()
