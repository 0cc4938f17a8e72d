import pytest
import torch

from filterformer.functional import check_neutreno_lambda, neutreno


def test_neutreno_adds_the_fidelity_term_per_head():
    attended, values, first = (torch.randn(2, 3, 5, 4, dtype=torch.float64) for _ in range(3))
    lam = torch.rand(3, dtype=torch.float64)
    out = neutreno(attended, values, first, lam)
    for h in range(3):
        expected = attended[:, h] + lam[h] * (first[:, h] - values[:, h])
        torch.testing.assert_close(out[:, h], expected)
    torch.testing.assert_close(neutreno(attended, values, first, 0.0), attended)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), -1.0, -1e-9, True,
                                 "0.6", None])
def test_check_neutreno_lambda_refuses_non_finite_negative_and_non_numbers(bad):
    with pytest.raises(ValueError, match=r"neutreno_lambda must be a finite number >= 0 \(the "
                                         r"papers use λ in \(0, 1\].*0 disables the term\)"):
        check_neutreno_lambda(bad)


def test_check_neutreno_lambda_returns_valid_values_as_floats():
    for lam in (0, 0.0, 1, *torch.rand(3, dtype=torch.float64).tolist(), 1.5):
        checked = check_neutreno_lambda(lam)
        assert type(checked) is float and checked == lam
