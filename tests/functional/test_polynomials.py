import math

import pytest
import torch
from scipy.special import eval_jacobi

from filterformer.functional import (
    chebyshev_basis,
    jacobi_basis,
    legendre_basis,
    monomial_basis,
    polynomial_basis,
    polynomial_series,
)

K_MAX = 10


@pytest.mark.parametrize(
    ("a", "b"), [(1.0, 1.0), (0.0, 0.0), (-0.5, -0.5), (-0.3, 0.7), (2.5, -0.6), (-0.9, -0.2)]
)
def test_jacobi_basis_matches_scipy(a, b):
    x = torch.rand(3, 40, dtype=torch.float64) * 2 - 1
    values = jacobi_basis(x, K_MAX, a, b)
    assert values.shape == (3, 40, K_MAX + 1)
    for k in range(K_MAX + 1):
        expected = torch.from_numpy(eval_jacobi(k, a, b, x.numpy()))
        torch.testing.assert_close(values[..., k], expected, rtol=0, atol=1e-10)


def test_jacobi_basis_holds_outside_the_interval():
    # AGF evaluates at sigmoid outputs in (0, 1), but the recursion is exact anywhere.
    x = torch.rand(50, dtype=torch.float64) * 4 - 2
    values = jacobi_basis(x, 6, 1.5, 0.5)
    for k in range(7):
        expected = torch.from_numpy(eval_jacobi(k, 1.5, 0.5, x.numpy()))
        torch.testing.assert_close(values[..., k], expected, rtol=1e-12, atol=1e-10)


def test_legendre_matches_the_closed_form():
    x = torch.rand(60, dtype=torch.float64) * 2 - 1
    values = legendre_basis(x, K_MAX)
    for n in range(K_MAX + 1):
        # Legendre's explicit sum: P_n(x) = 2^-n Σ_j C(n, j)² (x−1)^(n−j) (x+1)^j.
        expected = sum(
            math.comb(n, j) ** 2 * (x - 1) ** (n - j) * (x + 1) ** j for j in range(n + 1)
        ) / 2**n
        torch.testing.assert_close(values[..., n], expected, rtol=0, atol=1e-10)


def test_chebyshev_matches_cosines_up_to_the_standard_scaling():
    x = torch.rand(60, dtype=torch.float64) * 2 - 1
    values = chebyshev_basis(x, K_MAX)
    for n in range(K_MAX + 1):
        t_n = torch.cos(n * torch.arccos(x))
        scale = math.comb(2 * n, n) / 4**n
        torch.testing.assert_close(values[..., n], scale * t_n, rtol=0, atol=1e-10)


def test_monomial_basis_is_powers():
    x = torch.randn(5, 7, dtype=torch.float64)
    values = monomial_basis(x, 4)
    for k in range(5):
        torch.testing.assert_close(values[..., k], x**k)


def test_polynomial_basis_dispatches_by_name():
    x = torch.rand(20, dtype=torch.float64)
    torch.testing.assert_close(polynomial_basis(x, 3, "legendre"), jacobi_basis(x, 3, 0, 0))
    torch.testing.assert_close(
        polynomial_basis(x, 3, "jacobi", 2.0, 0.5), jacobi_basis(x, 3, 2.0, 0.5)
    )
    with pytest.raises(ValueError, match=r"jacobi.*legendre.*chebyshev.*monomial"):
        polynomial_basis(x, 3, "hermite")


@pytest.mark.parametrize(("a", "b", "K"), [(-1.0, -1.0, 2), (-1.5, -0.5, 5), (-2.0, -1.0, 3)])
def test_recursions_that_divide_by_zero_are_rejected(a, b, K):
    with pytest.raises(ValueError, match="divides by zero"):
        jacobi_basis(torch.rand(4), K, a, b)


def test_a_recursion_that_stops_before_the_zero_is_accepted():
    # a + b = −3 divides by zero only at k = 3 (k + a + b = 0).
    values = jacobi_basis(torch.rand(4, dtype=torch.float64), 2, -1.5, -1.5)
    assert torch.isfinite(values).all()


@pytest.mark.parametrize("K", [-1, 2.0, True])
def test_invalid_orders_are_rejected(K):
    with pytest.raises(ValueError, match="K must be"):
        jacobi_basis(torch.rand(3), K)


@pytest.mark.parametrize(
    ("basis", "a", "b"),
    [("jacobi", 1.0, 1.0), ("jacobi", -0.3, 0.7), ("legendre", 0, 0), ("chebyshev", 0, 0),
     ("monomial", 0, 0)],
)
@pytest.mark.parametrize("K", [0, 1, 2, 7])
def test_polynomial_series_is_the_basis_times_its_coefficients(basis, a, b, K):
    x = torch.rand(3, 5, 6, dtype=torch.float64) * 2 - 1
    coefficients = torch.randn(K + 1, dtype=torch.float64, requires_grad=True)
    expected = polynomial_basis(x, K, basis, a, b) @ coefficients
    series = polynomial_series(x, coefficients, basis, a, b)
    torch.testing.assert_close(series, expected)
    (grad,) = torch.autograd.grad(series.sum(), coefficients)
    torch.testing.assert_close(grad, polynomial_basis(x, K, basis, a, b).sum(dim=(0, 1, 2)))


def test_polynomial_series_matches_scipy():
    x = torch.rand(50, dtype=torch.float64) * 2 - 1
    coefficients = torch.randn(5, dtype=torch.float64)
    points = x.numpy()
    expected = sum(c.item() * eval_jacobi(k, 0.4, 1.3, points) for k, c in enumerate(coefficients))
    torch.testing.assert_close(
        polynomial_series(x, coefficients, "jacobi", 0.4, 1.3), torch.from_numpy(expected)
    )


def test_polynomial_series_rejects_bad_coefficients_and_bases():
    with pytest.raises(ValueError, match="coefficients must have shape"):
        polynomial_series(torch.rand(3), torch.ones(2, 2))
    with pytest.raises(ValueError, match=r"basis must be one of"):
        polynomial_series(torch.rand(3), torch.ones(3), "hermite")
    with pytest.raises(ValueError, match="divides by zero"):
        polynomial_series(torch.rand(3), torch.ones(4), "jacobi", -1.0, -1.0)
